"""The sort and top-k family (racecheck.dsl.sort_ops) against numpy's reference."""

from __future__ import annotations

import numpy as np
import pytest

from racecheck.dsl import sort_ops, tile_math
from racecheck.dsl.dtypes import FP32, INT32, UINT32
from racecheck.dsl.tensors import Tile
from racecheck.events import EventRef

P0101, P1010 = sort_ops.MaskPattern.P0101, sort_ops.MaskPattern.P1010


def _scores(values: np.ndarray, source: int = 1) -> Tile:
    data = np.asarray(values, dtype=np.float32).reshape(1, -1)
    return Tile(
        data=data, dtype=FP32, valid=data.shape, sources=frozenset({EventRef(rank=0, index=source)})
    )


def _top(pairs: Tile, k: int) -> list[int]:
    ids = tile_math.gather(pairs[:, 0 : 2 * k], mask_pattern=P1010, output_dtype=INT32)
    return [int(i) for i in ids.data[0]]


def test_sort32_sorts_each_block_of_32_descending_with_its_index() -> None:
    values = np.random.default_rng(3).standard_normal(64)
    pairs = sort_ops.sort32(_scores(values), tile_math.arange(0, [1, 64], dtype=UINT32))
    assert pairs.shape == (1, 128) and pairs.dtype is FP32
    ids = tile_math.gather(pairs, mask_pattern=P1010, output_dtype=INT32).data[0]
    for block in (0, 1):
        expected = block * 32 + np.argsort(-values[block * 32 : block * 32 + 32], kind="stable")
        assert list(ids[block * 32 : block * 32 + 32]) == list(expected)
    sorted_values = tile_math.gather(pairs, mask_pattern=P0101).data[0]
    assert np.array_equal(sorted_values[:32], np.sort(values[:32].astype(np.float32))[::-1])


def test_format1_merges_four_runs_per_window_and_format2_merges_rows() -> None:
    values = np.random.default_rng(4).standard_normal(256)
    pairs = sort_ops.sort32(_scores(values), tile_math.arange(0, [1, 256], dtype=UINT32))
    runs = sort_ops.mrgsort(pairs, block_len=64)  # windows of 4 x 32 pairs
    ids = tile_math.gather(runs, mask_pattern=P1010, output_dtype=INT32).data[0]
    assert list(ids[:128]) == list(np.argsort(-values[:128], kind="stable"))
    whole = sort_ops.mrgsort(runs[:, 0:256], runs[:, 256:512])
    assert _top(whole, 6) == list(np.argsort(-values, kind="stable")[:6])


def test_format1_merges_runs_rather_than_sorting_the_window() -> None:
    """Runs that are not sorted merge as the hardware merges them: head by head."""
    run = np.array([[1.0, 0], [3.0, 1]], dtype=np.float32)  # an unsorted run of 2 pairs
    other = np.array([[2.0, 2], [0.0, 3]], dtype=np.float32)
    data = np.concatenate([run, other]).reshape(1, 8)
    merged = sort_ops.mrgsort(Tile(data=data, dtype=FP32, valid=(1, 8)), block_len=4)
    assert list(merged.data[0, 0::2]) == [2.0, 1.0, 3.0, 0.0]


def test_ties_keep_their_order_and_the_result_depends_on_both_operands() -> None:
    index = tile_math.arange(0, [1, 32], dtype=UINT32)
    index.sources = frozenset({EventRef(rank=0, index=9)})
    pairs = sort_ops.sort32(_scores(np.zeros(32), source=1), index)
    assert _top(pairs, 4) == [0, 1, 2, 3]
    assert pairs.sources == frozenset({EventRef(rank=0, index=1), EventRef(rank=0, index=9)})


def test_cmp_and_concat() -> None:
    left = _scores([1.0, 2.0, 3.0])
    assert list(sort_ops.cmp(left, 2.0, 4).data[0]) == [0.0, 0.0, 1.0]
    assert list(sort_ops.cmp(left, left, 0).data[0]) == [1.0, 1.0, 1.0]
    joined = sort_ops.concat(left, _scores([4.0], source=2))
    assert list(joined.data[0]) == [1.0, 2.0, 3.0, 4.0]
    assert joined.sources == frozenset({EventRef(rank=0, index=1), EventRef(rank=0, index=2)})
    with pytest.raises(ValueError, match="cmp_type"):
        sort_ops.cmp(left, 1.0, 7)


def test_scatter_is_the_inverse_of_gather_in_both_forms() -> None:
    row = _scores([1.0, 2.0, 3.0, 4.0])
    even = tile_math.gather(row, mask_pattern=P0101)
    odd = tile_math.gather(row, mask_pattern=P1010)
    blank = _scores(np.zeros(4), source=2)
    back = sort_ops.scatter(even, mask_pattern=P0101, dst=blank)
    back = sort_ops.scatter(odd, mask_pattern=P1010, dst=back)
    assert list(back.data[0]) == [1.0, 2.0, 3.0, 4.0]
    assert back.sources == frozenset({EventRef(rank=0, index=1), EventRef(rank=0, index=2)})
    columns = Tile(data=np.array([[3, 0]]), dtype=INT32, valid=(1, 2), sources=frozenset())
    placed = sort_ops.scatter(blank, -1, columns, _scores([7.0, 8.0], source=3))
    assert list(placed.data[0]) == [8.0, 0.0, 0.0, 7.0]
    with pytest.raises(ValueError, match="times its columns"):
        sort_ops.scatter(row, mask_pattern=P0101, dst=blank)
    with pytest.raises(IndexError):
        outside = Tile(data=np.array([[4, 0]]), dtype=INT32, valid=(1, 2), sources=frozenset())
        sort_ops.scatter(blank, -1, outside, _scores([7.0, 8.0]))


def test_col_expand_expdif_max_and_min_broadcast_a_row_down_the_columns() -> None:
    block = Tile(
        data=np.array([[1.0, 5.0], [3.0, 2.0]], dtype=np.float32),
        dtype=FP32,
        valid=(2, 2),
        sources=frozenset(),
    )
    row = _scores([1.0, 2.0])
    np.testing.assert_allclose(
        tile_math.OPS["col_expand_expdif"](block, row).data, np.exp([[0.0, 3.0], [2.0, 0.0]])
    )
    assert tile_math.OPS["col_expand_max"](block, row).data.tolist() == [[1.0, 5.0], [3.0, 2.0]]
    assert tile_math.OPS["col_expand_min"](block, row).data.tolist() == [[1.0, 2.0], [1.0, 2.0]]
