"""All-to-all-v with one send count per destination read from the input, clamped to 0..M.

Like 135, but rank ``s`` reads its count for destination ``d`` from row ``s`` of a
``[N, N]`` input and clamps each (``pl.max(pl.min(c, M), 0)``): the ``N * N`` counts are
independent, ``(M + 3) ** (N * N)`` ways the comparisons can go. The builtin publishes
each ``min(send_counts[d], M)`` to ``d``; the receiver copies that many rows of each
source's block, then the rest of it (``pl.range(n, M)``: a loop whose start is the
count). racecheck keeps each count's form through both windows, runs one summary run in
which each copy loop runs every iteration any count reaches (from the least start to
the greatest stop), and proves it for every count. The outputs of that run are no
input's, so the proof claims no model.
``269_all_to_all_v_input_counts_bug_negative.py`` leaves the lower clamp out.

racecheck expects:
    ranks 2..8: proved
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
                rows = pl.max(pl.min(pl.read(count, [d]), MAX_RECV), 0)  # @clamp
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
