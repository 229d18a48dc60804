"""370's kernel all_to_all_v with the send counts clamped from above only.

The program clamps each count with ``pl.min(c, M)`` and leaves the lower clamp out,
trusting the builtin; but PyPTO's lowering clamps from above only too (``min(count,
M)``, no floor at 0: all_to_all_v's kernel.cpp.in says so), so a negative count reaches
the receiver. Its first copy loop then runs no iteration, and the second,
``pl.range(n, M)``, starts at the negative count: row ``src * M + n`` of source 0 is
before the target window. For every P the bounds obligation fails at P = 2, where the
ordinary check shows the out-of-bounds load with the negative count it takes.
``370_kernel_all_to_all_v_clamped_counts.py`` clamps to ``0..M``.

racecheck expects:
    ranks 2..3: bug out-of-bounds at @rest
    all: bug at P=2 out-of-bounds at @rest
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
    class KernelAllToAllVUpperClamp:
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
                rows = pl.min(pl.read(send_counts, [d, 0]), MAX_RECV)  # @clamp
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

    return KernelAllToAllVUpperClamp


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
