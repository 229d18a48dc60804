"""Driver-only names (docs/model.md) are inert: files that import them load, and a
program with no communication is proved; using them while tracing is unsupported."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.dsl.modules import _PytestStandIn
from racecheck.errors import UnsupportedConstruct

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_file_importing_every_driver_name_without_communication_is_proved() -> None:
    report = racecheck.verify(str(EXAMPLES / "43_driver_names_no_communication.py"), ranks="1..2")
    assert not report.errors
    assert {result.verdict for result in report.results} == {racecheck.Verdict.PROVED}
    assert [result.program for result in report.results] == ["build_copy", "build_copy"]


def test_driver_names_used_while_tracing_are_unsupported_at_their_line() -> None:
    path = FIXTURES / "driver_in_trace.py"
    report = racecheck.verify(str(path), ranks="2", programs=["build_config_in_kernel"])
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    line = next(
        n for n, text in enumerate(path.read_text().splitlines(), start=1) if "RunConfig(" in text
    )
    assert report.errors[0].startswith(f"{path}:{line}: error:")


def test_a_sub_worker_that_only_reads_is_not_run_and_said_so() -> None:
    report = racecheck.verify(
        str(FIXTURES / "driver_in_trace.py"), ranks="2", programs=["build_sub_worker_call"]
    )
    (result,) = report.results
    assert result.verdict is racecheck.Verdict.PROVED
    assert any(note.startswith("log_step() is a host sub-worker callback") for note in result.notes)


def test_the_pytest_stand_in_leaves_test_functions_alone() -> None:
    stand_in = _PytestStandIn()

    @stand_in.mark.parametrize("n_ranks", [stand_in.param(2, id="p2")])
    @stand_in.fixture
    def test_something(n_ranks: int) -> int:
        return n_ranks

    assert test_something(3) == 3
    assert stand_in.param(2, id="p2") == (2,)
    with pytest.raises(UnsupportedConstruct, match="never runs"):
        stand_in.main([])
