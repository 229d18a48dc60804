"""The explore engine on hand-written protocols whose answers are known, and its
partial-order reduction against the plain enumeration of every interleaving."""

from __future__ import annotations

import time
from collections.abc import Generator

import pytest
from bruteforce import is_stuck, replay
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import DATA, HOST, MEMORIES, SIGNAL, traces, unit_traces
from test_engines_conformance import assert_conforms

from racecheck.engines.explore import ExploreEngine, ExploreOracle, first_to_finish
from racecheck.engines.macrostates import ExploredStates, explore_states, fewest_states
from racecheck.engines.por import ExploredTraces, explore
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.engines.syncprogram import compile_sync_program
from racecheck.errors import EngineUnknown
from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Event,
    EventKind,
    EventRef,
    Notify,
    NotifyOp,
    RankEnd,
    Region,
    SignalCell,
    SourceLocation,
    Trace,
    Wait,
    WaitCmp,
    WriteOp,
    Written,
)


class Protocol:
    """Builds a trace rank by rank over the strategies' memories; each call returns the ref."""

    def __init__(self, ranks: int) -> None:
        self.ranks = ranks
        self.events: list[list[Event]] = [[] for _ in range(ranks)]

    def _add(
        self, rank: int, kind: EventKind, region: Region, mode: AccessMode, **extra
    ) -> EventRef:
        index = len(self.events[rank])
        location = SourceLocation(file="proto.py", line=100 * rank + index + 1, text=kind.value)
        event = Event(
            rank=rank, index=index, kind=kind, access=region, mode=mode, location=location, **extra
        )
        self.events[rank].append(event)
        return event.ref

    def store(self, rank: int, owner: int, memory: int = DATA.id) -> EventRef:
        region = Region(memory=memory, owner=owner, ranges=((0, 8),))
        return self._add(rank, EventKind.STORE, region, AccessMode.WRITE)

    def load(self, rank: int, owner: int, memory: int = DATA.id) -> EventRef:
        region = Region(memory=memory, owner=owner, ranges=((0, 8),))
        return self._add(rank, EventKind.LOAD, region, AccessMode.READ)

    def notify(
        self,
        rank: int,
        peer: int,
        value: int = 1,
        op: NotifyOp = NotifyOp.ATOMIC_ADD,
        *,
        row: int = 0,
    ) -> EventRef:
        cell = _cell(peer, row)
        notify = Notify(cell=cell, op=op, value=value)
        return self._add(
            rank, EventKind.NOTIFY, _cell_region(cell), AccessMode.ATOMIC, notify=notify
        )

    def wait(
        self, rank: int, expected: int = 1, cmp: WaitCmp = WaitCmp.GE, *, row: int = 0
    ) -> EventRef:
        cell = _cell(rank, row)
        wait = Wait(cell=cell, cmp=cmp, expected=expected)
        return self._add(rank, EventKind.WAIT, _cell_region(cell), AccessMode.ATOMIC, wait=wait)

    def cell_store(self, rank: int, peer: int, value: int, *, row: int = 0) -> EventRef:
        region = _cell_region(_cell(peer, row))
        written = Written.int32s(WriteOp.ASSIGN, [value])
        return self._add(rank, EventKind.STORE, region, AccessMode.WRITE, written=written)

    def trace(self) -> Trace:
        return Trace(
            ranks=self.ranks,
            events=tuple(tuple(events) for events in self.events),
            memories=MEMORIES,
            ends=(RankEnd.FINISHED,) * self.ranks,
        )


def _cell(owner: int, row: int) -> SignalCell:
    return SignalCell(memory=SIGNAL.id, owner=owner, offset=4 * row, index=(row, 0))


def _cell_region(cell: SignalCell) -> Region:
    return Region(memory=cell.memory, owner=cell.owner, ranges=((cell.offset, cell.offset + 4),))


def oracle_for(protocol: Protocol, **engine_options: int) -> ExploreOracle:
    return ExploreEngine(**engine_options).order(
        SyncSkeleton(protocol.trace()), deadline=time.monotonic() + 30
    )


SEARCHES = ({"reduced_steps": 0}, {"macro_states": 0})  # each search alone


def can_precede_checked(protocol: Protocol, first: EventRef, second: EventRef) -> bool:
    """can_precede from each search, which must agree, and when true a witness from each
    that replays, ends with first, lacks second."""
    answers = set()
    for options in SEARCHES:
        oracle = oracle_for(protocol, **options)
        answer = oracle.can_precede(first, second)
        if answer:
            schedule = oracle.witness(first, second)
            replay(protocol.trace(), schedule)
            assert schedule[-1] == first and second not in schedule
        answers.add(answer)
    (answer,) = answers
    return answer


def stuck_values(protocol: Protocol) -> dict[EventRef, int] | None:
    """The blocked waits of the stuck state with their cells' values, replayed; each
    search must find the same."""
    found = []
    for options in SEARCHES:
        stuck = oracle_for(protocol, **options).stuck()
        if stuck is None:
            found.append(None)
            continue
        trace = protocol.trace()
        assert is_stuck(trace, replay(trace, stuck.schedule))
        blocked = zip(stuck.blocked, stuck.cell_values, strict=True)
        found.append({ref: value for ref, (_, value) in blocked})
    assert found[0] == found[1]
    return found[0]


def mesh_allreduce(ranks: int) -> Protocol:
    """The seed mesh all-reduce: stage, notify-all / wait-all barrier, read every peer, store y."""
    protocol = Protocol(ranks)
    for me in range(ranks):
        protocol.store(me, me)
        for peer in range(ranks):
            if peer != me:
                protocol.notify(me, peer, row=me)
        for source in range(ranks):
            if source != me:
                protocol.wait(me, row=source)
        protocol.load(me, me)
        for peer in range(ranks):
            if peer != me:
                protocol.load(me, peer)
        protocol.store(me, HOST_OWNER, memory=HOST.id)
    return protocol


def test_message_passing_orders_the_store_before_the_load() -> None:
    protocol = Protocol(2)
    store = protocol.store(0, 0)
    protocol.notify(0, 1)
    protocol.wait(1)
    load = protocol.load(1, 0)
    assert can_precede_checked(protocol, store, load)
    assert not can_precede_checked(protocol, load, store)
    assert stuck_values(protocol) is None


def test_unsynchronised_accesses_go_both_ways() -> None:
    protocol = Protocol(2)
    store = protocol.store(0, 1)
    load = protocol.load(1, 1)
    assert can_precede_checked(protocol, store, load)
    assert can_precede_checked(protocol, load, store)


def test_a_notify_after_the_store_does_not_order_an_earlier_load() -> None:
    protocol = Protocol(2)
    protocol.wait(0)
    store = protocol.store(0, 1)
    load = protocol.load(1, 1)
    protocol.notify(1, 0)
    assert not can_precede_checked(protocol, store, load)
    assert can_precede_checked(protocol, load, store)


def test_set_after_add_loses_an_update_and_deadlocks() -> None:
    protocol = Protocol(3)
    protocol.notify(0, 2, 1, NotifyOp.SET)
    after_set = protocol.load(0, 0)
    protocol.notify(1, 2, 1)
    wait = protocol.wait(2, 2)
    assert stuck_values(protocol) == {wait: 1}
    assert can_precede_checked(protocol, wait, after_set)  # Set first, then Add: it passes


def test_eq_wait_deadlocks_when_the_counter_jumps_past_it() -> None:
    protocol = Protocol(3)
    protocol.notify(0, 2)
    second = protocol.notify(1, 2)
    wait = protocol.wait(2, 1, WaitCmp.EQ)
    assert stuck_values(protocol) == {wait: 2}
    assert can_precede_checked(protocol, wait, second)


def test_a_wait_nobody_notifies_blocks_forever_while_the_others_finish() -> None:
    protocol = Protocol(2)
    wait = protocol.wait(0)
    store = protocol.store(1, 1)
    stuck = oracle_for(protocol).stuck()
    assert stuck is not None
    assert stuck.blocked == (wait,)
    assert stuck.schedule == (store,)
    assert not can_precede_checked(protocol, wait, store)


def test_atomic_add_minus_one_resets_the_cell_for_the_next_round() -> None:
    protocol = Protocol(2)
    protocol.notify(0, 1)
    second_notify = protocol.notify(0, 1)
    protocol.wait(1)
    protocol.notify(1, 1, -1)
    second_wait = protocol.wait(1)
    assert not can_precede_checked(protocol, second_wait, second_notify)
    assert stuck_values(protocol) is None


def test_a_reset_without_a_second_round_of_notifies_deadlocks() -> None:
    protocol = Protocol(2)
    protocol.notify(0, 1)
    protocol.wait(1)
    protocol.notify(1, 1, -1)
    second_wait = protocol.wait(1)
    assert stuck_values(protocol) == {second_wait: 0}


def test_counters_that_may_decrease_are_not_saturated() -> None:
    protocol = Protocol(1)
    protocol.notify(0, 0, 2)
    protocol.notify(0, 0, 2)
    protocol.notify(0, 0, -1)
    wait = protocol.wait(0, 2, WaitCmp.EQ)
    assert stuck_values(protocol) == {wait: 3}


def test_a_plain_store_into_a_signal_cell_is_a_set() -> None:
    protocol = Protocol(2)
    store = protocol.store(0, 1)
    protocol.cell_store(0, 1, 1)
    protocol.wait(1)
    load = protocol.load(1, 1)
    assert not can_precede_checked(protocol, load, store)


def test_a_plain_store_beside_the_cells_signals_nothing() -> None:
    protocol = Protocol(2)
    protocol.cell_store(0, 1, 1, row=2)  # offset 8: no notify or wait targets it
    wait = protocol.wait(1)
    assert stuck_values(protocol) == {wait: 0}


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_mesh_allreduce_stages_before_every_peer_reads_and_never_deadlocks(ranks: int) -> None:
    protocol = mesh_allreduce(ranks)
    oracle = oracle_for(protocol)
    assert oracle.stuck() is None
    stage = EventRef(rank=0, index=0)
    for reader in range(1, ranks):
        remote_load = EventRef(rank=reader, index=len(protocol.events[reader]) - 1 - (ranks - 1))
        assert protocol.trace().event(remote_load).access.owner == 0
        assert not oracle.can_precede(remote_load, stage)
        assert oracle.can_precede(stage, remote_load)


def test_too_many_states_is_unknown_not_an_answer() -> None:
    with pytest.raises(EngineUnknown, match="states"):
        oracle_for(mesh_allreduce(3), max_states=10)


def test_a_passed_deadline_is_unknown_not_an_answer() -> None:
    with pytest.raises(EngineUnknown, match="--timeout"):
        ExploreEngine().order(
            SyncSkeleton(mesh_allreduce(2).trace()), deadline=time.monotonic() - 1
        )


def test_a_wait_can_pass_on_either_of_two_adds_before_the_other() -> None:
    """The wait is dependent with both adds, the adds with neither: the reduction must
    still run the wait after each add alone (it reads 1 either way) and after both."""
    protocol = Protocol(3)
    wait = protocol.wait(0, 1, WaitCmp.EQ)
    first = protocol.notify(1, 0)
    second = protocol.notify(2, 0)
    assert can_precede_checked(protocol, wait, first)
    assert can_precede_checked(protocol, wait, second)
    assert stuck_values(protocol) == {wait: 2}


def test_the_mesh_allreduce_is_one_trace_and_is_run_once() -> None:
    """Every wait of the mesh is fed by one known notify: one maximal trace, so the
    reduced search runs each sync step once (the unreduced one runs millions at P=8)."""
    ranks = 8
    skeleton = SyncSkeleton(mesh_allreduce(ranks).trace())
    program = compile_sync_program(skeleton)
    explored = searched(explore(program, max_states=10_000))
    assert explored.nodes == sum(len(steps) for steps in program.steps) == 2 * ranks * (ranks - 1)
    assert not explored.deadlocks
    oracle = ExploreOracle(skeleton, program, explored)
    stage = EventRef(rank=0, index=0)
    for reader in range(1, ranks):
        remote_load = EventRef(rank=reader, index=3 * (ranks - 1) + 1)
        assert not oracle.can_precede(remote_load, stage)
        assert oracle.can_precede(stage, remote_load)


@st.composite
def sync_protocols(draw: st.DrawFn) -> Trace:
    """More ranks and sync steps than `strategies.traces`, few cells (rows 0 and 1 of
    ranks 0..2), so that adds, Sets and Ge/Eq waits pile up on them."""
    ranks = draw(st.integers(2, 5))
    protocol = Protocol(ranks)
    for me in range(ranks):
        for _ in range(draw(st.integers(0, {2: 7, 3: 6, 4: 5, 5: 4}[ranks]))):
            kind = draw(st.sampled_from(("add", "add", "set", "wait", "wait", "load", "store")))
            peer, row = draw(st.integers(0, min(ranks - 1, 2))), draw(st.integers(0, 1))
            if kind == "add":
                protocol.notify(me, peer, draw(st.sampled_from((1, 1, 2, -1))), row=row)
            elif kind == "set":
                protocol.notify(me, peer, draw(st.integers(0, 2)), NotifyOp.SET, row=row)
            elif kind == "wait" and me <= 2:
                cmp = draw(st.sampled_from((WaitCmp.GE, WaitCmp.EQ)))
                protocol.wait(me, draw(st.sampled_from((0, 1, 1, 2))), cmp, row=row)
            elif kind == "load":
                protocol.load(me, peer)
            else:
                protocol.store(me, peer)
    return protocol.trace()


REDUCTION = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@REDUCTION
@given(trace=st.one_of(sync_protocols(), traces(), unit_traces()))
def test_the_reduced_search_finds_what_every_interleaving_finds(trace: Trace) -> None:
    """Same deadlocked states, same least causal past of every step towards every rank
    (the facts every answer is read from), in no more steps than the plain enumeration."""
    skeleton = SyncSkeleton(trace)
    assume(skeleton.refusal() is None)
    program = compile_sync_program(skeleton)
    try:
        every = searched(explore(program, reduce=False, max_states=100_000))
    except EngineUnknown:
        assume(False)
        raise
    reduced = searched(explore(program, max_states=100_000))
    assert reduced.deadlocks.keys() == every.deadlocks.keys()
    assert least_pasts(reduced) == least_pasts(every)
    assert reduced.nodes <= every.nodes


@pytest.mark.parametrize("alone", SEARCHES, ids=["macro-states", "reduced"])
@REDUCTION
@given(trace=st.one_of(sync_protocols(), traces(), unit_traces()))
def test_each_search_of_the_engine_is_exact(alone: dict[str, int], trace: Trace) -> None:
    """With no budget for the other search, the engine answers from one search alone."""
    engine = ExploreEngine(**alone)
    assume(engine.unsupported(SyncSkeleton(trace)) is None)
    assert_conforms(engine, trace)


@REDUCTION
@given(trace=st.one_of(sync_protocols(), traces()))
def test_the_macro_states_are_never_fewer_than_their_lower_bound(trace: Trace) -> None:
    skeleton = SyncSkeleton(trace)
    assume(skeleton.refusal() is None)
    program = compile_sync_program(skeleton)
    search = explore_states(program, max_states=100_000)
    try:
        explored = first_to_finish([(1, search)], deadline=time.monotonic() + 60)
    except EngineUnknown:
        assume(False)
        raise
    assert isinstance(explored, ExploredStates)
    assert fewest_states(program) <= len(explored.states)


def test_a_macro_search_whose_lower_bound_passes_its_budget_gives_up_at_once() -> None:
    """The mesh at P=4: each rank's 3 notifies run before its first wait, so at least
    4^4 = 256 states (it has 1,043); a budget of 255 fails before any state is visited,
    one of 256 starts the search (and fails later)."""
    program = compile_sync_program(SyncSkeleton(mesh_allreduce(4).trace()))
    assert fewest_states(program) == 4**4
    with pytest.raises(EngineUnknown, match="more than 255 macro states"):
        next(explore_states(program, max_states=255))
    search = explore_states(program, max_states=256)
    next(search)
    with pytest.raises(EngineUnknown, match="more than 256 macro states"):
        first_to_finish([(1, search)], deadline=time.monotonic() + 60)


def searched(search: Generator[None, None, ExploredTraces]) -> ExploredTraces:
    explored = first_to_finish([(1, search)], deadline=time.monotonic() + 60)
    assert isinstance(explored, ExploredTraces)
    return explored


def least_pasts(explored: ExploredTraces) -> list[list[list[int | None]]]:
    return [
        [
            [None if past is None else past.clock[rank] for rank, past in enumerate(row)]
            for row in steps
        ]
        for steps in explored.least_past
    ]
