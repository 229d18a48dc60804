"""Ring shift whose push is a two-block ``pl.spmd_submit``, named by the receive's ``deps``.

The push of 128_ring_shift_spmd_dispatch.py in a ``@pl.program`` class:
``pl.spmd_submit(self.push_half, x, inbox, core_num=2)`` runs the kernel on two
concurrent blocks as one task and returns its task id, which the receive names in
``deps=`` (PyPTO would also order them: the push's ``remote_store`` marks ``inbox``
written, docs/model.md). Each block pushes the half that ``pl.tile.get_block_idx()``
picks, so the order of the blocks cannot matter.

racecheck expects:
    ranks 1..2: proved
    ranks 3..4: proved shift-1
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 64
HALF = SIZE // 2


@pl.program
class SpmdSubmitShift:
    @pl.function(type=pl.FunctionType.InCore)
    def push_half(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    ):
        ctx = pld.get_comm_ctx(inbox)
        right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        offset = pl.tile.get_block_idx() * HALF
        half = pl.load(x, [0, offset], [1, HALF])
        pld.tile.remote_store(half, inbox, peer=right, offsets=[0, offset])

    @pl.function(type=pl.FunctionType.InCore)
    def receive_step(
        self,
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        ctx = pld.get_comm_ctx(inbox)
        right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        recv = pl.load(inbox, [0, 0], [1, SIZE])
        y = pl.store(recv, [0, 0], y)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
    ):
        (pushed,) = pl.spmd_submit(self.push_half, x, inbox, core_num=2)
        pl.submit(self.receive_step, inbox, signal, y, deps=[pushed])

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def spmd_shift(
        self,
        x: pl.Tensor[[NR, 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],
    ):
        inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(pld.world_size()):
            inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], inbox, signal, device=r)


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift pushed by pl.spmd_submit")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    SpmdSubmitShift.spmd_shift(x, y, config=config)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
