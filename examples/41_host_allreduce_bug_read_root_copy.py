"""Host-level all-reduce, then every rank reads rank 0's copy: a read-after-write race.

The twin of ``40_host_allreduce_multicore.py``. After ``pld.tensor.allreduce``
returns on a rank, *its own* copy holds the sum, but rank 0's last tile store
happens after the last barrier of rank 0's kernel: a rank that finishes first and
fetches rank 0's copy with ``remote_load`` can read it before rank 0 has stored
the tile. racecheck reports the race between the fetch and the builtin's store on
rank 0 (the host call's line), with a replayed witness.

racecheck expects:
    ranks 2..4: bug race read-after-write at @fetch, @reduce
    ranks 1: proved allreduce-sum
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
            reduced = pld.tile.remote_load(data, peer=0, offsets=[0, 0], shape=[1, SIZE])  # @fetch
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
    parser = argparse.ArgumentParser(description="host-level all-reduce, read from rank 0")
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
