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

from racecheck.findings import Finding, ProgramResult, Verdict
from racecheck.steering import OpenRead


@dataclass(frozen=True, slots=True, kw_only=True)
class Path:
    """How one path's tracing run differs from the default run."""


FIRST = Path()


@dataclass(frozen=True, slots=True, kw_only=True)
class PathOutcome:
    result: ProgramResult
    opened: tuple[OpenRead, ...] = ()  # steering values this path does not settle


def explore(check_path: Callable[[Path, float], PathOutcome], *, timeout: float) -> ProgramResult:
    """Check the first path, then the paths its open values lead to, all within
    `timeout` seconds (`check_path` gets the deadline, a `time.monotonic()` value)."""
    deadline = time.monotonic() + timeout
    outcome = check_path(FIRST, deadline)
    return merged([outcome.result], outcome.opened)


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
