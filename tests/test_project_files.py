"""Real PyPTO files as their repository lays them out (issue 11): helpers imported by
project-rooted names, factories built in such helpers with string annotations, and
factory parameters that are sizes rather than the rank count."""

from __future__ import annotations

import sys
from pathlib import Path

import racecheck
from racecheck import FindingKind, Verdict

FIXTURES = Path(__file__).parent / "fixtures"
BUILDERS = FIXTURES / "rcproject" / "suite" / "builders.py"


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_factory_imported_from_the_project_is_checked_at_the_helpers_lines() -> None:
    report = racecheck.verify(str(FIXTURES / "rcproject" / "suite" / "test_shift.py"), ranks="2..3")
    assert not report.errors
    verdicts = {(result.program, result.ranks): result.verdict for result in report.results}
    assert verdicts == {
        ("build_shift[fenced=True]", 2): Verdict.PROVED,
        ("build_shift[fenced=True]", 3): Verdict.PROVED,
        ("build_shift[fenced=False]", 2): Verdict.BUG,
        ("build_shift[fenced=False]", 3): Verdict.BUG,
    }
    bug = next(result for result in report.results if result.verdict is Verdict.BUG)
    (finding,) = bug.findings
    assert finding.kind is FindingKind.RACE
    load, store = _line(BUILDERS, "remote_load(data"), _line(BUILDERS, "[0, 0], data)")
    assert {(site.file, site.line) for site in finding.locations} == {
        (str(BUILDERS), load),
        (str(BUILDERS), store),
    }
    assert "rcproject" not in sys.modules  # the project's modules leave with the check


def test_a_keyword_only_size_with_a_default_is_not_the_rank_count() -> None:
    report = racecheck.verify(str(FIXTURES / "sized_by_default.py"), ranks="2..3")
    assert [(result.ranks, result.verdict) for result in report.results] == [
        (2, Verdict.PROVED),
        (3, Verdict.PROVED),
    ]
    assert {result.rank_param for result in report.results} == {None}
