"""Model-library files as pypto-lib lays them out (issue 22): P fixed at import by the
file's own command line, a shared `config` module rewritten at import, environment
switches, and helpers imported from the project root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import racecheck
from racecheck import Verdict
from racecheck.cli import main
from racecheck.errors import LoadError, UsageError

PROJECT = Path(__file__).parent / "fixtures" / "rcmodels"
MODEL = PROJECT / "models" / "flash" / "shift.py"


def _verdicts(report: racecheck.Report) -> dict[int, Verdict]:
    return {result.ranks: result.verdict for result in report.results}


def test_without_its_command_line_the_file_is_written_for_its_default_p() -> None:
    report = racecheck.verify(str(MODEL), ranks="2..4", jobs=1)
    assert _verdicts(report) == {2: Verdict.PROVED, 3: Verdict.SKIPPED, 4: Verdict.SKIPPED}
    assert report.imported_with == (f"import root: {PROJECT}",)  # `from golden import`


@pytest.mark.parametrize("jobs", [1, 2])
def test_argv_per_p_imports_the_file_and_its_config_afresh_at_each_p(jobs: int) -> None:
    report = racecheck.verify(str(MODEL), ranks="2..4", argv=["--ep", "{P}"], jobs=jobs)
    assert _verdicts(report) == {2: Verdict.PROVED, 3: Verdict.SKIPPED, 4: Verdict.PROVED}
    skipped = next(result for result in report.results if result.ranks == 3)
    assert "--ep must be 2 or 4, got 3" in (skipped.message or "")
    assert "config" not in sys.modules and "golden" not in sys.modules
    assert sys.argv[1:] != ["--ep", "4"]  # the process's own command line is restored


def test_env_reaches_the_import_and_is_restored() -> None:
    report = racecheck.verify(
        str(MODEL), ranks="2,4", argv=["--ep", "{P}"], env={"RC_FIXTURE_FENCE": "0"}, jobs=1
    )
    assert _verdicts(report) == {2: Verdict.BUG, 4: Verdict.BUG}
    assert "RC_FIXTURE_FENCE" not in os.environ
    assert report.imported_with == (
        "argv: --ep {P}",
        "env: RC_FIXTURE_FENCE=0",
        f"import root: {PROJECT}",
    )


def test_a_file_that_refuses_every_p_at_import_is_one_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["verify", "--ranks", "3", "--argv", "--ep {P}", "--jobs", "1", str(MODEL)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refuses every P" in err[0] and "--ep must be 2 or 4" in err[0]


def test_import_root_names_where_root_relative_imports_resolve(tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "shift.py"
    copy.parent.mkdir()
    copy.write_text(MODEL.read_text())
    (copy.parent / "config.py").write_text((MODEL.parent / "config.py").read_text())
    with pytest.raises(LoadError, match="No module named 'golden'"):
        racecheck.verify(str(copy), ranks="2", jobs=1)
    report = racecheck.verify(str(copy), ranks="2", jobs=1, import_root=str(PROJECT))
    assert _verdicts(report) == {2: Verdict.PROVED}


def test_the_text_report_says_what_the_file_was_imported_with(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["verify", "--ranks", "4", "--argv", "--ep {P}", "--env", "RC_FIXTURE_FENCE=1"]
    assert main([*argv, "--jobs", "1", "--no-color", str(MODEL)]) == 0
    out = capsys.readouterr().out
    assert "imported with argv: --ep {P}" in out
    assert "imported with env: RC_FIXTURE_FENCE=1" in out


@pytest.mark.parametrize(
    "flags",
    [["--env", "NOEQUALS"], ["--argv", "'unclosed"], ["--import-root", "/no/such/dir"]],
)
def test_bad_import_flags_are_usage_errors(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", *flags, str(MODEL)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_bad_import_options_are_rejected_by_the_api() -> None:
    with pytest.raises(UsageError):
        racecheck.verify(str(MODEL), env={"": "x"})


SHIFT = Path(__file__).parent.parent / "examples" / "02_ring_shift_p2p.py"
INLINE_SEND = """

@pl.jit.inline
def send_left(x, inbox, left):
    pld.tensor.put(inbox, left, x)


"""


@pytest.mark.parametrize("fenced", [True, False])
def test_an_inline_helper_called_from_a_kernel_is_spliced_into_it(
    tmp_path: Path, fenced: bool
) -> None:
    source = SHIFT.read_text()
    source = source.replace(
        "    pld.tensor.put(inbox, left, x)\n", "    send_left(x, inbox, left)\n"
    )
    source = source.replace("\n\n@pl.jit.incore\n", INLINE_SEND + "@pl.jit.incore\n", 1)
    if not fenced:
        source = source.replace(
            "    pld.system.wait(signal,", "    pass  # pld.system.wait(signal,"
        )
    variant = tmp_path / "inline_kernel.py"
    variant.write_text(source)
    report = racecheck.verify(str(variant), ranks="2..3", jobs=1)
    expected = Verdict.PROVED if fenced else Verdict.BUG
    assert {result.verdict for result in report.results} == {expected}


SPECS = PROJECT / "models" / "flash" / "specs.py"


def test_scalars_and_dynamic_dims_come_from_the_files_own_specs() -> None:
    report = racecheck.verify(str(SPECS), ranks="2", argv=["--ep", "{P}"], jobs=1)
    assert _verdicts(report) == {2: Verdict.PROVED}
    report = racecheck.verify(
        str(SPECS), ranks="2", argv=["--ep", "{P}"], args={"rows": 2, "ROWS": 2}, jobs=1
    )
    (result,) = report.results  # --arg wins over the spec: the file's own rule rejects it
    assert result.verdict is Verdict.SKIPPED and "states one row" in (result.message or "")
