"""Variable-length all-to-all called from the host function (``pld.tensor.all_to_all_v``).

Every rank stages its ``N * M`` rows (``M = 4`` rows per destination) into a window
and writes its per-destination send counts (``N - d`` rows for destination ``d``) into a
counts window; the host function
then calls the builtin, which PyPTO lowers to one dispatch of its kernel per device.
Per destination ``d``, self included, the kernel publishes ``min(send_counts[d], M)``
into ``d``'s ``recv_counts[me]`` with a ``Set`` notify *before* the data, puts the
whole ``M``-row block, and ends with a barrier. The consumer reads each count back
(control flow from memory) and copies the valid rows, then the rest of the block, so
the output is the plain all-to-all of the blocks.

Run twice on the same windows (``--repeat 2``, persistent windows without reset) the
second call's puts and counts land while a slower receiver still copies out the first
call's rows: the builtin has no read-complete barrier (docs/model.md).

racecheck expects:
    ranks 1: proved
    ranks 2..4: proved all_to_all
    ranks 2 --repeat 2: bug race write-after-read at @consume, @exchange
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir import DistributedConfig

SIZE = 16
MAX_RECV = 4


def build_host_all_to_all_v(nr: int):
    total = nr * MAX_RECV

    @pl.program
    class HostAllToAllV:
        @pl.function(type=pl.FunctionType.InCore)
        def stage_step(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            stage: pl.Out[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ):
            for row in pl.range(total):
                chunk = pl.load(inp, [row, 0], [1, SIZE])
                stage = pl.store(chunk, [row, 0], stage)
            for d in pl.range(nr):
                pl.write(counts, [d, 0], nr - d)

        @pl.function(type=pl.FunctionType.Orchestration)
        def stage_orch(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            stage: pl.Out[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ):
            self.stage_step(inp, stage, counts)

        @pl.function(type=pl.FunctionType.InCore)
        def consume_step(
            self,
            data: pld.DistributedTensor[[total, SIZE], pl.FP32],
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
            out: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            for src in pl.range(nr):
                n_rows = pl.cast(pl.read(recv_counts, [src, 0]), pl.INDEX)
                for r in pl.range(n_rows):
                    chunk = pl.load(data, [src * MAX_RECV + r, 0], [1, SIZE])  # @consume
                    out = pl.store(chunk, [src * MAX_RECV + r, 0], out)
                for r in pl.range(n_rows, MAX_RECV):
                    chunk = pl.load(data, [src * MAX_RECV + r, 0], [1, SIZE])
                    out = pl.store(chunk, [src * MAX_RECV + r, 0], out)
            return out

        @pl.function(type=pl.FunctionType.Orchestration)
        def consume_orch(
            self,
            data: pld.DistributedTensor[[total, SIZE], pl.FP32],
            recv_counts: pld.DistributedTensor[[nr, 1], pl.INT32],
            out: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            return self.consume_step(data, recv_counts, out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            inputs: pl.Tensor[[nr, total, SIZE], pl.FP32],
            outputs: pl.Out[pl.Tensor[[nr, total, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, total, SIZE], pl.FP32]:
            input_buf = pld.alloc_window_buffer(total * SIZE * pl.FP32.get_byte())
            data_buf = pld.alloc_window_buffer(total * SIZE * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            counts_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            recv_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                stage = pld.window(input_buf, [total, SIZE], dtype=pl.FP32)
                counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
                self.stage_orch(inputs[r], stage, counts, device=r)
            stage = pld.window(input_buf, [total, SIZE], dtype=pl.FP32)
            data = pld.window(data_buf, [total, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
            counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
            recv = pld.window(recv_buf, [nr, 1], dtype=pl.INT32)
            data = pld.tensor.all_to_all_v(stage, data, signal, counts, recv)  # @exchange
            for r in pl.range(pld.world_size()):
                self.consume_orch(data, recv, outputs[r], device=r)
            return outputs

    return HostAllToAllV


def main() -> int:
    parser = argparse.ArgumentParser(description="host-level all_to_all_v")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_host_all_to_all_v(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    total = nr * MAX_RECV
    inputs = torch.randn((nr, total, SIZE), dtype=torch.float32)
    outputs = torch.zeros((nr, total, SIZE), dtype=torch.float32)
    compiled(inputs, outputs)
    golden = inputs.reshape(nr, nr, MAX_RECV, SIZE).transpose(0, 1).reshape(nr, total, SIZE)
    print("OK" if torch.allclose(outputs, golden) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
