"""The properties of docs/model.md §2 on hand-built traces, decided with the monotone engine."""

from __future__ import annotations

import dataclasses
import time

import pytest
from tracebuild import (
    LINE_REMOTE,
    LINE_STORE,
    TraceBuilder,
    mesh_allreduce,
)

from racecheck.analysis import Hazard, find_hazards, to_finding
from racecheck.engines import ENGINES
from racecheck.engines.monotone import MonotoneEngine
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.events import HOST_OWNER, EventRef, NotifyOp, RankEnd, Trace, WaitCmp
from racecheck.findings import FindingKind, RaceDetail, Severity


def hazards_of(trace: Trace) -> list[Hazard]:
    engine = MonotoneEngine()
    assert engine.unsupported(SyncSkeleton(trace)) is None
    return find_hazards(trace, engine.order(SyncSkeleton(trace), deadline=time.monotonic() + 30))


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 8])
def test_mesh_with_barrier_has_no_hazard(ranks: int) -> None:
    assert hazards_of(mesh_allreduce(ranks)) == []


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_mesh_without_barrier_is_one_read_after_write_race(ranks: int) -> None:
    (hazard,) = hazards_of(mesh_allreduce(ranks, barrier=False))
    assert hazard.kind is FindingKind.RACE
    assert hazard.detail == "read-after-write"
    assert [loc.line for loc in hazard.locations] == [LINE_REMOTE, LINE_STORE]
    reader, writer = hazard.ranks
    assert reader != writer and {reader, writer} <= set(range(ranks))


def test_race_witness_runs_the_read_before_the_write() -> None:
    trace = mesh_allreduce(4, barrier=False)
    engine = MonotoneEngine()
    oracle = engine.order(SyncSkeleton(trace), deadline=time.monotonic() + 30)
    (hazard,) = find_hazards(trace, oracle)
    finding, schedule = to_finding(trace, oracle, hazard)
    assert schedule[-1] == hazard.bad_first
    assert hazard.bad_second not in schedule
    assert [step.highlight for step in finding.witness].count(True) == 2


def _overwrite_protocol(*, ack: bool) -> Trace:
    """Rank 0 pushes two rounds into rank 1's buffer from one line of a loop; rank 1 reads
    each round. Without an acknowledgement, round 2 can clobber round 1 before rank 1
    read it."""
    builder = TraceBuilder(2)
    buf = builder.window("buf", 64)
    sig = builder.window("sig", 16)
    builder.store(0, buf, 1, 0, 64, line=1)
    builder.notify(0, sig, 1, 0, line=2)
    if ack:
        builder.wait(0, sig, 4, line=3)
    builder.store(0, buf, 1, 0, 64, line=1)
    builder.notify(0, sig, 1, 0, line=2)
    builder.wait(1, sig, 0, line=11)
    builder.load(1, buf, 1, 0, 64, line=12)
    if ack:
        builder.notify(1, sig, 0, 4, line=13)
    builder.wait(1, sig, 0, line=14, expected=2)
    builder.load(1, buf, 1, 0, 64, line=15)
    return builder.build()


def test_unacknowledged_second_round_is_write_after_read() -> None:
    (hazard,) = hazards_of(_overwrite_protocol(ack=False))
    assert (hazard.kind, hazard.detail) == (FindingKind.RACE, "write-after-read")
    assert [loc.line for loc in hazard.locations] == [12, 1]
    assert hazard.bad_first == EventRef(rank=0, index=2)


def test_a_write_of_bytes_nothing_else_provides_is_read_after_write() -> None:
    """Issue 10.9: rank 0 publishes an 8-byte header to ranks 1 and 2; rank 2 then writes
    bytes 4..64, unordered with rank 1's read. Rank 1 can miss bytes only rank 2
    provides (read-after-write); calling it write-after-read would show the benign
    order (rank 2 first) as the witness."""
    builder = TraceBuilder(3)
    buf = builder.window("buf", 64)
    sig = builder.window("sig", 16)
    builder.store(0, buf, 1, 0, 8, line=1)
    builder.notify(0, sig, 1, 0, line=2)
    builder.notify(0, sig, 2, 0, line=3)
    builder.wait(1, sig, 0, line=11)
    builder.load(1, buf, 1, 0, 64, line=12)
    builder.wait(2, sig, 0, line=21)
    builder.store(2, buf, 1, 4, 64, line=22)
    (hazard,) = hazards_of(builder.build())
    assert (hazard.kind, hazard.detail) == (FindingKind.RACE, "read-after-write")
    assert hazard.bad_first == EventRef(rank=1, index=1)  # the read runs first


def test_acknowledged_rounds_are_safe() -> None:
    assert hazards_of(_overwrite_protocol(ack=True)) == []


def test_unreachable_threshold_is_a_deadlock_naming_the_wait() -> None:
    builder = TraceBuilder(2)
    sig = builder.window("sig", 8)
    builder.notify(0, sig, 1, 0, line=1)
    builder.wait(1, sig, 0, line=2, expected=2)
    (hazard,) = hazards_of(builder.build())
    assert hazard.kind is FindingKind.DEADLOCK
    assert [loc.line for loc in hazard.locations] == [2]
    assert hazard.ranks == (1,)
    assert [value for _, value in hazard.holds] == [1]


def test_read_of_never_written_bytes_is_stale() -> None:
    builder = TraceBuilder(2)
    buf = builder.window("buf", 128)
    sig = builder.window("sig", 8)
    builder.store(0, buf, 0, 0, 64, line=1)
    builder.notify(0, sig, 1, 0, line=2)
    builder.wait(1, sig, 0, line=3)
    builder.load(1, buf, 0, 64, 128, line=4)  # one chunk off
    (hazard,) = hazards_of(builder.build())
    assert hazard.kind is FindingKind.STALE_READ
    assert [loc.line for loc in hazard.locations] == [4]
    assert hazard.regions[0].ranges == ((64, 128),)


def test_partly_covered_read_is_stale_only_where_uncovered() -> None:
    builder = TraceBuilder(1)
    buf = builder.window("buf", 128)
    builder.store(0, buf, 0, 0, 96, line=1)
    builder.load(0, buf, 0, 0, 128, line=2)
    (hazard,) = hazards_of(builder.build())
    assert hazard.regions[0].ranges == ((96, 128),)


def test_stale_bytes_are_found_in_a_window_that_also_holds_signal_cells() -> None:
    """Issue 10.8: data and cells in one window; the cells are not stale, the data is."""
    builder = TraceBuilder(2)
    both = builder.window("both", 128)  # bytes 0..4: rank 1's cell; 4..128: data
    builder.store(0, both, 1, 4, 64, line=1)
    builder.notify(0, both, 1, 0, line=2)
    builder.wait(1, both, 0, line=3)
    builder.load(1, both, 1, 0, 128, line=4)  # the cell, written data, never-written data
    (hazard,) = hazards_of(builder.build())
    assert hazard.kind is FindingKind.STALE_READ
    assert hazard.regions[0].ranges == ((64, 128),)


def test_a_window_only_notifies_write_is_all_signal_cells_and_never_stale() -> None:
    """A counter row read whole (PyPTO's EP dispatch reads every peer's count): the
    elements no peer notified hold their zero, which is not a stale read."""
    builder = TraceBuilder(2)
    counts = builder.window("counts", 16)  # four INT32 cells per rank
    builder.notify(0, counts, 1, 4, line=1)
    builder.wait(1, counts, 4, line=2)
    builder.load(1, counts, 1, 0, 16, line=3)
    assert hazards_of(builder.build()) == []


def test_a_stale_read_is_a_warning() -> None:
    builder = TraceBuilder(1)
    buf = builder.window("buf", 64)
    builder.load(0, buf, 0, 0, 64, line=1)
    trace = builder.build()
    oracle = MonotoneEngine().order(SyncSkeleton(trace), deadline=time.monotonic() + 30)
    (hazard,) = find_hazards(trace, oracle)
    finding, _ = to_finding(trace, oracle, hazard)
    assert (finding.code.value, finding.severity) == ("stale-read", Severity.WARNING)


def test_a_read_behind_a_wait_that_never_passes_belongs_to_the_deadlock() -> None:
    builder = TraceBuilder(2)
    buf = builder.window("buf", 64)
    sig = builder.window("sig", 8)
    builder.notify(0, sig, 1, 0, line=1)
    builder.wait(1, sig, 0, line=2, expected=2)  # never reaches 2
    builder.load(1, buf, 0, 0, 64, line=3)  # never runs
    (hazard,) = hazards_of(builder.build())
    assert hazard.kind is FindingKind.DEADLOCK


def _hazards_by(engine_name: str, trace: Trace) -> list[Hazard]:
    engine = ENGINES[engine_name]()
    skeleton = SyncSkeleton(trace)
    assert engine.unsupported(skeleton) is None
    return find_hazards(trace, engine.order(skeleton, deadline=time.monotonic() + 30))


def _stale_lines(hazards: list[Hazard]) -> list[tuple[int, tuple[int, ...]]]:
    return [
        (hazard.locations[0].line, hazard.ranks)
        for hazard in hazards
        if hazard.kind is FindingKind.STALE_READ
    ]


@pytest.mark.parametrize("engine_name", ["explore", "smt"])
def test_a_read_behind_a_wait_that_only_some_executions_pass_is_stale(engine_name: str) -> None:
    """Rank 0's Eq wait passes between rank 1's two Adds, else it never passes; rank 2
    waits forever. Some stuck states block rank 0, some do not: whichever the engine
    shows, rank 0's read runs in some execution and nothing writes its bytes. Rank 2's
    read runs in no execution: it belongs to the deadlock."""
    builder = TraceBuilder(3)
    buf = builder.window("buf", 64)
    sig = builder.window("sig", 8)
    builder.wait(0, sig, 0, line=1, cmp=WaitCmp.EQ)
    builder.load(0, buf, 0, 0, 64, line=2)
    builder.notify(1, sig, 0, 0, line=3)
    builder.notify(1, sig, 0, 0, line=4)
    builder.wait(2, sig, 4, line=5)  # nobody notifies it
    builder.load(2, buf, 2, 0, 64, line=6)
    hazards = _hazards_by(engine_name, builder.build())
    assert any(hazard.kind is FindingKind.DEADLOCK for hazard in hazards)
    assert _stale_lines(hazards) == [(2, (0,))]


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
def test_no_engine_reports_a_read_no_execution_runs(engine_name: str) -> None:
    """Rank 1's read sits behind a wait nobody notifies, rank 0's behind one that passes."""
    builder = TraceBuilder(2)
    buf = builder.window("buf", 64)
    sig = builder.window("sig", 8)
    builder.notify(0, sig, 0, 0, line=1)
    builder.wait(0, sig, 0, line=2)
    builder.load(0, buf, 0, 0, 64, line=3)
    builder.wait(1, sig, 0, line=4)
    builder.load(1, buf, 1, 0, 64, line=5)
    assert _stale_lines(_hazards_by(engine_name, builder.build())) == [(3, (0,))]


@pytest.mark.parametrize("engine_name", ["explore", "smt"])
def test_a_set_add_mix_is_reported_where_some_execution_reaches_it(engine_name: str) -> None:
    """Rank 0 reaches its Set and Add only between rank 1's two Adds, rank 2 never
    reaches its own; the tracing run forced both ranks' waits."""
    builder = TraceBuilder(3)
    sig = builder.window("sig", 16)
    builder.wait(0, sig, 0, line=1, cmp=WaitCmp.EQ)
    builder.notify(0, sig, 1, 4, line=2, op=NotifyOp.SET)
    builder.notify(0, sig, 1, 4, line=3)
    builder.notify(1, sig, 0, 0, line=4)
    builder.notify(1, sig, 0, 0, line=5)
    builder.wait(2, sig, 8, line=6)  # nobody notifies it
    builder.notify(2, sig, 1, 12, line=7, op=NotifyOp.SET)
    builder.notify(2, sig, 1, 12, line=8)
    trace = dataclasses.replace(
        builder.build(), ends=(RankEnd.FORCED, RankEnd.FINISHED, RankEnd.FORCED)
    )
    mixes = [
        [location.line for location in hazard.locations]
        for hazard in _hazards_by(engine_name, trace)
        if hazard.detail == RaceDetail.SET_ADD_MIX.value
    ]
    assert mixes == [[2, 3]]


def test_two_ranks_writing_one_host_row_race() -> None:
    builder = TraceBuilder(2)
    out = builder.host("y", 64)
    builder.store(0, out, HOST_OWNER, 0, 32, line=1)
    builder.store(1, out, HOST_OWNER, 16, 48, line=1)
    (hazard,) = hazards_of(builder.build())
    assert (hazard.kind, hazard.detail) == (FindingKind.RACE, "write-after-write")


def test_either_of_two_notifiers_can_release_a_ge_one_wait() -> None:
    """Disjunctive release: the wait passes after whichever notify comes first, so the
    store behind the other notifier is not ordered before the load."""
    builder = TraceBuilder(3)
    buf = builder.window("buf", 64)
    sig = builder.window("sig", 8)
    builder.notify(0, sig, 2, 0, line=1)
    builder.store(1, buf, 2, 0, 64, line=2)
    builder.notify(1, sig, 2, 0, line=3)
    builder.wait(2, sig, 0, line=4)
    builder.load(2, buf, 2, 0, 64, line=5)
    (hazard,) = hazards_of(builder.build())
    assert (hazard.kind, hazard.detail) == (FindingKind.RACE, "read-after-write")
