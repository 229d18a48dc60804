"""Fix of 176_three_groups_swap_bug_cross_domain_cycle.py: each device forwards what
its first swap received into its second, so a tag edge orders its two dispatches.

Groups A {0, 1}, C {0, 2} and B {1, 2} swap rows pairwise as in 176. Here the second
dispatch of each device reads the host tensor its first one writes (`outputs_a` on
devices 0 and 1, `outputs_c` on device 2): PyPTO's runtime runs a reader after the
earlier writer of the storage it reads (docs/model.md), so every device runs its
dispatches in program order and no cycle of waits can form.

racecheck expects:
    ranks 3: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


@pl.program
class ThreeGroupRelay:
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
            self.chip_orch(inputs[r], outputs_a[r], scratch, signal, 1 - r, device=r)
        scratch_c = pld.window(scratch_c_buf, [1, SIZE], dtype=pl.FP32)
        signal_c = pld.window(signal_c_buf, [1, 1], dtype=pl.INT32)
        self.chip_orch(outputs_a[0], outputs_c[0], scratch_c, signal_c, 1, device=0)
        self.chip_orch(inputs[2], outputs_c[2], scratch_c, signal_c, 0, device=2)
        scratch_b = pld.window(scratch_b_buf, [1, SIZE], dtype=pl.FP32)
        signal_b = pld.window(signal_b_buf, [1, 1], dtype=pl.INT32)
        self.chip_orch(outputs_a[1], outputs_b[1], scratch_b, signal_b, 1, device=1)
        self.chip_orch(outputs_c[2], outputs_b[2], scratch_b, signal_b, 0, device=2)
        return outputs_a


def main() -> int:
    parser = argparse.ArgumentParser(description="three pairwise groups, relayed")
    parser.add_argument("-d", "--device", default="0,1,2")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    compiled = ir.compile(
        ThreeGroupRelay,
        distributed_config=DistributedConfig(device_ids=device_ids[:3], num_sub_workers=0),
    )
    inputs = torch.stack([torch.full((1, SIZE), 10.0 + d) for d in range(3)])
    outputs_a = torch.zeros((3, 1, SIZE))
    outputs_b = torch.zeros((3, 1, SIZE))
    outputs_c = torch.zeros((3, 1, SIZE))
    compiled(inputs, outputs_a, outputs_b, outputs_c)
    swapped = torch.equal(outputs_a[0], inputs[1]) and torch.equal(outputs_b[1], inputs[1])
    print("OK" if swapped else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
