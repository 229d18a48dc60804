"""`--assume`: a user's precondition on input elements narrows the inputs checked, and
every answer says it assumed it; outside it an input that breaks the protocol is a bug
with the concrete input."""

from __future__ import annotations

from pathlib import Path

import pytest

from racecheck.assumptions import Assumption, narrowed, parse_assumption
from racecheck.cli import main
from racecheck.errors import UsageError
from racecheck.findings import FindingKind, Verdict
from racecheck.options import Options
from racecheck.pipeline import check

NO_CLAMP = (
    Path(__file__).resolve().parent.parent
    / "examples"
    / "263_input_counts_all_to_all_v_bug_no_clamp.py"
)


def test_the_three_forms_parse() -> None:
    assert parse_assumption("send_counts in 0..4") == Assumption("send_counts", 0, 4)
    assert parse_assumption(" c in -3 .. 3 ") == Assumption("c", -3, 3)
    assert str(parse_assumption("c <= 4")) == "c <= 4"
    assert str(parse_assumption("c >= -1")) == "c >= -1"
    assert narrowed((-(2**31), 2**31 - 1), (parse_assumption("c <= 4"),), "c") == (-(2**31), 4)
    assert narrowed((0, 255), (parse_assumption("c in 3..900"),), "d") == (0, 255)


@pytest.mark.parametrize("text", ["c < 4", "in 0..3", "c in 4..3", "c == 1"])
def test_anything_else_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--assume"):
        Options(assume=(text,))


def test_within_the_assumption_the_unclamped_count_is_proved_and_says_so() -> None:
    (result,) = check(str(NO_CLAMP), Options(ranks=(3,), assume=("send_counts in 0..2",))).results
    assert result.verdict is Verdict.PROVED
    assert "assuming send_counts in 0..2" in result.notes
    assert any(note.startswith("for every input: ") for note in result.notes)


def test_past_the_capacity_the_overflow_is_a_bug_with_a_count_the_assumption_allows() -> None:
    (result,) = check(str(NO_CLAMP), Options(ranks=(2,), assume=("send_counts in 0..3",))).results
    assert result.verdict is Verdict.BUG
    (overflow,) = [f for f in result.findings if f.kind is FindingKind.OUT_OF_BOUNDS]
    # the --seed draw, held to 0..3, shows it (no inputs named), or z3's counts do
    assert all(0 <= value <= 3 for _, _, value in overflow.inputs)


def test_an_assumption_on_no_input_is_a_usage_error_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["verify", str(NO_CLAMP), "--ranks", "2", "--assume", "nothing in 0..2"])
    assert code == 2
    assert "has no input tensor 'nothing'" in capsys.readouterr().err


def _with_pragma(tmp_path: Path, pragma: str) -> Path:
    """263's program with `pragma` as a comment line after its imports."""
    text = NO_CLAMP.read_text()
    anchor = "from pypto.ir.distributed_compiled_program import DistributedConfig\n"
    path = tmp_path / "kernel.py"
    path.write_text(text.replace(anchor, f"{anchor}\n{pragma}\n", 1))
    return path


def test_a_comment_line_in_the_file_declares_an_assumption(tmp_path: Path) -> None:
    path = _with_pragma(tmp_path, "# racecheck: assume send_counts in 0..2")
    (result,) = check(str(path), Options(ranks=(3,))).results
    assert result.verdict is Verdict.PROVED
    assert "assuming send_counts in 0..2" in result.notes


def test_the_file_and_the_command_line_both_hold(tmp_path: Path) -> None:
    path = _with_pragma(tmp_path, "# racecheck: assume send_counts >= 0")
    options = Options(ranks=(2,), assume=("send_counts <= 2",))
    (result,) = check(str(path), options).results
    assert result.verdict is Verdict.PROVED
    assert "assuming send_counts <= 2, send_counts >= 0" in result.notes
    (alone,) = check(str(path), Options(ranks=(2,))).results  # >= 0 alone: 3 overflows
    assert alone.verdict is Verdict.BUG


def test_the_same_words_in_a_string_declare_nothing(tmp_path: Path) -> None:
    path = _with_pragma(tmp_path, 'NOTE = """\n# racecheck: assume send_counts in 0..2\n"""')
    (result,) = check(str(path), Options(ranks=(2,))).results
    assert result.verdict is Verdict.BUG


@pytest.mark.parametrize(
    ("pragma", "says"),
    [
        ("# racecheck: assume send_counts < 3", "write `NAME in LOW..HIGH`"),
        ("# racecheck: assume nothing in 0..2", "has no input tensor 'nothing'"),
    ],
)
def test_a_bad_declaration_names_its_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pragma: str, says: str
) -> None:
    path = _with_pragma(tmp_path, pragma)
    line = path.read_text().splitlines().index(pragma) + 1
    assert main(["verify", str(path), "--ranks", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{path}:{line}: " in err and says in err
    assert "Traceback" not in err
