"""``pld.tensor.all_to_all_v`` inside a kernel: counts published with Set, whole blocks put.

Each rank stages its ``N * M`` rows (``M = 2`` rows per destination) into a window and
calls the builtin with its send counts in a plain tensor. PyPTO lowers it to, per
destination ``d`` (self included), a ``Set`` notify of ``min(send_counts[d], M)`` into
``d``'s ``recv_counts[me]`` *before* the data, a put of the whole ``M``-row block into
``d``'s ``target``, then one barrier (docs/model.md). After the call each rank reads
every count back and copies the counted rows, then the rest of each block, so the
output is the plain all-to-all of the blocks.

The send counts are input data, and the published count steers the receiver's copy
loops after a round trip through the builtin's ``Set``: racecheck keeps the count's
symbolic form on the way and flips the comparisons the builtin's clamp and the loops
made. The builtin clamps only from above (``min(count, M)``): a negative count passes,
the receiver's second loop starts at it, and row ``src * M + count`` of source 0 is
outside ``target``; the finding names the count. Example
``135_all_to_all_v_input_count.py`` clamps its count to ``0..M`` and is proved.

racecheck expects:
    ranks 1..4: bug out-of-bounds at @rest
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16
MAX_RECV = 2
ROUNDS = 1  # @rounds


def build_all_to_all_v(nr: int):
    total = nr * MAX_RECV

    @pl.program
    class KernelAllToAllV:
        @pl.function(type=pl.FunctionType.InCore)
        def exchange(
            self,
            x: pl.Tensor[[total, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
            stage: pld.DistributedTensor[[total, SIZE], pl.FP32],
            target: pld.DistributedTensor[[total, SIZE], pl.FP32],
            signal: pld.DistributedTensor[[nr, 1], pl.INT32],
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            for _ in pl.range(ROUNDS):
                stage = pl.store(pl.load(x, [0, 0], [total, SIZE]), [0, 0], stage)
                target = pld.tensor.all_to_all_v(  # @exchange
                    stage, target, signal, send_counts, recv_counts
                )
                for src in pl.range(nr):
                    rows = pl.cast(pl.read(recv_counts, [src, 0]), pl.INDEX)
                    for r in pl.range(rows):
                        row = pl.load(target, [src * MAX_RECV + r, 0], [1, SIZE])  # @copy
                        y = pl.store(row, [src * MAX_RECV + r, 0], y)
                    for r in pl.range(rows, MAX_RECV):
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
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            return self.exchange(x, send_counts, y, stage, target, signal, recv_counts)

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
            recv_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                self.per_rank(
                    x[r],
                    send_counts[r],
                    y[r],
                    pld.window(stage_buf, [total, SIZE], dtype=pl.FP32),
                    pld.window(target_buf, [total, SIZE], dtype=pl.FP32),
                    pld.window(signal_buf, [nr, 1], dtype=pl.INT32),
                    pld.window(recv_buf, [nr, 1], dtype=pl.INT32),
                    device=r,
                )
            return y

    return KernelAllToAllV


def main() -> int:
    parser = argparse.ArgumentParser(description="all_to_all_v inside a kernel")
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
    send_counts = torch.ones((nr, nr, 1), dtype=torch.int32)
    y = torch.zeros_like(x)
    compiled(x, send_counts, y)
    golden = x.reshape(nr, nr, MAX_RECV, SIZE).transpose(0, 1).reshape(nr, total, SIZE)
    print("OK" if torch.equal(y, golden) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
