"""The command line in-process, with the pipeline replaced by a recorder.

These tests pin down the CLI's own decisions: how flags become Options, which renderer
runs, the exit status, and how every failure becomes one line on stderr. The real
pipeline on real files is exercised in test_cli_end_to_end.py.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import subprocess
import sys
import tomllib
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from report_samples import mixed_report, proved_report

from racecheck.cli import main
from racecheck.errors import LoadError
from racecheck.findings import Report
from racecheck.options import EngineChoice, Options


class TerminalStream(io.StringIO):
    def isatty(self) -> bool:
        return True


@dataclass
class Recorder:
    """Stands in for racecheck.pipeline: records each call, answers with `report` or raises."""

    report: Report = field(default_factory=proved_report)
    error: BaseException | None = None
    calls: list[tuple[str, Options, object]] = field(default_factory=list)

    def check(self, path: str, options: Options, *, progress: object = None) -> Report:
        self.calls.append((path, options, progress))
        if self.error is not None:
            raise self.error
        return self.report


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    module = types.ModuleType("racecheck.pipeline")
    module.check = recorder.check  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "racecheck.pipeline", module)
    return recorder


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def run(*argv: str, stdout: io.StringIO | None = None, stderr: io.StringIO | None = None) -> Run:
    out, err = stdout or io.StringIO(), stderr or io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return Run(code=code, out=out.getvalue(), err=err.getvalue())


def assert_one_line_failure(result: Run) -> None:
    assert result.code == 2
    assert len(result.err.splitlines()) == 1, result.err
    assert "Traceback" not in result.err
    assert result.out == ""


def test_flags_become_options(pipeline: Recorder) -> None:
    run(
        "verify", "f.py", "--ranks", "2,4..5", "--engine", "smt", "--program", "A",
        "--program", "B", "--arg", "mode=ring", "--arg", "dtype=pl.FP16", "--repeat", "3",
        "--expect", "allreduce-sum", "--timeout", "2.5", "--seed", "7",
    )  # fmt: skip
    [(path, options, progress)] = pipeline.calls
    assert path == "f.py"
    assert options == Options(
        ranks=(2, 4, 5),
        engine=EngineChoice.SMT,
        programs=("A", "B"),
        args=(("mode", "ring"), ("dtype", "pl.FP16")),
        repeat=3,
        expect="allreduce-sum",
        timeout=2.5,
        seed=7,
    )
    assert progress is None  # stderr is not a terminal


def test_defaults(pipeline: Recorder) -> None:
    run("verify", "f.py")
    [(_, options, _)] = pipeline.calls
    assert options == Options()


@pytest.mark.parametrize(
    ("report", "code"),
    [(proved_report(), 0), (mixed_report(), 1), (Report(file="f.py"), 2)],
)
def test_exit_status_is_the_reports(pipeline: Recorder, report: Report, code: int) -> None:
    pipeline.report = report
    assert run("verify", "f.py").code == code


def test_text_report_on_stdout(pipeline: Recorder) -> None:
    pipeline.report = mixed_report()
    result = run("verify", "f.py")
    assert "  MeshAllreduce  P=2  proved" in result.out
    assert "error: [race-raw] data race (read-after-write)" in result.out
    assert result.err == ""


@pytest.mark.parametrize("output_format", ["json", "sarif"])
def test_machine_formats_print_one_json_document(pipeline: Recorder, output_format: str) -> None:
    pipeline.report = mixed_report()
    result = run("verify", "f.py", "--format", output_format)
    document = json.loads(result.out)
    assert document.get("schema") == 1 or document.get("version") == "2.1.0"
    assert result.code == 1


def test_colour_follows_the_terminal_and_no_color(pipeline: Recorder) -> None:
    assert "\033[" in run("verify", "f.py", stdout=TerminalStream()).out
    assert "\033[" not in run("verify", "f.py", "--no-color", stdout=TerminalStream()).out
    assert "\033[" not in run("verify", "f.py").out


def test_progress_only_on_a_terminal(pipeline: Recorder) -> None:
    result = run("verify", "f.py", stderr=TerminalStream())
    [(_, _, progress)] = pipeline.calls
    assert callable(progress)
    assert "\033[K" in result.err


def test_progress_names_program_and_rank_count() -> None:
    from racecheck.cli import _terminal_progress

    stream = io.StringIO()
    show: Callable[[str, int], None] = _terminal_progress(stream)
    show("MeshAllreduce", 4)
    assert "checking MeshAllreduce at P=4" in stream.getvalue()


def test_user_error_is_one_located_line(pipeline: Recorder) -> None:
    pipeline.error = LoadError("invalid syntax", file="bad.py", line=3)
    result = run("verify", "bad.py")
    assert_one_line_failure(result)
    assert result.err == "bad.py:3: error: invalid syntax\n"


def test_load_error_in_json_mode_is_a_stderr_line_and_one_json_object(
    pipeline: Recorder,
) -> None:
    pipeline.error = LoadError("no such file", file="gone.py")
    result = run("verify", "gone.py", "--format", "json")
    assert result.code == 2
    assert result.err == "gone.py: error: no such file\n"
    printed = json.loads(result.out)
    assert printed["file"] == "gone.py"
    assert (printed["verdict"], printed["exit_code"]) == ("error", 2)
    assert printed["results"] == []
    assert printed["errors"] == ["gone.py: error: no such file"]


def test_usage_error_in_json_mode_is_one_json_object() -> None:
    result = run("verify", "f.py", "--format", "json", "--ranks", "0")
    assert result.code == 2
    printed = json.loads(result.out)
    assert printed["exit_code"] == 2 and "ranks '0'" in printed["errors"][0]


@pytest.mark.parametrize("output", ["json", "text"])
def test_ctrl_c_is_exit_2_and_under_json_one_json_object(pipeline: Recorder, output: str) -> None:
    pipeline.error = KeyboardInterrupt()
    result = run("verify", "f.py", "--format", output)
    assert result.code == 2
    assert result.err == "racecheck: interrupted (Ctrl-C); nothing was proved\n"
    if output == "json":
        printed = json.loads(result.out)
        assert printed["exit_code"] == 2 and "interrupted" in printed["errors"][0]
        assert printed["results"] == []
    else:
        assert result.out == ""


def test_internal_error_is_never_a_verdict(pipeline: Recorder) -> None:
    pipeline.error = KeyError("boom")
    result = run("verify", "f.py")
    assert_one_line_failure(result)
    assert "internal error" in result.err and "--debug" in result.err


def test_debug_shows_the_traceback(pipeline: Recorder) -> None:
    pipeline.error = KeyError("boom")
    result = run("verify", "f.py", "--debug")
    assert result.code == 2
    assert "Traceback" in result.err
    assert result.err.splitlines()[-1].startswith("racecheck: internal error: KeyError")


def test_html_report_is_written(pipeline: Recorder, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = run("verify", "f.py", "--html", str(page))
    assert result.code == 0
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_several_files_are_checked_in_turn_and_exit_with_the_worst(pipeline: Recorder) -> None:
    result = run("verify", "a.py", "b.py", "--ranks", "2")
    assert [call[0] for call in pipeline.calls] == ["a.py", "b.py"]
    assert result.code == 0


def test_json_describes_one_file_only(pipeline: Recorder) -> None:
    result = run("verify", "a.py", "b.py", "--format", "json")
    assert result.code == 2 and "give one FILE" in result.err
    assert "give one FILE" in json.loads(result.out)["errors"][0]
    assert pipeline.calls == []


def test_help_goes_to_stdout() -> None:
    result = run("verify", "--help")
    assert result.code == 0
    assert "--ranks" in result.out and "--engine" in result.out


def test_version_prints_the_installed_version_on_stdout() -> None:
    result = run("--version")
    declared = tomllib.loads(
        (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    )["project"]["version"]
    assert (result.code, result.out, result.err) == (0, f"racecheck {declared}\n", "")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["verify", "f.py", "--ranks", "0"], "between 1 and"),
        (["verify", "f.py", "--ranks", "8..2"], "is empty"),
        (["verify", "f.py", "--ranks", "x"], "not a rank count"),
        (["verify", "f.py", "--ranks", ""], "not a rank count"),
        (["verify", "f.py", "--engine", "z3"], "unknown engine 'z3'"),
        (["verify", "f.py", "--format", "xml"], "invalid choice: 'xml'"),
        (["verify", "f.py", "--repeat", "0"], "repeat 0: must be a whole number of at least 1"),
        (["verify", "f.py", "--timeout", "-1"], "positive number of seconds"),
        (["verify", "f.py", "--timeout", "nan"], "positive number of seconds"),
        (["verify", "f.py", "--seed", "x"], "whole number"),
        (["verify", "f.py", "--arg", "nodefault"], "expected NAME=VALUE"),
        (["verify", "f.py", "--bogus"], "unrecognized arguments: --bogus"),
        (["verify"], "required: FILE"),
        ([], "required: COMMAND"),
        (["prove", "f.py"], "invalid choice: 'prove'"),
        (["trace", "f.py"], "required: --ranks"),
        (["trace", "f.py", "--ranks", "2..4"], "give one rank count"),
    ],
)
def test_bad_flags(pipeline: Recorder, argv: list[str], says: str) -> None:
    result = run(*argv)
    assert_one_line_failure(result)
    assert result.err.startswith("racecheck: error: ")
    assert says in result.err
    assert pipeline.calls == []


def test_module_entry_point_exits_with_the_status() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "racecheck", "verify", "f.py", "--ranks", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert completed.stderr.startswith("racecheck: error: ranks '0'")
    assert completed.stdout == ""


@pytest.mark.parametrize("command", ["verify", "trace", "export"])
def test_help_shows_every_option_with_its_default(command: str) -> None:
    from racecheck.cli import _build_parser

    parser = _build_parser()
    (choices,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub = choices.choices[command]
    for action in sub._actions:
        if action.option_strings and action.dest != "help":
            assert action.help and ("default:" in action.help or "(required)" in action.help), (
                action.option_strings
            )
    text = " ".join(run(command, "--help").out.split())
    defaults = Options()
    assert "(default: 1)" in text and "(default: 0)" in text  # --repeat, --seed
    if command == "verify":
        assert defaults.timeout == math.inf and "(default: 2..8)" in text
        assert "--timeout S seconds per program and P (default: none" in text
        assert f"(default: {defaults.engine.value})" in text
