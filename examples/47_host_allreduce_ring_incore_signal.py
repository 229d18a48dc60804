"""A host ring all-reduce given the InCore ring's signal shape ``[2(N - 1), N]``.

The host ring kernel needs one more row, ``[2(N - 1) + 1, N]``, for its return
barrier; on a smaller signal PyPTO's kernel returns at once, touching neither the
signal nor the data (docs/model.md). Nothing races — every rank simply keeps its
own input. Without a golden model racecheck proves it free of races and says the
outputs match ``barrier`` (no data effect); asked for the sum, it reports the wrong
result.

racecheck expects:
    ranks 2..4: proved barrier
    ranks 2..4 --expect allreduce-sum: bug wrong-result
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

CHUNK = 12


def build_host_ring(nr: int):
    size = CHUNK * nr
    rows = 2 * (nr - 1)  # @shape

    @pl.program
    class HostRing:
        @pl.function(type=pl.FunctionType.InCore)
        def publish(
            self,
            inp: pl.Tensor[[1, size], pl.FP32],
            data: pl.Out[pld.DistributedTensor[[1, size], pl.FP32]],
        ) -> pld.DistributedTensor[[1, size], pl.FP32]:
            return pl.store(pl.load(inp, [0, 0], [1, size]), [0, 0], data)

        @pl.function(type=pl.FunctionType.InCore)
        def consume(
            self,
            data: pld.DistributedTensor[[1, size], pl.FP32],
            out: pl.Out[pl.Tensor[[1, size], pl.FP32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            return pl.store(pl.load(data, [0, 0], [1, size]), [0, 0], out)

        @pl.function(type=pl.FunctionType.Orchestration)
        def publish_orch(
            self,
            inp: pl.Tensor[[1, size], pl.FP32],
            data: pl.Out[pld.DistributedTensor[[1, size], pl.FP32]],
        ) -> pld.DistributedTensor[[1, size], pl.FP32]:
            return self.publish(inp, data)

        @pl.function(type=pl.FunctionType.Orchestration)
        def consume_orch(
            self,
            data: pld.DistributedTensor[[1, size], pl.FP32],
            out: pl.Out[pl.Tensor[[1, size], pl.FP32]],
        ) -> pl.Tensor[[1, size], pl.FP32]:
            return self.consume(data, out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            inputs: pl.Tensor[[nr, 1, size], pl.FP32],
            outputs: pl.Out[pl.Tensor[[nr, 1, size], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, size], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, size], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([rows, nr], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, size], dtype=pl.FP32)
                self.publish_orch(inputs[r], data, device=r)
            data = pld.window(data_buf, [1, size], dtype=pl.FP32)
            signal = pld.window(signal_buf, [rows, nr], dtype=pl.INT32)
            data = pld.tensor.allreduce(data, signal, mode="ring")  # @reduce
            for r in pl.range(pld.world_size()):
                self.consume_orch(data, outputs[r], device=r)
            return outputs

    return HostRing


def main() -> int:
    parser = argparse.ArgumentParser(description="host ring, InCore signal shape")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_host_ring(nr),
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    inputs = torch.randn((nr, 1, CHUNK * nr))
    outputs = torch.zeros_like(inputs)
    compiled(inputs, outputs)
    golden = inputs.sum(dim=0, keepdim=True).expand_as(outputs)
    print("OK" if torch.allclose(outputs, golden, rtol=1e-4, atol=1e-5) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
