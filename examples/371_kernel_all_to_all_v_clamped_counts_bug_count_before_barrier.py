"""370's kernel all_to_all_v with the received counts read before the call: too early.

The receiver wants its loop bounds early and reads every ``recv_counts[src]`` before it
calls ``pld.tensor.all_to_all_v``, into a window of its own it loops over after the
call.
The builtin's ``Set`` of each count comes from the source rank, ordered before the
reader only by the builtin's barrier, which runs after the read: the read races with
the ``Set`` (a rank that has not published yet leaves 0 there, or the value of a
previous call). ``--ranks all`` gives no answer for every P: the early read is traced
before any ``Set`` of its window, as 0 only, and the builtin's ``Set`` stores ``0..2``
there afterwards, so the read's value would not cover the cell's (the fallback names
both lines); the concrete checks at P = 2..8 show the race.
``370_kernel_all_to_all_v_clamped_counts.py`` reads the counts after the call.

racecheck expects:
    ranks 2..3: bug race at @early, @exchange
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
    class KernelAllToAllVEarlyCount:
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
            expected: pld.DistributedTensor[[nr, 1], pl.INT32],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            stage = pl.store(pl.load(x, [0, 0], [total, SIZE]), [0, 0], stage)
            for d in pl.range(nr):
                rows = pl.max(pl.min(pl.read(send_counts, [d, 0]), MAX_RECV), 0)  # @clamp
                pl.write(counts, [d, 0], rows)
            for src in pl.range(nr):
                early = pl.read(recv_counts, [src, 0])  # @early
                pl.write(expected, [src, 0], early)
            target = pld.tensor.all_to_all_v(  # @exchange
                stage, target, signal, counts, recv_counts
            )
            for src in pl.range(nr):
                n_rows = pl.cast(pl.read(expected, [src, 0]), pl.INDEX)
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
            expected: pld.DistributedTensor[[nr, 1], pl.INT32],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            return self.exchange(
                x, send_counts, y, stage, target, signal, counts, recv_counts, expected
            )

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
            expected_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
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
                    pld.window(expected_buf, [nr, 1], dtype=pl.INT32),
                    device=r,
                )
            return y

    return KernelAllToAllVEarlyCount


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
