"""Host index errors are out-of-bounds bugs, a P is skipped only by the program's own
rule, exits and runaway user code are errors, never a hang or a skip (issue 10.5, 10.10)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from racecheck.errors import LoadError
from racecheck.findings import FindingKind, Verdict
from racecheck.load import load_file
from racecheck.options import Options
from racecheck.pipeline import check
from racecheck.report.phrases import describe_finding

PROGRAM = """
import os
import sys

import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 8
ROWS = {rows}


def build_copy(nr: int):
    {factory}

    @pl.program
    class Copy:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            {kernel}
            row = pl.load(x, [0, 0], [1, SIZE])
            y = pl.store(row, [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def copy(
            self,
            x: pl.Tensor[[ROWS or nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            {host}
            for r in pl.range(pld.world_size()):
                self.step(x[{row}], y[r], device=r)  # the dispatch
            return y

    return Copy
"""


def _write(
    tmp_path: Path, *, row="r", rows=0, factory="pass", kernel="pass", host="pass", head=""
) -> str:
    path = tmp_path / "program.py"
    source = PROGRAM.format(row=row, rows=rows, factory=factory, kernel=kernel, host=host)
    path.write_text(textwrap.dedent(head) + source)
    return str(path)


def _line(path: str, text: str) -> int:
    return next(n for n, line in enumerate(Path(path).read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize(("row", "ranks"), [("r ^ 1", 3), ("r + 1", 2)])
def test_a_host_row_out_of_range_is_an_out_of_bounds_bug(tmp_path, row, ranks) -> None:
    path = _write(tmp_path, row=row)
    (result,) = check(path, Options(ranks=(ranks,))).results
    assert result.verdict is Verdict.BUG
    (finding,) = result.findings
    assert finding.kind is FindingKind.OUT_OF_BOUNDS
    assert [loc.line for loc in finding.locations] == [_line(path, "# the dispatch")]
    assert describe_finding(finding).startswith(f"the host: row {ranks} of x")


def test_x_xor_1_is_fine_at_even_rank_counts(tmp_path) -> None:
    (result,) = check(_write(tmp_path, row="r ^ 1"), Options(ranks=(2,))).results
    assert result.verdict is Verdict.PROVED


def test_a_host_tensor_with_a_fixed_row_count_other_than_p_is_skipped(tmp_path) -> None:
    (result,) = check(_write(tmp_path, rows=4), Options(ranks=(3,))).results
    assert result.verdict is Verdict.SKIPPED
    assert "has 4 rows" in result.message


def test_the_programs_own_raise_skips_that_p(tmp_path) -> None:
    factory = 'if nr % 2:\n        raise ValueError("needs an even rank count")'
    (result,) = check(_write(tmp_path, factory=factory), Options(ranks=(3,))).results
    assert (result.verdict, result.message) == (Verdict.SKIPPED, "needs an even rank count")


@pytest.mark.parametrize(
    ("factory", "kernel", "raised"),
    [
        ('int("three")', "pass", "ValueError"),
        ("pass", 'raise ValueError("bad tile")', "ValueError"),
        ("pass", 'raise RuntimeError("bad tile")', "RuntimeError"),
        ("def deep(n):\n        return deep(n + 1)\n    deep(0)", "pass", "RecursionError"),
        ("pass", "sys.exit(3)", "sys.exit"),
        ("pass", "os._exit(3)", "sys.exit/os._exit (3)"),
    ],
)
def test_what_user_code_raises_by_itself_is_an_error_not_a_skip(
    tmp_path, factory, kernel, raised
) -> None:
    report = check(_write(tmp_path, factory=factory, kernel=kernel), Options(ranks=(2,)))
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN
    assert raised in result.message
    assert report.exit_code == 2


def test_exiting_at_import_is_a_load_error(tmp_path) -> None:
    path = _write(tmp_path, head="import os\nos._exit(4)\n")
    with pytest.raises(LoadError, match="os._exit"):
        load_file(path)


def test_a_file_with_a_utf8_bom_loads(tmp_path) -> None:
    path = Path(_write(tmp_path))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    (result,) = check(str(path), Options(ranks=(2,))).results
    assert result.verdict is Verdict.PROVED


def test_a_file_that_loops_at_import_is_a_load_error_within_the_timeout(tmp_path) -> None:
    path = _write(tmp_path, head="while True:\n    pass\n")
    with pytest.raises(LoadError, match="did not finish within --timeout") as caught:
        check(path, Options(ranks=(2,), timeout=0.5))
    assert caught.value.line in (1, 2)  # the loop's `while` or its body


@pytest.mark.parametrize(
    ("where", "indent", "said"),
    [("factory", 8, "building build_copy"), ("host", 16, "the host entry of")],
)
def test_user_code_that_loops_ends_in_an_error_naming_its_line(
    tmp_path, where, indent, said
) -> None:
    path = _write(tmp_path, **{where: "while True:\n" + " " * indent + "pass"})
    report = check(path, Options(ranks=(2,), timeout=0.5))
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN
    assert said in result.message and "did not finish within --timeout" in result.message
    loop = _line(path, "while True:")
    assert any(f":{line}:" in report.errors[0] for line in (loop, loop + 1))


@pytest.mark.parametrize("head", ["", "raise ValueError('at import')\n"])
def test_a_check_leaves_the_process_as_it_found_it(tmp_path, head) -> None:
    import sys

    from racecheck.dsl.location import user_files

    before_files, before_modules = user_files(), set(sys.modules)
    path = _write(tmp_path, head=head)
    try:
        check(path, Options(ranks=(2,)))
    except LoadError:
        assert head
    assert user_files() == before_files
    left = set(sys.modules) - before_modules
    assert {name for name in left if name.startswith(("racecheck_user_", "pypto"))} == set()


def test_an_access_after_defer_wait_in_its_task_is_unknown_naming_the_line() -> None:
    """PyPTO retires a deferred wait's task at once: the kernel's later read is not
    ordered by the wait, so it must never be checked as if it were."""
    fixture = Path(__file__).parent / "fixtures" / "defer_then_read.py"
    report = check(str(fixture), Options(ranks=(2, 3)))
    assert {result.verdict for result in report.results} == {Verdict.UNKNOWN}
    (error,) = report.errors
    line = next(
        n for n, text in enumerate(fixture.read_text().splitlines(), 1) if "pl.load(inbox" in text
    )
    assert error.startswith(f"{fixture}:{line}: ") and "after pld.system.defer_wait" in error
