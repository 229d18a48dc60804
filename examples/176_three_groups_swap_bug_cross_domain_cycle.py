"""Three communication groups on three devices, pairwise swapping rows: a deadlock
in an order of dispatches that PyPTO's runtime allows.

Group A is devices {0, 1}, group C devices {0, 2}, group B devices {1, 2} (windows
dispatched to only some devices form their own group, docs/model.md). Each device
runs two dispatches whose windows belong to different groups: device 0 runs A then C,
device 1 A then B, device 2 C then B. PyPTO's runtime orders a rank's dispatches only
within one communication domain and by tag edges, so device 1 may run its B dispatch
first. Its wait then needs device 2's B notify, but device 2 is waiting in its C
dispatch for device 0, which waits in its A dispatch for device 1: a dispatch holds
its device until it ends, so the three devices deadlock. In program order every swap
completes. The fix, 177_three_groups_swap_chained.py, orders each device's second
dispatch after its first with a tag edge.

racecheck expects:
    ranks 3: bug deadlock at @wait ranks 0 1 2
    ranks 2: skipped
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


@pl.program
class ThreeGroupSwap:
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
        pld.system.wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)  # @wait
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
        outputs_c: pl.Out[pl.Tensor[[3, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[3, 1, SIZE], pl.FP32]:
        scratch_a_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_a_buf = pld.alloc_window_buffer(4)
        scratch_b_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_b_buf = pld.alloc_window_buffer(4)
        scratch_c_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_c_buf = pld.alloc_window_buffer(4)
        for r in pl.range(2):  # group A: devices 0 and 1
            scratch = pld.window(scratch_a_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_a_buf, [1, 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs_a[r], scratch, signal, 1 - r, device=r)  # @group_a
        # group C: devices 0 and 2, members 0 and 1 (PyPTO reads no group from a loop
        # with a step, so one dispatch per device)
        scratch = pld.window(scratch_c_buf, [1, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_c_buf, [1, 1], dtype=pl.INT32)
        self.chip_orch(inputs[0], outputs_c[0], scratch, signal, 1, device=0)
        self.chip_orch(inputs[2], outputs_c[2], scratch, signal, 0, device=2)
        for r in pl.range(1, 3):  # group B: devices 1 and 2, members 0 and 1
            scratch = pld.window(scratch_b_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_b_buf, [1, 1], dtype=pl.INT32)
            self.chip_orch(inputs[r], outputs_b[r], scratch, signal, 2 - r, device=r)  # @group_b
        return outputs_a


def main() -> int:
    parser = argparse.ArgumentParser(description="three pairwise communication groups")
    parser.add_argument("-d", "--device", default="0,1,2")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    compiled = ir.compile(
        ThreeGroupSwap,
        distributed_config=DistributedConfig(device_ids=device_ids[:3], num_sub_workers=0),
    )
    inputs = torch.stack([torch.full((1, SIZE), 10.0 + d) for d in range(3)])
    outputs_a = torch.zeros((3, 1, SIZE))
    outputs_b = torch.zeros((3, 1, SIZE))
    outputs_c = torch.zeros((3, 1, SIZE))
    compiled(inputs, outputs_a, outputs_b, outputs_c)
    swapped = torch.equal(outputs_a[0], inputs[1]) and torch.equal(outputs_c[2], inputs[0])
    print("OK" if swapped else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
