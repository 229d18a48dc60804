"""Tile arithmetic of model kernels (racecheck.dsl.tile_math): values as PyPTO's ops
define them, valid shapes carried, and the loads a value depends on kept."""

from __future__ import annotations

import numpy as np
import pytest

from racecheck.dsl import tile_math
from racecheck.dsl.dtypes import FP32
from racecheck.dsl.tensors import TensorView, Tile, _valid_part
from racecheck.dsl.tile_ops import reshape_tensor, tensor_dim
from racecheck.events import EventRef, MemoryKind


def _tile(values: list[list[float]], valid: tuple[int, int] | None = None) -> Tile:
    data = np.array(values, dtype=np.float32)
    source = frozenset({EventRef(rank=0, index=3)})
    return Tile(data=data, dtype=FP32, valid=valid or data.shape, sources=source)


def test_row_reductions_and_broadcasts_compute_over_valid_values() -> None:
    tile = _tile([[1, 5, 9], [4, 2, 7]], valid=(2, 2))
    assert tile_math.row_max(tile).data.tolist() == [[5], [4]]
    assert tile_math.row_min(tile).data.tolist() == [[1], [2]]
    scaled = tile_math.OPS["row_expand_mul"](tile, _tile([[10], [100]]))
    assert scaled.data.tolist() == [[10, 50, 90], [400, 200, 700]]
    assert scaled.sources == tile.sources  # the loads the values depend on


def test_transpose_swaps_the_valid_shape_too() -> None:
    moved = tile_math.transpose(_tile([[1, 2, 3], [4, 5, 6]], valid=(2, 1)), 0, 1)
    assert moved.data.tolist() == [[1, 4], [2, 5], [3, 6]]
    assert moved.valid == (1, 2)


def test_matmul_acc_adds_the_transposed_product_into_the_accumulator() -> None:
    acc = _tile([[1, 1], [1, 1]])
    lhs = _tile([[1, 2], [3, 4]])
    rhs = _tile([[1, 0], [0, 1]])
    total = tile_math.matmul_acc(acc, lhs, rhs, b_trans=True)
    assert total.data.tolist() == [[2, 3], [4, 5]]


def test_fillpad_writes_the_pad_past_the_valid_shape() -> None:
    narrowed = tile_math.set_validshape(_tile([[1, 2], [3, 4]]), 1, 1)
    assert narrowed.valid == (1, 1)
    padded = tile_math.fillpad(narrowed, tile_math.PadValue.zero)
    assert padded.data.tolist() == [[1, 0], [0, 0]] and padded.valid == (2, 2)
    lowest = tile_math.fillpad(narrowed, tile_math.PadValue.min)
    assert lowest.data[1, 1] == np.finfo(np.float32).min
    with pytest.raises(ValueError):
        tile_math.set_validshape(narrowed, 3, 1)


def test_a_tile_slice_is_a_sub_tile_valid_where_its_tile_is() -> None:
    block = _tile([[1, 2, 3], [4, 5, 6]], valid=(2, 2))[0:2, 1:3]
    assert block.data.tolist() == [[2, 3], [5, 6]] and block.valid == (2, 1)


def test_reshape_of_a_view_keeps_its_bytes_and_dim_reads_an_axis() -> None:
    view = TensorView(
        memory=0,
        kind=MemoryKind.HOST,
        name="x",
        base=64,
        shape=(2, 3, 4),
        dtype=FP32,
        memory_nbytes=256,
    )
    flat = reshape_tensor(view, [6, 4])
    assert isinstance(flat, TensorView) and (flat.base, flat.shape) == (64, (6, 4))
    with pytest.raises(TypeError, match="element count"):
        reshape_tensor(view, [5, 4])
    assert tensor_dim(view, -1) == 4 and tensor_dim(view, 0) == 2


def test_a_reshape_carries_a_prefix_valid_region_and_refuses_another() -> None:
    from racecheck.dsl.tile_ops import reshape

    column = _tile([[1], [2], [3], [4]], valid=(1, 1))
    assert reshape(column, [1, 4]).valid == (1, 1)
    rows = _tile([[1, 2], [3, 4], [5, 6]], valid=(2, 2))
    assert reshape(rows, [6]).valid == (4,)
    with pytest.raises(TypeError, match="no region"):
        reshape(rows, [2, 3])  # four cells are no origin-anchored region of [2, 3]
    with pytest.raises(TypeError, match="row-major prefix"):
        reshape(_tile([[1, 2], [3, 4]], valid=(2, 1)), [4])


def test_block_assignment_and_gather_update_and_read_a_local_tile() -> None:
    tile = _tile([[0, 0, 0], [0, 0, 0]])
    tile[0:1, :] = _tile([[7, 8, 9]])
    assert tile.data.tolist() == [[7, 8, 9], [0, 0, 0]]
    picks = Tile(data=np.array([[2, 0], [1, 1]]), dtype=FP32, valid=(2, 2))
    gathered = tile_math.gather(tile, dim=-1, index=picks)
    assert gathered.data.tolist() == [[9, 7], [0, 0]]
    with pytest.raises(IndexError):
        tile_math.gather(tile, dim=-1, index=Tile(data=np.array([[3]]), dtype=FP32, valid=(1, 1)))


def test_arange_fills_one_row_from_its_start() -> None:
    assert tile_math.arange(3, [1, 4]).data.tolist() == [[3, 4, 5, 6]]
    assert tile_math.arange(3, [1, 3], descending=True).data.tolist() == [[3, 2, 1]]


def test_a_product_with_an_all_zero_operand_is_zeros_unless_the_other_is_not_finite() -> None:
    """The shortcut that spares a model's zero-page weights the multiply keeps numpy's
    values: zeros, and NaN where an infinity meets a zero."""
    from racecheck.dsl.tile_ops import product

    left = _tile([[1, -2], [3, 4]])
    zeros = _tile([[0, 0, 0], [0, 0, 0]])
    data, valid = product(left, zeros, False, False)
    assert data.tolist() == [[0, 0, 0], [0, 0, 0]] and valid == (2, 3)
    data, _ = product(left, _tile([[0, 0], [0, 0], [0, 0]]), False, True)
    assert data.shape == (2, 3)
    infinite = _tile([[np.inf, 1], [1, 1]])
    data, _ = product(infinite, zeros, False, False)
    assert np.isnan(data[0]).all() and not np.isnan(data[1]).any()


def test_gather_row_places_the_block_it_reads_and_keeps_both_sources() -> None:
    acc = tile_math.create_l1([3, 2], FP32)
    row = _tile([[7, 8]])
    placed = tile_math.gather_row(acc, row, [1, 0], [0, 0], [1, 2])
    assert placed.data.tolist() == [[0, 0], [7, 8], [0, 0]] and acc.data.sum() == 0
    assert placed.sources == row.sources
    column = tile_math.gather_row(acc, row, [0, 1], [0, 0], [1, 2], transpose=True)
    assert column.data.tolist() == [[0, 7], [0, 8], [0, 0]]
    with pytest.raises(IndexError, match="gather_row"):
        tile_math.gather_row(acc, row, [3, 0], [0, 0], [1, 2])


def test_a_partly_valid_tile_is_stored_into_the_rows_its_valid_part_covers() -> None:
    """`out[0:16, 0:2] = acc` with acc 16 rows of which 8 are valid stores 8 rows: an
    8-row `out` takes it (pypto-lib's 16-row boxed matmul tiles at T = 8)."""
    boxed = tile_math.set_validshape(_tile(np.ones((16, 2))), 8, 2)
    view = TensorView(
        memory=0,
        kind=MemoryKind.HOST,
        name="out",
        base=0,
        shape=(8, 2),
        dtype=FP32,
        memory_nbytes=64,
    )
    items = _valid_part((slice(0, 16), slice(0, 2)), boxed)
    assert items == (slice(0, 8), slice(0, 2))
    assert view._selection(items)[:2] == ([0, 0], [8, 2])
    whole = _tile(np.ones((16, 2)))
    assert _valid_part((slice(0, 16), slice(0, 2)), whole) == (slice(0, 16), slice(0, 2))
