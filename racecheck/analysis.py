"""The properties of docs/model.md §2, decided from an engine's ordering answers.

* Race: two accesses of overlapping bytes from different ranks, at least one writing,
  not both atomic, that can happen in either order (`can_precede` both ways). A Set
  notify is a plain 32-bit store (docs/model.md): it races with any other write to its
  cell but a Set of the same value; waits read cells atomically.
* Set-add mix: a cell written by both Set and Add effects, ordered or not (PyPTO
  forbids it, docs/model.md): a race finding with detail `set-add-mix`.
  Both orders are possible, so the detail names the likelier intent: when other
  writes of all those bytes (same `--repeat` call) always precede the read and were
  published to it — its rank reaches the synchronisation the read depends on without
  waiting again — the read was meant for that value and the race is write-after-read
  (a later round clobbers it); otherwise read-after-write (the read may see the bytes
  before the write it was meant to see lands).
* Stale read: bytes of a window, other than its signal cells, that a read covers and
  that no write can precede in any execution. Checked per byte region: a window that
  also holds signal cells is checked on its other bytes. A read that no execution
  runs (some wait before it never passes) is part of the deadlock, not a stale read;
  one that some execution runs is checked, whichever stuck state the engine shows.
  A stale read is a warning (docs/model.md): `racecheck.judge` makes it an error
  when the functional check at that P fails.
* Deadlock: the engine's `stuck()` state.
* Out of bounds: recorded by the co-simulation with its line.

One finding per kind, detail and pair of source lines: the same bug seen by many rank
pairs is one finding, shown with its first pair. One pair of lines can race both ways
(a repeated call reads the previous round's data, and overwrites before the peer read).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import itemgetter

from racecheck.clock import Overtime, passed
from racecheck.conflicts import race_conflict, writes
from racecheck.cosim.simulate import collector_paused
from racecheck.describe import describe_cell, describe_holders, task_as_thread
from racecheck.engines.base import OrderOracle
from racecheck.engines.skeleton import signal_cells
from racecheck.events import (
    HOST_OWNER,
    QUIET,
    TASK_START,
    CellIndex,
    CellKey,
    CellOp,
    Event,
    EventKind,
    EventRef,
    MemoryKind,
    NotifyOp,
    Region,
    Schedule,
    SignalCell,
    SourceLocation,
    Trace,
    WriteIndex,
    cell_effect,
    intersect_ranges,
    subtract_ranges,
    union_ranges,
)
from racecheck.findings import (
    BlockedWait,
    Finding,
    FindingCode,
    FindingKind,
    Place,
    RaceDetail,
    StepKind,
    StepStatus,
    WitnessStep,
    identity,
)
from racecheck.report.reasons import ReasonCode, reason

_CELL_BYTES = 4  # a signal cell is one INT32


@dataclass(frozen=True, slots=True, kw_only=True)
class Hazard:
    """A finding before its witness: which events, and which order shows it."""

    kind: FindingKind
    detail: str
    events: tuple[EventRef, ...]  # primary first
    ranks: tuple[int, ...]
    locations: tuple[SourceLocation, ...]
    regions: tuple[Region, ...] = ()
    bad_first: EventRef | None = None  # the witness runs `bad_first` while `bad_second` waits
    bad_second: EventRef | None = None
    schedule: Schedule = ()  # a ready witness (deadlocks)
    pending: StepStatus = StepStatus.AFTERWARDS  # highlighted events the witness does not run
    place: Place | None = None
    steers: bool = False
    holds: tuple[tuple[EventRef, int | None], ...] = ()  # deadlock: each blocked wait's cell
    later_writer: int | None = None
    reason: str = ""

    @property
    def identity(self) -> tuple[object, ...]:
        """The identity of the finding it becomes (`Finding.identity`)."""
        return identity(self.kind, self.detail, self.locations)


RACE_SEARCH = reason(ReasonCode.STAGE_RACE_SEARCH)


def find_hazards(trace: Trace, oracle: OrderOracle, *, deadline: float = math.inf) -> list[Hazard]:
    """Every hazard of the trace. A rank stopped by an out-of-bounds access never ran
    its remaining events, so waits on it and reads of what it would have written are
    consequences, not findings: only races among the events that did run are added.
    Past `deadline` (`racecheck.clock`) it raises `Overtime`. The collector is
    paused meanwhile: the index of the accesses is many containers that live until
    the end, which collections would walk again and again."""
    with collector_paused():
        return _hazards(trace, oracle, deadline)


def _hazards(trace: Trace, oracle: OrderOracle, deadline: float) -> list[Hazard]:
    hazards = out_of_bounds(trace)
    accessed = instances(trace)
    crashed = bool(trace.out_of_bounds)
    stuck = None if crashed else deadlock(trace, oracle)
    if stuck is not None:
        hazards.append(stuck)
    cells = list(signal_cells(trace).values())
    hazards.extend(races(trace, oracle, accessed, cells, deadline=deadline))
    hazards.extend(set_add_mixes(trace, oracle))
    if not crashed:
        blocked = stuck.events if stuck is not None else ()
        hazards.extend(stale_reads(trace, oracle, accessed, cells, blocked=blocked))
    return hazards


def out_of_bounds(trace: Trace) -> list[Hazard]:
    seen: dict[SourceLocation, Hazard] = {}
    for record in trace.out_of_bounds:
        on_host = record.rank == HOST_OWNER
        seen.setdefault(
            record.location,
            Hazard(
                kind=FindingKind.OUT_OF_BOUNDS,
                detail="",
                reason=record.message,
                events=(),
                ranks=() if on_host else (record.rank,),
                locations=(record.location,),
                regions=(),
            ),
        )
    return list(seen.values())


def set_add_mixes(trace: Trace, oracle: OrderOracle) -> list[Hazard]:
    """Cells that a Set notify and an Add (notify or atomic store) both write: PyPTO
    forbids the mix whatever the order (docs/model.md). One finding per pair of lines;
    the witness runs one of the two while the other has not run yet. A pair that can
    run in no order sits behind a deadlock and belongs to it."""
    sets: dict[CellKey, Event] = {}
    for rank_events in trace.events:
        for event in rank_events:
            if _is_set(event) and event.notify is not None:
                sets.setdefault(event.notify.cell.key, event)
    found: dict[tuple[SourceLocation, SourceLocation], Hazard] = {}
    near = CellIndex(sets)
    for rank_events in trace.events if sets else ():
        for event in rank_events:
            for key in near.touching(event.access):
                set_event = sets[key]
                effect = cell_effect(event, key)
                lines = (set_event.location, event.location)
                if effect is None or effect.op is not CellOp.ADD or lines in found:
                    continue
                hazard = _set_add_mix(trace, oracle, set_event, event)
                if hazard is not None:
                    found[lines] = hazard
    return list(found.values())


def _set_add_mix(
    trace: Trace, oracle: OrderOracle, set_event: Event, add_event: Event
) -> Hazard | None:
    assert set_event.notify is not None
    later = max(set_event, add_event, key=lambda event: event.index)
    if set_event.rank == add_event.rank and not oracle.can_run(later.ref):
        return None  # no execution reaches the pair: the deadlock is the finding
    if _can_precede(oracle, set_event, add_event):
        bad_first, bad_second = set_event.ref, add_event.ref
    elif _can_precede(oracle, add_event, set_event):
        bad_first, bad_second = add_event.ref, set_event.ref
    else:
        return None
    return Hazard(
        kind=FindingKind.RACE,
        detail=RaceDetail.SET_ADD_MIX.value,
        place=_cell_place(set_event.notify.cell, trace),
        events=(set_event.ref, add_event.ref),
        ranks=(set_event.rank, add_event.rank),
        locations=tuple(dict.fromkeys((set_event.location, add_event.location))),
        regions=tuple(e.access for e in (set_event, add_event) if e.access is not None),
        bad_first=bad_first,
        bad_second=bad_second,
    )


def _can_precede(oracle: OrderOracle, first: Event, second: Event) -> bool:
    if first.rank == second.rank:
        return first.index < second.index
    return oracle.can_precede(first.ref, second.ref)


def deadlock(trace: Trace, oracle: OrderOracle) -> Hazard | None:
    stuck = oracle.stuck()
    if stuck is None:
        return None
    # the program's own waits first, where it hangs; then a thread left without a unit
    # (a core, the dispatch lock), which says who holds them; then one that cannot start
    blocked = sorted(stuck.blocked, key=lambda ref: _blocked_rank(trace.event(ref)))
    waits = [trace.event(ref) for ref in blocked]
    values = {(cell.memory, cell.owner, cell.offset): value for cell, value in stuck.cell_values}
    holds = []
    for event in waits:
        assert event.wait is not None
        cell = event.wait.cell
        holds.append((event.ref, values.get((cell.memory, cell.owner, cell.offset))))
    # where the program's own waits hang; a thread that cannot start (a start edge, a
    # unit: racecheck's own waits) is named by them, and by its call only if none is
    own = [event for event in waits if not event.synthetic] or waits
    locations = tuple(dict.fromkeys(event.location for event in own))
    return Hazard(
        kind=FindingKind.DEADLOCK,
        detail="",
        events=tuple(blocked),
        ranks=tuple(dict.fromkeys(ref.rank for ref in blocked)),
        locations=locations,
        schedule=stuck.schedule,
        pending=StepStatus.BLOCKED,
        holds=tuple(holds),
    )


def _blocked_rank(event: Event) -> int:
    """Where a blocked wait is listed: 0 a wait of the program, 1 one for a unit, 2 a
    start edge."""
    if not event.synthetic:
        return 0
    return 1 if event.wait is not None and event.wait.take else 2


_conflict = race_conflict
_writes = writes


def _conflict_class(event: Event) -> tuple[object, ...]:
    """What `_conflict` reads of an event."""
    notify = event.notify
    return (event.kind, event.mode, None if notify is None else (notify.op, notify.value))


def _is_set(event: Event) -> bool:
    return event.notify is not None and event.notify.op is NotifyOp.SET


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """Bytes of one instance that the same accesses cover (between two consecutive
    range boundaries); two accesses overlap iff they cover a common segment. The
    accesses covering it, per rank, in program order."""

    number: int
    by_rank: dict[int, list[Event]]
    writers: dict[int, list[Event]]  # the ranks that write it only


class Instance:
    """The accesses of one memory instance (memory, owner): their ranges in the order a
    sweep over start offsets meets them, and the segments they cover."""

    def __init__(self, items: list[tuple[int, int, Event]]) -> None:
        items.sort(key=lambda item: item[0])
        access = items[0][2].access
        assert access is not None
        self.key = (access.memory, access.owner)
        self.spans: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
        bounds = sorted({offset for start, end, _ in items for offset in (start, end)})
        self.bounds = bounds
        self.segments = [
            Segment(number=number, by_rank=defaultdict(list), writers={})
            for number in range(max(len(bounds) - 1, 0))
        ]
        self.segments_of: dict[tuple[int, int], list[Segment]] = defaultdict(list)
        for position, (start, end, event) in enumerate(items):
            key = (event.rank, event.index)
            self.spans.setdefault(key, []).append((position, start, end))
            joined = self.segments_of[key]
            for number in range(bisect_left(bounds, start), bisect_left(bounds, end)):
                segment = self.segments[number]
                joined.append(segment)
                segment.by_rank[event.rank].append(event)
        for segment in self.segments:
            for rank, events in segment.by_rank.items():
                events.sort(key=lambda event: event.index)
                writers = [event for event in events if _writes(event)]
                if writers:
                    segment.writers[rank] = writers

    def position(self, event: Event, segment: Segment) -> int:
        """The sweep position of the range of `event` that covers `segment`."""
        start = self.bounds[segment.number]
        spans = self.spans[(event.rank, event.index)]
        return next(place for place, low, high in spans if low <= start < high)

    def sweep_key(self, a: Event, b: Event) -> tuple[int, int] | None:
        """Where a sweep over start offsets first meets `a` and `b` overlapping: (the
        later range's position, the earlier one's), the first smallest; None if they
        do not overlap."""
        a_spans = self.spans[(a.rank, a.index)]
        b_spans = self.spans[(b.rank, b.index)]
        if len(a_spans) == 1 and len(b_spans) == 1:  # the common case, kept fast
            (p, a_start, a_end), (q, b_start, b_end) = a_spans[0], b_spans[0]
            if a_start < b_end and b_start < a_end:
                return (p, q) if p > q else (q, p)
            return None
        best: tuple[int, int] | None = None
        for p, a_start, a_end in a_spans:
            for q, b_start, b_end in b_spans:
                if a_start < b_end and b_start < a_end:
                    key = (p, q) if p > q else (q, p)
                    best = key if best is None or key < best else best
        return best


def instances(trace: Trace) -> list[Instance]:
    """The accessed memory instances, in the order the trace first touches them."""
    groups: dict[tuple[int, int], list[tuple[int, int, Event]]] = defaultdict(list)
    for rank_events in trace.events:
        for event in rank_events:
            if event.access is None:
                continue
            key = (event.access.memory, event.access.owner)
            for start, end in event.access.ranges:
                groups[key].append((start, end, event))
    return [Instance(items) for items in groups.values()]


class _Side:
    """One rank's accesses of a segment that conflict with the other rank's (`_facing`),
    as the partners in windows. Of a group of alike accesses (line, kind, mode, notify,
    bytes) only the first in a window can make the first pair of its lines and detail:
    alike accesses share their start offset, so their sweep positions grow with
    program order. Narrow windows are walked
    whole; the groups are made when a wide window first needs them."""

    def __init__(self, instance: Instance, segment: Segment, events: list[Event]) -> None:
        self.instance = instance
        self.segment = segment
        self.events = events
        self.refs = [event.ref for event in self.events]
        self.groups: list[list[int]] = []

    def position(self, place: int) -> int:
        return self.instance.position(self.events[place], self.segment)

    def firsts(self, low: int, high: int) -> Iterable[int]:
        """Places among events[low:high + 1] that include the first of each group: all
        of them when they are few (another pair of a group adds no finding)."""
        if high - low < _FEW:
            return range(low, high + 1)
        if not self.groups:
            self._group()
        firsts = []
        for places in self.groups:
            at = bisect_left(places, low)
            if at < len(places) and places[at] <= high:
                firsts.append(places[at])
        return firsts

    def _group(self) -> None:
        grouped: dict[tuple[object, ...], list[int]] = defaultdict(list)
        for place, event in enumerate(self.events):
            grouped[_likeness(event)].append(place)
        self.groups = list(grouped.values())


_FEW = 16  # a window this wide or narrower is walked whole


def _likeness(event: Event) -> tuple[object, ...]:
    assert event.access is not None
    return (event.location, event.kind, event.mode, event.notify, event.access.ranges)


def races(
    trace: Trace,
    oracle: OrderOracle,
    accessed: list[Instance],
    cells: list[SignalCell],
    *,
    deadline: float = math.inf,
) -> list[Hazard]:
    """Races among the overlapping accesses of two ranks, at least one writing, that can
    run in either order (and conflict): per pair of lines and detail, the pair a sweep
    over each instance's start offsets meets first (instances in the order the trace
    first touches them), in that order. A pair of lines is settled by its first pair
    with a writer first, or once both read details showed: later pairs do not count.

    Near-linear in events: `can_precede(x, y)` only turns true as `y` moves later in
    its rank and only turns false as `x` does, so among the accesses of one segment,
    the partners that run in either order with one access form a window of the other
    rank's accesses, and both ends of the window only move forward through the first
    rank's accesses. Per access and group of partners (`_Side`) only the window's
    first one can be the first pair of its lines and detail: a read's detail depends
    on the read and the bytes it shares with the write alone (`_Details`)."""
    by_lines: dict[tuple[SourceLocation, SourceLocation], list[_Candidate]] = defaultdict(list)
    for number, instance in enumerate(accessed):
        for segment in instance.segments:
            if passed(deadline):
                events = next(iter(segment.by_rank.values()), [])
                raise Overtime(RACE_SEARCH, events[0].location if events else None)
            for key, first, second in _segment_candidates(oracle, instance, segment):
                by_lines[(first.location, second.location)].append(((number, *key), first, second))
    details = _Details(trace, oracle)
    chosen = [found for candidates in by_lines.values() for found in _settle(candidates, details)]
    chosen.sort(key=itemgetter(0))
    return [_race(trace, first, second, detail, cells) for _, detail, first, second in chosen]


_Candidate = tuple[tuple[int, int, int], Event, Event]  # (instance, sweep key), first, second


def _settle(
    candidates: list[_Candidate], details: _Details
) -> Iterator[tuple[tuple[int, int, int], RaceDetail, Event, Event]]:
    """The pairs one pair of lines reports, walking its candidates in sweep order."""
    candidates.sort(key=itemgetter(0))
    seen: set[RaceDetail] = set()
    for order, first, second in candidates:
        if _writes(first):
            yield order, RaceDetail.WRITE_AFTER_WRITE, first, second
            return
        detail = details.of(first, second)
        if detail not in seen:
            seen.add(detail)
            yield order, detail, first, second
            if len(seen) == len(_READ_DETAILS):
                return


_READ_DETAILS = (RaceDetail.READ_AFTER_WRITE, RaceDetail.WRITE_AFTER_READ)


def _segment_candidates(
    oracle: OrderOracle, instance: Instance, segment: Segment
) -> Iterator[tuple[tuple[int, int], Event, Event]]:
    """(sweep key in this segment, first, second) of the conflicting pairs of the
    segment that run in either order, the first of each group in each window, seen
    from the side of the pair's first access."""
    ranks = sorted(segment.by_rank)
    for place, rank in enumerate(ranks):
        for other in ranks[place + 1 :]:
            if rank not in segment.writers and other not in segment.writers:
                continue
            ours, theirs = _facing(instance, segment, rank, other)
            if not ours.events:
                continue
            lows, highs = _windows(oracle, ours, theirs)
            if all(high < low for low, high in zip(lows, highs, strict=True)):
                continue
            yield from _candidates(ours, theirs, zip(lows, highs, strict=True))
            back = (
                (bisect_left(highs, index), bisect_right(lows, index) - 1)
                for index in range(len(theirs.events))
            )
            yield from _candidates(theirs, ours, back)


def _facing(instance: Instance, segment: Segment, rank: int, other: int) -> tuple[_Side, _Side]:
    """The sides of `rank` and `other` in `segment`, each cut down to the accesses that
    conflict with some access of the other side: the rest make no pair, so asking when
    they run (a wait beside the notifies that feed it) cannot change a finding. Whether
    two accesses conflict depends on their `_conflict_class` only, so the cut keeps or
    drops a group of alike accesses whole, and the windows of the accesses kept are
    those of the whole sides restricted to the accesses kept (`races`)."""
    mine, theirs = segment.by_rank[rank], segment.by_rank[other]
    return (
        _Side(instance, segment, _conflicting(mine, theirs)),
        _Side(instance, segment, _conflicting(theirs, mine)),
    )


def _conflicting(events: list[Event], partners: list[Event]) -> list[Event]:
    """The events that conflict with at least one of `partners`, in program order."""
    classes = list({_conflict_class(partner): partner for partner in partners}.values())
    verdicts: dict[tuple[object, ...], bool] = {}
    kept = []
    for event in events:
        key = _conflict_class(event)
        if key not in verdicts:
            verdicts[key] = any(_conflict(event, partner) for partner in classes)
        if verdicts[key]:
            kept.append(event)
    return kept


def _windows(oracle: OrderOracle, ours: _Side, theirs: _Side) -> tuple[list[int], list[int]]:
    """Per access of `ours`, the window theirs[low:high + 1] that runs in either order
    with it (empty when high < low)."""
    lows, highs = [], []
    low, high, count = 0, -1, len(theirs.refs)
    for ref in ours.refs:
        while low < count and not oracle.can_precede(ref, theirs.refs[low]):
            low += 1
        while high + 1 < count and oracle.can_precede(theirs.refs[high + 1], ref):
            high += 1
        lows.append(low)
        highs.append(high)
    return lows, highs


def _candidates(
    ours: _Side, theirs: _Side, windows: Iterable[tuple[int, int]]
) -> Iterator[tuple[tuple[int, int], Event, Event]]:
    for place, (low, high) in enumerate(windows):
        if high < low:
            continue
        event = ours.events[place]
        for partner_place in theirs.firsts(low, high):
            partner = theirs.events[partner_place]
            if not _conflict(event, partner):
                continue
            first, second = _ordered_pair(event, partner)
            if first is event:
                position, other = ours.position(place), theirs.position(partner_place)
                yield ((position, other) if position > other else (other, position)), first, second


def _ordered_pair(a: Event, b: Event) -> tuple[Event, Event]:
    """Reader first; two writers by rank."""
    if _writes(a) and not _writes(b):
        return b, a
    if _writes(b) and not _writes(a):
        return a, b
    return (a, b) if (a.rank, a.index) <= (b.rank, b.index) else (b, a)


def _always_before(oracle: OrderOracle, earlier: Event, later: Event) -> bool:
    if earlier.rank == later.rank:
        return earlier.index < later.index
    return not oracle.can_precede(later.ref, earlier.ref)


def _published_to(trace: Trace, oracle: OrderOracle, write: Event, read: Event) -> bool:
    """Was `write` the value the synchronisation before `read` published? True when the
    writer reaches its last event that always precedes the read without waiting on
    anything after the write (a wait in between starts a later round): as the events
    that always precede the read are a prefix of the writer's, when its first wait
    after the write does not always precede the read."""
    if write.rank == read.rank:
        return True
    later = trace.events[write.rank][write.index + 1 :]
    wait = next((event for event in later if event.kind is EventKind.WAIT), None)
    return wait is None or not _always_before(oracle, wait, read)


class _Details:
    """The detail of a read racing with a write: write-after-read when other writes of
    all the racing bytes (same `--repeat` call) always precede the read and were
    published to it, else read-after-write. It depends on the read and the bytes it
    shares with the write only: the racing write can run after the read, so it is
    never one of those others. Kept per read and bytes."""

    def __init__(self, trace: Trace, oracle: OrderOracle) -> None:
        self.trace = trace
        self.oracle = oracle
        self.writes = WriteIndex.of_run(trace.events)
        self.known: dict[tuple[int, int, tuple[tuple[int, int], ...]], RaceDetail] = {}

    def of(self, read: Event, write: Event) -> RaceDetail:
        assert read.access is not None and write.access is not None
        if self._task_before(read, write):
            return RaceDetail.WRITE_AFTER_READ
        overlap = intersect_ranges(read.access.ranges, write.access.ranges)
        key = (read.rank, read.index, overlap)
        if key not in self.known:
            self.known[key] = self._detail(read, overlap)
        return self.known[key]

    def _task_before(self, read: Event, write: Event) -> bool:
        """Whether the read's task is called before the write's on one rank (thread keys
        follow the calls): the read was meant for what the bytes held before the write,
        which PyPTO does not order after it (no write-after-read edge)."""
        threads = self.trace.threads
        if not threads or read.rank == write.rank:
            return False
        same_rank = self.trace.device(read.rank) == self.trace.device(write.rank)
        return same_rank and read.rank < write.rank

    def _detail(self, read: Event, overlap: tuple[tuple[int, int], ...]) -> RaceDetail:
        assert read.access is not None
        racing = Region(memory=read.access.memory, owner=read.access.owner, ranges=overlap)
        published = [
            span
            for other, shared in self.writes.overlapping(racing)
            if other.repeat == read.repeat
            and _always_before(self.oracle, other, read)
            and _published_to(self.trace, self.oracle, other, read)
            for span in shared
        ]
        # Write-after-read only when published writes cover every racing byte: a byte
        # only the racing write provides is one the read was meant to see.
        shadowed = not subtract_ranges(overlap, union_ranges(published))
        return RaceDetail.WRITE_AFTER_READ if shadowed else RaceDetail.READ_AFTER_WRITE


def _race(
    trace: Trace, first: Event, second: Event, detail: RaceDetail, cells: list[SignalCell]
) -> Hazard:
    assert first.access is not None and second.access is not None
    overlap = intersect_ranges(first.access.ranges, second.access.ranges)
    shared = Region(memory=first.access.memory, owner=first.access.owner, ranges=overlap)
    if detail is RaceDetail.READ_AFTER_WRITE:
        bad_first, bad_second = first, second
    else:
        bad_first, bad_second = second, first
    return Hazard(
        kind=FindingKind.RACE,
        detail=detail.value,
        place=place_of(shared, trace, cells),
        steers=first.ref in trace.control_reads or second.ref in trace.control_reads,
        events=(first.ref, second.ref),
        ranks=(first.rank, second.rank),
        locations=(first.location, second.location),
        regions=(first.access, second.access),
        bad_first=bad_first.ref,
        bad_second=bad_second.ref,
    )


def place_of(region: Region, trace: Trace, cells: list[SignalCell]) -> Place:
    """The region in the user's names: the first signal cell it touches, else its bytes."""
    inside = [cell for cell in cells if _cell_in(cell, region)]
    if inside:
        return _cell_place(inside[0], trace)
    name = trace.memory(region.memory).name
    return Place(memory=name, owner=region.owner, ranges=region.ranges)


def _cell_place(cell: SignalCell, trace: Trace) -> Place:
    return Place(
        memory=trace.memory(cell.memory).name,
        owner=cell.owner,
        ranges=((cell.offset, cell.offset + _CELL_BYTES),),
        cell=cell.index,
    )


def _cell_in(cell: SignalCell, region: Region) -> bool:
    return (
        cell.memory == region.memory
        and cell.owner == region.owner
        and bool(intersect_ranges(((cell.offset, cell.offset + _CELL_BYTES),), region.ranges))
    )


def stale_reads(
    trace: Trace,
    oracle: OrderOracle,
    accessed: list[Instance],
    cells: list[SignalCell],
    *,
    blocked: tuple[EventRef, ...] = (),
) -> list[Hazard]:
    """Reads of window bytes, other than signal cells, that no write can precede; a read
    that no execution runs belongs to the deadlock. `blocked`: the waits of a stuck
    state (none when no execution deadlocks); its execution runs every read but those
    behind them, so only those, when stale, take the engine's `can_run`."""
    cell_spans: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for cell in cells:
        cell_spans[(cell.memory, cell.owner)].append((cell.offset, cell.offset + _CELL_BYTES))
    first_blocked = {ref.rank: ref.index for ref in blocked}
    signal_tensors = _signal_tensors(trace)
    by_key = {instance.key: instance for instance in accessed}
    preceding = _Preceding(oracle)
    found: dict[SourceLocation, Hazard] = {}
    for rank_events in trace.events:
        for event in rank_events:
            if event.kind is not EventKind.LOAD or event.access is None:
                continue
            memory = trace.memory(event.access.memory)
            if memory.kind is not MemoryKind.WINDOW or event.location in found:
                continue
            if event.access.memory in signal_tensors:
                continue
            key = (event.access.memory, event.access.owner)
            signal = union_ranges(cell_spans.get(key, []))
            hazard = _stale(trace, by_key[key], preceding, event, signal, cells)
            ran = event.index < first_blocked.get(event.rank, len(rank_events))
            if hazard is not None and (ran or oracle.can_run(event.ref)):
                found[event.location] = hazard
    return list(found.values())


def _signal_tensors(trace: Trace) -> set[int]:
    """Windows that only notifies write: every element is a signal cell, notified or
    not, and reading one never notified is legitimate (docs/model.md, stale read)."""
    notified: set[int] = set()
    written: set[int] = set()
    for rank_events in trace.events:
        for event in rank_events:
            if event.access is None or not writes(event):
                continue
            if event.kind is EventKind.NOTIFY:
                notified.add(event.access.memory)
            else:
                written.add(event.access.memory)
    return notified - written


class _Preceding:
    """The writers that can precede a read, for reads met rank by rank in program order:
    per (segment, reader rank, writer rank) they are a prefix of the writer rank's
    writes that only grows from one read to the next."""

    def __init__(self, oracle: OrderOracle) -> None:
        self.oracle = oracle
        self.counts: dict[tuple[tuple[int, int], int, int, int], int] = {}

    def latest_first(self, instance: Instance, read: Event) -> Iterator[Event]:
        for segment in instance.segments_of[(read.rank, read.index)]:
            for rank, writers in segment.writers.items():
                if rank == read.rank:
                    count = bisect_left(writers, read.index, key=lambda writer: writer.index)
                else:
                    slot = (instance.key, segment.number, read.rank, rank)
                    count = self.counts.get(slot, 0)
                    while count < len(writers) and self.oracle.can_precede(
                        writers[count].ref, read.ref
                    ):
                        count += 1
                    self.counts[slot] = count
                for position in range(count - 1, -1, -1):
                    yield writers[position]


def _stale(
    trace: Trace,
    instance: Instance,
    preceding: _Preceding,
    read: Event,
    signal: tuple[tuple[int, int], ...],
    cells: list[SignalCell],
) -> Hazard | None:
    assert read.access is not None
    missing = subtract_ranges(read.access.ranges, signal)
    if not missing:
        return None
    for writer in preceding.latest_first(instance, read):
        assert writer.access is not None
        missing = subtract_ranges(missing, writer.access.ranges)
        if not missing:
            return None
    stale = Region(memory=read.access.memory, owner=read.access.owner, ranges=missing)
    overlapping = {
        (writer.rank, writer.index): writer
        for segment in instance.segments_of[(read.rank, read.index)]
        for writers in segment.writers.values()
        for writer in writers
    }
    later = [
        writer
        for writer in overlapping.values()
        if writer.access is not None and intersect_ranges(writer.access.ranges, missing)
    ]
    later.sort(key=lambda writer: instance.sweep_key(read, writer) or (0, 0))
    locations: tuple[SourceLocation, ...] = (read.location,)
    if later:
        locations += (later[0].location,)
    return Hazard(
        kind=FindingKind.STALE_READ,
        detail="",
        place=place_of(stale, trace, cells),
        later_writer=later[0].rank if later else None,
        events=(read.ref,),
        ranks=(read.rank,),
        locations=locations,
        regions=(stale,),
    )


def witness_steps(
    trace: Trace, schedule: Schedule, highlight: tuple[EventRef, ...], pending: StepStatus
) -> tuple[WitnessStep, ...]:
    """The events of a witness that explain it: sync events and the highlighted ones;
    highlighted events the schedule does not run come last, with status `pending`."""
    steps = []
    for ref in schedule:
        event = trace.event(ref)
        marked = ref in highlight
        if (event.is_sync and event.label not in QUIET) or marked:
            steps.append(step_of(trace, event, highlight=marked))
    for ref in highlight:
        if ref not in schedule:
            step = step_of(trace, trace.event(ref), highlight=True, status=pending, after=schedule)
            steps.append(step)
    return tuple(steps)


_STEP_KINDS = {
    EventKind.LOAD: StepKind.READ,
    EventKind.STORE: StepKind.WRITE,
    EventKind.ATOMIC_ADD: StepKind.ATOMIC_ADD,
    EventKind.NOTIFY: StepKind.NOTIFY,
    EventKind.WAIT: StepKind.WAIT,
}


def step_of(
    trace: Trace,
    event: Event,
    *,
    highlight: bool = False,
    status: StepStatus = StepStatus.RAN,
    after: Schedule = (),
) -> WitnessStep:
    """One event as a witness step, in the user's names; a unit's wait names who holds
    the units `after` that schedule."""
    kind = _STEP_KINDS[event.kind]
    thread = trace.threads[event.rank]
    sync = event.notify or event.wait
    if event.synthetic and event.wait is not None:  # a start edge or a unit (`lower_start_edges`)
        cell = event.wait.cell
        start = event.label == TASK_START
        return WitnessStep(
            rank=thread.rank,
            index=event.index,
            kind=kind,
            location=event.location,
            call="" if start else describe_cell(cell, trace) + describe_holders(trace, after, cell),
            starts_after=task_as_thread(trace, cell.index[0]) if start else "",
            status=status,
            highlight=highlight,
            task=thread.name,
        )
    if sync is not None:
        place: Place | None = _cell_place(sync.cell, trace)
    elif event.access is not None:
        name = trace.memory(event.access.memory).name
        place = Place(memory=name, owner=event.access.owner, ranges=event.access.ranges)
    else:
        place = None
    call = event.label.rsplit(".", 1)[-1] if event.label and sync is None else ""
    return WitnessStep(
        rank=thread.rank,
        index=event.index,
        kind=kind,
        location=event.location,
        task=thread.name,
        call="" if call == kind.value else call,
        place=place,
        op=event.notify.op if event.notify is not None else None,
        cmp=event.wait.cmp if event.wait is not None else None,
        value=event.notify.value if event.notify else (event.wait.expected if event.wait else None),
        repeat=event.repeat + 1 if trace.repeat > 1 else None,
        status=status,
        highlight=highlight,
        loops=event.loops,
    )


def _devices(trace: Trace, hazard: Hazard) -> tuple[int, ...]:
    """The device ranks of the hazard's threads; a deadlock names each rank once, in
    order (two blocked threads of one rank are one rank that hangs)."""
    devices = tuple(trace.device(thread) for thread in hazard.ranks)
    return tuple(sorted(set(devices))) if hazard.kind is FindingKind.DEADLOCK else devices


def to_finding(
    trace: Trace, oracle: OrderOracle, hazard: Hazard, *, witnessed: bool = True
) -> tuple[Finding, Schedule]:
    """The finding with its witness steps, and the full witness schedule to replay;
    without either when not `witnessed`."""
    schedule = hazard.schedule if witnessed else ()
    if witnessed and hazard.bad_first is not None and hazard.bad_second is not None:
        schedule = oracle.witness(hazard.bad_first, hazard.bad_second)
    finding = Finding(
        kind=hazard.kind,
        detail=hazard.detail,
        locations=hazard.locations,
        ranks=_devices(trace, hazard),
        threads=_thread_names(trace, hazard.ranks),
        regions=hazard.regions,
        place=hazard.place,
        steers=hazard.steers,
        blocked=tuple(
            BlockedWait(
                rank=trace.device(ref.rank),
                step=step_of(trace, trace.event(ref), after=schedule),
                holds=None if trace.event(ref).synthetic else value,  # a start edge holds no value
            )
            for ref, value in hazard.holds
        ),
        later_writer=None if hazard.later_writer is None else trace.device(hazard.later_writer),
        reason=hazard.reason,
        witness=witness_steps(trace, schedule, hazard.events, hazard.pending) if schedule else (),
        severity=FindingCode.of(hazard.kind, hazard.detail).record.severity,
    )
    return finding, schedule


def _thread_names(trace: Trace, threads: tuple[int, ...]) -> tuple[str, ...]:
    """Each thread's name, or () when none has one (every rank is one thread)."""
    names = tuple(trace.threads[thread].name for thread in threads if thread >= 0)
    return names if any(names) and len(names) == len(threads) else ()
