"""The golden models on small hand-computed inputs: goldens, layouts, tolerance, identify."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import racecheck
from racecheck.errors import UsageError
from racecheck.findings import FindingKind, Verdict
from racecheck.models import (
    ModelNotApplicable,
    close_enough,
    first_difference,
    golden_repeated,
    identify,
    matches,
    parse_model,
    tolerance,
)

# Three ranks, rows of six elements: rank r holds 10 * r + [1..6].
X = np.array([[1, 2, 3, 4, 5, 6], [11, 12, 13, 14, 15, 16], [21, 22, 23, 24, 25, 26]], float)


def golden(name: str, inputs: np.ndarray = X) -> np.ndarray:
    result = parse_model(name).golden(inputs)
    assert result is not None
    return result


def test_allreduce_goldens() -> None:
    assert golden("allreduce-sum")[2].tolist() == [33, 36, 39, 42, 45, 48]
    assert golden("allreduce-max")[0].tolist() == X[2].tolist()
    assert golden("allreduce-min")[1].tolist() == X[0].tolist()
    assert golden("allreduce-prod")[0, :2].tolist() == [1 * 11 * 21, 2 * 12 * 22]


def test_broadcast_allgather_and_shifts() -> None:
    assert (golden("broadcast-root1") == X[1]).all()
    assert golden("allgather").shape == (3, 18)
    assert golden("allgather")[1].tolist() == X.reshape(-1).tolist()
    assert golden("shift+1")[2].tolist() == X[0].tolist()
    assert golden("shift-1")[0].tolist() == X[2].tolist()
    assert golden("shift+4")[0].tolist() == X[1].tolist()


def test_reduce_scatter_holds_only_block_r() -> None:
    # Blocks of two: rank 1 gets the sum of block 1, i.e. elements 3 and 4 of every row.
    assert golden("reduce_scatter-sum").tolist() == [[33, 36], [39, 42], [45, 48]]


def test_all_to_all_transposes_blocks() -> None:
    expected = [[1, 2, 11, 12, 21, 22], [3, 4, 13, 14, 23, 24], [5, 6, 15, 16, 25, 26]]
    assert golden("all_to_all").tolist() == expected


def test_barrier_leaves_data_untouched_and_none_claims_nothing() -> None:
    assert (golden("barrier") == X).all()
    assert parse_model("none").golden(X) is None
    assert matches(parse_model("none"), X, np.zeros((3, 1)), "FP32")


def test_goldens_read_rows_in_row_major_order_whatever_the_shape() -> None:
    shaped = X.reshape(3, 2, 3)
    assert (golden("all_to_all", shaped) == golden("all_to_all")).all()
    assert matches(
        parse_model("allreduce-sum"), shaped, golden("allreduce-sum").reshape(3, 1, 6), "FP32"
    )


def test_models_that_cannot_apply_do_not_match() -> None:
    five_wide = np.ones((3, 5))
    with pytest.raises(ModelNotApplicable):
        parse_model("all_to_all").golden(five_wide)
    assert not matches(parse_model("reduce_scatter-sum"), five_wide, np.ones((3, 1)), "FP32")
    assert not matches(parse_model("broadcast-root3"), X, X, "FP32")
    assert not matches(parse_model("allgather"), X, X, "FP32")  # wrong output length


def test_reduce_scatter_accepts_the_block_in_place() -> None:
    in_place = X.copy()
    for rank, block in enumerate(golden("reduce_scatter-sum")):
        in_place[rank, 2 * rank : 2 * rank + 2] = block
    assert matches(parse_model("reduce_scatter-sum"), X, in_place, "FP32")
    in_place[1, 2] += 1
    assert not matches(parse_model("reduce_scatter-sum"), X, in_place, "FP32")


def test_tolerance_depends_on_dtype() -> None:
    want = golden("allreduce-sum")
    assert matches(parse_model("allreduce-sum"), X, want * (1 + 1e-6), "FP32")
    assert not matches(parse_model("allreduce-sum"), X, want * (1 + 1e-3), "FP32")
    assert matches(parse_model("allreduce-sum"), X, want * (1 + 1e-2), "FP16")
    assert matches(parse_model("allreduce-sum"), X, want * (1 + 1e-2), "BF16")
    assert not matches(parse_model("allreduce-sum"), X, want * (1 + 5e-2), "FP16")
    ints = X.astype(np.int32)
    assert matches(parse_model("allreduce-sum"), ints, want.astype(np.int32), "INT32")
    assert not matches(parse_model("allreduce-sum"), ints, want.astype(np.int32) + 1, "INT32")
    assert tolerance("pl.FP32") == tolerance("float32") == 1e-5
    with pytest.raises(ValueError):
        tolerance("FP8")


def test_identify_picks_the_model_and_the_shortest_shift() -> None:
    rng = np.random.default_rng(7)
    inputs = rng.standard_normal((4, 8))
    for name in ("allreduce-sum", "allreduce-min", "broadcast-root2", "allgather", "all_to_all"):
        assert identify(inputs, golden(name, inputs), "FP32") == name
    assert identify(inputs, golden("reduce_scatter-sum", inputs), "FP32") == "reduce_scatter-sum"
    assert identify(inputs, golden("shift-3", inputs), "FP32") == "shift+1"
    assert identify(inputs, golden("shift+3", inputs), "FP32") == "shift-1"
    assert identify(inputs, inputs.copy(), "FP32") == "barrier"
    assert identify(inputs, inputs * 3, "FP32") is None


def test_identify_at_one_rank_reports_the_first_model() -> None:
    inputs = np.arange(4.0).reshape(1, 4)
    assert identify(inputs, inputs.copy(), "FP32") == "allreduce-sum"


def test_first_difference_points_at_the_first_wrong_element() -> None:
    want = golden("allreduce-sum")
    got = want.reshape(3, 2, 3).copy()
    got[1, 1, 0] = -1
    where = first_difference(want, got, "FP32")
    assert where is not None
    assert (where.rank, where.index) == (1, (1, 0))
    assert where.got == (-1.0, 45.0, 48.0)
    assert where.golden == (42.0, 45.0, 48.0)
    assert first_difference(want, want, "FP32") is None


def test_first_difference_in_place_layout_indexes_the_full_row() -> None:
    want = golden("reduce_scatter-sum")
    got = np.zeros((3, 6))
    where = first_difference(want, got, "FP32")
    assert where is not None and (where.rank, where.index) == (0, (0,))
    got[0, :2] = want[0]
    assert first_difference(want, got, "FP32").index == (2,)


def test_repeated_golden_applies_the_model_again() -> None:
    shift = parse_model("shift+1")
    assert (golden_repeated(shift, X, 2) == golden("shift+2")).all()
    assert (
        golden_repeated(parse_model("allreduce-sum"), X, 2) == 3 * golden("allreduce-sum")
    ).all()
    with pytest.raises(ModelNotApplicable):
        golden_repeated(parse_model("allgather"), X, 2)


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(UsageError, match="allreduce-sum"):
        parse_model("allreduce-avg")
    with pytest.raises(UsageError):
        parse_model("shift+x")


def test_user_golden_from_a_file_and_a_module(tmp_path: Path) -> None:
    source = tmp_path / "my_golden.py"
    source.write_text("def doubled(inputs):\n    return inputs * 2\n")
    model = parse_model(f"{source}:doubled")
    assert matches(model, X, X * 2, "FP32")
    assert parse_model("numpy:negative").golden(X)[0, 0] == -1
    with pytest.raises(UsageError):
        parse_model(f"{source}:missing")
    with pytest.raises(UsageError):
        parse_model(f"{tmp_path / 'absent.py'}:doubled")


TEMPLATE = Path(__file__).resolve().parent.parent / "models" / "allreduce_sum_by_hand.py"
EXAMPLES = TEMPLATE.parent.parent / "examples"


def test_the_user_golden_template_accepts_the_sum_and_rejects_a_double_count() -> None:
    expect = f"{TEMPLATE}:allreduce_sum"
    right = racecheck.verify(str(EXAMPLES / "08_allreduce_mesh.py"), ranks="2..3", expect=expect)
    assert [(r.ranks, r.verdict) for r in right.results] == [
        (2, Verdict.PROVED),
        (3, Verdict.PROVED),
    ]
    wrong = racecheck.verify(
        str(EXAMPLES / "10_allreduce_mesh_bug_double_count.py"), ranks="2..3", expect=expect
    )
    for result in wrong.results:
        assert result.verdict == Verdict.BUG
        assert [f.kind for f in result.findings] == [FindingKind.WRONG_RESULT]
        assert result.findings[0].diff is not None
        assert result.findings[0].diff.model == expect


def test_close_enough_rejects_a_wrong_rank_count() -> None:
    assert not close_enough(golden("allreduce-sum"), golden("allreduce-sum")[:2], "FP32")
