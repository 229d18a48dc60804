"""The host unpacks what a dispatch returns and hands it to the next dispatch.

``split_orch`` writes the sum and the difference of two tiles into its two ``pl.Out``
tensors and declares both as its results; the host unpacks them (``s, d = ...``, as
PyPTO's tuple-return dispatch does) and passes them to ``publish_orch``, which stages
their product in a window and reads its right neighbour's, behind the builtin barrier.
What the host gets from a dispatch is the tensors it writes, one per declared result
(a dispatch whose declared results match neither its written tensors nor its
``pl.Out`` ones is refused, naming its line: tests/test_host_regions.py).

racecheck expects:
    ranks 2..4: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 32


def build(nr: int):
    @pl.program
    class TupleResults:
        @pl.function(type=pl.FunctionType.InCore)
        def split_step(
            self,
            a: pl.Tensor[[1, SIZE], pl.FP32],
            b: pl.Tensor[[1, SIZE], pl.FP32],
            total: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            gap: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        ) -> tuple[pl.Tensor[[1, SIZE], pl.FP32], pl.Tensor[[1, SIZE], pl.FP32]]:
            tile_a = pl.load(a, [0, 0], [1, SIZE])
            tile_b = pl.load(b, [0, 0], [1, SIZE])
            total = pl.store(pl.add(tile_a, tile_b), [0, 0], total)
            gap = pl.store(pl.sub(tile_a, tile_b), [0, 0], gap)
            return total, gap

        @pl.function(type=pl.FunctionType.Orchestration)
        def split_orch(
            self,
            a: pl.Tensor[[1, SIZE], pl.FP32],
            b: pl.Tensor[[1, SIZE], pl.FP32],
            total: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            gap: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        ) -> tuple[pl.Tensor[[1, SIZE], pl.FP32], pl.Tensor[[1, SIZE], pl.FP32]]:
            total, gap = self.split_step(a, b, total, gap)
            return total, gap

        @pl.function(type=pl.FunctionType.InCore)
        def publish_step(
            self,
            total: pl.Tensor[[1, SIZE], pl.FP32],
            gap: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            me = pld.rank(ctx)
            product = pl.mul(pl.load(total, [0, 0], [1, SIZE]), pl.load(gap, [0, 0], [1, SIZE]))
            data = pl.store(product, [0, 0], data)
            signal = pld.tensor.barrier(signal)
            peer = (me + 1) % pld.nranks(ctx)
            recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0], shape=[1, SIZE])
            return pl.store(recv, [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def publish_orch(
            self,
            total: pl.Tensor[[1, SIZE], pl.FP32],
            gap: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.publish_step(total, gap, y, data, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def run(
            self,
            a: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            b: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            total: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
            gap: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(nr):
                s, d = self.split_orch(a[r], b[r], total[r], gap[r], device=r)
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.publish_orch(s, d, y[r], data, signal, device=r)
            return y

    return TupleResults


def main() -> int:
    parser = argparse.ArgumentParser(description="a dispatch's tuple results on the host")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    a = torch.randn(nr, 1, SIZE)
    b = torch.randn(nr, 1, SIZE)
    total, gap, y = (torch.zeros(nr, 1, SIZE) for _ in range(3))
    compiled(a, b, total, gap, y)
    expected = torch.roll((a + b) * (a - b), shifts=-1, dims=0)
    ok = torch.allclose(y, expected, rtol=1e-5, atol=1e-5)
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
