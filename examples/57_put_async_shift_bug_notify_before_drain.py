"""The put_async ring shift of 56_put_async_shift.py, notifying before the drain.

The notify runs while the transfer may still be in flight: ``wait_async_event`` is
what drains it, and PyPTO emits the fence that publishes the row only after that wait
(docs/model.md). The neighbour's wait can pass and its read see the row before the
transfer writes it.

racecheck expects:
    ranks 2..4: bug race read-after-write at @put, @read
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 256


@pl.jit.incore
def shift_step(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    outbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(outbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    row = pl.load(x, [0, 0], [1, SIZE])
    outbox = pl.store(row, [0, 0], outbox)
    session = pld.system.async_session()
    sent = pld.tensor.put_async(inbox, right, outbox, session)  # @put
    pl.add(row, row)  # local work while the transfer is in flight
    add = pld.NotifyOp.AtomicAdd
    pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=add)  # @notify
    pld.system.wait_async_event(sent, session)  # @drain
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    received = pl.load(inbox, [0, 0], [1, SIZE])  # @read
    return pl.store(received, [0, 0], y)


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    outbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    return shift_step(x, y, outbox, inbox, signal)


@pl.jit.host
def put_async_shift(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]]
):
    outbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        outbox = pld.window(outbox_buf, [1, SIZE], dtype=pl.FP32)
        inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], outbox, inbox, signal, device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift through put_async")
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
    compiled = put_async_shift.compile(x, y, config=config)
    compiled(x, y, config=config)
    print("OK" if torch.equal(y, torch.roll(x, shifts=1, dims=0)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
