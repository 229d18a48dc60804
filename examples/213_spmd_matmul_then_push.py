"""Multiply in one ``pl.spmd``, push in another: two tasks, each of one kind of core.

``y[r] = (x @ w)[(r - 1 + N) % N]``, shaped like pypto-lib's LM head. The ``project``
blocks multiply on the cube core and store the product into a per-device tensor; the
``push`` blocks each store half of its rows into the right neighbour's ``inbox`` and
notify it; ``arrive`` waits for both halves, and ``fetch``, which names ``arrive`` in
``deps=``, copies ``inbox`` out. Matmul and communication are in one function but in
different tasks, so no kernel mixes them and no notify runs on a cube lane
(95_shift_matmul_bug_cube_lane_notify.py is the kernel that does).
214_spmd_matmul_then_push_bug_unordered_fetch.py drops the ``deps=``.

racecheck expects:
    ranks 1..3: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto.ir.distributed_compiled_program import DistributedConfig
from pypto.runtime import RunConfig

NR = pl.dynamic("NR")
SIZE = 16
HALF = SIZE // 2


@pl.jit
def per_rank(
    x: pl.Tensor[[SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[SIZE, SIZE], pl.FP32]],
    inbox: pld.DistributedTensor[[SIZE, SIZE], pl.FP32],
    signal: pld.DistributedTensor[[1, 1], pl.INT32],
):
    ctx = pld.get_comm_ctx(inbox)
    right = (pld.rank(ctx) + 1) % pld.nranks(ctx)
    product = pl.create_tensor([SIZE, SIZE], dtype=pl.FP32)
    for _ in pl.spmd(1, name_hint="project"):
        left = pl.move(pl.load(x, [0, 0], [SIZE, SIZE]), target_memory=pl.Mem.Left)
        weights = pl.move(pl.load(w, [0, 0], [SIZE, SIZE]), target_memory=pl.Mem.Right)
        pl.store(pl.matmul(left, weights), [0, 0], product)
    for half in pl.spmd(2, name_hint="push"):
        rows = pl.load(product, [half * HALF, 0], [HALF, SIZE])
        pld.tile.remote_store(rows, inbox, peer=right, offsets=[half * HALF, 0])  # @push
        pld.system.notify(signal, peer=right, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="arrive") as arrived:
        pld.system.wait(signal, offsets=[0, 0], expected=2, cmp=pld.WaitCmp.Ge)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="fetch", deps=[arrived]):
        recv = pl.load(inbox, [0, 0], [SIZE, SIZE])  # @fetch
        pl.store(recv, [0, 0], y)
    return y


@pl.jit.host
def spmd_matmul_then_push(
    x: pl.Tensor[[NR, SIZE, SIZE], pl.FP32],
    w: pl.Tensor[[NR, SIZE, SIZE], pl.FP32],
    y: pl.Out[pl.Tensor[[NR, SIZE, SIZE], pl.FP32]],
):
    inbox_buf = pld.alloc_window_buffer([SIZE, SIZE], dtype=pl.FP32)
    signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        inbox = pld.window(inbox_buf, [SIZE, SIZE], dtype=pl.FP32)
        signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
        per_rank(x[r], w[r], y[r], inbox, signal, device=r)


def expected(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.roll(x @ w, shifts=1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="multiply in one spmd, push in another")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    x = torch.randn((nr, SIZE, SIZE), dtype=torch.float32)
    w = torch.randn((nr, SIZE, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, SIZE, SIZE), dtype=torch.float32)
    config = RunConfig(
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    spmd_matmul_then_push.compile(x, w, y, config=config)(x, w, y, config=config)
    print("OK" if torch.allclose(y, expected(x, w), atol=1e-4) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
