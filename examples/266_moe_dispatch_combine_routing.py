"""MoE dispatch and combine whose routing comes from the input, with slot counters.

Each rank holds ``TOKENS`` token rows and, per token, an expert id read from its
``experts`` input and clamped to ``0..nr * EXPERTS - 1``; expert ``g`` lives on rank
``g // EXPERTS`` as local expert ``g % EXPERTS``. Dispatch: for each destination and
each of its local experts, the sender walks its tokens and, for every token routed
there, puts the row into lane ``(expert, sender)`` of the destination's ``recv``
window at the next slot of a slot counter bumped per matching route. It then publishes
the per-(destination, expert) counts as one ``remote_store`` row into the destination's
``meta`` window and bumps the destination's arrival counter. After the arrival barrier
the receiver gathers, per local expert, ``n`` rows of each source's lane (``n`` read
from ``meta``: a loop bound) into a compact block at a running offset (the sum of the
earlier sources' counts: a row offset). Combine: the receiver sends every gathered row
back into lane ``(expert, receiver)`` of the source's ``back`` window; the source, after
its own barrier, walks its routes again with the same slot counters and reads each
token's row back.

A lane holds ``TOKENS`` rows: one source sends at most ``TOKENS`` rows to one expert,
whatever the routing. ``267_moe_dispatch_combine_routing_bug_small_lane.py`` gives a
lane one row fewer, which the routing that sends every token of a rank to one expert
overflows.

Every token's route is a branch on input data, and a slot counter carries what earlier
iterations decided into the next one's address: path by path the routing gives
``(P * EXPERTS) ** (TOKENS * P)`` paths. racecheck's summary run takes each route
branch for every input (its body only loads and stores), keeps the slot counter's exact
form (``slot + when(route)``), lets each offset computed from it cover every value it
takes (``lane + 0 .. lane + t`` at token ``t``), and carries the published counts to the
receiver, whose gather loop then runs at most ``TOKENS`` times for any routing: a run
with fewer routes has the same synchronisation and a subset of the accesses, so it is
proved for every routing (the proof's note names the branches and the counter).

racecheck expects:
    ranks 2..3: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16
TOKENS = 2
EXPERTS = 2  # local experts per rank
LANE = TOKENS  # rows of one (expert, source) lane


def build_moe_dispatch_combine(nr: int):
    rows = EXPERTS * nr * LANE  # a rank's recv window: EXPERTS lanes per source

    @pl.program
    class MoeDispatchCombine:
        @pl.function(type=pl.FunctionType.InCore)
        def moe(
            self,
            x: pl.Tensor[[TOKENS, SIZE], pl.FP32],
            experts: pl.Tensor[[TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[TOKENS, SIZE], pl.FP32]],
            recv: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            back: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            meta: pl.InOut[pld.DistributedTensor[[nr, EXPERTS], pl.INT32]],
            arrived: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            returned: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[TOKENS, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(recv)
            me = pld.rank(ctx)
            for dest in pl.range(nr):
                counts = pl.tile.full([1, EXPERTS], dtype=pl.INT32, value=0)
                for e in pl.range(EXPERTS):
                    slot = 0
                    for t in pl.range(TOKENS):
                        expert = pl.max(pl.min(pl.read(experts, [t, 0]), nr * EXPERTS - 1), 0)
                        if expert == dest * EXPERTS + e:  # @route
                            row = pl.load(x, [t, 0], [1, SIZE])
                            at = (e * nr + me) * LANE + slot
                            pld.tile.remote_store(row, recv, peer=dest, offsets=[at, 0])  # @push
                            slot = slot + 1
                    pl.tile.write(counts, [0, e], slot)
                pld.tile.remote_store(counts, meta, peer=dest, offsets=[me, 0])  # @publish
                pld.system.notify(arrived, peer=dest, offsets=[me, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
            for source in pl.range(nr):
                pld.system.wait(arrived, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
            for e in pl.range(EXPERTS):
                for source in pl.range(nr):
                    n = pl.read(meta, [source, e])  # @count
                    lane = (e * nr + source) * LANE
                    for s in pl.range(n):  # @gather
                        row = pl.load(recv, [lane + s, 0], [1, SIZE])
                        back_lane = (e * nr + me) * LANE
                        pld.tile.remote_store(row, back, peer=source, offsets=[back_lane + s, 0])
            for source in pl.range(nr):
                pld.system.notify(returned, peer=source, offsets=[me, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
            for source in pl.range(nr):
                pld.system.wait(returned, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
            for dest in pl.range(nr):
                for e in pl.range(EXPERTS):
                    slot = 0
                    for t in pl.range(TOKENS):
                        expert = pl.max(pl.min(pl.read(experts, [t, 0]), nr * EXPERTS - 1), 0)
                        if expert == dest * EXPERTS + e:
                            lane = (e * nr + dest) * LANE
                            row = pl.load(back, [lane + slot, 0], [1, SIZE])  # @combine
                            y = pl.store(row, [t, 0], y)
                            slot = slot + 1
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[TOKENS, SIZE], pl.FP32],
            experts: pl.Tensor[[TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[TOKENS, SIZE], pl.FP32]],
            recv: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            back: pl.InOut[pld.DistributedTensor[[rows, SIZE], pl.FP32]],
            meta: pl.InOut[pld.DistributedTensor[[nr, EXPERTS], pl.INT32]],
            arrived: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            returned: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[TOKENS, SIZE], pl.FP32]:
            return self.moe(x, experts, y, recv, back, meta, arrived, returned)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def moe_layer(
            self,
            x: pl.Tensor[[nr, TOKENS, SIZE], pl.FP32],
            experts: pl.Tensor[[nr, TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr, TOKENS, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, TOKENS, SIZE], pl.FP32]:
            recv_buf = pld.alloc_window_buffer([rows, SIZE], dtype=pl.FP32)
            back_buf = pld.alloc_window_buffer([rows, SIZE], dtype=pl.FP32)
            meta_buf = pld.alloc_window_buffer([nr, EXPERTS], dtype=pl.INT32)
            arrived_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            returned_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                recv = pld.window(recv_buf, [rows, SIZE], dtype=pl.FP32)
                back = pld.window(back_buf, [rows, SIZE], dtype=pl.FP32)
                meta = pld.window(meta_buf, [nr, EXPERTS], dtype=pl.INT32)
                arrived = pld.window(arrived_buf, [nr, 1], dtype=pl.INT32)
                returned = pld.window(returned_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], experts[r], y[r], recv, back, meta, arrived, returned,
                              device=r)
            return y

    return MoeDispatchCombine


def main() -> int:
    parser = argparse.ArgumentParser(description="MoE dispatch and combine, routed by input")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_moe_dispatch_combine(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, TOKENS, SIZE), dtype=torch.float32)
    experts = torch.randint(0, nr * EXPERTS, (nr, TOKENS, 1), dtype=torch.int32)
    y = torch.zeros((nr, TOKENS, SIZE), dtype=torch.float32)
    compiled(x, experts, y)
    print("OK" if torch.equal(y, x) else "MISMATCH")
    return 0 if torch.equal(y, x) else 1


if __name__ == "__main__":
    raise SystemExit(main())
