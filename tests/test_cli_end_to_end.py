"""The command line on real collective files: verdicts, the trace view, and bad input.

Every bad input must end in exit status 2 with one line on stderr that names the file
(and line, where there is one) and no traceback. These tests need the whole pipeline
(frontend, co-simulation, engines), so they skip while `racecheck.load` is absent.
"""

from __future__ import annotations

import io
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("racecheck.load")

from racecheck.cli import main  # noqa: E402 - only once the pipeline exists

KERNEL_HEAD = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 64
NR = pl.dynamic("NR")


@pl.program
class MeshAllreduce:
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        data: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[NR, 1], pl.INT32],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        ctx = pld.get_comm_ctx(data)
        my_rank = pld.rank(ctx)
        nranks = pld.nranks(ctx)
        local = pl.load(x, [0, 0], [1, SIZE])
        data = pl.store(local, [0, 0], data)
"""

BARRIER = """
        for peer in pl.range(nranks):
            if peer != my_rank:
                pld.system.notify(signal, peer=peer, offsets=[my_rank, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
        for src in pl.range(nranks):
            if src != my_rank:
                pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
"""

KERNEL_TAIL = """
        acc = pl.load(data, [0, 0], [1, SIZE])
        for peer in pl.range(nranks):
            if peer != my_rank:
                recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0], shape=[1, SIZE])
                acc = pl.add(acc, recv)
        y = pl.store(acc, [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(self, x, y, data, signal):
        return self.kernel(x, y, data, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def entry(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[NR, 1, SIZE], pl.FP32]:
        data_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_buf = pld.alloc_window_buffer([pld.world_size(), 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [pld.world_size(), 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], data, signal, device=r)
        return y
"""

MESH = KERNEL_HEAD + BARRIER + KERNEL_TAIL
MESH_WITHOUT_BARRIER = KERNEL_HEAD + KERNEL_TAIL
REMOTE_LOAD_LINE = 1 + MESH_WITHOUT_BARRIER.splitlines().index(
    "                recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0], shape=[1, SIZE])"
)

UNKNOWN_CALL = MESH.replace("acc = pl.add(acc, recv)", "acc = pld.foo(acc, recv)")
UNKNOWN_CALL_LINE = 1 + UNKNOWN_CALL.splitlines().index("                acc = pld.foo(acc, recv)")
UNKNOWN_CALL_AT = f"unknown_call.py:{UNKNOWN_CALL_LINE}:"

FACTORY_WITH_EXTRA_PARAMETER = """
import pypto.language as pl
import pypto.language.distributed as pld


def build_exchange(nr, size):
    @pl.program
    class Exchange:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.Tensor[[1, size], pl.FP32]) -> pl.Tensor[[1, size], pl.FP32]:
            return x

    return Exchange
"""


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


def run(*argv: str) -> Run:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return Run(code=code, out=out.getvalue(), err=err.getvalue())


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_correct_mesh_is_proved_at_every_rank_count(tmp_path: Path) -> None:
    path = write(tmp_path, "mesh.py", MESH)
    result = run("verify", path, "--ranks", "2..4")
    assert result.code == 0, result.out + result.err
    for ranks in (2, 3, 4):
        assert f"MeshAllreduce  P={ranks}  proved" in result.out
    assert "allreduce-sum" in result.out
    assert result.out.rstrip().endswith("3 proved, 0 bugs, 0 skipped, 0 unknown")


def test_missing_barrier_is_one_race_block_across_rank_counts(tmp_path: Path) -> None:
    path = write(tmp_path, "mesh_nobarrier.py", MESH_WITHOUT_BARRIER)
    result = run("verify", path, "--ranks", "2..4")
    assert result.code == 1, result.out + result.err
    assert result.out.count(f"{path}:{REMOTE_LOAD_LINE}: error: [race-raw] data race") == 1
    assert "at P=2..4]" in result.out


def test_trace_lists_each_ranks_events_with_their_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "mesh.py", MESH)
    result = run("trace", path, "--ranks", "2")
    assert result.code == 0, result.err
    assert "rank 0:" in result.out and "rank 1:" in result.out
    notify_lines = [line for line in result.out.splitlines() if " notify " in line]
    assert len(notify_lines) == 2  # one per rank, to its single peer
    assert "AtomicAdd 1" in notify_lines[0] and "pld.system.notify" in notify_lines[0]
    assert any(" wait " in line and "Ge 1" in line for line in result.out.splitlines())


@dataclass(frozen=True)
class BadInput:
    name: str
    file_text: str | None  # None: the file does not exist
    extra: tuple[str, ...]
    says: tuple[str, ...]  # substrings of the one stderr line


BAD_INPUTS = [
    BadInput("missing", None, (), ("missing.py",)),
    BadInput("syntax", "x = 1\ndef broken(:\n    pass\n", (), ("syntax.py:2:",)),
    BadInput("unknown_call", UNKNOWN_CALL, (), (UNKNOWN_CALL_AT, "pld.foo")),
    BadInput(
        "unset_parameter",
        FACTORY_WITH_EXTRA_PARAMETER,
        (),
        ("unset_parameter.py", "size", "--arg size="),
    ),
    BadInput("bad_model", MESH, ("--expect", "allreduce-median"), ("allreduce-median",)),
    BadInput("bad_ranks", MESH, ("--ranks", "8..2"), ("ranks '8..2'",)),
    BadInput("bad_engine", MESH, ("--engine", "z3"), ("unknown engine 'z3'",)),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda case: case.name)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, case: BadInput) -> None:
    path = str(tmp_path / f"{case.name}.py")
    if case.file_text is not None:
        write(tmp_path, f"{case.name}.py", case.file_text)
    result = run("verify", path, "--ranks", "2", *case.extra)
    assert result.code == 2, result.out + result.err
    assert len(result.err.splitlines()) == 1, result.err
    assert "Traceback" not in result.err
    assert "internal error" not in result.err
    assert "error:" in result.err
    for fragment in case.says:
        assert fragment in result.err


def test_bad_input_with_debug_shows_the_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "syntax.py", "def broken(:\n")
    result = run("verify", path, "--debug")
    assert result.code == 2
    assert "Traceback" in result.err
