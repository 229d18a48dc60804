"""All-reduce called from the host function, on two cores, as PyPTO's docs recommend.

Every rank stages its input into the ``data`` window; the host function then calls
``pld.tensor.allreduce`` itself, which PyPTO lowers to one dispatch of its builtin
kernel per device. With ``core_num=2`` and a ``[N, 2]`` signal, block ``b`` of the
kernel synchronises on lane ``b`` and reduces the 256-element tiles ``b, b + 2, ...``
of the 600 elements (three tiles: barrier generations 1..3 on lane 0, 1..2 on lane 1),
storing each tile of its own copy after a barrier; its epilogue clears the signal. A
last dispatch copies the result out. racecheck models the host kernel itself, so the
proof speaks about this size and these lanes.

racecheck expects:
    ranks 1..4: proved allreduce-sum
    ranks 2..3 --repeat 2: proved allreduce-sum
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 600
CORES = 2


def build_host_allreduce(nr: int):
    @pl.program
    class HostAllreduce:
        @pl.function(type=pl.FunctionType.InCore)
        def publish(
            self,
            inp: pl.Tensor[[1, SIZE], pl.FP32],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        ) -> pld.DistributedTensor[[1, SIZE], pl.FP32]:
            local = pl.load(inp, [0, 0], [1, SIZE], target_memory=pl.MemorySpace.Vec)
            return pl.store(local, [0, 0], data)

        @pl.function(type=pl.FunctionType.InCore)
        def consume(
            self,
            data: pld.DistributedTensor[[1, SIZE], pl.FP32],
            out: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            reduced = pl.load(data, offsets=[0, 0], shapes=[1, SIZE])
            return pl.store(reduced, offsets=[0, 0], output_tensor=out)

        @pl.function(type=pl.FunctionType.Orchestration)
        def publish_orch(
            self,
            inp: pl.Tensor[[1, SIZE], pl.FP32],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        ) -> pld.DistributedTensor[[1, SIZE], pl.FP32]:
            return self.publish(inp, data)

        @pl.function(type=pl.FunctionType.Orchestration)
        def consume_orch(
            self,
            data: pld.DistributedTensor[[1, SIZE], pl.FP32],
            out: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.consume(data, out)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            inputs: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            outputs: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer(SIZE * pl.FP32.get_byte())
            signal_buf = pld.alloc_window_buffer(pld.world_size() * CORES * pl.INT32.get_byte())
            for rank in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                self.publish_orch(inputs[rank], data, device=rank)
            data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [pld.world_size(), CORES], dtype=pl.INT32)
            data = pld.tensor.allreduce(data, signal, core_num=CORES)  # @reduce
            for rank in pl.range(pld.world_size()):
                self.consume_orch(data, outputs[rank], device=rank)
            return outputs

    return HostAllreduce


def main() -> int:
    parser = argparse.ArgumentParser(description="host-level all-reduce on two cores")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_host_allreduce(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    inputs = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    outputs = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(inputs, outputs)
    golden = inputs.sum(dim=0, keepdim=True).expand_as(outputs)
    print("OK" if torch.allclose(outputs, golden, rtol=1e-4, atol=1e-5) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
