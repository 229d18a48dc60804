"""``pld.tensor.all_to_all_v`` inside a kernel, its send counts clamped by the program.

Each rank stages its ``N * M`` rows (``M = 2`` rows per destination) into a window,
reads its count for each destination ``d`` from its ``send_counts`` input, clamps it to
``0..M`` (``pl.max(pl.min(c, M), 0)``) and writes it with ``pl.write`` into cell ``d`` of
a counts window, which it hands to the builtin. PyPTO's InCore lowering then publishes,
per destination (self included), ``min(counts[d], M)`` into ``d``'s ``recv_counts[me]``
with a ``Set`` *before* the data, puts the whole ``M``-row block, and ends with one
barrier (docs/model.md; ``M`` is ``target.shape[0] // signal.shape[0]``, ``(N * M) // N``).
After the call each rank reads every received count back and copies that many rows of
the source's block, then the rest of it.

For every P (``--ranks all``) racecheck follows the builtin's lowering with the rank and
N symbolic: the count a rank writes lies in ``0..M``, so the one the builtin reads back
from the counts window does (0 or a value a ``pl.write`` stores), the ``Set`` publishes
a value in ``0..M``, and both copy loops stay inside the source's block for every count.
``371_kernel_all_to_all_v_clamped_counts_bug_count_before_barrier.py`` reads the counts
before the call, ``372_kernel_all_to_all_v_clamped_counts_bug_no_lower_clamp.py`` clamps
from above only, ``373_kernel_all_to_all_v_clamped_counts_bug_sent_count.py`` copies as
many rows as it sent, unclamped.

racecheck expects:
    ranks 2..3: proved
    all: proved for every P
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16
MAX_RECV = 2


def build_all_to_all_v(nr: int):
    total = nr * MAX_RECV

    @pl.program
    class KernelAllToAllVClamped:
        @pl.function(type=pl.FunctionType.InCore)
        def exchange(
            self,
            x: pl.Tensor[[total, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
            stage: pld.DistributedTensor[[total, SIZE], pl.FP32],
            target: pld.DistributedTensor[[total, SIZE], pl.FP32],
            signal: pld.DistributedTensor[[nr, 1], pl.INT32],
            counts: pld.DistributedTensor[[nr, 1], pl.INT32],
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            stage = pl.store(pl.load(x, [0, 0], [total, SIZE]), [0, 0], stage)
            for d in pl.range(nr):
                rows = pl.max(pl.min(pl.read(send_counts, [d, 0]), MAX_RECV), 0)  # @clamp
                pl.write(counts, [d, 0], rows)
            target = pld.tensor.all_to_all_v(  # @exchange
                stage, target, signal, counts, recv_counts
            )
            for src in pl.range(nr):
                n_rows = pl.cast(pl.read(recv_counts, [src, 0]), pl.INDEX)  # @count
                for r in pl.range(n_rows):
                    row = pl.load(target, [src * MAX_RECV + r, 0], [1, SIZE])  # @copy
                    y = pl.store(row, [src * MAX_RECV + r, 0], y)
                for r in pl.range(n_rows, MAX_RECV):
                    row = pl.load(target, [src * MAX_RECV + r, 0], [1, SIZE])  # @rest
                    y = pl.store(row, [src * MAX_RECV + r, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[total, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
            stage: pld.DistributedTensor[[total, SIZE], pl.FP32],
            target: pld.DistributedTensor[[total, SIZE], pl.FP32],
            signal: pld.DistributedTensor[[nr, 1], pl.INT32],
            counts: pld.DistributedTensor[[nr, 1], pl.INT32],
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            return self.exchange(x, send_counts, y, stage, target, signal, counts, recv_counts)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            x: pl.Tensor[[nr, total, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr, total, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, total, SIZE], pl.FP32]:
            stage_buf = pld.alloc_window_buffer([total, SIZE], dtype=pl.FP32)
            target_buf = pld.alloc_window_buffer([total, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            counts_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            recv_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                self.per_rank(
                    x[r],
                    send_counts[r],
                    y[r],
                    pld.window(stage_buf, [total, SIZE], dtype=pl.FP32),
                    pld.window(target_buf, [total, SIZE], dtype=pl.FP32),
                    pld.window(signal_buf, [nr, 1], dtype=pl.INT32),
                    pld.window(counts_buf, [nr, 1], dtype=pl.INT32),
                    pld.window(recv_buf, [nr, 1], dtype=pl.INT32),
                    device=r,
                )
            return y

    return KernelAllToAllVClamped


def main() -> int:
    parser = argparse.ArgumentParser(description="kernel all_to_all_v, clamped counts")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_all_to_all_v(nr),
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    total = nr * MAX_RECV
    x = torch.randn((nr, total, SIZE))
    send_counts = torch.randint(-1, MAX_RECV + 2, (nr, nr, 1), dtype=torch.int32)
    y = torch.zeros_like(x)
    compiled(x, send_counts, y)
    golden = x.reshape(nr, nr, MAX_RECV, SIZE).transpose(0, 1).reshape(nr, total, SIZE)
    print("OK" if torch.equal(y, golden) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
