"""Device scalars leave INT32 (docs/model.md): the device wraps or is undefined there,
racecheck does not follow it. A concrete run where one does is `unknown`, naming the
line and the value, with no finding; `--ranks all` proves nothing beyond the smallest
P where one does (and falls back when that P is small)."""

from __future__ import annotations

import json
from pathlib import Path

import racecheck
from racecheck.dsl.scalars import DeviceInt
from racecheck.findings import ProgramResult, Verdict
from racecheck.report.json import render_json
from racecheck.report.sarif import render_sarif
from racecheck.report.text import render_text

# Every rank puts its row into rank 0's window and notifies; `{row}` computes the row
# from `me`, the rank (an INT32 scalar); `{host}` is a line of the host entry.
SOURCE = """
import pypto.language as pl
import pypto.language.distributed as pld

NR = pl.dynamic("NR")
SIZE = 8


@pl.program
class Rows:
    @pl.function(type=pl.FunctionType.InCore)
    def put_row(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        rows: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        ctx = pld.get_comm_ctx(rows)
        me = pld.rank(ctx)
        local = pl.load(x, [0, 0], [1, SIZE])
        row = {row}  # @row
        pld.tile.remote_store(local, rows, peer=0, offsets=[row, 0])
        pld.system.notify(signal, peer=0, offsets=[row, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        rows: pl.InOut[pld.DistributedTensor[[NR, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[NR, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.put_row(x, y, rows, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def entry(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[NR, 1, SIZE], pl.FP32]:
        {host}  # @host
        rows_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            rows = pld.window(rows_buf, [NR, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [NR, 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], rows, signal, device=r)
        return y
"""
# `me` (INT32) times an INT32 2**28 leaves INT32 at rank 8 (P >= 9); the division brings
# it back in range. A bare literal is INDEX: `me * 268435456` is computed in 64 bits and
# does not wrap (docs/model.md §1); the every-P prover still bounds P by it (below).
OVERFLOWS_AT_9 = "(me * pl.cast(268435456, pl.INT32)) // 268435456"
PROMOTED = "(me * 268435456) // 268435456"
IN_RANGE = "(me * 4) // 4"


def _program(tmp_path: Path, row: str, host: str = "pass") -> tuple[Path, int]:
    """The program with its row and host line; the line number of marker `# @row`."""
    path = tmp_path / "rows.py"
    path.write_text(SOURCE.replace("{row}", row).replace("{host}", host))
    return path, _line(path, "# @row")


def _line(path: Path, marker: str) -> int:
    lines = path.read_text().splitlines()
    return next(number for number, text in enumerate(lines, start=1) if marker in text)


def _verify(path: Path, ranks: str) -> list[ProgramResult]:
    return list(racecheck.verify(str(path), ranks=ranks).results)


def test_a_rank_scalar_leaving_int32_makes_the_run_unknown_at_its_line(tmp_path: Path) -> None:
    path, line = _program(tmp_path, OVERFLOWS_AT_9)
    (result,) = _verify(path, "9")
    assert (result.verdict, result.findings) == (Verdict.UNKNOWN, ())
    assert result.message == (
        f"line {line}: `8 * 268435456` = 2147483648 leaves the INT32 range; the device wraps"
        " or is undefined there (docs/model.md), racecheck does not follow it"
    )


def test_a_literal_promotes_the_product_to_index_so_it_does_not_wrap(tmp_path: Path) -> None:
    path, _ = _program(tmp_path, PROMOTED)
    (result,) = _verify(path, "9")
    assert (result.verdict, result.findings) == (Verdict.PROVED, ())


def test_below_the_overflow_every_p_is_proved(tmp_path: Path) -> None:
    path, _ = _program(tmp_path, OVERFLOWS_AT_9)
    results = _verify(path, "2..8")
    assert [(result.ranks, result.verdict) for result in results] == [
        (ranks, Verdict.PROVED) for ranks in range(2, 9)
    ]


def test_every_p_falls_back_naming_the_overflow(tmp_path: Path) -> None:
    path, line = _program(tmp_path, PROMOTED)
    results = _verify(path, "all")
    assert [(result.ranks, result.verdict) for result in results] == [
        (ranks, Verdict.PROVED) for ranks in range(2, 9)
    ]
    assert all(result.every_p is None for result in results)
    assert results[0].notes[0] == (
        f"not proved for every P: at P=9, line {line} computes `(rank * 268435456)` outside"
        " the INT32 range; checked P=2..8 instead"
    )


def test_arithmetic_in_range_up_to_a_large_p_is_proved_below_it(tmp_path: Path) -> None:
    path, line = _program(tmp_path, IN_RANGE)
    (result,) = _verify(path, "all")
    assert result.verdict is Verdict.PROVED and result.every_p is not None
    assert (result.every_p.low, result.every_p.high) == (2, 536870913)
    assert (
        f"P < 536870913 (at P=536870913, line {line} computes `(rank * 4)` outside the INT32"
        " range; the device wraps or is undefined there)"
    ) in result.every_p.assumptions


def test_a_bounded_every_p_proof_says_its_bound_in_every_format(tmp_path: Path) -> None:
    path, _ = _program(tmp_path, IN_RANGE)
    report = racecheck.verify(str(path), ranks="all")
    bounded = "races, deadlocks, bounds: every 2 <= P < 536870913; outputs: checked at P = "
    assert bounded in render_text(report, color=False)
    assert bounded in render_sarif(report)
    (described,) = json.loads(render_json(report))["results"]
    assert (described["every_p"]["low"], described["every_p"]["high"]) == (2, 536870913)


def test_a_run_past_int32_reports_no_finding_of_its_unbounded_values(tmp_path: Path) -> None:
    # unbounded, rank 1's row is 2^32 + 1 (out of bounds); wrapped it would be 1
    path, line = _program(tmp_path, "me * pl.cast(65536, pl.INT32) * pl.cast(65536, pl.INT32) + me")
    for result in _verify(path, "2..3"):
        assert (result.verdict, result.findings) == (Verdict.UNKNOWN, ())
        assert result.message.startswith(f"line {line}: `65536 * 65536` = 4294967296 leaves")


def test_a_host_scalar_leaving_its_type_makes_the_run_unknown(tmp_path: Path) -> None:
    # `pld.world_size()` is INT64 in PyPTO: 2 * 2^62 leaves it, 2 * 2^30 does not
    path, _ = _program(tmp_path, "me", host="spare = pld.world_size() * 4611686018427387904")
    line = _line(path, "# @host")
    (small,) = _verify(path, "2..2")
    assert (small.verdict, small.findings) == (Verdict.UNKNOWN, ())
    assert small.message.startswith(
        f"line {line}: `2 * 4611686018427387904` = 9223372036854775808 leaves the INT64 range"
    )
    path, _ = _program(tmp_path, "me", host="spare = pld.world_size() * 1073741824")
    (small,) = _verify(path, "2..2")
    assert (small.verdict, small.findings) == (Verdict.PROVED, ())


def test_outside_a_run_device_scalars_are_python_integers() -> None:
    assert DeviceInt(2**31 - 1) + 1 == 2**31
    assert -DeviceInt(-(2**31)) == 2**31


def test_no_bound_where_only_p_itself_would_leave_int32() -> None:
    """Example 01 computes `rank + 1`, which leaves INT32 only at P = 2^31: P is an INT32
    scalar itself and never gets there, so the proof carries no bound."""
    example = Path(__file__).resolve().parent.parent / "examples" / "01_shift_builtin_barrier.py"
    (result,) = racecheck.verify(str(example), ranks="all").results
    assert result.verdict is Verdict.PROVED and result.every_p is not None
    assert result.every_p.high is None
    assert not any(assumption.startswith("P < ") for assumption in result.every_p.assumptions)


# Every rank stores its row into the window of rank `peer`, computed from a Python
# integer the host hands the kernel as an INT32 scalar: 2^32, which the device does not
# hold. Unbounded, `peer` is `me` (proved); cast to INT32 it is `me - 1`, -1 at rank 0.
HANDED = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 4
BIG = 4294967296


def build(nr: int):
    @pl.program
    class Handed:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            inbox: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            k: pl.Scalar[pl.INT32],
        ):
            ctx = pld.get_comm_ctx(inbox)
            {peer}
            local = pl.load(x, [0, 0], [1, SIZE])
            pld.tile.remote_store(local, inbox, peer=peer, offsets=[0, 0])

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def entry(self, x: pl.Tensor[[nr, 1, SIZE], pl.FP32]):
            buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            for r in pl.range(pld.world_size()):
                inbox = pld.window(buf, [1, SIZE], dtype=pl.FP32)
                self.step(x[r], inbox, {k}, device=r)  # @dispatch

    return Handed
"""
FROM_K = "peer = k // 65536 // 65536 - 1 + pld.rank(ctx)  # @peer"
CARRIED = """for i, (acc,) in pl.range(0, 1, 1, init_values=(BIG,)):  # @peer
                acc = pl.yield_(acc)
            peer = acc // 65536 // 65536 - 1 + pld.rank(ctx)"""


def _handed(tmp_path: Path, peer: str, k: str) -> Path:
    path = tmp_path / "handed.py"
    path.write_text(HANDED.replace("{peer}", peer).replace("{k}", k))
    return path


def test_a_dispatched_python_integer_outside_int32_makes_the_run_unknown(tmp_path: Path) -> None:
    path = _handed(tmp_path, FROM_K, "BIG")
    line = _line(path, "# @dispatch")
    for result in _verify(path, "2..3"):
        assert (result.verdict, result.findings) == (Verdict.UNKNOWN, ())
        assert result.message == (
            f"line {line}: `4294967296` handed to the device leaves the INT32 range; the device"
            " wraps or is undefined there (docs/model.md), racecheck does not follow it"
        )


def test_a_loop_carried_literal_is_index_so_2_to_the_32_is_followed(tmp_path: Path) -> None:
    # the init value is a literal, INDEX in PyPTO: `acc // 2^32` is 1 and peer is `me`
    path = _handed(tmp_path, CARRIED, "0")
    (result,) = _verify(path, "2")
    assert (result.verdict, result.findings) == (Verdict.PROVED, ())


def test_a_loop_carried_python_integer_outside_index_makes_the_run_unknown(
    tmp_path: Path,
) -> None:
    path = _handed(tmp_path, CARRIED.replace("(BIG,)", "(BIG * BIG * BIG,)"), "0")
    line = _line(path, "# @peer")
    (result,) = _verify(path, "2")
    assert (result.verdict, result.findings) == (Verdict.UNKNOWN, ())
    assert result.message.startswith(
        f"line {line}: `{2**96}` handed to the device leaves the INDEX range"
    )


def test_a_dispatched_python_integer_in_int32_is_followed(tmp_path: Path) -> None:
    path = _handed(tmp_path, FROM_K, "2147483647")
    # k // 2^32 is 0: peer is me - 1, -1 at rank 0
    (result,) = _verify(path, "2")
    assert result.verdict is Verdict.BUG
    assert {finding.kind.value for finding in result.findings} == {"out-of-bounds"}
