"""The output contract on real files (issue 10.6, 10.7, 10.12): options that must not
change meaning silently, golden inputs, JSON for every outcome, several files, pipes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from test_cli_end_to_end import MESH, MESH_WITHOUT_BARRIER, write

import racecheck
from racecheck.cli import main
from racecheck.errors import UsageError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FENCE = str(EXAMPLES / "30_allreduce_mesh_bug_fence_off.py")
LENGTH_FIRST = str(EXAMPLES / "31_allreduce_mesh_length_first.py")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("spelling", ["false", "False", "no", "off", "0"])
def test_false_in_any_spelling_selects_the_buggy_variant(spelling: str) -> None:
    report = racecheck.verify(FENCE, ranks=[2], args={"fence": spelling})
    [result] = report.results
    assert result.verdict is racecheck.Verdict.BUG
    assert [f.code.value for f in result.findings] == ["race-raw"]
    assert result.program == "build_mesh" and result.rank_param == "nr"


def test_true_selects_the_fenced_variant() -> None:
    [result] = racecheck.verify(FENCE, ranks=[2], args={"fence": "yes"}).results
    assert (result.verdict, result.model) == (racecheck.Verdict.PROVED, "allreduce-sum")


def test_a_bool_parameter_rejects_other_words() -> None:
    code, _, err = run("verify", FENCE, "--ranks", "2", "--arg", "fence=maybe")
    assert code == 2 and "--arg fence=maybe: expected a bool" in err


def test_an_arg_naming_no_parameter_is_a_usage_error_listing_them() -> None:
    code, _, err = run("verify", FENCE, "--ranks", "2", "--arg", "fense=true")
    assert code == 2
    assert "--arg fense: no selected program has a parameter" in err
    assert "(parameters: fence)" in err


def test_the_rank_count_parameter_cannot_be_set_by_arg() -> None:
    code, _, err = run("verify", FENCE, "--ranks", "2", "--arg", "nr=4")
    assert code == 2 and "receives the rank count P through 'nr'" in err


GPUS_FACTORY = """
import pypto.language as pl
import pypto.language.distributed as pld


def build(gpus):
    @pl.jit.host
    def entry(x: pl.Tensor[[gpus, 4], pl.FP32], y: pl.Out[pl.Tensor[[gpus, 4], pl.FP32]]):
        pass

    return entry
"""


def test_rank_param_names_the_factory_parameter_that_gets_p(tmp_path: Path) -> None:
    path = write(tmp_path, "gpus.py", GPUS_FACTORY)
    code, _, err = run("verify", path, "--ranks", "2")
    assert code == 2 and "--rank-param gpus" in err
    code, out, _ = run("verify", path, "--ranks", "2..3", "--rank-param", "gpus", "--no-color")
    assert code == 0, out
    assert "note: build receives P through its parameter 'gpus'" in out
    report = racecheck.verify(path, ranks=[3], rank_param="gpus")
    assert [r.rank_param for r in report.results] == ["gpus"]
    for command in ("trace", "export"):
        code, out, _ = run(command, path, "--ranks", "3", "--rank-param", "gpus")
        assert code == 0 and "P=3" in out
    code, _, err = run("verify", path, "--ranks", "2", "--rank-param", "cpus")
    assert code == 2 and "--rank-param cpus: build() has no parameter" in err
    code, _, err = run("verify", LENGTH_FIRST, "--ranks", "2", "--rank-param", "nr")
    assert code == 2 and "--rank-param nr: no selected factory" in err


@pytest.mark.parametrize(
    ("keyword", "value", "words"),
    [
        ("repeat", 0, "repeat 0"),
        ("repeat", True, "repeat True"),
        ("ranks", [0], "rank counts must be"),
        ("ranks", [], "rank counts must be"),
        ("timeout", 0, "timeout 0"),
        ("timeout", float("nan"), "timeout nan"),
        ("seed", -1, "seed -1"),
        ("expect", "allreduce-avg", "unknown golden model"),
    ],
)
def test_the_api_validates_like_the_cli(keyword: str, value: object, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        racecheck.verify(FENCE, **{keyword: value})  # type: ignore[arg-type]


def test_golden_reads_the_data_input_not_a_leading_int32_length() -> None:
    report = racecheck.verify(LENGTH_FIRST, ranks=[2, 3], expect="allreduce-sum")
    assert [(r.verdict, r.model) for r in report.results] == [
        (racecheck.Verdict.PROVED, "allreduce-sum")
    ] * 2


def test_a_model_that_cannot_apply_at_p_is_a_usage_error() -> None:
    code, _, err = run("verify", LENGTH_FIRST, "--ranks", "3", "--expect", "broadcast-root5")
    assert code == 2
    assert "--expect broadcast-root5 does not apply at P=3: root 5 is not a rank of 3" in err


GOLDENS = """
import numpy as np


def raises(inputs):
    raise KeyError("no such key")


def short(inputs):
    return inputs[:1]


def not_at_three(inputs):
    from racecheck.models import ModelNotApplicable

    if len(inputs) == 3:
        raise ModelNotApplicable("three ranks do not split the row")
    return inputs.sum(axis=0, keepdims=True).repeat(len(inputs), axis=0)
"""


@pytest.mark.parametrize(
    ("function", "words"),
    [("raises", "raised KeyError"), ("short", "golden has leading dimension")],
)
def test_a_broken_user_golden_is_the_goldens_error(
    tmp_path: Path, function: str, words: str
) -> None:
    goldens = write(tmp_path, "goldens.py", GOLDENS)
    model = f"{goldens}:{function}"
    code, out, err = run("verify", LENGTH_FIRST, "--ranks", "2", "--expect", model)
    assert code == 2 and out == ""
    assert words in err and f"{function}" in err


def test_a_user_golden_that_does_not_apply_names_the_p(tmp_path: Path) -> None:
    """models/README.md: no wrong result, exit 2 naming the P and the golden's reason."""
    goldens = write(tmp_path, "goldens.py", GOLDENS)
    model = f"{goldens}:not_at_three"
    code, out, err = run("verify", LENGTH_FIRST, "--ranks", "2..3", "--expect", model)
    assert code == 2 and "wrong" not in out + err
    assert f"--expect {model} does not apply at P=3: three ranks do not split the row" in err


def test_json_reports_a_load_error_as_one_object(tmp_path: Path) -> None:
    code, out, err = run("verify", str(tmp_path / "gone.py"), "--format", "json")
    assert code == 2 and "error:" in err
    printed = json.loads(out)
    assert printed["verdict"] == "error" and printed["results"] == []
    assert printed["errors"] and "gone.py" in printed["errors"][0]


def test_a_bug_in_one_file_exits_1_even_if_another_fails_to_load(tmp_path: Path) -> None:
    buggy = write(tmp_path, "buggy.py", MESH_WITHOUT_BARRIER)
    broken = write(tmp_path, "broken.py", "def broken(:\n")
    correct = write(tmp_path, "correct.py", MESH)
    code, out, err = run("verify", broken, buggy, correct, "--ranks", "2", "--no-color")
    assert code == 1
    assert "broken.py:1: error: syntax error" in err
    assert "[race-raw]" in out and "proved" in out


def test_an_unwritable_html_path_is_a_usage_error_before_the_run(tmp_path: Path) -> None:
    target = tmp_path / "missing-folder" / "report.html"
    code, out, err = run("verify", FENCE, "--html", str(target))
    assert code == 2 and out == ""
    assert f"--html {target}: cannot write there" in err


class _ClosedPipe(io.StringIO):
    """stdout whose reader went away (`racecheck trace ... | head`)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("command", ["trace", "export"])
def test_output_into_a_closed_pipe_ends_quietly(command: str) -> None:
    err = io.StringIO()
    argv = [command, FENCE, "--ranks", "2", "--arg", "fence=true"]
    assert main(argv, stdout=_ClosedPipe(), stderr=err) == 0
    assert err.getvalue() == ""
