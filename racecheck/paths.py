"""Never `proved` from one path: the executions one trace does not stand for.

A traced run stands for every execution only while every value that steered it is the
same in all of them (`racecheck.steering`). Where one may differ, other paths are
checked: reads-from alternatives (the unordered writes land in another order) and
other inputs. Each path's trace is checked in full; the verdicts merge (the worst
wins, findings deduplicated by kind and lines). An open value no explored path
settles makes the verdict `unknown`, naming the line that read it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from racecheck import clock
from racecheck.cosim import DefaultPolicy, HoldPolicy, SchedulePolicy
from racecheck.cosim.execution import Decided
from racecheck.dsl.symbolic import Decision, realises
from racecheck.engines.base import OrderOracle
from racecheck.events import EventRef, Schedule, Stuck
from racecheck.findings import Finding
from racecheck.judge import Outcome, shows_bug
from racecheck.load import ProgramInstance
from racecheck.report.reasons import ReasonCode, reason
from racecheck.steering import Cause, OpenRead

BUDGET = 16
"""Paths checked per program and P before an open value makes the verdict unknown."""

SATURATED_AFTER = 3
"""Once the paths checked show a bug, exploring stops after this many paths in a row
found nothing new: the verdict cannot change, further paths could only add findings,
and each costs a co-simulation. The paths left are named in a note."""

T = TypeVar("T")

PathKey = tuple[frozenset[EventRef], tuple[tuple[str, int, float], ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Path:
    """How one path's tracing run differs from the default run.

    `held`: writes the scheduler keeps back while any other rank can run, so the others
    of their unordered group land first. `decided`: the unordered groups an ancestor
    path already branched on (their other orders are this path's siblings).
    `inputs`: input elements chosen for this path (tensor, flat index, value).
    `forced`: the decisions these inputs were chosen for, in order; the run must make
    them (concolic search: its later decisions are flipped in turn by its children).
    `avoided`: when the last forced decision is the other side of a pinned value
    (`racecheck.dsl.symbolic.decision`), the values it took on the paths before, which
    it must not take either: a pinned value is flipped again on each value it takes,
    until no input gives it another (or the budget runs out, and it stays open).
    """

    held: tuple[EventRef, ...] = ()
    decided: frozenset[frozenset[EventRef]] = frozenset()
    inputs: tuple[tuple[str, int, float], ...] = ()
    forced: tuple[Decision, ...] = ()
    avoided: tuple[Decision, ...] = ()
    summarised: bool = False  # a summary run (`racecheck.symbolic_inputs`)

    def policy(self) -> SchedulePolicy:
        policy: SchedulePolicy = DefaultPolicy()
        for write in reversed(self.held):
            policy = HoldPolicy(write, policy)
        return policy

    def applied(self, instance: ProgramInstance) -> ProgramInstance:
        return dataclasses.replace(instance, inputs=self.inputs) if self.inputs else instance

    @property
    def key(self) -> PathKey:
        return frozenset(self.held), self.inputs


FIRST = Path()
SUMMARY = Path(summarised=True)


class PathOracle:
    """The engine's answers for one path's trace, with witnesses this path can replay.

    On a path with held writes, or in a trace whose reads steer control flow (`steered`:
    a loop bound read from memory), an engine's witness may land writes in the other
    order, and then the program takes another path than the trace. `realise` runs the
    program under a policy and returns its schedule (None if it failed); a witness for
    `first` before `second` is taken from the path's own run with `second` held back,
    when that run shows it.
    """

    def __init__(
        self,
        oracle: OrderOracle,
        path: Path,
        realise: Callable[[SchedulePolicy], Schedule | None],
        *,
        steered: bool = False,
    ) -> None:
        self.oracle = oracle
        self.path = path
        self.realise = realise
        self.steered = steered

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        return self.oracle.can_precede(first, second)

    def can_run(self, event: EventRef) -> bool:
        return self.oracle.can_run(event)

    def stuck(self) -> Stuck | None:
        return self.oracle.stuck()

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        if self.path.held or self.steered:
            schedule = self.realise(HoldPolicy(second, self.path.policy()))
            if schedule is not None and first in schedule:
                prefix = schedule[: schedule.index(first) + 1]
                if second not in prefix:
                    return prefix
        return self.oracle.witness(first, second)


@dataclass(frozen=True, slots=True, kw_only=True)
class PathOutcome:
    outcome: Outcome  # the path's facts, judged with the others' by `racecheck.judge`
    opened: tuple[OpenRead, ...] = ()  # steering values that may differ on other paths
    schedule: Schedule = ()  # the order the path's tracing run executed events in
    decisions: tuple[Decided, ...] = ()  # what its input-dependent values decided
    summary: tuple[str, ...] | None = None  # a summary run: why it is not for every input


@dataclass(frozen=True, slots=True, kw_only=True)
class Unsettled:
    """An open value no explored path settles, and why."""

    opened: OpenRead
    why: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pending:
    path: Path
    reason: OpenRead  # the open value this path is an alternative for
    last: EventRef | None = None  # the write that must land last on this path


class Exploration:
    """The search over one program's paths at one P, driven by the pipeline: it names
    the next path to check (`next_path`), takes the outcome of each path checked
    (`record`) and gives their merge once none is left (`outcome`).

    The first path, then the paths its open values lead to, breadth first, all within
    the `--timeout` in force (`racecheck.clock.unit`, else `timeout` seconds; each path
    is checked against `deadline`) and `BUDGET` paths, until a bug is shown and
    `SATURATED_AFTER` paths add nothing to it. With `summarise`, input values the budget
    leaves open may still be settled by one summary run (`SUMMARY`): before the
    alternatives when they cannot all fit, else after them.
    """

    def __init__(self, *, timeout: float, summarise: bool = False) -> None:
        self.deadline = clock.deadline(timeout)
        self._summarise = summarise
        self._results: list[Outcome] = []
        self._unsettled: list[Unsettled] = []
        self._seen = {FIRST.key}
        self._found: _Found | None = None  # None until the first path is recorded
        self._todo: list[_Pending] = []
        self._tried: list[str] = []  # a summary run's reasons, once tried
        self._next: Path | None = FIRST
        self._pending: _Pending | None = None  # the alternative `_next` is
        self._summary_for: list[Unsettled] = []  # the open values a summary run is for
        self._summary_first = False  # the summary run comes before the alternatives

    def next_path(self) -> Path | None:
        """The path to check next, None once exploring is over."""
        return self._next

    def record(self, path: Path, checked: PathOutcome) -> None:
        """The outcome of the path `next_path` named; the next path is chosen."""
        assert path is self._next
        if path.summarised:
            self._next = self._after_summary(checked)
        elif self._found is None:
            self._next = self._after_first(checked)
        else:
            self._next = self._after_alternative(checked)

    def outcome(self) -> Outcome:
        """The merged outcome of the paths checked (`merged`), once none is left."""
        assert self._next is None and self._results
        return merged(self._results, tuple(self._unsettled))

    def _after_first(self, first: PathOutcome) -> Path | None:
        self._results.append(first.outcome)
        found = self._found = _Found(first.outcome)
        self._todo = self._branches(FIRST, first, BUDGET - 1)
        if self._summarise and len(self._todo) >= BUDGET and not found.bug:
            opened = [Unsettled(opened=branch.reason, why="") for branch in self._todo]
            if self._summary_may_settle(opened):  # the paths cannot all fit
                self._summary_first = True
                return SUMMARY
        return self._following()

    def _after_alternative(self, checked: PathOutcome) -> Path | None:
        pending, found = self._pending, self._found
        assert pending is not None and found is not None
        self._results.append(_with_inputs(checked.outcome, pending.path))
        found.add(checked.outcome)
        if not _realised(pending, checked):
            why = reason(ReasonCode.PATH_UNREALISED)
            self._unsettled.append(Unsettled(opened=pending.reason, why=why))
        room = BUDGET - len(self._results) - len(self._todo)
        self._todo.extend(self._branches(pending.path, checked, room))
        return self._following()

    def _after_summary(self, checked: PathOutcome) -> Path | None:
        if self._summary_settles(checked):
            self._unsettled = []
            return None
        if self._summary_first:
            self._summary_first = False
            return self._following()
        return None

    def _following(self) -> Path | None:
        """The next alternative waiting, unless exploring stops (`_stop`); then the
        summary run that may settle what the paths left open, else None."""
        if self._todo:
            pending = self._todo.pop(0)
            assert self._found is not None
            why = _stop(self._results, self._found, self.deadline)
            if why is None:
                self._pending = pending
                return pending.path
            self._unsettled.extend(
                Unsettled(opened=waiting.reason, why=why) for waiting in [pending, *self._todo]
            )
            self._todo = []
        if self._tried and self._unsettled:
            why = reason(ReasonCode.SUMMARY_NOT_EVERY_INPUT, why=self._tried[0])
            self._unsettled.append(Unsettled(opened=self._unsettled[0].opened, why=why))
        elif self._summarise and self._summary_may_settle(self._unsettled):
            return SUMMARY
        return None

    def _branches(self, path: Path, outcome: PathOutcome, room: int) -> list[_Pending]:
        return _branches(path, outcome, self._unsettled, self._seen, self.deadline, room)

    def _summary_may_settle(self, unsettled: list[Unsettled]) -> bool:
        """Whether one summary run may settle every input value `unsettled` names: only
        input values are open, no path shows a bug or is undecided, time is left."""
        assert self._found is not None
        if not unsettled or self._found.bug or any(o.unknown for o in self._results):
            return False
        if any(entry.opened.cause is not Cause.INPUT for entry in unsettled):
            return False
        if clock.passed(self.deadline):
            return False
        self._summary_for = unsettled
        return True

    def _summary_settles(self, checked: PathOutcome) -> bool:
        """Whether the summary run stands for every input (`racecheck.symbolic_inputs`)
        with no finding. Its outcome then joins the results (without a model: its
        outputs are no input's); else why not is kept for the message."""
        outcome = checked.outcome
        unsettled = self._summary_for
        if checked.summary:  # named: a loop-carried value, a bound that steers elsewhere, ...
            self._tried.append(checked.summary[0])
            if unsettled[0].why:  # exploring is over: say why the summary did not settle it
                why = reason(ReasonCode.SUMMARY_NOT_EVERY_INPUT, why=self._tried[0])
                unsettled.append(Unsettled(opened=unsettled[0].opened, why=why))
        elif outcome.findings or outcome.unknown or outcome.hung:
            self._tried.append(reason(ReasonCode.SUMMARY_UNDECIDED))
        if checked.summary != () or outcome.findings or outcome.unknown or outcome.hung:
            return False
        self._results.append(dataclasses.replace(outcome, model=None))
        return True


class _Found:
    """The findings of the paths checked so far, and how many paths in a row added none."""

    def __init__(self, first: Outcome) -> None:
        self.identities = {finding.identity for finding in first.findings}
        self.bug = shows_bug(first)
        self.quiet = 0

    def add(self, outcome: Outcome) -> None:
        new = {finding.identity for finding in outcome.findings} - self.identities
        self.identities |= new
        self.bug = self.bug or shows_bug(outcome)
        self.quiet = 0 if new else self.quiet + 1


def _stop(results: list[Outcome], found: _Found, deadline: float) -> str | None:
    """Why exploring stops before the next path, None while it goes on."""
    if len(results) >= BUDGET:
        return reason(ReasonCode.PATHS_BUDGET, budget=BUDGET)
    if clock.passed(deadline):
        stage = reason(ReasonCode.STAGE_OTHER_PATHS, checked=len(results))
        return clock.Overtime(stage).reason
    if found.bug and found.quiet >= SATURATED_AFTER:
        return reason(ReasonCode.PATHS_SATURATED, quiet=SATURATED_AFTER)
    return None


def _with_inputs(outcome: Outcome, path: Path) -> Outcome:
    """The path's findings, naming the inputs chosen for it."""
    if not path.inputs:
        return outcome
    findings = tuple(dataclasses.replace(f, inputs=path.inputs) for f in outcome.findings)
    return dataclasses.replace(outcome, findings=findings)


def _branches(
    path: Path,
    outcome: PathOutcome,
    unsettled: list[Unsettled],
    seen: set[PathKey],
    deadline: float,
    room: int,
) -> list[_Pending]:
    """The alternatives of every open value of `outcome` not branched on before; an
    open value that cannot be branched on is unsettled. `room` paths of the budget are
    left after those already waiting: once one more alternative than that is found,
    the verdict cannot be proved, and the inputs of the others are not solved for."""

    def fresh(branch: _Pending) -> bool:
        if branch.path.key in seen:
            return False
        seen.add(branch.path.key)
        return True

    orders = [branch for branch in _orders(path, outcome, unsettled) if fresh(branch)]
    return orders + _inputs(path, outcome, unsettled, deadline, fresh, room - len(orders))


def _orders(path: Path, outcome: PathOutcome, unsettled: list[Unsettled]) -> list[_Pending]:
    """Reads-from alternatives: each unordered write of a group held back in turn."""
    order = {ref: n for n, ref in enumerate(outcome.schedule)}
    branches: list[_Pending] = []
    for opened in outcome.opened:
        group = frozenset(opened.writers)
        if opened.cause is not Cause.ORDER or group in path.decided:
            continue
        if not opened.last_wins:
            why = reason(ReasonCode.ORDERS_NOT_ENUMERATED)
            unsettled.append(Unsettled(opened=opened, why=why))
            continue
        last = max(opened.writers, key=lambda ref: order.get(ref, -1))
        for write in opened.writers:
            if write != last:
                child = dataclasses.replace(
                    path,
                    held=(*path.held, write),
                    decided=path.decided | {group},
                    forced=(),
                    avoided=(),
                )  # another order may decide otherwise: its input decisions start afresh
                branches.append(_Pending(path=child, reason=opened, last=write))
    return branches


def _inputs(
    path: Path,
    outcome: PathOutcome,
    unsettled: list[Unsettled],
    deadline: float,
    fresh: Callable[[_Pending], bool],
    room: int,
) -> list[_Pending]:
    """Input alternatives (concolic): for each decision after the forced ones, inputs
    that keep the decisions before it and flip it, until more `fresh` ones than `room`
    are found. An input dependence without a symbolic form cannot be followed: it is
    unsettled."""
    inputs = [opened for opened in outcome.opened if opened.cause is Cause.INPUT]
    unsettled.extend(
        Unsettled(opened=opened, why=reason(ReasonCode.INPUT_NOT_SYMBOLIC))
        for opened in inputs
        if not opened.symbolic
    )
    if not inputs or not outcome.decisions or room < 0:
        return []
    from racecheck.engines.inputs_smt import Answer, flips  # z3 only when inputs steer

    made = [decided.decision for decided in outcome.decisions]
    first, avoided = _repinned(path, made)
    branches: list[_Pending] = []
    solutions = flips(made, first, deadline=deadline, avoided=avoided)
    for n, solution in _until_overtime(solutions, unsettled, inputs[0]):
        opened = _reason(inputs, outcome.decisions[n])
        if solution.answer is Answer.UNDECIDED:
            unsettled.append(Unsettled(opened=opened, why=reason(ReasonCode.INPUTS_UNDECIDED)))
        elif solution.answer is Answer.FOUND:
            flipped = Decision(condition=made[n].condition, taken=not made[n].taken)
            child = dataclasses.replace(
                path,
                inputs=solution.values,
                forced=(*made[:n], flipped),
                avoided=avoided if n == first else (),
            )
            pending = _Pending(path=child, reason=opened)
            if fresh(pending):
                branches.append(pending)
            if len(branches) > room:
                break
    return branches


def _until_overtime(
    solutions: Iterator[T], unsettled: list[Unsettled], opened: OpenRead
) -> Iterator[T]:
    """`solutions` until `--timeout` cuts them (the open value then stays open, with
    why); the ones found before are still worth a path each."""
    try:
        yield from solutions
    except clock.Overtime as cut:
        unsettled.append(Unsettled(opened=opened, why=cut.reason))


def _repinned(path: Path, made: list[Decision]) -> tuple[int, tuple[Decision, ...]]:
    """The first decision of the path's run to flip, and the values it must avoid: the
    last forced one again when the run met it by pinning a value to another value
    than the ones avoided (its other values are still to try), else the first after
    the forced ones."""
    forced = path.forced
    if forced and len(made) >= len(forced) and made[len(forced) - 1] != forced[-1]:
        return len(forced) - 1, (forced[-1], *path.avoided)
    return len(forced), ()


def _reason(inputs: list[OpenRead], decided: Decided) -> OpenRead:
    """The open input value behind a decision, for messages."""
    return next((opened for opened in inputs if opened.read in decided.sources), inputs[0])


def _realised(pending: _Pending, outcome: PathOutcome) -> bool:
    """Did the path's run go the way it was chosen for: its held write landed last
    among its group, and it made the forced decisions (a pinned value avoiding every
    value `avoided`)?"""
    forced = pending.path.forced
    made = [decided.decision for decided in outcome.decisions[: len(forced)]]
    if len(made) < len(forced) or not all(map(realises, made, forced)):
        return False
    if not all(realises(made[-1], value) for value in pending.path.avoided):
        return False
    if pending.last is None:
        return True
    order = {ref: n for n, ref in enumerate(outcome.schedule)}
    if any(ref not in order for ref in pending.reason.writers):
        return False
    return all(order[ref] <= order[pending.last] for ref in pending.reason.writers)


def _unsettled_message(unsettled: tuple[Unsettled, ...]) -> str:
    """Each open value once, with every reason it stayed open."""
    whys: dict[str, dict[str, None]] = {}
    for entry in unsettled:
        whys.setdefault(entry.opened.message, {})[entry.why] = None
    return "; ".join(f"{message} ({'; '.join(why)})" for message, why in whys.items())


def merged(outcomes: list[Outcome], unsettled: tuple[Unsettled, ...]) -> Outcome:
    """The facts of all paths as one outcome: their findings once each, the first reason
    a path could not be decided, the open values no path settled (which
    `racecheck.judge` turns into `unknown` unless some path shows a bug), and the golden
    model only if every path's outputs match it."""
    first = outcomes[0]
    model = first.model if all(o.model == first.model for o in outcomes) else None
    findings: dict[tuple[object, ...], Finding] = {}
    for outcome in outcomes:
        for finding in outcome.findings:
            findings.setdefault(finding.identity, finding)
    unknown = next((o.unknown for o in outcomes if o.unknown is not None), None)
    if unknown is None and unsettled:
        unknown = _unsettled_message(unsettled)
    return dataclasses.replace(
        first,
        findings=tuple(findings.values()),
        unknown=unknown,
        model=model,
        hung=any(outcome.hung for outcome in outcomes),
        notes=tuple(dict.fromkeys(note for outcome in outcomes for note in outcome.notes)),
        seconds=round(sum(outcome.seconds for outcome in outcomes), 4),
    )
