"""The one verdict function and the cross-P step (issue 9.2, 10.8, 10.9, 10.11)."""

from __future__ import annotations

import dataclasses

import numpy as np
from report_samples import LOAD, race

from racecheck.findings import Finding, FindingKind, OutputDiff, Severity, Verdict
from racecheck.judge import Outcome, across_ranks, decide, with_wrong_result
from racecheck.options import Options
from racecheck.reference import HostIO
from racecheck.report.phrases import describe_finding

STALE = Finding(
    kind=FindingKind.STALE_READ,
    detail="",
    locations=(LOAD,),
    ranks=(0,),
    severity=Severity.WARNING,
)


def outcome(ranks: int = 2, **fields: object) -> Outcome:
    return Outcome(program="P", ranks=ranks, **fields)  # type: ignore[arg-type]


def test_a_confirmed_race_is_a_bug() -> None:
    result = decide(outcome(findings=(race(),)))
    assert result.verdict is Verdict.BUG and result.findings == (race(),)


def test_a_race_whose_witness_did_not_replay_is_unknown_never_a_bug() -> None:
    result = decide(outcome(findings=(race(confirmed=False),), model="allreduce-sum"))
    assert result.verdict is Verdict.UNKNOWN
    assert result.message.startswith("internal inconsistency: the race-raw witness at")
    assert result.model is None


def test_an_unconfirmed_race_beside_a_confirmed_one_is_dropped_with_a_note() -> None:
    other = dataclasses.replace(race(confirmed=False), ranks=(2, 3))
    result = decide(outcome(findings=(race(), other)))
    assert result.verdict is Verdict.BUG
    assert result.findings == (race(),)
    assert any("did not replay" in note for note in result.notes)


def test_a_hung_run_without_a_deadlock_finding_is_unknown() -> None:
    assert decide(outcome(hung=True)).verdict is Verdict.UNKNOWN


def test_a_stale_read_alone_is_a_warning_and_the_verdict_stays_proved() -> None:
    result = decide(outcome(findings=(STALE,), model="allreduce-sum"))
    assert (result.verdict, result.model) == (Verdict.PROVED, "allreduce-sum")
    assert result.warnings == (STALE,)


def io(outputs: np.ndarray, inputs: np.ndarray) -> HostIO:
    return HostIO(name="y", dtype="FP32", inputs=inputs, outputs=outputs, in_place=False)


def test_a_wrong_result_makes_the_stale_read_an_error_named_as_its_cause() -> None:
    inputs = np.arange(8, dtype=np.float32).reshape(2, 4)
    wrong = with_wrong_result(
        outcome(findings=(STALE,), io=io(np.zeros((2, 4), np.float32), inputs)),
        _diff(),
    )
    result = decide(wrong)
    assert result.verdict is Verdict.BUG
    stale, wrong_result = result.findings
    assert stale.severity is Severity.ERROR and stale.kind is FindingKind.STALE_READ
    assert wrong_result.kind is FindingKind.WRONG_RESULT
    assert wrong_result.cause == LOAD
    assert (
        describe_finding(wrong_result)
        == f"the outputs do not match m; likely cause: the stale read at {LOAD}"
    )


def _diff() -> OutputDiff:
    return OutputDiff(tensor="y", rank=0, index=(0, 0), got=(0.0,), golden=(4.0,), model="m")


def test_p_matching_no_model_is_a_wrong_result_against_the_model_other_p_match() -> None:
    def allreduce(ranks: int, *, tail_lost: bool) -> Outcome:
        inputs = np.arange(ranks * 6, dtype=np.float32).reshape(ranks, 6)
        outputs = np.repeat(inputs.sum(axis=0, keepdims=True), ranks, axis=0)
        if tail_lost:
            outputs[:, -1] = 0.0
        model = None if tail_lost else "allreduce-sum"
        return outcome(ranks, io=io(outputs, inputs), model=model)

    judged = across_ranks(
        [
            allreduce(2, tail_lost=False),
            allreduce(3, tail_lost=False),
            allreduce(4, tail_lost=False),
            allreduce(5, tail_lost=True),
        ],
        Options(),
    )
    verdicts = [decide(o).verdict for o in judged]
    assert verdicts == [Verdict.PROVED, Verdict.PROVED, Verdict.PROVED, Verdict.BUG]
    [wrong] = decide(judged[3]).findings
    assert wrong.kind is FindingKind.WRONG_RESULT and wrong.diff is not None
    assert (wrong.diff.model, wrong.diff.index) == ("allreduce-sum", (5,))


def test_a_model_one_larger_p_coincides_with_condemns_no_clean_p() -> None:
    """The exchange with rank r ^ 2 is shift+2 at P=4 and no model at P=8: correct."""

    def exchange(ranks: int) -> Outcome:
        inputs = np.arange(ranks * 4, dtype=np.float32).reshape(ranks, 4)
        outputs = inputs[[r ^ 2 for r in range(ranks)]]
        model = "shift+2" if ranks == 4 else None
        return outcome(ranks, io=io(outputs, inputs), model=model)

    judged = across_ranks([exchange(4), exchange(8)], Options())
    assert [decide(o).verdict for o in judged] == [Verdict.PROVED, Verdict.PROVED]
    stale = dataclasses.replace(exchange(8), findings=(STALE,))
    judged = across_ranks([exchange(4), stale], Options())
    assert decide(judged[1]).verdict is Verdict.BUG


def test_a_model_matched_only_at_p1_condemns_no_clean_p() -> None:
    """At P=1 every model is the identity: a custom collective is not condemned by it."""
    one = outcome(1, io=io(np.ones((1, 4), np.float32), np.ones((1, 4), np.float32)))
    one = dataclasses.replace(one, model="allreduce-sum")
    custom = outcome(2, io=io(np.zeros((2, 4), np.float32), np.ones((2, 4), np.float32)))
    judged = across_ranks([one, custom], Options())
    assert decide(judged[1]).verdict is Verdict.PROVED
    stale = dataclasses.replace(custom, findings=(STALE,))
    judged = across_ranks([one, stale], Options())
    assert decide(judged[1]).verdict is Verdict.BUG
