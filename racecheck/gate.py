"""What the user demands beyond freedom from bugs, applied to judged results: with
`require_model` a proved P whose outputs match no golden model is `unknown`; with
`require_every_p` a `--ranks all` program that fell back to concrete P is `unknown`
(a bug found at those P stays a bug). Both make the exit status 2, never 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Sequence

from racecheck.findings import ProgramResult, Verdict
from racecheck.options import Options
from racecheck.report.reasons import ReasonCode, reason

NO_MODEL = reason(ReasonCode.GATE_NO_MODEL)
NOT_EVERY_P = reason(ReasonCode.GATE_NOT_EVERY_P)


def demand(
    results: Sequence[ProgramResult], options: Options, single_device: Container[str]
) -> list[ProgramResult]:
    """`results` with the user's demands applied (see the module docstring)."""
    return [_demanded(result, options, single_device) for result in results]


def _demanded(
    result: ProgramResult, options: Options, single_device: Container[str]
) -> ProgramResult:
    if result.verdict is not Verdict.PROVED:
        return result
    fell_back = (
        options.every_p is not None
        and result.every_p is None
        and result.program not in single_device
    )
    if options.require_every_p and fell_back:
        return _unknown(result, NOT_EVERY_P)
    if options.require_model and result.model is None:
        return _unknown(result, NO_MODEL)
    return result


def _unknown(result: ProgramResult, reason: str) -> ProgramResult:
    return dataclasses.replace(result, verdict=Verdict.UNKNOWN, message=reason, model=None)
