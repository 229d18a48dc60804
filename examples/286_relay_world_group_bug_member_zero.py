"""The relay of 285 with member 0 as the sender: device 0, which is never dispatched.

``for r in pl.range(1, pld.world_size())`` puts the windows in the group of every
device (PyPTO's MaterializeCommDomainScopes looks at the loop's stop only), so
member 0 is device 0, which runs nothing: every dispatched device waits forever for
its notify. Numbering the dispatched devices 1, 2, ... as members 0, 1, ... would
make device 1 the sender and hide the hang.

racecheck expects:
    ranks 2..5: bug deadlock at @wait
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16


@pl.program
class RelayFromMemberZero:
    @pl.function(type=pl.FunctionType.InCore)
    def relay_step(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        ctx = pld.get_comm_ctx(data)
        me = pld.rank(ctx)
        if me == 0:
            local = pl.load(x, [0, 0], [1, SIZE])
            for peer in pl.range(0 + 1, pld.nranks(ctx)):
                pld.tensor.put(data, peer, x, [0, 0], [0, 0], [1, SIZE])
                pld.system.notify(
                    signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
            return pl.store(local, [0, 0], y)
        pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)  # @wait
        got = pl.load(data, [0, 0], [1, SIZE])
        return pl.store(got, [0, 0], y)

    @pl.function(type=pl.FunctionType.Orchestration)
    def per_rank(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
    ) -> pl.Tensor[[1, SIZE], pl.FP32]:
        return self.relay_step(x, y, data, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def relay(
        self,
        x: pl.Tensor[[pl.dynamic("N"), 1, SIZE], pl.FP32],
        y: pl.Out[pl.Tensor[[pl.dynamic("N"), 1, SIZE], pl.FP32]],
    ) -> pl.Tensor[[pl.dynamic("N"), 1, SIZE], pl.FP32]:
        data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
        signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
        for r in pl.range(1, pld.world_size()):  # device 0 runs nothing
            data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
            signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
            self.per_rank(x[r], y[r], data, signal, device=r)
        return y


def main() -> int:
    parser = argparse.ArgumentParser(description="relay from one device to the later ones")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        RelayFromMemberZero,
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
