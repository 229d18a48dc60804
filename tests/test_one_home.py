"""Every rule has one home: these tests pin the registries and shared rules that the
rest of racecheck reads instead of keeping copies."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from racecheck.check import check
from racecheck.findings import (
    FINDING_CODES,
    FileVerdict,
    FindingCode,
    FindingKind,
    ProgramResult,
    RaceDetail,
    Report,
    Severity,
    Verdict,
    file_verdict,
)
from racecheck.options import Options
from racecheck.report.json import report_to_json
from racecheck.report.sarif import _driver


def test_every_finding_code_has_one_record_and_kind_and_detail_pick_it() -> None:
    assert set(FINDING_CODES) == set(FindingCode)
    for code, record in FINDING_CODES.items():
        assert record.code is code
        assert FindingCode.of(record.kind, record.detail) is code
    assert FindingCode.of(FindingKind.DEADLOCK, "anything") is FindingCode.DEADLOCK
    races = {r.detail for r in FINDING_CODES.values() if r.kind is FindingKind.RACE}
    assert races == {detail.value for detail in RaceDetail}


def test_sarif_rules_read_the_registry() -> None:
    rules = {rule["id"]: rule for rule in _driver()["rules"]}
    for code, record in FINDING_CODES.items():
        assert rules[code.value]["shortDescription"]["text"] == record.rule
        assert rules[code.value]["defaultConfiguration"]["level"] == record.severity.value
    assert rules["stale-read"]["defaultConfiguration"]["level"] == Severity.WARNING.value


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_proved_p_beside_a_skipped_p_makes_the_file_proved() -> None:
    """Example 11 rejects P=5 by its own rule and is proved at P=4: the file is proved,
    in the JSON verdict and the exit status alike (the verdict said `skipped`)."""
    report = check(str(EXAMPLES / "11_allreduce_two_phase.py"), Options(ranks=(4, 5)))
    assert [r.verdict for r in report.results] == [Verdict.PROVED, Verdict.SKIPPED]
    document = report_to_json(report)
    assert (document["verdict"], document["exit_code"]) == ("proved", 0)


def _report(*verdicts: Verdict, errors: tuple[str, ...] = ()) -> Report:
    results = tuple(ProgramResult(program="p", ranks=p, verdict=v) for p, v in enumerate(verdicts))
    return Report(file="f.py", results=results, errors=errors)


@pytest.mark.parametrize(
    ("report", "verdict"),
    [
        (_report(Verdict.PROVED, Verdict.BUG, Verdict.UNKNOWN), FileVerdict.BUG),
        (_report(Verdict.PROVED, Verdict.UNKNOWN), FileVerdict.UNKNOWN),
        (_report(Verdict.PROVED, errors=("f.py:3: error: x",)), FileVerdict.UNKNOWN),
        (_report(errors=("f.py: error: x",)), FileVerdict.ERROR),
        (_report(Verdict.SKIPPED, Verdict.PROVED), FileVerdict.PROVED),
        (_report(Verdict.SKIPPED), FileVerdict.SKIPPED),
        (_report(), FileVerdict.SKIPPED),
    ],
)
def test_one_rule_gives_the_file_verdict_and_the_exit_status(
    report: Report, verdict: FileVerdict
) -> None:
    assert file_verdict(report) is verdict
    assert report.exit_code == {FileVerdict.BUG: 1, FileVerdict.PROVED: 0}.get(verdict, 2)


def test_an_error_only_report_fits_the_schema() -> None:
    schema = json.loads(
        (Path(__file__).resolve().parent.parent / "docs" / "report.schema.json").read_text()
    )
    document = report_to_json(_report(errors=("gone.py: error: no such file",)))
    assert document["verdict"] == "error"
    jsonschema.Draft202012Validator(schema).validate(document)
