"""The `smt` engine on hand-built protocols, and against the brute force on random ones."""

from __future__ import annotations

import time

import pytest
from bruteforce import BruteForce, cross_rank_pairs, is_stuck, replay
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import traces
from tracebuild import mesh_allreduce

from racecheck.engines.skeleton import SyncSkeleton
from racecheck.engines.smt import SmtEngine, SmtOracle
from racecheck.errors import EngineUnknown
from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Event,
    EventKind,
    EventRef,
    Memory,
    MemoryKind,
    Notify,
    NotifyOp,
    RankEnd,
    Region,
    Schedule,
    SignalCell,
    SourceLocation,
    Trace,
    Wait,
    WaitCmp,
    WriteOp,
    Written,
)

DATA = Memory(id=0, kind=MemoryKind.WINDOW, name="data", nbytes=4096)
SIGNAL = Memory(id=1, kind=MemoryKind.WINDOW, name="signal", nbytes=4096)
HOST = Memory(id=2, kind=MemoryKind.HOST, name="y", nbytes=4096)
ROW = 64  # bytes of one data row


def cell(owner: int, row: int) -> SignalCell:
    return SignalCell(memory=SIGNAL.id, owner=owner, offset=4 * row, index=(row, 0))


class TraceBuilder:
    """Appends events rank by rank; `build()` freezes them into a Trace."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.events: list[list[Event]] = [[] for _ in range(ranks)]

    def _add(self, rank: int, kind: EventKind, **fields: object) -> EventRef:
        index = len(self.events[rank])
        location = SourceLocation(file="proto.py", line=100 * rank + index + 1, text=kind.value)
        self.events[rank].append(
            Event(rank=rank, index=index, kind=kind, location=location, **fields)  # type: ignore[arg-type]
        )
        return EventRef(rank=rank, index=index)

    def store(
        self,
        rank: int,
        owner: int,
        row: int = 0,
        *,
        memory: Memory = DATA,
    ) -> EventRef:
        region = Region(memory=memory.id, owner=owner, ranges=((row * ROW, (row + 1) * ROW),))
        return self._add(rank, EventKind.STORE, access=region, mode=AccessMode.WRITE)

    def cell_store(self, rank: int, target: SignalCell, value: int) -> EventRef:
        """A plain int32 store of `value` over exactly the cell's 4 bytes."""
        written = Written.int32s(WriteOp.ASSIGN, [value])
        return self._add(
            rank,
            EventKind.STORE,
            access=_cell_region(target),
            mode=AccessMode.WRITE,
            written=written,
        )

    def load(self, rank: int, owner: int, row: int = 0) -> EventRef:
        region = Region(memory=DATA.id, owner=owner, ranges=((row * ROW, (row + 1) * ROW),))
        return self._add(rank, EventKind.LOAD, access=region, mode=AccessMode.READ)

    def host_store(self, rank: int, row: int) -> EventRef:
        region = Region(memory=HOST.id, owner=HOST_OWNER, ranges=((row * ROW, (row + 1) * ROW),))
        return self._add(rank, EventKind.STORE, access=region, mode=AccessMode.WRITE)

    def notify(
        self, rank: int, target: SignalCell, value: int = 1, op: NotifyOp = NotifyOp.ATOMIC_ADD
    ) -> EventRef:
        return self._add(
            rank,
            EventKind.NOTIFY,
            access=_cell_region(target),
            mode=AccessMode.ATOMIC,
            notify=Notify(cell=target, op=op, value=value),
        )

    def wait(
        self, rank: int, target: SignalCell, expected: int = 1, cmp: WaitCmp = WaitCmp.GE
    ) -> EventRef:
        return self._add(
            rank,
            EventKind.WAIT,
            access=_cell_region(target),
            mode=AccessMode.ATOMIC,
            wait=Wait(cell=target, cmp=cmp, expected=expected),
        )

    def build(self) -> Trace:
        return Trace(
            ranks=self.ranks,
            events=tuple(tuple(events) for events in self.events),
            memories=(DATA, SIGNAL, HOST),
            ends=(RankEnd.FINISHED,) * self.ranks,
        )


def _cell_region(target: SignalCell) -> Region:
    return Region(
        memory=target.memory, owner=target.owner, ranges=((target.offset, target.offset + 4),)
    )


def oracle(trace: Trace, seconds: float = 30.0) -> SmtOracle:
    return SmtEngine().order(SyncSkeleton(trace), deadline=time.monotonic() + seconds)


def assert_witness(trace: Trace, schedule: Schedule, first: EventRef, second: EventRef) -> None:
    replay(trace, schedule)  # raises if it is not an execution
    assert schedule[-1] == first
    assert second not in schedule


def assert_ordered(trace: Trace, before: EventRef, after: EventRef) -> None:
    answers = oracle(trace)
    assert not answers.can_precede(after, before)
    assert answers.can_precede(before, after)
    assert_witness(trace, answers.witness(before, after), before, after)


def test_message_passing_is_ordered() -> None:
    build = TraceBuilder(2)
    written = build.store(0, 1)
    build.notify(0, cell(1, 0))
    build.wait(1, cell(1, 0))
    read = build.load(1, 1)
    assert_ordered(build.build(), written, read)


def test_unsynchronised_accesses_race_both_ways() -> None:
    build = TraceBuilder(2)
    written = build.store(0, 1)
    read = build.load(1, 1)
    trace = build.build()
    answers = oracle(trace)
    for first, second in ((written, read), (read, written)):
        assert answers.can_precede(first, second)
        assert_witness(trace, answers.witness(first, second), first, second)
    assert answers.witness(read, written) == (read,)


def test_notify_before_the_store_does_not_order_it() -> None:
    build = TraceBuilder(2)
    build.notify(0, cell(1, 0))
    written = build.store(0, 1)
    build.wait(1, cell(1, 0))
    read = build.load(1, 1)
    trace = build.build()
    answers = oracle(trace)
    assert answers.can_precede(read, written)
    witness = answers.witness(read, written)
    assert_witness(trace, witness, read, written)
    assert witness == (EventRef(rank=0, index=0), EventRef(rank=1, index=0), read)


def test_set_loses_a_concurrent_atomic_add() -> None:
    # Ranks 0 and 1 both credit rank 2's cell, rank 0 with Set: waiting for 2 can hang.
    build = TraceBuilder(3)
    build.notify(0, cell(2, 0), value=1, op=NotifyOp.SET)
    build.notify(1, cell(2, 0), value=1)
    waited = build.wait(2, cell(2, 0), expected=2)
    trace = build.build()
    stuck = oracle(trace).stuck()
    assert stuck is not None
    assert stuck.blocked == (waited,)
    assert stuck.cell_values == ((cell(2, 0), 1),)
    assert is_stuck(trace, replay(trace, stuck.schedule))
    # With both AtomicAdd, the count always reaches 2.
    build = TraceBuilder(3)
    build.notify(0, cell(2, 0))
    build.notify(1, cell(2, 0))
    build.wait(2, cell(2, 0), expected=2)
    assert oracle(build.build()).stuck() is None


def test_eq_wait_a_counter_can_jump_past() -> None:
    build = TraceBuilder(3)
    build.notify(0, cell(2, 0))
    build.notify(1, cell(2, 0))
    waited = build.wait(2, cell(2, 0), expected=1, cmp=WaitCmp.EQ)
    after = build.load(2, 2)
    trace = build.build()
    answers = oracle(trace)
    stuck = answers.stuck()
    assert stuck is not None and stuck.blocked == (waited,)
    assert is_stuck(trace, replay(trace, stuck.schedule))
    assert answers.can_precede(after, EventRef(rank=1, index=0))  # it can also pass


def test_wait_never_satisfied_is_stuck_after_the_others_finish() -> None:
    build = TraceBuilder(2)
    build.notify(0, cell(1, 1))  # the wrong row
    build.load(0, 0)
    waited = build.wait(1, cell(1, 0))
    after = build.load(1, 1)
    trace = build.build()
    answers = oracle(trace)
    stuck = answers.stuck()
    assert stuck is not None and stuck.blocked == (waited,)
    assert stuck.schedule[-1] == EventRef(rank=0, index=1)
    assert is_stuck(trace, replay(trace, stuck.schedule))
    assert not answers.can_precede(after, EventRef(rank=0, index=0))
    assert not answers.can_precede(after, EventRef(rank=0, index=1))


def test_reset_with_atomic_add_minus_one_makes_a_reused_cell_wait_again() -> None:
    # Two rounds on one cell: rank 1 waits, resets by -1, waits again.
    build = TraceBuilder(2)
    first_write = build.store(0, 1)
    build.notify(0, cell(1, 0))
    second_write = build.store(0, 1, row=1)
    build.notify(0, cell(1, 0))
    build.wait(1, cell(1, 0))
    build.notify(1, cell(1, 0), value=-1)
    build.wait(1, cell(1, 0))
    read = build.load(1, 1, row=1)
    trace = build.build()
    answers = oracle(trace)
    assert not answers.can_precede(read, first_write)
    assert not answers.can_precede(read, second_write)
    assert answers.stuck() is None
    # Without the reset, the second wait passes at once: the read can beat the write.
    build = TraceBuilder(2)
    build.store(0, 1)
    build.notify(0, cell(1, 0))
    second_write = build.store(0, 1, row=1)
    build.notify(0, cell(1, 0))
    build.wait(1, cell(1, 0))
    build.wait(1, cell(1, 0))
    read = build.load(1, 1, row=1)
    trace = build.build()
    answers = oracle(trace)
    assert answers.can_precede(read, second_write)
    assert_witness(trace, answers.witness(read, second_write), read, second_write)


def test_plain_store_of_zero_into_a_signal_cell_acts_as_a_set() -> None:
    # Rank 1 clears its own cell with a plain store after rank 0's credit may have landed.
    build = TraceBuilder(2)
    build.notify(0, cell(1, 0))
    build.cell_store(1, cell(1, 0), 0)
    waited = build.wait(1, cell(1, 0))
    trace = build.build()
    stuck = oracle(trace).stuck()
    assert stuck is not None and stuck.blocked == (waited,)
    assert stuck.schedule == (EventRef(rank=0, index=0), EventRef(rank=1, index=0))
    # A store that misses every signal cell changes nothing.
    build = TraceBuilder(2)
    build.notify(0, cell(1, 0))
    build.cell_store(1, cell(1, 2), 0)
    build.wait(1, cell(1, 0))
    assert oracle(build.build()).stuck() is None


@pytest.mark.parametrize("barrier", [True, False])
def test_mesh_allreduce_at_eight_ranks(barrier: bool) -> None:
    ranks = 8
    trace = mesh_allreduce(ranks, barrier=barrier)
    answers = oracle(trace)
    stores = {me: EventRef(rank=me, index=0) for me in range(ranks)}
    for reader in range(ranks):
        for index, event in enumerate(trace.events[reader]):
            if event.kind is EventKind.LOAD and event.access and event.access.owner != reader:
                load = EventRef(rank=reader, index=index)
                store = stores[event.access.owner]
                assert answers.can_precede(load, store) is not barrier
                assert answers.can_precede(store, load)
                assert_witness(trace, answers.witness(store, load), store, load)
    assert answers.stuck() is None


def test_unknown_when_the_deadline_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = mesh_allreduce(3)
    with pytest.raises(EngineUnknown):
        SmtEngine().order(SyncSkeleton(trace), deadline=time.monotonic() - 1)
    answers = oracle(trace, seconds=30)
    later = time.monotonic() + 31  # the clock jumps past the deadline: no sleep, no race with load
    monkeypatch.setattr(time, "monotonic", lambda: later)
    with pytest.raises(EngineUnknown):
        answers.can_precede(EventRef(rank=1, index=5), EventRef(rank=0, index=0))


def assert_agrees_with_the_brute_force(trace: Trace) -> None:
    truth = BruteForce(trace)
    answers = oracle(trace)
    for first, second in cross_rank_pairs(trace):
        expected = truth.can_precede(first, second)
        assert answers.can_precede(first, second) == expected, (first, second)
        if expected:
            assert_witness(trace, answers.witness(first, second), first, second)
    stuck = answers.stuck()
    assert (stuck is not None) == truth.has_stuck_state()
    if stuck is not None:
        state = replay(trace, stuck.schedule)
        assert is_stuck(trace, state)
        assert all(state.positions[ref.rank] == ref.index for ref in stuck.blocked)


@st.composite
def crowded_cell_traces(draw: st.DrawFn) -> Trace:
    """Up to three ranks hammering rank 0's cell 0 with AtomicAdds and Sets while rank 0
    waits on it with Ge and Eq: the shapes the count lemmas reason about."""
    ranks = draw(st.integers(2, 3))
    build = TraceBuilder(ranks)
    target = cell(0, 0)
    for rank in range(ranks):
        for _ in range(draw(st.integers(1, 4))):
            action = draw(st.sampled_from(("add", "add", "set", "wait", "store")))
            if action == "wait" and rank == 0:
                cmp = draw(st.sampled_from(WaitCmp))
                build.wait(0, target, expected=draw(st.integers(0, 3)), cmp=cmp)
            elif action == "set":
                build.notify(rank, target, value=draw(st.integers(0, 2)), op=NotifyOp.SET)
            elif action == "store":
                build.cell_store(rank, target, draw(st.integers(0, 2)))
            else:
                build.notify(rank, target, value=draw(st.integers(-1, 2)))
    return build.build()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowded_cell_traces())
def test_agrees_with_the_brute_force_on_one_crowded_cell(trace: Trace) -> None:
    assert_agrees_with_the_brute_force(trace)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_agrees_with_the_brute_force(trace: Trace) -> None:
    assert_agrees_with_the_brute_force(trace)
