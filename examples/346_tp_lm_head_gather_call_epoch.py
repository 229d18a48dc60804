"""The TP LM-head gather (344_tp_lm_head_gather_clear.py) on a monotonic counter whose
epoch is the forward's number.

Nothing clears ``done``: it counts every tile of every forward, and the host passes the
forward's number from 1 as ``done_epoch``, so forward ``k`` waits for
``done_epoch * TILES`` and a count left by earlier forwards never satisfies it early
(pypto-lib's MoE passes its 1-based call id as ``moe_epoch`` the same way). Checked as
serving runs it, the host waiting for every rank between forwards and giving each its
number: ``--rounds joined --per-call done_epoch={call}``.

Left at its default of 1 in every forward, the epoch restarts on a counter that does not
(pypto-lib #960: the prefill recomputed ``moe_epoch`` from 1 every dispatch while the
counters stayed monotonic): from the second forward on every wait passes at once.

racecheck expects:
    ranks 2..4: proved
    ranks 2..3 --repeat 3 --rounds joined --per-call done_epoch={call}: proved
    ranks 2..3 --repeat 2 --rounds joined: bug race read-after-write at @gather_read, @push_put
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


@pl.jit
def lm_head(
    logits: pl.Tensor[[ROWS, VOCAB], pl.FP32],
    out: pl.Out[pl.Tensor[[MAX_RANKS * ROWS, VOCAB], pl.FP32]],
    gathered: pld.DistributedTensor[[MAX_RANKS * ROWS, VOCAB], pl.FP32],
    done: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    done_epoch: pl.Scalar[pl.INT32],
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
            pld.system.wait(
                done, offsets=[src, 0], expected=done_epoch * TILES, cmp=pld.WaitCmp.Ge
            )
        for src in pl.range(n):
            rows = pl.load(gathered, [src * ROWS, 0], [ROWS, VOCAB])  # @gather_read
            pl.store(rows, [src * ROWS, 0], out)
    return out


@pl.jit.host
def l3_lm_head(
    logits: pl.Tensor[[NR, ROWS, VOCAB], pl.FP32],
    out: pl.Out[pl.Tensor[[NR, MAX_RANKS * ROWS, VOCAB], pl.FP32]],
    done_epoch: pl.Scalar[pl.INT32] = 1,
):
    gathered_buf = pld.alloc_window_buffer([MAX_RANKS * ROWS, VOCAB], dtype=pl.FP32)
    done_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        gathered = pld.window(gathered_buf, [MAX_RANKS * ROWS, VOCAB], dtype=pl.FP32)
        done = pld.window(done_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        lm_head(logits[r], out[r], gathered, done, done_epoch, device=r)


def main() -> int:
    parser = argparse.ArgumentParser(description="TP LM-head gather, epoch = forward number")
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
