"""370's kernel all_to_all_v whose receiver copies as many rows as it sent, unclamped.

The program writes its raw send counts into the counts window (no clamp: the builtin
clamps what it publishes) and the receiver, assuming every pair exchanges as many
rows both ways, takes its loop bound from its own counts window instead of
``recv_counts``. That count was never clamped: a count above the block's ``M`` rows
copies rows past the source's block, and past the target window for the last source.
The file declares the counts it is called with (``# racecheck: assume send_counts in
0..8``, below the imports): within them, for every P the bounds obligation fails at
P = 2, where the ordinary check shows the out-of-bounds load with the count that
overflows the block.
``370_kernel_all_to_all_v_clamped_counts.py`` clamps and reads ``recv_counts``.

racecheck expects:
    ranks 2..3: bug out-of-bounds at @copy
    all: bug at P=2 out-of-bounds at @copy
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

# racecheck: assume send_counts in 0..8

SIZE = 16
MAX_RECV = 2


def build_all_to_all_v(nr: int):
    total = nr * MAX_RECV

    @pl.program
    class KernelAllToAllVSentCount:
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
                pl.write(counts, [d, 0], pl.read(send_counts, [d, 0]))
            target = pld.tensor.all_to_all_v(  # @exchange
                stage, target, signal, counts, recv_counts
            )
            for src in pl.range(nr):
                n_rows = pl.cast(pl.read(counts, [src, 0]), pl.INDEX)  # @count
                for r in pl.range(n_rows):
                    row = pl.load(target, [src * MAX_RECV + r, 0], [1, SIZE])  # @copy
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

    return KernelAllToAllVSentCount


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
    send_counts = torch.randint(0, 9, (nr, nr, 1), dtype=torch.int32)
    y = torch.zeros_like(x)
    compiled(x, send_counts, y)
    golden = x.reshape(nr, nr, MAX_RECV, SIZE).transpose(0, 1).reshape(nr, total, SIZE)
    print("OK" if torch.equal(y, golden) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
