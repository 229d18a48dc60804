"""The properties of docs/model.md §2 as ordering questions, and the verdicts their answers give.

Decides nothing by itself: it lists, straight from the definitions (written here
independently of `racecheck.analysis`, so that a SPIN run is a real second opinion),
which `can_precede` and `can_run` questions a trace's race and stale-read verdicts
rest on, and turns a model checker's answers to them into verdicts.

* Conflict: accesses of overlapping bytes of one memory instance by different ranks,
  at least one writing (a NOTIFY and an ATOMIC_ADD write, a WAIT only reads), not both
  atomic. A Set notify is not atomic but a plain store (docs/model.md), except
  against a WAIT, and two Sets of one value do not conflict. A conflicting pair races
  iff each can run while the other has not.
* Stale read: a LOAD of a window that some execution runs; its bytes, other than the
  signal cells of that instance (bytes a NOTIFY or WAIT accesses), that no
  overlapping write can precede (an earlier write of the same rank always does) are
  stale. A window no event writes but a NOTIFY is all signal cells: none of its
  LOADs is stale. A LOAD no execution runs sits behind a wait that never passes: the
  deadlock.
* Deadlock: answered by the model checker directly; nothing to derive.

Assumes a well-formed trace (events indexed by position, regions normalised).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from racecheck.conflicts import race_conflict, writes
from racecheck.events import (
    Event,
    EventKind,
    EventRef,
    MemoryKind,
    Ranges,
    Trace,
    intersect_ranges,
    subtract_ranges,
    union_ranges,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """Can `first` have run in some execution while `second` has not yet? Without
    `second`: can `first` run in some execution at all?"""

    first: EventRef
    second: EventRef | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StaleRead:
    read: EventRef
    ranges: Ranges  # bytes of the read's memory instance that no write can precede


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdicts:
    """What the answers say: racing pairs (lower (rank, index) first), stale reads, deadlock."""

    races: frozenset[tuple[EventRef, EventRef]]
    stale_reads: tuple[StaleRead, ...]
    deadlock: bool


def conflicts(a: Event, b: Event) -> bool:
    """Different ranks, overlapping bytes, and a race by `conflicts.race_conflict`."""
    if a.rank == b.rank or a.access is None or b.access is None:
        return False
    return a.access.overlaps(b.access) and race_conflict(a, b)


def _by_instance(trace: Trace) -> dict[tuple[int, int], list[Event]]:
    table: dict[tuple[int, int], list[Event]] = defaultdict(list)
    for rank_events in trace.events:
        for event in rank_events:
            if event.access is not None:
                table[(event.access.memory, event.access.owner)].append(event)
    return table


def conflicting_pairs(trace: Trace) -> list[tuple[Event, Event]]:
    """Every conflicting pair once, the event of lower (rank, index) first."""
    pairs: list[tuple[Event, Event]] = []
    for events in _by_instance(trace).values():
        for n, a in enumerate(events):
            pairs.extend((a, b) for b in events[n + 1 :] if conflicts(a, b))
    return pairs


def stale_candidates(trace: Trace) -> list[tuple[Event, Ranges, list[Event]]]:
    """Each LOAD of a window, its bytes outside signal cells, and every write (any
    rank) that overlaps it."""
    windows = {memory.id for memory in trace.memories if memory.kind is MemoryKind.WINDOW}
    writers_of: dict[int, set[EventKind]] = defaultdict(set)
    for event in (event for rank_events in trace.events for event in rank_events):
        if event.access is not None and writes(event):
            writers_of[event.access.memory].add(event.kind)
    windows -= {memory for memory, kinds in writers_of.items() if kinds == {EventKind.NOTIFY}}
    candidates = []
    for (memory, _), events in _by_instance(trace).items():
        if memory not in windows:
            continue
        writers = [event for event in events if writes(event)]
        cells = union_ranges(
            [
                span
                for event in events
                if event.kind in (EventKind.NOTIFY, EventKind.WAIT) and event.access is not None
                for span in event.access.ranges
            ]
        )
        for read in events:
            if read.kind is EventKind.LOAD:
                assert read.access is not None
                data = subtract_ranges(read.access.ranges, cells)
                overlapping = [w for w in writers if w.access and read.access.overlaps(w.access)]
                if data:
                    candidates.append((read, data, overlapping))
    return candidates


def questions(trace: Trace) -> tuple[Question, ...]:
    """Every question the race and stale-read verdicts need, each once, in trace order."""
    found: dict[Question, None] = {}
    for a, b in conflicting_pairs(trace):
        found[Question(first=a.ref, second=b.ref)] = None
        found[Question(first=b.ref, second=a.ref)] = None
    for read, data, writers in stale_candidates(trace):
        # stale only if its own rank's earlier writes leave bytes uncovered: only then
        # does whether it runs at all matter
        own = [w for w in writers if w.rank == read.rank and w.index < read.index]
        if _uncovered(read, data, own):
            found[Question(first=read.ref)] = None
        for writer in writers:
            if writer.rank != read.rank:
                found[Question(first=writer.ref, second=read.ref)] = None
    return tuple(found)


def _uncovered(read: Event, data: Ranges, writers: Iterable[Event]) -> Ranges:
    """The bytes of `data` (of `read`'s) that none of `writers` writes."""
    assert read.access is not None
    written = [
        span
        for writer in writers
        if writer.access is not None
        for span in intersect_ranges(writer.access.ranges, read.access.ranges)
    ]
    return subtract_ranges(data, union_ranges(written))


def decide(trace: Trace, answers: Mapping[Question, bool], *, deadlock: bool) -> Verdicts:
    """The verdicts, given an answer to every question of `questions(trace)`."""

    def can_precede(first: Event, second: Event) -> bool:
        if first.rank == second.rank:
            return first.index < second.index
        return answers[Question(first=first.ref, second=second.ref)]

    races = frozenset(
        (a.ref, b.ref)
        for a, b in conflicting_pairs(trace)
        if can_precede(a, b) and can_precede(b, a)
    )
    stale = []
    for read, data, writers in stale_candidates(trace):
        missing = _uncovered(read, data, (w for w in writers if can_precede(w, read)))
        if missing and answers[Question(first=read.ref)]:
            stale.append(StaleRead(read=read.ref, ranges=missing))
    return Verdicts(races=races, stale_reads=tuple(stale), deadlock=deadlock)
