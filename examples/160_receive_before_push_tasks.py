"""Ring shift whose receive is called before the push, two tasks of one rank.

``per_rank`` calls ``receive_step`` first and ``push_step`` second. The push only
writes ``inbox`` and ``signal`` after the receive read them, a write-after-read that
PyPTO's runtime does not track (docs/model.md): the two tasks run alongside each
other, so the receive's wait is released by the neighbour's push while its own push
proceeds. Run strictly in program order every rank would wait for a push that comes
after its own receive: racecheck checks the order with the push first, which the
runtime allows and in which no two unordered tasks can matter, and proves it. At P=1
the push lands in the rank's own inbox, which the receive reads: the two orders are
not interchangeable, and racecheck runs tasks one after another, so it says unknown.

racecheck expects:
    ranks 1: proved
    ranks 2: proved shift+1
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


@pl.program
class ReceiveThenPush:
    @pl.function(type=pl.FunctionType.InCore)
    def push_step(
        self,
        x: pl.Tensor[[1, SIZE], pl.FP32],
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
    ):
        ctx = pld.get_comm_ctx(inbox)
        right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
        data = pl.load(x, [0, 0], [1, SIZE])
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
        inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
        signal: pld.DistributedTensor[[1, 1], pl.INT32],
    ):
        y = self.receive_step(inbox, signal, y)
        self.push_step(x, inbox, signal)

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def receive_then_push(
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
    parser = argparse.ArgumentParser(description="ring shift, receive called before push")
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
    ReceiveThenPush.receive_then_push(x, y, config=config)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
