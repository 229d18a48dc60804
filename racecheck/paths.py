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
import time
from collections.abc import Callable
from dataclasses import dataclass

from racecheck.cosim import DefaultPolicy, HoldPolicy, SchedulePolicy
from racecheck.engines.base import OrderOracle
from racecheck.events import EventRef, Schedule, Stuck
from racecheck.findings import Finding, ProgramResult, Verdict
from racecheck.steering import Cause, OpenRead

BUDGET = 16
"""Paths checked per program and P before an open value makes the verdict unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Path:
    """How one path's tracing run differs from the default run.

    `held`: writes the scheduler keeps back while any other rank can run, so the others
    of their unordered group land first. `decided`: the unordered groups an ancestor
    path already branched on (their other orders are this path's siblings).
    """

    held: tuple[EventRef, ...] = ()
    decided: frozenset[frozenset[EventRef]] = frozenset()

    def policy(self) -> SchedulePolicy:
        policy: SchedulePolicy = DefaultPolicy()
        for write in reversed(self.held):
            policy = HoldPolicy(write, policy)
        return policy

    @property
    def key(self) -> frozenset[EventRef]:
        return frozenset(self.held)


FIRST = Path()


class PathOracle:
    """The engine's answers for one path's trace, with witnesses this path can replay.

    On a path with held writes, an engine's witness may land those writes in the
    other order, and then the program takes another path than the trace. `realise`
    runs the program under a policy and returns its schedule (None if it failed); a
    witness for `first` before `second` is taken from the path's own run with `second`
    held back, when that run shows it.
    """

    def __init__(
        self,
        oracle: OrderOracle,
        path: Path,
        realise: Callable[[SchedulePolicy], Schedule | None],
    ) -> None:
        self.oracle = oracle
        self.path = path
        self.realise = realise

    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        return self.oracle.can_precede(first, second)

    def stuck(self) -> Stuck | None:
        return self.oracle.stuck()

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        if self.path.held:
            schedule = self.realise(HoldPolicy(second, self.path.policy()))
            if schedule is not None and first in schedule:
                prefix = schedule[: schedule.index(first) + 1]
                if second not in prefix:
                    return prefix
        return self.oracle.witness(first, second)


@dataclass(frozen=True, slots=True, kw_only=True)
class PathOutcome:
    result: ProgramResult
    opened: tuple[OpenRead, ...] = ()  # steering values that may differ on other paths
    schedule: Schedule = ()  # the order the path's tracing run executed events in


@dataclass(frozen=True, slots=True, kw_only=True)
class _Pending:
    path: Path
    reason: OpenRead  # the open value this path is an alternative for
    last: EventRef  # the write that must land last on this path


def explore(check_path: Callable[[Path, float], PathOutcome], *, timeout: float) -> ProgramResult:
    """Check the first path, then the paths its open values lead to, breadth first, all
    within `timeout` seconds (`check_path` gets the deadline, a `time.monotonic()`
    value) and `BUDGET` paths."""
    deadline = time.monotonic() + timeout
    first = check_path(FIRST, deadline)
    results = [first.result]
    unsettled: list[OpenRead] = []
    seen = {FIRST.key}
    todo = _branches(FIRST, first, unsettled, seen)
    while todo:
        pending = todo.pop(0)
        if len(results) >= BUDGET or time.monotonic() > deadline:
            unsettled.extend(waiting.reason for waiting in [pending, *todo])
            break
        outcome = check_path(pending.path, deadline)
        results.append(outcome.result)
        if not _landed_last(pending, outcome.schedule):
            unsettled.append(pending.reason)
        todo.extend(_branches(pending.path, outcome, unsettled, seen))
    return merged(results, tuple(unsettled))


def _branches(
    path: Path, outcome: PathOutcome, unsettled: list[OpenRead], seen: set[frozenset[EventRef]]
) -> list[_Pending]:
    """The alternatives of every open value of `outcome` not branched on before; an
    open value that cannot be branched on is unsettled."""
    order = {ref: n for n, ref in enumerate(outcome.schedule)}
    branches: list[_Pending] = []
    for opened in outcome.opened:
        group = frozenset(opened.writers)
        if opened.cause is Cause.ORDER and group in path.decided:
            continue
        if opened.cause is not Cause.ORDER or not opened.last_wins:
            unsettled.append(opened)
            continue
        last = max(opened.writers, key=lambda ref: order.get(ref, -1))
        for write in opened.writers:
            child = Path(held=(*path.held, write), decided=path.decided | {group})
            if write != last and child.key not in seen:
                seen.add(child.key)
                branches.append(_Pending(path=child, reason=opened, last=write))
    return branches


def _landed_last(pending: _Pending, schedule: Schedule) -> bool:
    """Did the path's run realise the order it was for?"""
    order = {ref: n for n, ref in enumerate(schedule)}
    if any(ref not in order for ref in pending.reason.writers):
        return False
    return all(order[ref] <= order[pending.last] for ref in pending.reason.writers)


def merged(results: list[ProgramResult], unsettled: tuple[OpenRead, ...]) -> ProgramResult:
    """The worst verdict of the paths, their findings once each; unsettled open values
    turn a clean verdict into `unknown`."""
    first = results[0]
    findings: dict[tuple[object, ...], Finding] = {}
    for result in results:
        for finding in result.findings:
            findings.setdefault((finding.kind, finding.detail, finding.locations), finding)
    verdict = Verdict.worst([result.verdict for result in results])
    message = next((r.message for r in results if r.verdict is verdict), first.message)
    if unsettled and verdict in (Verdict.PROVED, Verdict.SKIPPED):
        verdict = Verdict.UNKNOWN
        message = "; ".join(dict.fromkeys(opened.message for opened in unsettled))
    return dataclasses.replace(
        first,
        verdict=verdict,
        findings=tuple(findings.values()),
        message=message,
        seconds=round(sum(result.seconds for result in results), 4),
    )
