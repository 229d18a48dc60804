"""All-to-all-v whose per-destination counts come from the input, clamped to 0..M.

Rank ``s`` reads its count for each destination ``d`` from its ``send_counts`` input,
clamps it to ``0..MAX_ROWS`` (``pl.max(pl.min(c, MAX_ROWS), 0)``), puts its whole
``MAX_ROWS``-row block into slot ``s`` of ``d``'s inbox, publishes the clamped count
with a ``Set`` on ``d``'s counts cell ``[s, 0]`` and then signals ``d`` with an
AtomicAdd on its signal cell ``[s, 0]``. The receiver waits for each source's signal,
reads the count back and copies that many rows of the slot.

Every destination's count is an independent input: path by path the counts give
``(MAX_ROWS + 1) ** (P * P)`` paths. racecheck keeps each count's form through the
counts window (the clamp is an exact ``max(min(c, 2), 0)``, no branch), sees that the
copy loop runs at most ``MAX_ROWS`` times for any input, and checks one run with every
iteration: a run with fewer rows copied has the same synchronisation and a subset of
the accesses, so it is proved for every input (the proof's note says so).
``263_input_counts_all_to_all_v_bug_no_clamp.py`` drops the clamp,
``265_input_counts_all_to_all_v_bug_sender_clamp_only.py`` clamps only what it puts,
``264_input_counts_all_to_all_v_bug_count_before_wait.py`` reads the count before the
signal orders it.

racecheck expects:
    ranks 2..4: proved
    all: proved for every P
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16
MAX_ROWS = 2


def build_input_counts_all_to_all_v(nr: int):
    @pl.program
    class InputCountsAllToAllV:
        @pl.function(type=pl.FunctionType.InCore)
        def exchange(
            self,
            x: pl.Tensor[[MAX_ROWS, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(inbox)
            me = pld.rank(ctx)
            block = pl.load(x, [0, 0], [MAX_ROWS, SIZE])
            for dest in pl.range(nr):
                count = pl.max(pl.min(pl.read(send_counts, [dest, 0]), MAX_ROWS), 0)  # @clamp
                pld.tile.remote_store(block, inbox, peer=dest, offsets=[MAX_ROWS * me, 0])
                pld.system.notify(counts, peer=dest, offsets=[me, 0], value=count,
                                  op=pld.NotifyOp.Set)
                pld.system.notify(signal, peer=dest, offsets=[me, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
            for source in pl.range(nr):
                pld.system.wait(signal, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
                received = pl.read(counts, [source, 0])  # @count
                for row in pl.range(received):  # @copy
                    tile = pl.load(inbox, [MAX_ROWS * source + row, 0], [1, SIZE])
                    y = pl.store(tile, [MAX_ROWS * source + row, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[MAX_ROWS, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]:
            return self.exchange(x, send_counts, y, inbox, counts, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def all_to_all_v(
            self,
            x: pl.Tensor[[nr, MAX_ROWS, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr, MAX_ROWS * nr, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, MAX_ROWS * nr, SIZE], pl.FP32]:
            inbox_buf = pld.alloc_window_buffer([MAX_ROWS * nr, SIZE], dtype=pl.FP32)
            counts_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                inbox = pld.window(inbox_buf, [MAX_ROWS * nr, SIZE], dtype=pl.FP32)
                counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], send_counts[r], y[r], inbox, counts, signal, device=r)
            return y

    return InputCountsAllToAllV


def main() -> int:
    parser = argparse.ArgumentParser(description="all-to-all-v with counts from the input")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_input_counts_all_to_all_v(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, MAX_ROWS, SIZE), dtype=torch.float32)
    send_counts = torch.randint(0, MAX_ROWS + 1, (nr, nr, 1), dtype=torch.int32)
    y = torch.zeros((nr, MAX_ROWS * nr, SIZE), dtype=torch.float32)
    compiled(x, send_counts, y)
    for dest in range(nr):
        for source in range(nr):
            count = int(send_counts[source, dest, 0])
            rows = y[dest, MAX_ROWS * source : MAX_ROWS * source + count]
            if not torch.equal(rows, x[source, :count]):
                print("MISMATCH")
                return 1
    print("OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
