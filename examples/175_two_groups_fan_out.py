"""One device feeds two communication groups: its two dispatches may run in either order.

Windows dispatched to only some devices form their own communication group
(docs/model.md): group A is devices {0, 1}, group B devices {1, 2}. Device 1 sends
its row to device 0 through group A's window and to device 2 through group B's; each
receiver waits for the notify and stores what arrived. Device 1's two dispatches take
windows of different domains and share no written tensor, so PyPTO's runtime may run
either first: racecheck checks both orders (and the receivers' waits never depend on
which comes first), and proves the program.

racecheck expects:
    ranks 3: proved
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
class TwoGroupFanOut:
    @pl.function(type=pl.FunctionType.InCore)
    def send_step(
        self,
        row: pl.Tensor[[1, SIZE], pl.FP32],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
        peer: pl.Scalar[pl.INT32],
    ):
        pld.tile.remote_store(pl.load(row, [0, 0], [1, SIZE]), inbox, peer=peer, offsets=[0, 0])
        pld.system.notify(signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)

    @pl.function(type=pl.FunctionType.InCore)
    def receive_step(
        self,
        out: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        pld.system.wait(signal=signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
        return pl.store(pl.load(inbox, [0, 0], [1, SIZE]), [0, 0], out)

    @pl.function(type=pl.FunctionType.Orchestration)
    def send_orch(
        self,
        row: pl.Tensor[[1, SIZE], pl.FP32],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
        peer: pl.Scalar[pl.INT32],
    ):
        self.send_step(row, inbox, signal, peer)

    @pl.function(type=pl.FunctionType.Orchestration)
    def receive_orch(
        self,
        out: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.receive_step(out, inbox, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        inputs: pl.Tensor[[3, 1, SIZE], pl.FP32],
        outputs: pl.Out[pl.Tensor[[3, 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[3, 1, SIZE], pl.FP32]:
        inbox_a_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_a_buf = pld.alloc_window_buffer(4)
        inbox_b_buf = pld.alloc_window_buffer(SIZE * 4)
        signal_b_buf = pld.alloc_window_buffer(4)
        inbox_a = pld.window(inbox_a_buf, [1, SIZE], dtype=pl.FP32)
        signal_a = pld.window(signal_a_buf, [1, 1], dtype=pl.INT32)
        inbox_b = pld.window(inbox_b_buf, [1, SIZE], dtype=pl.FP32)
        signal_b = pld.window(signal_b_buf, [1, 1], dtype=pl.INT32)
        self.send_orch(inputs[1], inbox_a, signal_a, 0, device=1)
        self.receive_orch(outputs[0], inbox_a, signal_a, device=0)
        self.send_orch(inputs[1], inbox_b, signal_b, 1, device=1)
        self.receive_orch(outputs[2], inbox_b, signal_b, device=2)
        return outputs


def main() -> int:
    parser = argparse.ArgumentParser(description="one device feeding two groups")
    parser.add_argument("-d", "--device", default="0,1,2")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    compiled = ir.compile(
        TwoGroupFanOut,
        distributed_config=DistributedConfig(device_ids=device_ids[:3], num_sub_workers=0),
    )
    inputs = torch.stack([torch.full((1, SIZE), 10.0 + d) for d in range(3)])
    outputs = torch.zeros((3, 1, SIZE))
    compiled(inputs, outputs)
    fanned = torch.equal(outputs[0], inputs[1]) and torch.equal(outputs[2], inputs[1])
    print("OK" if fanned else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
