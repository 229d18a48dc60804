"""The `smt` engine: ordering questions over every execution of a trace, decided by z3.

What it decides
    The questions of `racecheck.engines.base` (`can_precede`, `witness`, `can_run`,
    `stuck`), exactly, for the execution semantics stated there. An execution is
    encoded as an assignment to a Bool *executed* and an Int *time* per *signal event*
    (a WAIT, or any event with a Set or Add effect on a signal cell): the executed
    events form a prefix of each rank, times follow program order, and an executed
    WAIT's condition holds on its cell's value over the writes strictly before its time.
    Sorting the executed signal events by (time, waits before writers, rank, index)
    gives an execution, and every execution gives such an assignment, so satisfiable
    means reachable. Equal times need no exclusion: the encoding compares writers with
    that same tie-break.

    On top of that exact core sit implied constraints only (`_write_count_bounds`):
    how many of each rank's writes to a cell must, or cannot, precede a wait. They
    remove no execution but turn most queries into propagation.

    Every other event neither reads nor changes a signal cell and is always enabled,
    so it gets no variables. For ranks f ≠ s,
    `can_precede(first, second)` is the query "the last signal event of f at or before
    `first` executed, the first signal event of s at or after `second` not executed",
    and `can_run(event)` the query "the last signal event at or before `event` executed";
    data events are filled back in when a schedule is decoded. Every z3 model is kept
    as a run and answers every later question that run settles.

Model boundary
    A cell's value is the value of the last executed Set before the moment asked about
    (0 if none) plus every executed Add after that Set, taken mod 2^32 as an int32 on
    cells whose writes can leave the int32 range. Sets and Adds are the effects
    `racecheck.engines.skeleton` compiles from every event that writes a cell's bytes;
    a trace with an effect it cannot compile (opaque) is refused. An unsigned wait
    (defer_wait) compares the cell as uint32. A wait that takes a unit (a core, a
    dispatch lock) is a wait and an Add at one time; the takes of one cell get distinct
    times (`_keep_takes_apart`), so no two pass on the same free unit.

Unknown policy
    `_solve` is the only place that runs z3, each query within `QUERY_RLIMIT` of z3's
    resource units (work, not seconds: the same answer on every machine) and the time
    left before `--timeout` (`racecheck.engines.solving`). z3 `unknown` (its budget
    used up, a cancellation) raises `EngineUnknown`, and `--timeout` `Overtime`
    naming the lines the query was about. Only decided
    answers are cached; a question is never answered from a query z3 did not decide.

Limitations
    Relies on fixed per-rank event sequences (the co-simulation's trace): whether those
    sequences hold in every execution is the analysis's business, not this engine's.
    The value of a cell at a wait is a sum over the cell's writers with one "not
    overwritten" test per Set, so the encoding grows as waits × writers × Sets per cell.
    A witness is the causal past of `first` in one model's run (its rank's prefix and,
    for every needed wait, all writes to that cell before it): short, but not
    guaranteed to be the shortest execution. Witnesses and stuck states are replayed
    here before they are returned; a replay failure raises `SmtInternalError`.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeAlias

import z3  # type: ignore[import-untyped]

from racecheck import clock
from racecheck.cells import after_write
from racecheck.engines.skeleton import ADD, SyncSkeleton
from racecheck.engines.solving import limited_check
from racecheck.errors import EngineUnknown
from racecheck.events import (
    INT32_MIN,
    CellKey,
    Event,
    EventRef,
    NotifyOp,
    Schedule,
    SignalCell,
    Stuck,
    Trace,
    Wait,
    WaitCmp,
)
from racecheck.report.reasons import ReasonCode, reason


class SmtInternalError(RuntimeError):
    """The engine decoded something that is not an execution: a bug in racecheck."""


# ---------------------------------------------------------------------------------------
# The signal skeleton and the plain-Python replay (no z3)


@dataclass(frozen=True, slots=True, kw_only=True)
class _CellWrite:
    cell: CellKey
    op: NotifyOp  # a plain store into a signal cell is a SET
    value: int


@dataclass(frozen=True, slots=True, kw_only=True)
class _Skeleton:
    """Which events touch signal cells and how, keyed by event."""

    cells: dict[CellKey, SignalCell]
    writes: dict[EventRef, tuple[_CellWrite, ...]]
    signal_indices: tuple[tuple[int, ...], ...]  # per rank: indices of its signal events
    wrapping: frozenset[CellKey]  # cells some order of writes takes out of int32


def _skeleton(sync: SyncSkeleton) -> _Skeleton:
    writes: dict[EventRef, tuple[_CellWrite, ...]] = {}
    indices: list[tuple[int, ...]] = []
    for rank in range(sync.ranks):
        for position, index in enumerate(sync.index[rank]):
            if sync.kind[rank][position] < ADD:
                continue
            ref = EventRef(rank=rank, index=index)
            write = _CellWrite(
                cell=sync.cells[sync.cell[rank][position]].key,
                op=NotifyOp.ATOMIC_ADD if sync.kind[rank][position] == ADD else NotifyOp.SET,
                value=sync.amount[rank][position],
            )
            writes[ref] = (*writes.get(ref, ()), write)
        indices.append(tuple(dict.fromkeys(sync.index[rank])))
    return _Skeleton(
        cells={cell.key: cell for cell in sync.cells},
        writes=writes,
        signal_indices=tuple(indices),
        wrapping=frozenset(sync.cells[number].key for number in sync.wrapping_cells()),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Replayed:
    positions: tuple[int, ...]
    values: dict[CellKey, int]


def _wait_holds(event: Event, values: dict[CellKey, int]) -> bool:
    assert event.wait is not None
    value = values.get(event.wait.cell.key, 0)
    return event.wait.cmp.holds(value, event.wait.expected)


def _replay(trace: Trace, skeleton: _Skeleton, schedule: Iterable[EventRef]) -> _Replayed | None:
    """The state after `schedule`, or None if it is not an execution of `trace`."""
    positions = [0] * trace.ranks
    values: dict[CellKey, int] = {}
    for ref in schedule:
        if positions[ref.rank] != ref.index or ref.index >= len(trace.events[ref.rank]):
            return None
        event = trace.event(ref)
        if event.wait is not None and not _wait_holds(event, values):
            return None
        for write in skeleton.writes.get(ref, ()):
            add = write.op is NotifyOp.ATOMIC_ADD
            values[write.cell] = after_write(values.get(write.cell, 0), write.value, add)
        positions[ref.rank] += 1
    return _Replayed(positions=tuple(positions), values=values)


def _blocked_waits(trace: Trace, state: _Replayed) -> tuple[EventRef, ...] | None:
    """The waits unfinished ranks sit at, if no rank can move and some is unfinished."""
    blocked: list[EventRef] = []
    for rank, position in enumerate(state.positions):
        if position == len(trace.events[rank]):
            continue
        event = trace.events[rank][position]
        if event.wait is None or _wait_holds(event, state.values):
            return None
        blocked.append(event.ref)
    return tuple(blocked) or None


def _emit_until(out: list[EventRef], emitted: list[int], rank: int, stop: int) -> None:
    """Append `rank`'s events from where it stands up to index `stop` (exclusive)."""
    out.extend(EventRef(rank=rank, index=index) for index in range(emitted[rank], stop))
    emitted[rank] = max(emitted[rank], stop)


def _with_data_events(
    trace: Trace, signal_run: Iterable[EventRef], tails: dict[int, int]
) -> Schedule:
    """A run of signal events with each rank's data events just before its next signal
    event, then every rank in `tails` run up to the index it maps to (exclusive)."""
    out: list[EventRef] = []
    emitted = [0] * trace.ranks
    for ref in signal_run:
        _emit_until(out, emitted, ref.rank, ref.index + 1)
    for rank, stop in tails.items():
        _emit_until(out, emitted, rank, stop)
    return tuple(out)


# ---------------------------------------------------------------------------------------
# The z3 encoding


Condition: TypeAlias = bool | z3.BoolRef
"""A constraint, or a Python bool where the answer is known without z3."""


def _conjunction(parts: list[Condition]) -> Condition:
    if any(part is False for part in parts):
        return False
    open_parts = [part for part in parts if part is not True]
    if not open_parts:
        return True
    return open_parts[0] if len(open_parts) == 1 else z3.And(open_parts)


def _negation(condition: Condition) -> Condition:
    return not condition if isinstance(condition, bool) else z3.Not(condition)


def _value_bound(writes: Iterable[_CellWrite]) -> int:
    """No interleaving of `writes` (from a zero cell) gives the cell a larger value."""
    largest_set = 0
    positive_adds = 0
    for write in writes:
        if write.op is NotifyOp.SET:
            largest_set = max(largest_set, write.value)
        else:
            positive_adds += max(write.value, 0)
    return largest_set + positive_adds


def _write_count_bounds(
    wait: Wait, earlier_own: list[_CellWrite], other_ranks: dict[int, list[_CellWrite]]
) -> dict[int, tuple[int, int]] | None:
    """For each other rank, (at least, at most) how many of its writes to the wait's
    cell (in program order) precede the wait in any execution where the wait passes;
    None if the wait can never pass. `earlier_own` are the waiting rank's writes to the
    cell before the wait: they always precede it.

    Both Ge and Eq need value >= expected, so if the writes that may precede the wait
    minus rank q's j-th write onward bound the value below `expected`, q's first j
    writes precede it. An Eq wait also needs value <= expected; on a cell with no Set,
    if q's first j writes plus every write that lowers the value still exceed
    `expected`, fewer than j of q's writes precede it.
    """
    foreign = [write for writes in other_ranks.values() for write in writes]
    if _value_bound(earlier_own + foreign) < wait.expected:
        return None
    eq_on_adds = wait.cmp is WaitCmp.EQ and all(
        write.op is NotifyOp.ATOMIC_ADD for write in earlier_own + foreign
    )
    if eq_on_adds and _lowest(earlier_own, foreign) > wait.expected:
        return None
    bounds: dict[int, tuple[int, int]] = {}
    for rank, writes in other_ranks.items():
        foreign_rest = [
            write for other, others in other_ranks.items() if other != rank for write in others
        ]
        rest = earlier_own + foreign_rest
        at_least = max(
            (j + 1 for j in range(len(writes)) if _value_bound(rest + writes[:j]) < wait.expected),
            default=0,
        )
        at_most = len(writes)
        if eq_on_adds:
            at_most = min(
                (
                    j - 1
                    for j in range(1, len(writes) + 1)
                    if _lowest(earlier_own + writes[:j], foreign_rest + writes[j:]) > wait.expected
                ),
                default=len(writes),
            )
        bounds[rank] = (at_least, at_most)
    return bounds


def _lowest(counted: list[_CellWrite], uncertain: list[_CellWrite]) -> int:
    """The least value AtomicAdds give a zero cell when all of `counted` and any of
    `uncertain` ran."""
    return sum(write.value for write in counted) + sum(min(write.value, 0) for write in uncertain)


def _holds(cmp: WaitCmp, value: z3.ArithRef, expected: int) -> z3.BoolRef:
    """`value` is an int32; an unsigned wait compares both sides as uint32."""
    if cmp is WaitCmp.GE:
        return value >= expected
    if cmp is WaitCmp.EQ:
        return value == expected
    return z3.If(value < 0, value + 2**32, value) >= expected % 2**32


def _as_int32(total: z3.ArithRef) -> z3.ArithRef:
    """A sum of int32 writes as the cell holds it: wrapped at 32 bits."""
    return (total - INT32_MIN) % 2**32 + INT32_MIN


_ENCODING = reason(ReasonCode.STAGE_SMT_ENCODING)


class _Encoding:
    """The executions of one trace as constraints on one solver, reused by every query."""

    def __init__(self, trace: Trace, skeleton: _Skeleton, deadline: float = math.inf) -> None:
        self.deadline = deadline  # `--timeout`: read once per rank and per wait encoded
        self.context = z3.Context()
        self.solver = z3.Solver(ctx=self.context)
        self.executed: dict[EventRef, z3.BoolRef] = {}
        self.time: dict[EventRef, z3.ArithRef] = {}
        self._trace = trace
        self._skeleton = skeleton
        self._writers: dict[CellKey, list[tuple[EventRef, _CellWrite]]] = {}
        self._stuck_guard: z3.BoolRef | None = None
        self._ran_before_flags: dict[tuple[EventRef, EventRef], z3.BoolRef] = {}
        self._declare_signal_events()
        self._keep_takes_apart()
        self._require_waits_to_hold()

    def _declare_signal_events(self) -> None:
        for rank, indices in enumerate(self._skeleton.signal_indices):
            first = self._trace.events[rank][indices[0]].location if indices else None
            if clock.passed(self.deadline):  # the stage worded only when it is cut
                raise clock.Overtime(reason(ReasonCode.STAGE_SMT_RANK, rank=rank), first)
            previous: EventRef | None = None
            for index in indices:
                ref = EventRef(rank=rank, index=index)
                self.executed[ref] = z3.Bool(f"x_{rank}_{index}", self.context)
                self.time[ref] = z3.Int(f"t_{rank}_{index}", self.context)
                if previous is not None:
                    self.solver.add(z3.Implies(self.executed[ref], self.executed[previous]))
                    self.solver.add(self.time[previous] < self.time[ref])
                previous = ref
                for write in self._skeleton.writes.get(ref, ()):
                    self._writers.setdefault(write.cell, []).append((ref, write))

    def _keep_takes_apart(self) -> None:
        """Waits that take a unit (`racecheck.events.lower_start_edges`) of one cell at
        distinct times: each reads the writes strictly before its time and adds its take
        at it, so two at one time would both pass on the value before either took."""
        takers: dict[CellKey, list[z3.ArithRef]] = {}
        for ref, time in self.time.items():
            wait = self._trace.event(ref).wait
            if wait is not None and wait.take:
                takers.setdefault(wait.cell.key, []).append(time)
        for times in takers.values():
            if len(times) > 1:
                self.solver.add(z3.Distinct(*times))

    def _written_after(self, earlier: EventRef, later: EventRef) -> Condition:
        """Whether writer `later` comes after writer `earlier` in the decoded order:
        by time, ties broken by (rank, index) as `decode` does, so no two writers of
        a cell need distinct times."""
        if earlier.rank == later.rank:
            return earlier.index < later.index
        if _order(earlier) < _order(later):
            return self.time[earlier] <= self.time[later]
        return self.time[earlier] < self.time[later]

    def _require_waits_to_hold(self) -> None:
        for ref, executed in self.executed.items():
            event = self._trace.event(ref)
            wait = event.wait
            if wait is None:
                continue
            if clock.passed(self.deadline):
                stage = reason(ReasonCode.STAGE_SMT_WAIT, rank=ref.rank)
                raise clock.Overtime(stage, event.location)
            cell = wait.cell.key
            value = self._value(cell, partial(self._counted_at, ref))
            self.solver.add(z3.Implies(executed, _holds(wait.cmp, value, wait.expected)))
            if wait.cmp is not WaitCmp.GE_UNSIGNED and cell not in self._skeleton.wrapping:
                # the lemmas assume a value that only grows with the writes counted
                self._add_count_lemmas(ref, wait, self._writers.get(cell, []))

    def _counted_at(self, wait: EventRef, writer: EventRef) -> Condition:
        """Whether `writer` ran before `wait`, given that `wait` ran."""
        if writer.rank == wait.rank:
            return writer.index < wait.index
        return self._ran_before(wait, writer)

    def _ran_before(self, wait: EventRef, writer: EventRef) -> z3.BoolRef:
        """A named flag for `writer` (of another rank) having run before `wait`."""
        key = (wait, writer)
        if key not in self._ran_before_flags:
            flag = z3.Bool(f"b_{wait.rank}_{wait.index}_{writer.rank}_{writer.index}", self.context)
            self.solver.add(
                flag == z3.And(self.executed[writer], self.time[writer] < self.time[wait])
            )
            self._ran_before_flags[key] = flag
        return self._ran_before_flags[key]

    def _add_count_lemmas(
        self, ref: EventRef, wait: Wait, writers: list[tuple[EventRef, _CellWrite]]
    ) -> None:
        """Implied constraints on how many of each rank's writes precede the wait; they
        change no answer but let z3 propagate where it would otherwise search."""
        executed = self.executed[ref]
        earlier_own = [
            write
            for writer, write in writers
            if writer.rank == ref.rank and writer.index < ref.index
        ]
        by_rank: dict[int, list[EventRef]] = {}
        for writer, _ in writers:
            if writer.rank != ref.rank:
                by_rank.setdefault(writer.rank, []).append(writer)
        bounds = _write_count_bounds(
            wait,
            earlier_own,
            {rank: [self._skeleton_write(w, wait) for w in refs] for rank, refs in by_rank.items()},
        )
        if bounds is None:
            self.solver.add(z3.Not(executed))
            return
        for rank, refs in by_rank.items():
            flags = [self._ran_before(ref, writer) for writer in refs]
            for later, earlier in zip(flags[1:], flags, strict=False):
                self.solver.add(z3.Implies(later, earlier))
            at_least, at_most = bounds[rank]
            if at_least > 0:
                self.solver.add(z3.Implies(executed, flags[at_least - 1]))
            if at_most < len(flags):
                self.solver.add(z3.Implies(executed, z3.Not(flags[at_most])))

    def _skeleton_write(self, writer: EventRef, wait: Wait) -> _CellWrite:
        cell = wait.cell.key
        return next(w for w in self._skeleton.writes[writer] if w.cell == cell)

    def _value(self, cell: CellKey, counted: Callable[[EventRef], Condition]) -> z3.ArithRef:
        """The cell's value over the writers `counted` admits: the last Set among them
        (0 if none) plus the AtomicAdds after it."""
        writers = self._writers.get(cell, [])
        sets = [ref for ref, write in writers if write.op is NotifyOp.SET]
        terms: list[z3.ArithRef] = []
        for ref, write in writers:
            overwritten = [
                _negation(_conjunction([counted(later), self._written_after(ref, later)]))
                for later in sets
                if later != ref
            ]
            alive = _conjunction([counted(ref), *overwritten])
            if alive is True:
                terms.append(z3.IntVal(write.value, self.context))
            elif alive is not False:
                terms.append(z3.If(alive, z3.IntVal(write.value, self.context), 0))
        if not terms:
            return z3.IntVal(0, self.context)
        total = z3.Sum(terms)
        return _as_int32(total) if cell in self._skeleton.wrapping else total

    def stuck_guard(self) -> z3.BoolRef | None:
        """A literal that, assumed, asks for a stuck state; None if none can exist."""
        if self._stuck_guard is None:
            constraints = self._stuck_constraints()
            if constraints is None:
                return None
            self._stuck_guard = z3.Bool("stuck", self.context)
            self.solver.add(z3.Implies(self._stuck_guard, z3.And(constraints)))
        return self._stuck_guard

    def _stuck_constraints(self) -> list[z3.BoolRef] | None:
        """Every rank finished or at a WAIT false on the final values; some unfinished."""
        constraints: list[z3.BoolRef] = []
        unfinished: list[z3.BoolRef] = []
        for rank, indices in enumerate(self._skeleton.signal_indices):
            first = self._trace.events[rank][indices[0]].location if indices else None
            if clock.passed(self.deadline):
                raise clock.Overtime(reason(ReasonCode.STAGE_SMT_STUCK, rank=rank), first)
            before: z3.BoolRef = z3.BoolVal(True, self.context)
            for index in indices:
                ref = EventRef(rank=rank, index=index)
                at_next = z3.And(before, z3.Not(self.executed[ref]))
                wait = self._trace.event(ref).wait
                if wait is None:
                    constraints.append(z3.Not(at_next))
                else:
                    final = self._value(wait.cell.key, self.executed.__getitem__)
                    blocked = z3.Not(_holds(wait.cmp, final, wait.expected))
                    constraints.append(z3.Implies(at_next, blocked))
                before = self.executed[ref]
            if any(self._trace.events[rank][i].wait is not None for i in indices):
                unfinished.append(z3.Not(before))
        if not unfinished:
            return None
        constraints.append(z3.Or(unfinished))
        return constraints

    def decode(self, model: z3.ModelRef) -> tuple[EventRef, ...]:
        """The executed signal events in time order. Equal times are ordered as the
        encoding assumes: waits first (a wait only sees writes strictly before it),
        then writers by (rank, index) (see `_written_after`)."""
        executed = [
            ref
            for ref, flag in self.executed.items()
            if z3.is_true(model.eval(flag, model_completion=True))
        ]
        moment = {
            ref: model.eval(self.time[ref], model_completion=True).as_long() for ref in executed
        }
        return tuple(
            sorted(executed, key=lambda ref: (moment[ref], self._is_writer(ref), _order(ref)))
        )

    def _is_writer(self, ref: EventRef) -> bool:
        return ref in self._skeleton.writes


def _order(ref: EventRef) -> tuple[int, int]:
    return (ref.rank, ref.index)


QUERY_RLIMIT = 100_000_000
"""z3 resource units one query of the smt engine may use (docs/model.md, "Budgets")."""


def _solve(
    encoding: _Encoding, assumptions: list[z3.BoolRef], deadline: float, about: str
) -> z3.ModelRef | None:
    """A model of the encoding under `assumptions`, or None if there is none."""
    stage = reason(ReasonCode.STAGE_SMT_ASKED, about=about)
    checked = limited_check(
        encoding.solver, assumptions, rlimit=QUERY_RLIMIT, deadline=deadline, stage=stage
    )
    if checked.sat:
        return encoding.solver.model()
    if checked.unsat:
        return None
    raise EngineUnknown(reason(ReasonCode.SMT_UNDECIDED, about=about, why=checked.why))


# ---------------------------------------------------------------------------------------
# The oracle


@dataclass(frozen=True, slots=True, kw_only=True)
class _KnownRun:
    """A decoded execution of signal events, with each event's position in it."""

    run: tuple[EventRef, ...]
    position: dict[EventRef, int]

    @staticmethod
    def of(run: tuple[EventRef, ...]) -> _KnownRun:
        return _KnownRun(run=run, position={ref: n for n, ref in enumerate(run)})

    def prefix_through(
        self, last: EventRef, blocker: EventRef | None
    ) -> tuple[EventRef, ...] | None:
        """The run up to `last` if it executes `last` before (or without) `blocker`."""
        at = self.position.get(last)
        if at is None:
            return None
        if blocker is not None and self.position.get(blocker, at + 1) < at:
            return None
        return self.run[: at + 1]


class SmtOracle:
    """Answers the engine questions for one trace; every z3 model it gets is kept and
    answers later questions that the same execution settles."""

    def __init__(self, sync: SyncSkeleton, *, deadline: float) -> None:
        trace = sync.trace
        self._trace = trace
        self._skeleton = _skeleton(sync)
        self._encoding = _Encoding(trace, self._skeleton, deadline)
        self._deadline = deadline
        self._runs: list[_KnownRun] = []
        self._refuted: set[tuple[EventRef, EventRef | None]] = set()
        self._stuck_asked = False
        self._stuck: Stuck | None = None
        self.queries = 0  # z3 checks made, for benchmarks
        clock.check(deadline, _ENCODING)

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        return self._signal_prefix(first, second) is not None

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        prefix = self._signal_prefix(first, second)
        if prefix is None:
            raise ValueError(
                reason(ReasonCode.SMT_NO_EXECUTION, first=str(first), second=str(second))
            )
        if prefix:
            prefix = self._causal_past(prefix)
        schedule = self._ending_with(prefix, first)
        state = _replay(self._trace, self._skeleton, schedule)
        if state is None or not schedule or schedule[-1] != first or second in schedule:
            raise SmtInternalError(
                reason(ReasonCode.SMT_NOT_A_WITNESS, first=str(first), second=str(second))
            )
        return schedule

    def can_run(self, event: EventRef) -> bool:
        last = self._last_signal_through(event)
        return last is None or self._reach(last, None) is not None

    def stuck(self) -> Stuck | None:
        if not self._stuck_asked:
            self._stuck = self._find_stuck()
            self._stuck_asked = True
        return self._stuck

    # -- can_precede and witness

    def _signal_prefix(self, first: EventRef, second: EventRef) -> tuple[EventRef, ...] | None:
        """A run of signal events after which `first`'s rank can run on to `first` while
        `second` has not run; None if there is none."""
        if first.rank == second.rank:
            if first.index >= second.index:
                return None
            blocker = None
        else:
            blocker = self._first_signal_from(second)
        last = self._last_signal_through(first)
        if last is None:
            return ()
        return self._reach(last, blocker)

    def _last_signal_through(self, ref: EventRef) -> EventRef | None:
        indices = self._skeleton.signal_indices[ref.rank]
        at = bisect_right(indices, ref.index)
        return EventRef(rank=ref.rank, index=indices[at - 1]) if at else None

    def _first_signal_from(self, ref: EventRef) -> EventRef | None:
        indices = self._skeleton.signal_indices[ref.rank]
        at = bisect_left(indices, ref.index)
        return EventRef(rank=ref.rank, index=indices[at]) if at < len(indices) else None

    def _reach(self, last: EventRef, blocker: EventRef | None) -> tuple[EventRef, ...] | None:
        """A run that executes `last` and not `blocker` before it."""
        if (last, blocker) in self._refuted:
            return None
        known = self._known_prefix(last, blocker)
        if known is not None:
            return known
        assumptions = [self._encoding.executed[last]]
        if blocker is not None:
            assumptions.append(z3.Not(self._encoding.executed[blocker]))
        model = self._query(assumptions, self._about(last, blocker))
        if model is None:
            self._refuted.add((last, blocker))
            return None
        self._runs.append(_KnownRun.of(self._encoding.decode(model)))
        known = self._runs[-1].prefix_through(last, blocker)
        if known is None:
            raise SmtInternalError(
                reason(ReasonCode.SMT_MODEL_NOT_RUN, first=str(last), second=str(blocker))
            )
        return known

    def _about(self, last: EventRef, blocker: EventRef | None) -> str:
        """The query, in the user's terms: `last` running (before `blocker`)."""
        asks = reason(ReasonCode.SMT_ASKS_RUN, event=self._at(last))
        if blocker is None:
            return asks
        return reason(ReasonCode.SMT_ASKS_BEFORE, asks=asks, blocker=self._at(blocker))

    def _at(self, ref: EventRef) -> str:
        where = self._trace.event(ref).location
        return reason(ReasonCode.SMT_EVENT, rank=ref.rank, line=where.line, text=where.text)

    def _known_prefix(
        self, last: EventRef, blocker: EventRef | None
    ) -> tuple[EventRef, ...] | None:
        for known in self._runs:
            prefix = known.prefix_through(last, blocker)
            if prefix is not None:
                return prefix
        return None

    def _query(self, assumptions: list[z3.BoolRef], about: str) -> z3.ModelRef | None:
        self.queries += 1
        return _solve(self._encoding, assumptions, self._deadline, about)

    def _ending_with(self, prefix: Iterable[EventRef], first: EventRef) -> Schedule:
        return _with_data_events(self._trace, prefix, {first.rank: first.index + 1})

    def _causal_past(self, prefix: tuple[EventRef, ...]) -> tuple[EventRef, ...]:
        """The events of `prefix` that its last event needs: its rank's earlier events
        and, for every needed wait, every write to the wait's cell that ran before it
        (so every needed wait sees the same value), closed under both rules."""
        needed = [-1] * self._trace.ranks
        needed[prefix[-1].rank] = prefix[-1].index
        kept: list[EventRef] = []
        for position in range(len(prefix) - 1, -1, -1):
            ref = prefix[position]
            if ref.index > needed[ref.rank]:
                continue
            kept.append(ref)
            wait = self._trace.event(ref).wait
            if wait is None:
                continue
            cell = wait.cell.key
            for earlier in prefix[:position]:
                if any(write.cell == cell for write in self._skeleton.writes.get(earlier, ())):
                    needed[earlier.rank] = max(needed[earlier.rank], earlier.index)
        return tuple(reversed(kept))

    # -- stuck

    def _find_stuck(self) -> Stuck | None:
        guard = self._encoding.stuck_guard()
        if guard is None:
            return None
        model = self._query([guard], reason(ReasonCode.SMT_ASKS_DEADLOCK))
        if model is None:
            return None
        run = self._encoding.decode(model)
        self._runs.append(_KnownRun.of(run))
        schedule = _with_data_events(self._trace, run, self._stops(run))
        state = _replay(self._trace, self._skeleton, schedule)
        blocked = None if state is None else _blocked_waits(self._trace, state)
        if state is None or blocked is None:
            raise SmtInternalError(reason(ReasonCode.SMT_NOT_STUCK))
        cells = sorted({self._waited_cell(ref) for ref in blocked})
        return Stuck(
            schedule=schedule,
            blocked=blocked,
            cell_values=tuple(
                (self._skeleton.cells[key], state.values.get(key, 0)) for key in cells
            ),
        )

    def _waited_cell(self, ref: EventRef) -> CellKey:
        wait = self._trace.event(ref).wait
        assert wait is not None
        return wait.cell.key

    def _stops(self, run: tuple[EventRef, ...]) -> dict[int, int]:
        """Per rank, where it stops after `run`: its first signal event not in the run
        (a blocked wait), or its end."""
        executed = set(run)
        stops: dict[int, int] = {}
        for rank, indices in enumerate(self._skeleton.signal_indices):
            pending = [i for i in indices if EventRef(rank=rank, index=i) not in executed]
            stops[rank] = pending[0] if pending else len(self._trace.events[rank])
        return stops


@dataclass(frozen=True, slots=True, kw_only=True)
class SmtEngine:
    """The `smt` engine; see the module docstring for what it decides."""

    name: str = field(default="smt", init=False)

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        return skeleton.refusal()

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> SmtOracle:
        return SmtOracle(skeleton, deadline=deadline)
