"""The two-group swap of ``51_two_groups_swap.py`` with world ranks as group B's peers.

Group B is devices {1, 2}, numbered 0 and 1 inside its kernels. Passing the world
rank of the other device (``peer = 3 - r``) sends device 1 to member 2, which group B
does not have: racecheck reports the notify as out of bounds of the group.

racecheck expects:
    ranks 3: bug out-of-bounds
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


@pl.program
class TwoGroupSwap:
    @pl.function(type=pl.FunctionType.InCore)
    def swap_step(
        self,
        inp: pl.Tensor[[1, SIZE], pl.FP32],
        out: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        scratch: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        pl.store(pl.load(inp, [0, 0], [1, SIZE]), [0, 0], scratch)
        pld.system.notify(signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        pld.system.wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        recv = pld.tile.remote_load(scratch, peer=peer, offsets=[0, 0], shape=[1, SIZE])  # @load
        return pl.store(recv, [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def chip_orch(
        self,
        inp: pl.Tensor[[1, SIZE], pl.FP32],
        out: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        scratch: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        peer: pl.Scalar[pl.INT32],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.swap_step(inp, out, scratch, signal, peer)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[3, 1, SIZE], pl.FP32],
        outputs_a: pl.Out[pl.Tensor[[3, 1, SIZE], pl.FP32]],
        outputs_b: pl.Out[pl.Tensor[[3, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[3, 1, SIZE], pl.FP32]:
        scratch_a_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_a_buf = pld.alloc_window_buffer(4)
        scratch_b_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_b_buf = pld.alloc_window_buffer(4)
        for r in pl.range(2):
            scratch = pld.window(scratch_a_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_a_buf, [1, 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs_a[r], scratch, signal, 1 - r, device=r)
        for r in pl.range(1, 3):
            scratch = pld.window(scratch_b_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_b_buf, [1, 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs_b[r], scratch, signal, 3 - r, device=r)  # @peer
        return outputs_a


def main() -> int:
    parser = argparse.ArgumentParser(description="two groups, world peers")
    parser.add_argument("-d", "--device", default="0,1,2")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    compiled = ir.compile(
        TwoGroupSwap,
        distributed_config=DistributedConfig(device_ids=device_ids[:3], num_sub_workers=0),
    )
    inputs = torch.stack([torch.full((1, SIZE), 10.0 + d) for d in range(3)])
    outputs_a = torch.zeros((3, 1, SIZE))
    outputs_b = torch.zeros((3, 1, SIZE))
    compiled(inputs, outputs_a, outputs_b)
    swapped = torch.equal(outputs_a[0], inputs[1]) and torch.equal(outputs_b[2], inputs[1])
    print("OK" if swapped else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
