"""Host-body constructs of real PyPTO system tests: views sliced on several axes,
`pl.dynamic` dims used as numbers, and the builtin ring allreduce at one rank."""

from pathlib import Path

import numpy as np
import pytest

from racecheck.cosim import simulate
from racecheck.dsl.dtypes import FP32
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import DynVar
from racecheck.errors import UnsupportedConstruct
from racecheck.events import EventKind, MemoryKind
from racecheck.load import discover, load_file

FIXTURE = Path(__file__).parent / "fixtures" / "host_slices.py"
SPECS = {spec.name: spec for spec in discover(load_file(str(FIXTURE)))}


def _host_view(shape: tuple[int, ...]) -> TensorView:
    nbytes = int(np.prod(shape)) * 4
    return TensorView(
        memory=0,
        kind=MemoryKind.HOST,
        name="t",
        base=0,
        shape=shape,
        dtype=FP32,
        memory_nbytes=nbytes,
    )


@pytest.mark.parametrize("ranks", [2, 3])
def test_dispatch_per_peer_into_column_slices_gathers_every_rank(ranks: int) -> None:
    execution = simulate(SPECS["GatherByPeer"].instantiate(ranks))
    x, y = execution.tensors
    gathered = np.concatenate([x.initial[r, 0] for r in range(ranks)])
    for rank in range(ranks):
        np.testing.assert_array_equal(y.final[rank, 0], gathered)
    width_bytes = 8 * 4
    row_bytes = ranks * width_bytes
    y_memory = next(memory.id for memory in execution.trace.memories if memory.name == "y")
    stores = [
        event
        for event in execution.trace.events[1]
        if event.kind is EventKind.STORE and event.access.memory == y_memory
    ]
    assert [event.access.ranges for event in stores] == [
        ((row_bytes + p * width_bytes, row_bytes + (p + 1) * width_bytes),) for p in range(ranks)
    ]


def test_dynamic_dim_in_host_arithmetic_sizes_the_window() -> None:
    execution = simulate(SPECS["GatherByPeer"].instantiate(3))
    ready = next(memory for memory in execution.trace.memories if memory.name == "ready_buf")
    assert ready.nbytes == 3 * 8


def test_dynamic_dim_outside_a_running_program_is_not_a_number() -> None:
    with pytest.raises(TypeError, match="pl.dynamic"):
        int(DynVar("NR") * 4)


def test_selection_on_several_axes_is_one_contiguous_view() -> None:
    view = _host_view((3, 2, 8))[1, 1:2, 4:8]
    assert (view.base, view.shape) == ((16 + 8 + 4) * 4, (1, 4))
    whole_rows = _host_view((3, 2, 8))[1:3]
    assert (whole_rows.base, whole_rows.shape) == (16 * 4, (2, 2, 8))


def test_selection_outside_the_view_is_an_index_error() -> None:
    with pytest.raises(IndexError, match="slice 8:16"):
        _host_view((2, 1, 8))[0, 0:1, 8:16]


def test_strided_selection_is_unsupported_with_its_line() -> None:
    with pytest.raises(UnsupportedConstruct) as caught:
        simulate(SPECS["strided_slice"].instantiate(2))
    assert caught.value.line is not None and "contiguous" in str(caught.value)


def test_ring_allreduce_at_one_rank_needs_no_signal_rows() -> None:
    execution = simulate(SPECS["build_ring_builtin"].instantiate(1))
    assert not execution.trace.out_of_bounds
    x, y = execution.tensors
    np.testing.assert_array_equal(y.final, x.initial)
