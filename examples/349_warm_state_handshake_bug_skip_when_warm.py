"""A handshake skipped once a host state tensor says the rank is warm: host state carries
over between calls even when the windows are reset.

``state`` is a per-rank host tensor the serving loop passes to every call; it starts at
zero (the file's assumption below). On a cold call the step waits for its left
neighbour's ``sig`` before reading the row it put; then it marks itself warm. A warm
call skips the wait as an optimisation, assuming the neighbour is warm too and
therefore early. It is not: from the second call on nothing orders the neighbour's put
before this rank's read, whether the windows persist or PyPTO zeroes them between
calls, since ``state`` is not a window and is never reset.

racecheck expects:
    ranks 2: proved
    ranks 2 --repeat 2: bug race read-after-write at @warm_read, @put
    ranks 2 --repeat 2 --reset-windows: bug race read-after-write at @warm_read, @put

racecheck today (known gap: --reset-windows does not run the later calls from zeroed windows):
    ranks 2 --repeat 2 --reset-windows: unknown
"""

# racecheck: assume state in 0..0

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

MAX_RANKS = 8
SIZE = 4


@pl.jit
def kernel(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
    state: pl.InOut[pl.Tensor[[1, 1], pl.INT32]],
    data: pld.DistributedTensor[[MAX_RANKS, SIZE], pl.FP32],
    sig: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(data)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="body"):
        warm = pl.read(state, [0, 0])
        nxt = (me + 1) % n
        pld.tensor.put(  # @put
            data, nxt, x, dst_offsets=[me, 0], src_offsets=[0, 0], shape=[1, SIZE]
        )
        pld.system.notify(sig, peer=nxt, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd)
        prv = (me + n - 1) % n
        if warm == 0:
            pld.system.wait(sig, offsets=[prv, 0], expected=1, cmp=pld.WaitCmp.Ge)
        pl.store(pl.load(data, [prv, 0], [1, SIZE]), [0, 0], y)  # @warm_read
        pl.write(state, [0, 0], 1)
    return y


@pl.jit.host
def entry(
    x: pl.Tensor[[pl.dynamic("NR"), 1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[pl.dynamic("NR"), 1, SIZE], pl.FP32]],
    state: pl.InOut[pl.Tensor[[pl.dynamic("NR"), 1, 1], pl.INT32]],
):
    data_buf = pld.alloc_window_buffer([MAX_RANKS, SIZE], dtype=pl.FP32)
    sig_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        data = pld.window(data_buf, [MAX_RANKS, SIZE], dtype=pl.FP32)
        sig = pld.window(sig_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        kernel(x[r], y[r], state[r], data, sig, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="handshake skipped once warm")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    state = torch.zeros((nr, 1, 1), dtype=torch.int32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    compiled = entry.compile(x, y, state, config=config)
    for _ in range(2):
        compiled(x, y, state, config=config)
    print("OK" if torch.equal(y, x.roll(1, dims=0)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
