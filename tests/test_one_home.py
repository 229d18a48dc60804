"""Every rule has one home: these tests pin the registries and shared rules that the
rest of racecheck reads instead of keeping copies."""

from __future__ import annotations

from racecheck.findings import FINDING_CODES, FindingCode, FindingKind, RaceDetail, Severity
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
