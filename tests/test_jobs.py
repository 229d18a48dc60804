"""`--jobs N`: the (file, program, P) units run in worker processes, and every report —
text, JSON, SARIF, HTML, errors and exit status — is the one `--jobs 1` gives, timings
aside (issue 13)."""

from __future__ import annotations

import dataclasses
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import racecheck
from racecheck import pipeline as check_module
from racecheck.cli import main
from racecheck.errors import UsageError
from racecheck.findings import ProgramResult, Report, Verdict
from racecheck.options import Options, machine_cores
from racecheck.pipeline import check

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHIFT = (Path(__file__).parent / "fixtures" / "shift_factory.py").read_text()
MESH = str(EXAMPLES / "08_allreduce_mesh.py")
NO_BARRIER = str(EXAMPLES / "09_allreduce_mesh_bug_no_barrier.py")
SET_RESET = str(EXAMPLES / "05_shift_counter_barrier_bug_set_reset.py")
JOBS = ("1", "2", "3")


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    code: int
    out: str
    err: str
    html: str


def _untimed(text: str) -> str:
    """The report without its timings, the one part that differs from run to run."""
    text = re.sub(r'"seconds": [0-9.e-]+', '"seconds": T', text)
    return re.sub(r"\b\d+\.\d+s\b", "Ts", text)


def _run(tmp_path: Path, argv: list[str], jobs: str) -> Run:
    out, err = io.StringIO(), io.StringIO()
    html = tmp_path / f"report-{jobs}.html"
    with_html = ["--html", str(html)] if "--html" in argv else []
    argv = [arg for arg in argv if arg != "--html"]
    code = main([*argv, *with_html, "--no-color", "--jobs", jobs], stdout=out, stderr=err)
    page = html.read_text() if with_html else ""
    return Run(
        code=code, out=_untimed(out.getvalue()), err=_untimed(err.getvalue()), html=_untimed(page)
    )


def _same_for_every_jobs(tmp_path: Path, argv: list[str]) -> Run:
    inline, *pooled = (_run(tmp_path, argv, jobs) for jobs in JOBS)
    for run in pooled:
        assert run == inline
    return inline


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["verify", MESH, "--ranks", "2..6"], 0),
        (
            [
                "verify",
                MESH,
                "--ranks",
                "2..4",
                "--expect",
                f"{ROOT}/models/allreduce_sum_by_hand.py:allreduce_sum",
            ],
            0,
        ),
        (["verify", NO_BARRIER, "--ranks", "2..5", "--format", "json"], 1),
        (["verify", NO_BARRIER, "--ranks", "2..4", "--format", "sarif", "--html"], 1),
        (["verify", SET_RESET, "--ranks", "all", "--fallback", "2..4", "--format", "json"], 1),
        (["verify", SET_RESET, "--ranks", "2..4", "--repeat", "2"], 1),
        (["verify", str(EXAMPLES / "71_row_count_last_set_bug_unordered_sets.py")], 1),
    ],
)
def test_every_report_is_the_same_for_every_jobs(tmp_path, argv, code) -> None:
    run = _same_for_every_jobs(tmp_path, argv)
    assert run.code == code
    if "sarif" not in argv:
        assert "P=4" in run.out or '"ranks": 4' in run.out
    if "--html" in argv:
        assert "MeshAllreduceNoBarrier" in run.html


MEMOISED = str(Path(__file__).parent / "fixtures" / "memoised_factory.py")


@pytest.mark.parametrize("ranks", ["2..4", "all"])
def test_a_factory_that_memoises_its_program_gets_a_fresh_import_per_unit(tmp_path, ranks) -> None:
    """The factory hands its first program to every later call in one module: each unit
    (and each symbolic path) imports the file afresh, so P = 3 checks the 3-rank program
    whatever --jobs says, and --ranks all proves it without an internal error."""
    run = _same_for_every_jobs(tmp_path, ["verify", MEMOISED, "--ranks", ranks])
    assert run.code == 0 and not run.err
    if ranks == "all":
        assert "P>=2  proved" in run.out and "every P >= 2" in run.out
        return
    direct = racecheck.verify(str(EXAMPLES / "01_shift_builtin_barrier.py"), ranks="2..4")
    events = {result.ranks: result.events for result in direct.results}
    assert re.findall(r"P=(\d)  proved  (\d+) events", run.out) == [
        (str(p), str(n)) for p, n in events.items()
    ]


def test_a_multi_file_run_reports_each_file_in_order(tmp_path) -> None:
    run = _same_for_every_jobs(tmp_path, ["verify", NO_BARRIER, MESH, "--ranks", "2..4"])
    bug, proved = run.out.index("MeshAllreduceNoBarrier  P=2"), run.out.index("MeshAllreduce  P=2")
    assert bug < proved
    assert [int(p) for p in re.findall(r"MeshAllreduce  P=(\d)", run.out)] == [2, 3, 4]


def test_a_user_error_in_a_worker_is_the_same_error_and_exit_status(tmp_path) -> None:
    broadcast = str(EXAMPLES / "07_broadcast.py")
    argv = ["verify", broadcast, "--ranks", "2..5", "--expect", "broadcast-root3"]
    run = _same_for_every_jobs(tmp_path, argv)
    assert run.code == 2 and run.out == ""
    assert run.err == "racecheck: error: --expect broadcast-root3 does not apply at P=2:" + (
        " root 3 is not a rank of 2\n"
    )


def test_an_internal_error_in_a_worker_keeps_its_line_and_debug_traceback(
    tmp_path, monkeypatch
) -> None:
    def broken(spec, ranks, options):
        raise RuntimeError(f"broken at P={ranks}")

    monkeypatch.setattr(check_module, "_check_one", broken)  # the workers fork with it
    for jobs in JOBS:
        out, err = io.StringIO(), io.StringIO()
        argv = ["verify", MESH, "--ranks", "2..4", "--jobs", jobs, "--debug"]
        assert main(argv, stdout=out, stderr=err) == 2
        *traceback, line = err.getvalue().splitlines()
        assert line.startswith("racecheck: internal error: RuntimeError: broken at P=2 ")
        assert any("raise RuntimeError" in text for text in traceback)


def _shift_file(tmp_path: Path, old: str, new: str) -> str:
    assert old in SHIFT
    path = tmp_path / "shift.py"
    path.write_text(SHIFT.replace(old, new))
    return str(path)


def test_timeout_bounds_each_unit_in_its_worker(tmp_path) -> None:
    guard = "    if SIZE % nr != 0:\n"
    path = _shift_file(tmp_path, guard, "    while nr == 3:\n        pass\n" + guard)
    argv = ["verify", path, "--ranks", "2..4", "--arg", "use_builtin=true", "--timeout", "1"]
    run = _same_for_every_jobs(tmp_path, argv)
    assert run.code == 2
    assert re.findall(r"P=(\d)  (\w+)", run.out) == [
        ("2", "proved"),
        ("3", "unknown"),
        ("4", "proved"),
    ]
    loop = SHIFT.splitlines().index("def build_shift(nr: int, use_builtin: bool):") + 2
    (line,) = run.err.splitlines()
    assert any(
        line.startswith(f"{path}:{at}: error: building build_shift did not finish")
        for at in (loop, loop + 1)
    )


def test_what_user_code_prints_while_checked_comes_out_once_in_order(tmp_path, capfd) -> None:
    entry = "            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)\n"
    path = _shift_file(tmp_path, entry, '            print("host entry at", nr)\n' + entry)
    options = Options(ranks=(2, 3, 4), programs=("build_shift",), args=(("use_builtin", "1"),))
    printed = []
    for jobs in (1, 2):
        report = check(path, dataclasses.replace(options, jobs=jobs))
        assert [result.verdict for result in report.results] == [Verdict.PROVED] * 3
        printed.append(capfd.readouterr().out)
    inline, pooled = printed
    assert inline == pooled
    assert [line.split()[-1] for line in dict.fromkeys(inline.splitlines())] == ["2", "3", "4"]


@pytest.mark.parametrize("jobs", [0, -1, True, 1.5, "2"])
def test_jobs_must_be_a_whole_number_of_at_least_1(jobs) -> None:
    with pytest.raises(UsageError, match="jobs .*: must be a whole number of at least 1"):
        Options(jobs=jobs)


def test_jobs_defaults_to_the_cores_of_the_process() -> None:
    assert Options().jobs == machine_cores() >= 1


@pytest.mark.parametrize(("value", "said"), [("0", "jobs 0"), ("x", "jobs 'x'")])
def test_a_bad_jobs_flag_is_a_usage_error(value, said) -> None:
    err = io.StringIO()
    assert main(["verify", MESH, "--jobs", value], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue().startswith(
        f"racecheck: error: {said}: must be a whole number of at least 1"
    )


def test_the_api_takes_jobs_and_validates_it() -> None:
    def untimed(report: Report) -> tuple[ProgramResult, ...]:
        return tuple(dataclasses.replace(result, seconds=0.0) for result in report.results)

    inline = racecheck.verify(NO_BARRIER, ranks="2..4", jobs=1)
    assert untimed(racecheck.verify(NO_BARRIER, ranks="2..4", jobs=2)) == untimed(inline)
    assert [result.verdict for result in inline.results] == [Verdict.BUG] * 3
    with pytest.raises(UsageError, match="jobs 0"):
        racecheck.verify(MESH, jobs=0)


class _Forked(Exception):
    pass


def test_a_check_of_one_unit_forks_no_worker_and_several_units_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pool costs a fork and a teardown of its processes (~0.15 s a check, most of
    the test suite's checks): it is made only when there are units to share."""
    import racecheck.workers as workers

    def refused(*args: object, **kwargs: object) -> None:
        raise _Forked

    monkeypatch.setattr(workers, "ProcessPoolExecutor", refused)
    (result,) = racecheck.verify(MESH, ranks=[3], jobs=2).results
    assert result.verdict is Verdict.PROVED
    with pytest.raises(_Forked):
        racecheck.verify(MESH, ranks="2..3", jobs=2)
