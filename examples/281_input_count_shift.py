"""A ring shift of a row count read from the input, clamped by the program to 0..M.

Each rank reads from its ``send_count`` input how many of its ``M = 2`` rows to put
first, clamps the count to ``0..M`` (``pl.max(pl.min(c, M), 0)``), puts that many rows
one by one into its right neighbour's inbox and then the rest of them, signals the
neighbour, waits for its own signal and copies its inbox: ``y[r] = x[(r - 1) % P]``
whatever the counts. The count steers two loop bounds only, never a notify or a wait,
so ``racecheck verify --ranks all`` proves it for every P >= 2 and every input: the
count is a symbolic value of its dtype's range, each rank's its own
(tests/test_allp_inputs.py). ``287_input_count_shift_bug_no_upper_clamp.py``
leaves the upper clamp out and puts row ``M`` past the inbox.

racecheck expects:
    ranks 2..3: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 16
MAX_ROWS = 2


@pl.jit.incore
def shift_step(
    x: pl.Tensor[[MAX_ROWS, SIZE], pl.FP32],
    send_count: pl.Tensor[[1], pl.INT32],
    y: pl.Out[pl.Tensor[[MAX_ROWS, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[MAX_ROWS, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    count = pl.max(pl.min(pl.read(send_count, [0]), MAX_ROWS), 0)  # @clamp
    for row in pl.range(count):
        tile = pl.load(x, [row, 0], [1, SIZE])
        pld.tile.remote_store(tile, inbox, peer=right, offsets=[row, 0])  # @push
    for row in pl.range(count, MAX_ROWS):
        tile = pl.load(x, [row, 0], [1, SIZE])
        pld.tile.remote_store(tile, inbox, peer=right, offsets=[row, 0])  # @rest
    pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    received = pl.load(inbox, [0, 0], [MAX_ROWS, SIZE])  # @read
    return pl.store(received, [0, 0], y)


@pl.jit
def per_rank(
    x: pl.Tensor[[MAX_ROWS, SIZE], pl.FP32],
    send_count: pl.Tensor[[1], pl.INT32],
    y: pl.Out[pl.Tensor[[MAX_ROWS, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[MAX_ROWS, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    return shift_step(x, send_count, y, inbox, signal)


@pl.jit.host
def input_count_shift(
    x: pl.Tensor[[NR, MAX_ROWS, SIZE], pl.FP32],
    send_count: pl.Tensor[[NR, 1], pl.INT32],
    y: pl.Out[pl.Tensor[[NR, MAX_ROWS, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([MAX_ROWS, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [MAX_ROWS, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], send_count[r], y[r], inbox, signal, device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift of an input row count")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, MAX_ROWS, SIZE), dtype=torch.float32)
    send_count = torch.randint(-1, MAX_ROWS + 2, (nr, 1), dtype=torch.int32)
    y = torch.zeros((nr, MAX_ROWS, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    compiled = input_count_shift.compile(x, send_count, y, config=config)
    compiled(x, send_count, y, config=config)
    print("OK" if torch.equal(y, torch.roll(x, shifts=1, dims=0)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
