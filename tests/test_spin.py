"""SPIN, run on the Promela model, decides the properties of docs/model.md like racecheck does.

Hand-built protocols with known answers, then random protocols on which SPIN's answers
must equal the explore engine's and `find_hazards`' verdicts. SPIN is required: when it
is missing these tests fail and say how to install it (CI installs it).
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import monotone_traces, threaded_traces, traces, unit_traces
from tracebuild import TraceBuilder, mesh_allreduce

from racecheck.analysis import find_hazards
from racecheck.engines.explore import ExploreEngine
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.errors import EngineUnknown
from racecheck.events import (
    AccessMode,
    EventKind,
    EventRef,
    NotifyOp,
    Trace,
    WaitCmp,
    WriteOp,
    Written,
)
from racecheck.export.promela import to_promela
from racecheck.export.properties import Question, StaleRead
from racecheck.export.spin import SpinCheck, SpinUnavailable, check_with_spin, require_spin
from racecheck.findings import FindingKind, RaceDetail

pytestmark = pytest.mark.slow  # needs SPIN and gcc


@pytest.fixture(autouse=True)
def spin_installed() -> None:
    try:
        require_spin()
    except SpinUnavailable as missing:
        pytest.fail(f"these tests need SPIN: {missing}")


def spin(trace: Trace) -> SpinCheck:
    return check_with_spin(trace, timeout=60, memory_mb=1024)


def ref(rank: int, index: int) -> EventRef:
    return EventRef(rank=rank, index=index)


def two_ranks_with_data() -> tuple[TraceBuilder, int, int]:
    builder = TraceBuilder(2)
    return builder, builder.window("data", 16), builder.window("signal", 8)


def test_message_passing_is_clean() -> None:
    builder, data, signal = two_ranks_with_data()
    builder.store(0, data, 1, 0, 16, line=10)
    builder.notify(0, signal, 1, 0, line=11)
    builder.wait(1, signal, 0, line=20)
    builder.load(1, data, 1, 0, 16, line=21)
    verdicts = spin(builder.build()).verdicts
    assert (verdicts.races, verdicts.stale_reads, verdicts.deadlock) == (frozenset(), (), False)


def test_missing_barrier_is_a_race() -> None:
    builder, data, _ = two_ranks_with_data()
    builder.store(0, data, 1, 0, 16, line=10)
    builder.load(1, data, 1, 4, 8, line=20)
    verdicts = spin(builder.build()).verdicts
    assert verdicts.races == {(ref(0, 0), ref(1, 0))}
    assert (verdicts.stale_reads, verdicts.deadlock) == ((), False)


def arrivals(op: NotifyOp, cmp: WaitCmp, expected: int) -> Trace:
    """Ranks 1 and 2 each notify rank 0's cell with 1; rank 0 waits on it."""
    builder = TraceBuilder(3)
    signal = builder.window("signal", 4)
    builder.notify(1, signal, 0, 0, line=10, op=op)
    builder.notify(2, signal, 0, 0, line=10, op=op)
    builder.wait(0, signal, 0, line=20, cmp=cmp, expected=expected)
    return builder.build()


@pytest.mark.parametrize(
    ("op", "cmp", "expected", "deadlock"),
    [
        (NotifyOp.ATOMIC_ADD, WaitCmp.GE, 2, False),
        (NotifyOp.SET, WaitCmp.GE, 2, True),  # lost update: the second Set overwrites
        (NotifyOp.ATOMIC_ADD, WaitCmp.EQ, 1, True),  # the counter can jump past 1
        (NotifyOp.ATOMIC_ADD, WaitCmp.GE, 1, False),
    ],
)
def test_lost_updates_and_jumps_past_eq_deadlock(
    op: NotifyOp, cmp: WaitCmp, expected: int, deadlock: bool
) -> None:
    verdicts = spin(arrivals(op, cmp, expected)).verdicts
    assert verdicts.deadlock is deadlock
    assert verdicts.races == frozenset()  # notifies and waits are all atomic


def test_wait_nobody_notifies_deadlocks() -> None:
    builder, _, signal = two_ranks_with_data()
    builder.notify(1, signal, 0, 4, line=10)
    builder.wait(0, signal, 0, line=20)
    assert spin(builder.build()).verdicts.deadlock


def test_nothing_behind_a_wait_that_never_passes_can_run_first() -> None:
    """The marker of a question sits behind a blocked wait: SPIN must report it unreached
    (a no-op marker can be merged away and vanish from pan's unreached report). The
    protocol is the one the differential test once shrank to."""
    builder, data, signal = two_ranks_with_data()
    builder.wait(0, signal, 0, line=10)
    builder.load(0, data, 0, 0, 8, line=11)
    trace = builder.build()
    adds = tuple(
        dataclasses.replace(
            trace.events[0][1],
            rank=1,
            index=index,
            kind=EventKind.ATOMIC_ADD,
            mode=AccessMode.ATOMIC,
        )
        for index in range(2)
    )
    trace = dataclasses.replace(trace, events=(trace.events[0], adds))
    answers = spin(trace).answers
    assert answers[Question(first=ref(0, 1), second=ref(1, 0))] is False
    assert answers[Question(first=ref(1, 0), second=ref(0, 1))] is True


def test_read_before_its_only_write_is_stale() -> None:
    builder, data, signal = two_ranks_with_data()
    builder.load(1, data, 1, 0, 8, line=10)
    builder.notify(1, signal, 0, 0, line=11)
    builder.wait(0, signal, 0, line=20)
    builder.store(0, data, 1, 0, 8, line=21)
    verdicts = spin(builder.build()).verdicts
    assert verdicts.stale_reads == (StaleRead(read=ref(1, 0), ranges=((0, 8),)),)
    assert (verdicts.races, verdicts.deadlock) == (frozenset(), False)


def test_read_past_the_written_bytes_is_stale_there_only() -> None:
    builder, data, signal = two_ranks_with_data()
    builder.store(0, data, 1, 0, 8, line=10)
    builder.notify(0, signal, 1, 0, line=11)
    builder.wait(1, signal, 0, line=20)
    builder.load(1, data, 1, 0, 16, line=21)
    verdicts = spin(builder.build()).verdicts
    assert verdicts.stale_reads == (StaleRead(read=ref(1, 1), ranges=((8, 16),)),)


def test_a_read_of_a_window_only_notifies_write_is_not_stale() -> None:
    builder, _, signal = two_ranks_with_data()
    builder.notify(0, signal, 1, 4, line=10)
    builder.wait(1, signal, 4, line=20)
    builder.load(1, signal, 1, 0, 8, line=21)  # cell 0 is never notified: it holds 0
    assert spin(builder.build()).verdicts.stale_reads == ()


def test_a_read_some_execution_runs_is_stale_one_none_runs_is_not() -> None:
    """Rank 0's Eq wait passes only between rank 1's two Adds; rank 1's own wait is never
    notified. Neither load has a writer."""
    builder, data, signal = two_ranks_with_data()
    builder.wait(0, signal, 0, line=10, cmp=WaitCmp.EQ)
    builder.load(0, data, 0, 0, 8, line=11)
    builder.notify(1, signal, 0, 0, line=20)
    builder.notify(1, signal, 0, 0, line=21)
    builder.wait(1, signal, 4, line=22)
    builder.load(1, data, 1, 0, 8, line=23)
    checked = spin(builder.build())
    assert checked.answers[Question(first=ref(0, 1))] is True
    assert checked.answers[Question(first=ref(1, 3))] is False
    assert checked.verdicts.stale_reads == (StaleRead(read=ref(0, 1), ranges=((0, 8),)),)
    assert checked.verdicts.deadlock


def test_plain_reset_of_a_signal_cell_races_and_can_lose_the_credit() -> None:
    builder = TraceBuilder(3)
    signal = builder.window("signal", 4)
    builder.store(0, signal, 1, 0, 4, line=10)
    builder.notify(2, signal, 1, 0, line=20)
    builder.wait(1, signal, 0, line=30)
    trace = builder.build()
    reset = dataclasses.replace(trace.events[0][0], written=Written.int32s(WriteOp.ASSIGN, [0]))
    trace = dataclasses.replace(trace, events=((reset,), *trace.events[1:]))
    verdicts = spin(trace).verdicts
    assert verdicts.races == {(ref(0, 0), ref(1, 0)), (ref(0, 0), ref(2, 0))}
    assert verdicts.deadlock


@pytest.mark.parametrize("ranks", [2, 3])
def test_mesh_allreduce(ranks: int) -> None:
    assert spin(mesh_allreduce(ranks)).verdicts.races == frozenset()
    racing = spin(mesh_allreduce(ranks, barrier=False)).verdicts.races
    assert len(racing) == ranks * (ranks - 1)  # every store against every peer's read


def test_timeout_is_unknown_never_a_verdict() -> None:
    with pytest.raises(EngineUnknown):
        check_with_spin(mesh_allreduce(3), timeout=0.01)


def test_missing_spin_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SpinUnavailable, match="apt-get install spin"):
        check_with_spin(mesh_allreduce(2))


DIFFERENTIAL = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# Several ranks with a few events each: smaller draws rarely have anything to decide.
PROTOCOLS = st.one_of(traces(), monotone_traces()).filter(
    lambda trace: trace.ranks >= 2 and trace.size >= 2 * trace.ranks
)
# Several threads per rank with start edges, cores and dispatch locks: a proctype each.
THREADED = st.one_of(threaded_traces(), unit_traces()).filter(
    lambda trace: trace.ranks >= 2 and trace.size >= 2 * trace.ranks
)


@DIFFERENTIAL
@given(st.one_of(PROTOCOLS, THREADED))
def test_spin_agrees_with_explore_and_find_hazards(trace: Trace) -> None:
    checked = spin(trace)
    oracle = ExploreEngine().order(SyncSkeleton(trace), deadline=time.monotonic() + 60)
    for question, answer in checked.answers.items():
        second = question.second
        if second is None:
            assert oracle.can_run(question.first) == answer, question
        else:
            assert oracle.can_precede(question.first, second) == answer, question
    verdicts = checked.verdicts
    assert verdicts.deadlock == (oracle.stuck() is not None)
    hazards = find_hazards(trace, oracle)
    # Random traces give every event its own line, so a hazard's locations name its events.
    # set-add-mix is a static rule on the trace, not an ordering question
    raced = {
        frozenset(h.events)
        for h in hazards
        if h.kind is FindingKind.RACE and h.detail != RaceDetail.SET_ADD_MIX.value
    }
    assert raced == {frozenset(pair) for pair in verdicts.races}
    stale = {
        (h.events[0], h.regions[0].ranges) for h in hazards if h.kind is FindingKind.STALE_READ
    }
    # A rank crashed out of bounds runs nothing further, so its reads are not judged.
    assert stale == {(s.read, s.ranges) for s in verdicts.stale_reads if not trace.out_of_bounds}
    assert any(h.kind is FindingKind.DEADLOCK for h in hazards) == verdicts.deadlock


def test_a_thread_is_a_proctype_named_by_its_rank_and_task() -> None:
    from test_units import waiter_and_notifier

    trace = waiter_and_notifier(cores=1)
    text = to_promela(trace)
    assert "active proctype thread_0() { /* rank 0, task wait_step */" in text
    assert spin(trace).verdicts.deadlock  # the waiter holds the only core
    assert not spin(waiter_and_notifier(cores=1, ordered=True)).verdicts.deadlock
