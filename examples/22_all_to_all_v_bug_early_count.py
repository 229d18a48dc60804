"""Variable-length all-to-all, bug: the receiver reads the row count before waiting for it.

Rank ``s`` sends rank ``d`` the first ``(s + d) % 2 + 1`` rows of its input: it puts
them into slot ``s`` of ``d``'s inbox, then publishes the row count with a ``Set``
notify on ``d``'s cell ``[s, 0]`` (one writer per cell). The receiver waits until the
count is published — except that here it reads the count first and waits afterwards
(the twin of 21_all_to_all_v.py with two lines swapped). The count it loops over can be
the zero-initialised cell: the copy loop then runs zero times and rows go missing.
racecheck reports the read racing the Set that publishes the count, and notes that
control flow depends on the racy value.

racecheck expects:
    ranks 1: proved
    ranks 2..8: bug race read-after-write at @count, @publish
    all: bug at P=2 race read-after-write at @count, @publish
"""

import argparse

import numpy as np
import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16
MAX_ROWS = 2


def rows_sent(source: int, dest: int) -> int:
    return (source + dest) % 2 + 1


def build_all_to_all_v(nr: int):
    """Each rank sends 1 or 2 rows to every rank; counts travel through a signal window."""

    @pl.program
    class AllToAllVEarlyRead:
        @pl.function(type=pl.FunctionType.InCore)
        def exchange(
            self,
            x: pl.Tensor[[MAX_ROWS, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(inbox)
            me = pld.rank(ctx)

            for dest in pl.range(nr):
                count = (me + dest) % 2 + 1
                rows = pl.load(x, [0, 0], [MAX_ROWS, SIZE], valid_shape=[count, SIZE])
                pld.tile.remote_store(rows, inbox, peer=dest, offsets=[MAX_ROWS * me, 0])
                pld.system.notify(counts, peer=dest, offsets=[me, 0], value=count,  # @publish
                                  op=pld.NotifyOp.Set)

            for source in pl.range(nr):
                received = pl.read(counts, [source, 0])  # @count
                pld.system.wait(counts, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
                for row in pl.range(received):
                    tile = pl.load(inbox, [MAX_ROWS * source + row, 0], [1, SIZE])
                    y = pl.store(tile, [MAX_ROWS * source + row, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[MAX_ROWS, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[MAX_ROWS * nr, SIZE], pl.FP32]:
            return self.exchange(x, y, inbox, counts)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def all_to_all_v(
            self,
            x: pl.Tensor[[nr, MAX_ROWS, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, MAX_ROWS * nr, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, MAX_ROWS * nr, SIZE], pl.FP32]:
            inbox_buf = pld.alloc_window_buffer([MAX_ROWS * nr, SIZE], dtype=pl.FP32)
            counts_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                inbox = pld.window(inbox_buf, [MAX_ROWS * nr, SIZE], dtype=pl.FP32)
                counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], inbox, counts, device=r)
            return y

    return AllToAllVEarlyRead


def expected_all_to_all_v(inputs: np.ndarray) -> np.ndarray:
    """Rows [2s, 2s + count) of rank d's output are rank s's first `count` rows."""
    ranks = inputs.shape[0]
    out = np.zeros((ranks, MAX_ROWS * ranks, inputs.shape[-1]), dtype=inputs.dtype)
    for dest in range(ranks):
        for source in range(ranks):
            count = rows_sent(source, dest)
            out[dest, MAX_ROWS * source : MAX_ROWS * source + count] = inputs[source, :count]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description="variable-length all-to-all")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_all_to_all_v(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, MAX_ROWS, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, MAX_ROWS * nr, SIZE), dtype=torch.float32)
    compiled(x, y)
    golden = torch.from_numpy(expected_all_to_all_v(x.numpy()))
    print("OK" if torch.allclose(y, golden) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
