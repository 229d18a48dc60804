"""The near-linear pair search of the analysis finds exactly what checking every pair finds.

On random protocols (tests/strategies.py), against the brute force's ordering answers:
`races` reports exactly what a walk over every pair of overlapping accesses of two ranks
that runs in either order reports, on protocols whose events share a few source lines
(the walk uses the analysis's own rules for one pair: the search is under test);
`stale_reads` reports one stale read per source line of the loads that some execution
runs and some bytes of which no write can reach first, whichever stuck state it is
given; the cell index of the set-add-mix search finds every signal
cell an event writes.
"""

from __future__ import annotations

import dataclasses
from operator import itemgetter
from unittest.mock import patch

from bruteforce import BruteForce
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import MAX_EVENTS_PER_RANK, monotone_traces, traces
from tracebuild import TraceBuilder

from racecheck import analysis
from racecheck.analysis import (
    _conflict,
    _Details,
    _ordered_pair,
    instances,
    races,
    stale_reads,
)
from racecheck.engines.skeleton import signal_cells
from racecheck.events import (
    AccessMode,
    CellIndex,
    Event,
    EventKind,
    EventRef,
    MemoryKind,
    NotifyOp,
    SourceLocation,
    Trace,
    cell_effect,
    intersect_ranges,
    subtract_ranges,
)
from racecheck.findings import RaceDetail

MAX_EVENTS = max(MAX_EVENTS_PER_RANK.values())

PAIRS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _events(trace: Trace) -> list[Event]:
    return [event for rank_events in trace.events for event in rank_events]


def _writes(event: Event) -> bool:
    return event.mode is AccessMode.WRITE or (
        event.mode is AccessMode.ATOMIC and event.kind is not EventKind.WAIT
    )


def _overlap(a: Event, b: Event) -> bool:
    return (
        a.access is not None
        and b.access is not None
        and (a.access.memory, a.access.owner) == (b.access.memory, b.access.owner)
        and bool(intersect_ranges(a.access.ranges, b.access.ranges))
    )


def _called_twice(trace: Trace, lines: list[int]) -> Trace:
    """The trace run twice (as `--repeat 2` does) with its events' source lines drawn
    from a few: many pairs of events share a pair of lines, one line both reads and
    writes, and a window holds alike accesses of both calls."""
    drawn = iter(lines)
    located = [
        [
            dataclasses.replace(
                event, location=SourceLocation(file="gen.py", line=next(drawn), text="")
            )
            for event in rank_events
        ]
        for rank_events in trace.events
    ]
    return dataclasses.replace(
        trace,
        events=tuple(
            (
                *events,
                *(
                    dataclasses.replace(event, index=event.index + len(events), repeat=1)
                    for event in events
                ),
            )
            for events in located
        ),
        repeat=2,
    )


def _walk_every_pair(trace: Trace, truth: BruteForce) -> list[tuple[str, EventRef, EventRef]]:
    """The races of every conflicting pair of overlapping accesses of two ranks that
    runs in either order, met in sweep order (instances in trace order): per pair of
    lines and detail the first, a pair of lines settled by its first writer-first pair
    or once both read details showed."""
    details = _Details(trace, truth)
    met = []
    for number, instance in enumerate(instances(trace)):
        events = [
            event
            for event in _events(trace)
            if event.access is not None
            and (event.access.memory, event.access.owner) == instance.key
        ]
        for a in events:
            for b in events:
                key = instance.sweep_key(a, b)
                if (
                    a.rank < b.rank
                    and key is not None
                    and _conflict(a, b)
                    and truth.can_precede(a.ref, b.ref)
                    and truth.can_precede(b.ref, a.ref)
                ):
                    met.append(((number, *key), a, b))
    met.sort(key=itemgetter(0))
    found: dict[tuple[RaceDetail, SourceLocation, SourceLocation], tuple[str, EventRef, EventRef]]
    found, settled = {}, set()
    for _, a, b in met:
        first, second = _ordered_pair(a, b)
        lines = (first.location, second.location)
        if lines in settled:
            continue
        detail = RaceDetail.WRITE_AFTER_WRITE if _writes(first) else details.of(first, second)
        found.setdefault((detail, *lines), (detail.value, first.ref, second.ref))
        if _writes(first) or all((d, *lines) in found for d in READ_DETAILS):
            settled.add(lines)
    return list(found.values())


READ_DETAILS = (RaceDetail.READ_AFTER_WRITE, RaceDetail.WRITE_AFTER_READ)


@PAIRS
@given(
    trace=traces(max_ranks=3),
    lines=st.lists(st.integers(1, 3), min_size=3 * MAX_EVENTS, max_size=3 * MAX_EVENTS),
)
def test_races_are_the_first_pairs_of_every_pair_that_runs_in_either_order(
    trace: Trace, lines: list[int]
) -> None:
    _assert_races_are_the_walk(_called_twice(trace, lines))


def test_of_alike_writes_the_one_the_sweep_meets_first_races() -> None:
    """Two writes of one line start at different bytes: the one later in program order
    starts first, so its pair with the read is the one the sweep meets first."""
    build = TraceBuilder(2)
    data = build.window("data", 16)
    build.load(0, data, 0, 4, 12, line=1)
    build.store(1, data, 0, 4, 12, line=2)
    build.store(1, data, 0, 0, 8, line=2)
    trace = build.build()
    _assert_races_are_the_walk(trace)
    (race,) = races(trace, BruteForce(trace), instances(trace), [])
    assert race.events == (EventRef(rank=0, index=0), EventRef(rank=1, index=1))


class _Asked:
    """The brute force's answers, recording every question."""

    def __init__(self, trace: Trace) -> None:
        self.truth = BruteForce(trace)
        self.asked: list[tuple[EventRef, EventRef]] = []

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        self.asked.append((first, second))
        return self.truth.can_precede(first, second)


def test_a_pair_s_windows_hold_only_accesses_that_conflict_with_the_other_rank() -> None:
    """Examples/132's flag cell, twice: rank 0 Sets it and adds a credit, rank 1 waits
    for 2 and takes two. Waits conflict with neither notify and the Adds not with each
    other, so only a Set and a take make a pair; the windows ask about nothing else,
    and the race (the second Set can land before the first take) is the walk's."""
    build = TraceBuilder(2)
    signal = build.window("signal", 4)
    for _ in range(2):
        build.notify(0, signal, 1, 0, line=1, op=NotifyOp.SET)
        build.notify(0, signal, 1, 0, line=2)
        build.wait(1, signal, 0, line=3, expected=2)
        build.notify(1, signal, 1, 0, line=4, value=-2)
    trace = build.build()
    _assert_races_are_the_walk(trace)
    oracle = _Asked(trace)
    (race,) = races(trace, oracle, instances(trace), list(signal_cells(trace).values()))
    assert {trace.event(ref).location.line for ref in race.events} == {1, 4}
    assert oracle.asked
    for pair in oracle.asked:
        assert {trace.event(ref).location.line for ref in pair} == {1, 4}, pair


def _assert_races_are_the_walk(trace: Trace) -> None:
    truth = BruteForce(trace)
    cells = list(signal_cells(trace).values())
    expected = _walk_every_pair(trace, truth)
    found = races(trace, truth, instances(trace), cells)
    assert [(h.detail, *h.events) for h in found] == expected
    with patch.object(analysis, "_FEW", 0):  # every window by its groups of alike accesses
        found = races(trace, truth, instances(trace), cells)
    assert [(h.detail, *h.events) for h in found] == expected


def _stale_loads(trace: Trace, truth: BruteForce) -> set[tuple[int, int]]:
    """Loads of a data window that can run, with bytes no overlapping write can precede."""
    signal = {
        event.access.memory
        for event in _events(trace)
        if event.access is not None and (event.notify or event.wait)
    }
    stale = set()
    for read in _events(trace):
        if read.kind is not EventKind.LOAD or read.access is None:
            continue
        if trace.memory(read.access.memory).kind is not MemoryKind.WINDOW:
            continue
        if read.access.memory in signal or not truth.can_run(read.ref):
            continue
        missing = read.access.ranges
        for writer in _events(trace):
            if not (_writes(writer) and _overlap(writer, read)):
                continue
            assert writer.access is not None
            before = (
                writer.index < read.index
                if writer.rank == read.rank
                else truth.can_precede(writer.ref, read.ref)
            )
            if before:
                missing = subtract_ranges(missing, writer.access.ranges)
        if missing:
            stale.add((read.rank, read.index))
    return stale


@PAIRS
@given(trace=traces() | monotone_traces())
def test_stale_reads_are_the_loads_no_write_reaches(trace: Trace) -> None:
    truth = BruteForce(trace)
    expected = _stale_loads(trace, truth)
    cells = list(signal_cells(trace).values())
    expected_lines = {trace.event(EventRef(rank=r, index=i)).location for r, i in expected}
    for blocked in truth.stuck_waits() or {()}:
        found = stale_reads(trace, truth, instances(trace), cells, blocked=blocked)
        assert {(h.events[0].rank, h.events[0].index) for h in found} <= expected
        assert {h.locations[0] for h in found} == expected_lines


@PAIRS
@given(trace=traces())
def test_the_cell_index_finds_every_cell_an_event_writes(trace: Trace) -> None:
    keys = list(signal_cells(trace))
    index = CellIndex(keys)
    for event in _events(trace):
        touched = index.touching(event.access)
        assert touched == sorted(touched, key=keys.index)
        assert {key for key in keys if cell_effect(event, key) is not None} <= set(touched)
