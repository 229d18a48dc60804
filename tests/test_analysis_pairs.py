"""The near-linear pair search of the analysis finds exactly what checking every pair finds.

On random protocols (tests/strategies.py), against the brute force's ordering answers:
`racing_pairs` returns every pair of overlapping accesses of two ranks, at least one
writing, that can run in either order, each once; `stale_reads` reports one stale read
per source line of the loads some bytes of which no write can reach first; the cell
index of the set-add-mix search finds every signal cell an event writes.
"""

from __future__ import annotations

from bruteforce import BruteForce
from hypothesis import HealthCheck, given, settings
from strategies import monotone_traces, traces

from racecheck.analysis import instances, racing_pairs, stale_reads
from racecheck.engines.skeleton import signal_cells
from racecheck.events import (
    AccessMode,
    CellIndex,
    Event,
    EventKind,
    EventRef,
    MemoryKind,
    Trace,
    cell_effect,
    intersect_ranges,
    subtract_ranges,
)

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


def _every_racing_pair(trace: Trace, truth: BruteForce) -> set[frozenset[tuple[int, int]]]:
    events = _events(trace)
    return {
        frozenset({(a.rank, a.index), (b.rank, b.index)})
        for a in events
        for b in events
        if a.rank < b.rank
        and _overlap(a, b)
        and (_writes(a) or _writes(b))
        and truth.can_precede(a.ref, b.ref)
        and truth.can_precede(b.ref, a.ref)
    }


@PAIRS
@given(trace=traces())
def test_racing_pairs_are_every_pair_that_runs_in_either_order(trace: Trace) -> None:
    truth = BruteForce(trace)
    found = racing_pairs(truth, instances(trace))
    keys = [frozenset({(a.rank, a.index), (b.rank, b.index)}) for a, b in found]
    assert len(keys) == len(set(keys))
    assert set(keys) == _every_racing_pair(trace, truth)


def _stale_loads(trace: Trace, truth: BruteForce) -> set[tuple[int, int]]:
    """Loads of a data window with bytes no overlapping write can precede."""
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
        if read.access.memory in signal:
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
    found = stale_reads(trace, truth, instances(trace), cells)
    assert {(h.events[0].rank, h.events[0].index) for h in found} <= expected
    expected_lines = {trace.event(EventRef(rank=r, index=i)).location for r, i in expected}
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
