"""An allgather issued with ``defer=True``, consumed by a task that depends on it.

``pld.tensor.allgather(..., defer=True)`` splits the collective's task in PyPTO: the
puts and notifies run, the wait for the peers is deferred (the task's id completes
once every peer's cell reaches the generation, compared as unsigned) and the
self-clearing epilogue runs after it (docs/model.md). Only a task that names the
collective's id in ``deps=`` is ordered after the gathered rows; here the copy-out
does, so every rank reads all rows after they landed.

racecheck expects:
    ranks 1: proved
    ranks 2..4: proved allgather
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 32


@pl.jit
def per_rank(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[1, NR * SIZE], pl.FP32]],
    rows: pld.DistributedTensor[[NR, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[NR, 1], pl.INT32],
):
    with pl.manual_scope():
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="gather") as gathered:
            pld.tensor.allgather(x, rows, signal, defer=True)  # @gather
        with pl.at(level=pl.Level.CORE_GROUP, name_hint="copy_out", deps=[gathered]):
            for r in pl.range(NR):
                pl.store(pl.load(rows, [r, 0], [1, SIZE]), [0, r * SIZE], y)  # @copy
    return y


@pl.jit.host
def deferred_allgather(
    x: pl.Tensor[[NR, 1, SIZE], pl.FP32], y: pl.Out[pl.Tensor[[NR, 1, NR * SIZE], pl.FP32]]
):
    rows_buf = pld.alloc_window_buffer([NR, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([NR, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        rows = pld.window(rows_buf, [NR, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [NR, 1], dtype=pl.INT32)
        per_rank(x[r], y[r], rows, signal, device=r)
    return y


def main() -> int:
    parser = argparse.ArgumentParser(description="allgather with defer=True")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, nr * SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    compiled = deferred_allgather.compile(x, y, config=config)
    compiled(x, y, config=config)
    gathered = x.reshape(1, nr * SIZE).expand(nr, nr * SIZE).reshape(nr, 1, nr * SIZE)
    print("OK" if torch.equal(y, gathered) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
