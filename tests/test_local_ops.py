"""Local ops of docs/model.md, one at a time, on a recording rank context: the values
they compute and the memory events they make (kernel-local tensors make none)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import racecheck
from racecheck.cosim import simulate
from racecheck.dsl import dist_ops, local_ops, tile_ops, types
from racecheck.dsl.context import activated
from racecheck.dsl.dtypes import FP32, INT32
from racecheck.dsl.local_ops import tile_block
from racecheck.dsl.memory import MemoryState
from racecheck.dsl.modules import installed
from racecheck.dsl.symbolic import Decision
from racecheck.dsl.tensors import TensorView, Tile, cell_start, region_problem, region_runs
from racecheck.dsl.types import AtomicType, MemorySpace
from racecheck.errors import UnsupportedConstruct
from racecheck.events import EventRef, MemoryKind, NotifyOp, WaitCmp
from racecheck.load import discover, load_file

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class Recorder:
    """A rank context backed by real memory that lists every access it is handed."""

    memory: MemoryState
    rank: int = 0
    ranks: int = 2
    dims: dict[str, int] = field(default_factory=dict)
    log: list[tuple[str, int, int, tuple[int, ...]]] = field(default_factory=list)

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]:
        self.log.append(("load", view.memory, owner, tuple(offsets)))
        values = self.memory.read(view, owner, offsets, extent)
        return values, EventRef(rank=self.rank, index=len(self.log) - 1)

    def store(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        values: np.ndarray,
        label: str,
        *,
        accumulate: bool = False,
        sources: frozenset[EventRef] | None = None,
        forms: np.ndarray | None = None,
    ) -> None:
        self.log.append(("atomic" if accumulate else "store", view.memory, owner, tuple(offsets)))
        if accumulate:
            self.memory.accumulate(view, owner, offsets, values)
        else:
            self.memory.write(view, owner, offsets, values, forms)

    def notify(
        self,
        view: TensorView,
        peer: int,
        offsets: Sequence[int],
        value: object,
        op: NotifyOp,
        label: str,
    ) -> None:
        self.log.append(("notify", view.memory, peer, tuple(offsets)))

    def wait(
        self, view: TensorView, offsets: Sequence[int], expected: int, cmp: WaitCmp, label: str
    ) -> None:
        self.log.append(("wait", view.memory, self.rank, tuple(offsets)))

    def note_control(self, sources: frozenset[EventRef], decision: Decision | None) -> None:
        pass

    def input_symbols(
        self, view: TensorView, offsets: Sequence[int], extent: Sequence[int]
    ) -> np.ndarray | None:
        return None

    def fail_bounds(self, message: str) -> None:
        raise AssertionError(message)


def _window(memory: MemoryState, shape: tuple[int, ...], dtype=FP32) -> TensorView:
    nbytes = int(np.prod(shape)) * dtype.nbytes
    window = memory.add_window(f"w{len(memory.memories)}", nbytes)
    return TensorView(
        memory=window.id,
        kind=MemoryKind.WINDOW,
        name=window.name,
        base=0,
        shape=shape,
        dtype=dtype,
        memory_nbytes=nbytes,
    )


@contextmanager
def rank() -> Iterator[tuple[Recorder, TensorView, TensorView]]:
    """A rank with a [4, 8] FP32 window holding 0..31 and an empty [4, 8] window."""
    memory = MemoryState(2)
    source, target = _window(memory, (4, 8)), _window(memory, (4, 8))
    for owner in range(2):
        memory.write(source, owner, [0, 0], np.arange(32, dtype=np.float32).reshape(4, 8))
    recorder = Recorder(memory=memory)
    with installed(), activated(recorder):
        yield recorder, source, target


def test_load_takes_its_documented_keywords() -> None:
    with rank() as (recorder, source, _):
        tile = local_ops.load(
            source, offsets=[1, 0], shapes=[2, 8], valid_shape=[1, 8], target_memory=MemorySpace.Vec
        )
    assert tile.shape == (2, 8) and tile.valid == (1, 8)
    np.testing.assert_array_equal(tile.valid_values()[0], np.arange(8, 16))
    assert recorder.log == [("load", source.memory, 0, (1, 0))]


def test_store_keywords_and_kernel_local_tensors_record_nothing() -> None:
    with rank() as (recorder, _, target):
        local = tile_ops.create_tensor([2, 8], dtype=FP32)
        local = local_ops.store(
            tile_ops.full([1, 8], FP32, 3.0), offsets=[1, 0], output_tensor=local
        )
        block = local_ops.load(local, [1, 0], [1, 8])
        assert recorder.log == []
        local_ops.store(block, offsets=[2, 0], output_tensor=target)
    assert isinstance(local, Tile)
    np.testing.assert_array_equal(local.data, [[0] * 8, [3] * 8])
    assert recorder.log == [("store", target.memory, 0, (2, 0))]


def test_slice_is_a_view_whose_bytes_are_read_where_it_is_loaded() -> None:
    with rank() as (recorder, source, _):
        view = tile_ops.slice_(source, [2, 8], [2, 0])
        assert isinstance(view, TensorView) and recorder.log == []
        tile = local_ops.load(view, [0, 0], [2, 8])
        strided = tile_ops.slice_(source, [2, 2], [1, 3])  # not contiguous: a load now
    np.testing.assert_array_equal(tile.data[0], np.arange(16, 24))
    assert isinstance(strided, Tile)
    np.testing.assert_array_equal(strided.data, [[11, 12], [19, 20]])
    assert [entry[0] for entry in recorder.log] == ["load", "load"]


def test_assemble_stores_or_accumulates_into_a_tensor_and_updates_a_local_one() -> None:
    with rank() as (recorder, _, target):
        ones = tile_ops.tile_full([1, 8], FP32, 1.0)
        tile_ops.assemble(target, ones, [0, 0])
        tile_ops.assemble(target, ones, [0, 0], atomic=AtomicType.Add)
        local = tile_ops.assemble(
            tile_ops.full([2, 8], FP32, 5.0), ones, [1, 0], atomic=AtomicType.Add
        )
        assert [entry[0] for entry in recorder.log] == ["store", "atomic"]
        row = local_ops.load(target, [0, 0], [1, 8])
    np.testing.assert_array_equal(row.data, np.full((1, 8), 2.0))
    np.testing.assert_array_equal(local.data, [[5] * 8, [6] * 8])


def test_tile_math_ops_compute_their_values() -> None:
    with rank() as (_, source, _):
        tile = local_ops.load(source, [0, 0], [2, 8])
        sums = tile_ops.row_sum(
            tile, tile_ops.tile_create([2, 8], FP32, target_memory=MemorySpace.Vec)
        )
        flat = tile_ops.reshape(sums, [1, 2])
        moved = tile_ops.move(flat, target_memory=MemorySpace.Vec)
        product = tile_ops.matmul(tile, tile_ops.full([8, 1], FP32, 1.0))
        scalar = tile_ops.const(3, INT32)
    np.testing.assert_array_equal(moved.data, [[28, 92]])
    np.testing.assert_array_equal(product.data, [[28], [92]])
    assert scalar == 3 and isinstance(scalar, int)


def test_arrays_hold_scalars() -> None:
    with rank():
        array = tile_ops.array_create(3, INT32)
        array[1] = 7
        assert [array[0], array[1], len(array)] == [0, 7, 3]


def test_unroll_counts_like_range() -> None:
    with rank():
        assert [int(i) for i in local_ops.unroll(4)] == [0, 1, 2, 3]
        assert [int(i) for i in local_ops.unroll(1, 7, 3)] == [1, 4]


def test_parallel_iterations_on_disjoint_bytes_run_one_after_another() -> None:
    with rank() as (recorder, source, target):
        for row in local_ops.parallel(4):
            local_ops.store(local_ops.load(source, [row, 0], [1, 8]), [row, 0], target)
    assert len(recorder.log) == 8


@pytest.mark.parametrize("second", ["store", "load"])
def test_parallel_iterations_on_the_same_bytes_are_refused_at_the_loop(second: str) -> None:
    with rank() as (_, source, target), pytest.raises(UnsupportedConstruct) as raised:
        for row in local_ops.parallel(2):  # noqa: B007 - every iteration touches row 0
            if second == "load" and int(row) == 1:
                local_ops.load(target, [0, 0], [1, 8])
            else:
                local_ops.store(local_ops.load(source, [0, 0], [1, 8]), [0, 0], target)
    assert "iterations 0 and 1 of this pl.parallel" in raised.value.message


@pytest.mark.parametrize("late_read", [None, 3, 1])
def test_parallel_iterations_are_checked_against_every_earlier_piece(late_read: int | None) -> None:
    """Iterations touching adjacent halves of rows and all reading one tensor run; a
    read in the last iteration of a row an earlier one wrote is refused naming that
    iteration and the bytes (the touched bytes are kept as merged pieces per memory)."""
    with rank() as (_, source, target):
        checked = local_ops.parallel(4)
        with pytest.raises(UnsupportedConstruct) if late_read == 1 else nullcontext() as raised:
            for row in checked:
                whole = local_ops.load(source, [0, 0], [4, 8])
                for half in (0, 4):
                    local_ops.store(tile_block(whole, [0, half], [1, 4]), [row, half], target)
                if late_read is not None and int(row) == 3:
                    local_ops.load(target, [late_read, 4], [1, 4])
    if late_read == 1:
        assert raised is not None
        assert "iterations 1 and 3 of this pl.parallel both access" in raised.value.message
        assert "bytes 48..64 and one of them writes" in raised.value.message


@pytest.mark.parametrize("sync", ["notify", "wait", "signal store"])
def test_parallel_iterations_are_refused_when_one_of_them_synchronises(sync: str) -> None:
    """A notify run after an earlier iteration's store would publish it; concurrent
    iterations give no such order, so racecheck refuses rather than proves. A store of
    1 into an INT32 window publishes too when a rank waits on it (was proved)."""
    with rank() as (_, source, target), pytest.raises(UnsupportedConstruct) as raised:
        signal = _window(MemoryState(2), (1, 1), INT32)
        for row in local_ops.parallel(2):
            if int(row) == 0:
                local_ops.store(local_ops.load(source, [0, 0], [1, 8]), [0, 0], target)
            elif sync == "notify":
                add = types.NotifyOp.AtomicAdd
                dist_ops.notify(signal, peer=1, offsets=[0, 0], value=1, op=add)
            elif sync == "signal store":
                local_ops.store(tile_ops.full([1, 1], INT32, 1), [0, 0], signal)
            else:
                dist_ops.wait(signal, offsets=[0, 0], expected=1, cmp=types.WaitCmp.Ge)
    assert "iterations 0 and 1 of this pl.parallel access memory and one of them" in (
        raised.value.message
    )


@pytest.mark.parametrize("construct", ["full", "add", "store", "assemble"])
def test_a_scalar_read_keeps_its_load_in_the_tile_it_enters(construct: str) -> None:
    """A value read from memory steers through a kernel-local tile only if the tile
    remembers the load: losing it made a branch on an input look constant."""
    with rank() as (_, source, _):
        value = local_ops.read(source, [0, 1])
        make = {
            "full": lambda: tile_ops.full([1, 1], FP32, value),
            "add": lambda: local_ops.add(tile_ops.full([1, 1], FP32, 0.0), value),
            "store": lambda: local_ops.store(value, [0, 0], tile_ops.create_tensor([1, 1])),
            "assemble": lambda: tile_ops.assemble(tile_ops.create_tensor([1, 1]), value, [0, 0]),
        }
        tile = make[construct]()
        read_back = local_ops.read(tile, [0, 0])
    assert value.sources
    assert isinstance(tile, Tile) and tile.sources == value.sources
    assert read_back.sources == value.sources


def test_parallel_atomic_adds_do_not_conflict() -> None:
    with rank() as (recorder, _, target):
        for _ in local_ops.parallel(3):
            tile_ops.assemble(
                target, tile_ops.tile_full([1, 8], FP32, 1.0), [0, 0], atomic=AtomicType.Add
            )
    assert [entry[0] for entry in recorder.log] == ["atomic"] * 3


def test_tile_put_and_get_move_data_through_their_staging_tile() -> None:
    with rank() as (recorder, source, target):
        stage = tile_ops.tile_create([1, 8], FP32)
        dist_ops.tile_put(
            target, 1, source, stage, [0, 0], [3, 0], [1, 8]
        )  # region in stage2's slot
        dist_ops.tile_get(target, 1, source, stage, None, [1, 0], [2, 0], [1, 8])
        moved = recorder.memory.read(target, 1, [0, 0], [1, 8])
    np.testing.assert_array_equal(moved[0], np.arange(24, 32))
    assert recorder.log == [
        ("load", source.memory, 0, (3, 0)),
        ("store", target.memory, 1, (0, 0)),
        ("load", source.memory, 1, (2, 0)),
        ("store", target.memory, 0, (1, 0)),
    ]


def test_a_kernel_mixing_cube_ops_and_communication_is_unsupported() -> None:
    report = racecheck.verify(str(FIXTURES / "cube_and_comm.py"), ranks="2")
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    lines = (FIXTURES / "cube_and_comm.py").read_text().splitlines()
    notify = next(n for n, line in enumerate(lines, start=1) if "pld.system.notify(" in line)
    assert report.errors[0].startswith(f"{FIXTURES / 'cube_and_comm.py'}:{notify}: error:")
    assert "AIC and AIV lanes" in report.errors[0]


def test_parallel_iterations_share_kernel_local_tensors_made_before_the_loop() -> None:
    with rank() as (recorder, source, _):
        rows = tile_ops.create_tensor([4, 8], dtype=FP32)
        for row in local_ops.parallel(4):  # each iteration fills its own row: fine
            rows = tile_ops.assemble(rows, local_ops.load(source, [row, 0], [1, 8]), [row, 0])
        for _ in local_ops.parallel(2):  # a buffer made inside the iteration is its own
            scratch = tile_ops.tile_create([1, 8], FP32)
            scratch = local_ops.store(tile_ops.tile_full([1, 8], FP32, 1.0), [0, 0], scratch)
        with pytest.raises(UnsupportedConstruct, match="a kernel-local tensor"):
            for _ in local_ops.parallel(2):  # every iteration writes row 0
                rows = tile_ops.assemble(rows, tile_ops.tile_full([1, 8], FP32, 1.0), [0, 0])
    np.testing.assert_array_equal(rows.data[3], np.arange(24, 32))
    assert len(recorder.log) == 4


def test_a_tile_wider_than_its_tensor_reads_and_writes_its_valid_block_only() -> None:
    """PyPTO's multicore tests stage an `[N, 2]` signal through an `[N, 8]` tile with
    `valid_shape=[N, 2]` (32-byte rows): no access past the tensor's end."""
    fixture = Path(__file__).resolve().parent / "fixtures" / "wide_tile.py"
    report = racecheck.verify(str(fixture), ranks="2")
    assert [result.verdict for result in report.results] == [racecheck.Verdict.PROVED]
    (spec,) = discover(load_file(str(fixture)))
    events = simulate(spec.instantiate(2)).trace.events[0]
    load, store = (e for e in events if e.label in ("pl.load", "pl.store"))
    assert load.access.ranges == ((0, 16),)  # the [2, 2] window, not 2 rows of 8
    assert store.access.ranges == ((0, 16),)


def test_offsets_given_as_a_scalar_are_refused_with_what_to_write() -> None:
    # probe: `pld.system.notify(sig, peer=p, offsets=me, ...)` said "'DeviceInt' object
    # is not iterable"
    with pytest.raises(TypeError, match=r"lists such as \[i, j\], got 3"):
        local_ops.indices(3)  # type: ignore[arg-type]
    assert local_ops.indices((1, 2)) == [1, 2]


def test_a_valid_shape_larger_than_the_tile_is_refused_naming_both(tmp_path: Path) -> None:
    # probe: valid_shape=[1, 64] on a [1, 32] tile said "could not broadcast input array"
    source = (FIXTURES / "ring_left.py").read_text()
    old = "shape=[1, SIZE])"
    assert source.count(old) == 1
    path = tmp_path / "valid_too_large.py"
    path.write_text(source.replace(old, "shape=[1, SIZE // 2], valid_shape=[1, SIZE])"))
    (result,) = racecheck.verify(str(path), ranks=[2], jobs=1).results
    assert result.verdict is racecheck.Verdict.UNKNOWN
    assert "valid_shape [1, 4] does not fit in the shape [1, 2]" in result.message


@pytest.mark.parametrize(
    ("shape", "base", "memory_nbytes"),
    [((3, 4), 0, 48), ((2, 3, 2), 8, 56), ((5,), 4, 24), ((), 4, 8), ((2, 2), 8, 20)],
)
def test_cell_start_is_the_one_element_region(
    shape: tuple[int, ...], base: int, memory_nbytes: int
) -> None:
    """`cell_start` (the signal path) agrees with `region_problem` + `region_runs` on
    every one-element region, inside and out of bounds, and on a view that overruns its
    buffer (the last shape)."""
    view = TensorView(
        memory=0,
        kind=MemoryKind.WINDOW,
        name="signal",
        base=base,
        shape=shape,
        dtype=INT32,
        memory_nbytes=memory_nbytes,
    )
    axes = [range(-1, size + 1) for size in shape]
    checked = 0
    for offsets in [*itertools.product(*axes), (0,) * (len(shape) + 1)]:
        ones = [1] * len(offsets)
        start = cell_start(view, offsets)
        if region_problem(view, offsets, ones) is not None:
            assert start is None, offsets
        else:
            assert region_runs(view, offsets, ones) == ((start, start + 4),), offsets
            checked += 1
    assert checked == (0 if base + view.nbytes > memory_nbytes else math.prod(shape))


def test_an_untouched_zero_page_tensor_snapshots_as_zeros_and_a_written_one_as_written() -> None:
    from racecheck.dsl.dtypes import BF16
    from racecheck.dsl.memory import HOST_OWNER, MemoryState

    memory = MemoryState(2)
    weights = memory.add_zero_host_tensor("w", (4, 8), BF16)
    assert not memory.snapshot(weights).any() and memory.snapshot(weights).shape == (4, 8)
    memory.write(weights, HOST_OWNER, [1, 2], np.ones((1, 1), dtype=np.float32))
    assert memory.snapshot(weights)[1, 2] == 1 and memory.snapshot(weights).sum() == 1
    chosen = memory.add_zero_host_tensor("t", (3,), BF16)
    memory.set_element(chosen, 2, 5.0)
    assert memory.snapshot(chosen).tolist() == [0, 0, 5]
