"""Tensor-parallel LM-head gather with a fixed completion epoch and a clear after it.

Every TP rank computes the logits of its own vocabulary slice for ``ROWS`` rows and
must end with every rank's slices. ``lm_head_push`` puts this rank's slice, one row
tile at a time, into slot ``me`` of every rank's ``gathered`` window and bumps that
rank's ``done[me]`` once per tile. ``lm_head_gather`` waits until ``done[src]`` holds
``EPOCH * TILES`` for every source and copies the slots out.

The completion counter has a fixed epoch (``EPOCH = 1``): every forward waits for the
same count. That is right only because ``lm_head_gather`` clears its own cells after
its reads: it subtracts ``TILES`` per source with an ``AtomicAdd``, after the waits
that saw every tile of this forward, so no notify of this forward can land after the
clear and the next forward starts from zero.

The clear is not a reuse barrier: nothing stops a fast rank's next forward from
putting into a slot a slow peer still reads. Serving drives the LM head with the host
waiting for every rank between forwards (``--rounds joined``), and there it is
correct; looped inside one launch (free-running calls) it is not.
345_tp_lm_head_gather_bug_no_clear.py drops the clear (pypto-lib #850).

racecheck expects:
    ranks 2..4: proved
    ranks 2..3 --repeat 3 --rounds joined: proved
    ranks 2 --repeat 2: bug race write-after-read at @gather_read, @push_put
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
MAX_RANKS = 8
ROWS = 4
TILES = 2
TILE_ROWS = ROWS // TILES
VOCAB = 4  # per rank
EPOCH = 1


@pl.jit
def lm_head(
    logits: pl.Tensor[[ROWS, VOCAB], pl.FP32],
    out: pl.Out[pl.Tensor[[MAX_RANKS * ROWS, VOCAB], pl.FP32]],
    gathered: pld.DistributedTensor[[MAX_RANKS * ROWS, VOCAB], pl.FP32],
    done: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(gathered)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="lm_head_push") as pushed:
        for dst in pl.range(n):
            for t in pl.range(TILES):
                pld.tensor.put(  # @push_put
                    gathered,
                    dst,
                    logits,
                    dst_offsets=[me * ROWS + t * TILE_ROWS, 0],
                    src_offsets=[t * TILE_ROWS, 0],
                    shape=[TILE_ROWS, VOCAB],
                )
                pld.system.notify(
                    done, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="lm_head_gather", deps=[pushed]):
        for src in pl.range(n):
            pld.system.wait(done, offsets=[src, 0], expected=EPOCH * TILES, cmp=pld.WaitCmp.Ge)
        for src in pl.range(n):
            rows = pl.load(gathered, [src * ROWS, 0], [ROWS, VOCAB])  # @gather_read
            pl.store(rows, [src * ROWS, 0], out)
        for src in pl.range(n):
            pld.system.notify(  # @clear
                done, peer=me, offsets=[src, 0], value=-TILES, op=pld.NotifyOp.AtomicAdd
            )
    return out


@pl.jit.host
def l3_lm_head(
    logits: pl.Tensor[[NR, ROWS, VOCAB], pl.FP32],
    out: pl.Out[pl.Tensor[[NR, MAX_RANKS * ROWS, VOCAB], pl.FP32]],
):
    gathered_buf = pld.alloc_window_buffer([MAX_RANKS * ROWS, VOCAB], dtype=pl.FP32)
    done_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gathered = pld.window(gathered_buf, [MAX_RANKS * ROWS, VOCAB], dtype=pl.FP32)
        done = pld.window(done_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        lm_head(logits[r], out[r], gathered, done, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="TP LM-head gather with a clear after it")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    logits = torch.randn((nr, ROWS, VOCAB), dtype=torch.float32)
    out = torch.zeros((nr, MAX_RANKS * ROWS, VOCAB), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    l3_lm_head.compile(logits, out, config=config)(logits, out, config=config)
    expected = logits.reshape(1, nr * ROWS, VOCAB).expand(nr, -1, -1)
    print("OK" if torch.allclose(out[:, : nr * ROWS], expected) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
