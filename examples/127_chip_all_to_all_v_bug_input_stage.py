"""All-to-all-v in a per-device function whose staging kernel declares its windows inputs.

126_chip_all_to_all_v.py with ``stage_step``'s ``stage`` and ``counts`` declared as
plain (input) parameters although it writes them. PyPTO infers task edges from the
declared directions (docs/model.md): an input registers no producer, so nothing
orders the collective, which reads ``stage`` and ``counts``, after the staging. It
can run first: it reads counts nothing has written yet (zeros) and sends rows that
are not staged, so every rank copies out zeros.

racecheck expects:
    ranks 1..4: bug race read-after-write at @exchange, @count
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir import DistributedConfig

SIZE = 16
MAX_RECV = 4


def build_chip_all_to_all_v(nr: int):
    total = nr * MAX_RECV

    @pl.program
    class ChipAllToAllV:
        @pl.function(type=pl.FunctionType.InCore)
        def stage_step(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            stage: pld.DistributedTensor[[total, SIZE], pl.FP32],
            counts: pld.DistributedTensor[[nr, 1], pl.INT32],
        ):
            for row in pl.range(total):
                chunk = pl.load(inp, [row, 0], [1, SIZE])
                stage = pl.store(chunk, [row, 0], stage)
            for d in pl.range(nr):
                pl.write(counts, [d, 0], nr - d)  # @count

        @pl.function(type=pl.FunctionType.InCore)
        def consume_step(
            self,
            data: pl.InOut[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            recv_counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            out: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            for src in pl.range(nr):
                n_rows = pl.cast(pl.read(recv_counts, [src, 0]), pl.INDEX)
                for r in pl.range(n_rows):
                    chunk = pl.load(data, [src * MAX_RECV + r, 0], [1, SIZE])
                    out = pl.store(chunk, [src * MAX_RECV + r, 0], out)
                for r in pl.range(n_rows, MAX_RECV):
                    chunk = pl.load(data, [src * MAX_RECV + r, 0], [1, SIZE])
                    out = pl.store(chunk, [src * MAX_RECV + r, 0], out)
            return out

        @pl.function(type=pl.FunctionType.Orchestration)
        def chip_pipeline(
            self,
            inp: pl.Tensor[[total, SIZE], pl.FP32],
            out: pl.Out[pl.Tensor[[total, SIZE], pl.FP32]],
            stage: pl.InOut[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[total, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            recv: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[total, SIZE], pl.FP32]:
            self.stage_step(inp, stage, counts)
            data = pld.tensor.all_to_all_v(stage, data, signal, counts, recv)  # @exchange
            return self.consume_step(data, recv, out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            inputs: pl.Tensor[[nr, total, SIZE], pl.FP32],
            outputs: pl.Out[pl.Tensor[[nr, total, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, total, SIZE], pl.FP32]:
            stage_buf = pld.alloc_window_buffer(total * SIZE * pl.FP32.get_byte())
            data_buf = pld.alloc_window_buffer(total * SIZE * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            counts_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            recv_buf = pld.alloc_window_buffer(nr * pl.INT32.get_byte())
            for r in pl.range(pld.world_size()):
                stage = pld.window(stage_buf, [total, SIZE], dtype=pl.FP32)
                data = pld.window(data_buf, [total, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
                recv = pld.window(recv_buf, [nr, 1], dtype=pl.INT32)
                self.chip_pipeline(
                    inputs[r], outputs[r], stage, data, signal, counts, recv, device=r
                )
            return outputs

    return ChipAllToAllV


def main() -> int:
    parser = argparse.ArgumentParser(description="staging declared as input")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_chip_all_to_all_v(nr),
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
