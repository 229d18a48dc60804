"""Ring shift through a staging tensor, the stage's task id never stored in the array.

139_staged_shift_task_id_array.py without ``ready[0] = staged``: the slot keeps
``pl.system.task_invalid()``, so ``deps=[ready]`` names no task, and with
``pl.no_dep(staging)`` nothing orders the push after the stage (docs/model.md). PyPTO's
runtime may run the push first, sending what ``staging`` held before; racecheck runs it
first and the outputs are wrong, with a note naming the two tasks.

racecheck expects:
    ranks 1..4: bug race read-after-write at @load, @stage ranks 0
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 64


@pl.program
class StagedShift:
    @pl.function(type=pl.FunctionType.InCore)
    def stage_step(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        staging: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        data = pl.load(x, [0, 0], [1, SIZE])
        staging = pl.store(data, [0, 0], staging)  # @stage
        return staging

    @pl.function(type=pl.FunctionType.InCore)
    def push_step(
        self,
        staging: pl.Tensor[[1, SIZE], pl.FP32],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
    ):
        ctx = pld.get_comm_ctx(inbox)
        right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        data = pl.load(staging, [0, 0], [1, SIZE])  # @load
        pld.tile.remote_store(data, inbox, peer=right, offsets=[0, 0])
        pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)

    @pl.function(type=pl.FunctionType.InCore)
    def receive_step(
        self,
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        recv = pl.load(inbox, [0, 0], [1, SIZE])
        y = pl.store(recv, [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        staging: pl.Tensor[[1, SIZE], pl.FP32],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
    ):
        ready = pl.array.create(1, pl.TASK_ID)
        ready[0] = pl.system.task_invalid()
        pl.submit(self.stage_step, x, staging)
        (pushed,) = pl.submit(self.push_step, pl.no_dep(staging), inbox, signal, deps=[ready])
        y, _ = pl.submit(self.receive_step, inbox, signal, y, deps=[pushed])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def staged_shift(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
        staging: pl.Tensor[[NR, 1, SIZE], pl.FP32],
    ):
        inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], staging[r], inbox, signal, device=r)


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift through a staging tensor")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    staging = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    StagedShift.staged_shift(x, y, staging, config=config)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
