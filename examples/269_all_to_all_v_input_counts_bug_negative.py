"""The twin of 268 that clamps each count only from above.

A negative count reaches the receiver (the builtin's ``min(c, M)`` keeps it), and the
loop over the rest of the block, ``pl.range(n, M)``, then starts before the source's
rows: at the first source it reads before the window. racecheck solves for such a
count and shows it.

racecheck expects:
    ranks 2..4: bug out-of-bounds at @rest
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir import DistributedConfig

SIZE = 16
MAX_RECV = 2


def build_input_count_all_to_all_v(nr: int):
    total = nr * MAX_RECV

    @pl.program
    class InputCountAllToAllV:
        @pl.function(type=pl.FunctionType.InCore)
        def stage_step(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            count: pl.Tensor[[nr], pl.INT32],
            stage: pl.Out[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ):
            stage = pl.store(pl.load(inp, [0, 0], [total, SIZE]), [0, 0], stage)
            for d in pl.range(nr):
                rows = pl.min(pl.read(count, [d]), MAX_RECV)  # @clamp
                pl.write(counts, [d, 0], rows)

        @pl.function(type=pl.FunctionType.Orchestration)
        def stage_orch(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            count: pl.Tensor[[nr], pl.INT32],
            stage: pl.Out[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            counts: pl.Out[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ):
            self.stage_step(inp, count, stage, counts)

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
                    chunk = pl.load(data, [src * MAX_RECV + r, 0], [1, SIZE])  # @counted
                    out = pl.store(chunk, [src * MAX_RECV + r, 0], out)
                for r in pl.range(n_rows, MAX_RECV):
                    chunk = pl.load(data, [src * MAX_RECV + r, 0], [1, SIZE])  # @rest
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
            count: pl.Tensor[[nr, nr], pl.INT32],
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
                self.stage_orch(inputs[r], count[r], stage, counts, device=r)
            stage = pld.window(input_buf, [total, SIZE], dtype=pl.FP32)
            data = pld.window(data_buf, [total, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
            counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
            recv = pld.window(recv_buf, [nr, 1], dtype=pl.INT32)
            data = pld.tensor.all_to_all_v(stage, data, signal, counts, recv)  # @exchange
            for r in pl.range(pld.world_size()):
                self.consume_orch(data, recv, outputs[r], device=r)
            return outputs

    return InputCountAllToAllV


def main() -> int:
    parser = argparse.ArgumentParser(description="all_to_all_v with per-destination counts")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_input_count_all_to_all_v(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    total = nr * MAX_RECV
    inputs = torch.randn((nr, total, SIZE), dtype=torch.float32)
    count = torch.randint(-1, MAX_RECV + 2, (nr, nr), dtype=torch.int32)
    outputs = torch.zeros((nr, total, SIZE), dtype=torch.float32)
    compiled(inputs, count, outputs)
    golden = inputs.reshape(nr, nr, MAX_RECV, SIZE).transpose(0, 1).reshape(nr, total, SIZE)
    print("OK" if torch.allclose(outputs, golden) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
