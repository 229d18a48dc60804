"""Point-to-point ring shift built by a factory, whose left peer is Python-int arithmetic.

The factory's ``nr`` is a Python int the kernel sees as a closure value, and the kernel
turns its rank into a Python int with ``int(...)``. PyPTO parses the kernel's body into
IR, so its ``%`` is the device's, which truncates toward zero whatever the operands are
in Python (docs/model.md): the left peer is written ``(me - 1 + nr) % nr``, in range for
every rank. Its twin, 171, drops the ``+ nr``.

racecheck expects:
    ranks 1: proved
    ranks 2..6: proved shift+1
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 64


def build_ring_shift(nr: int):
    @pl.program
    class RingShift:
        @pl.function(type=pl.FunctionType.InCore)
        def pass_left(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
            signal: pld.DistributedTensor[[1, 1], pl.INT32],
        ):
            me = int(pld.rank(pld.get_comm_ctx(inbox)))
            left = (me - 1 + nr) % nr

            pld.tensor.put(inbox, left, x)  # @put
            pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)

            pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
            recv = pl.load(inbox, [0, 0], [1, SIZE])
            y = pl.store(recv, [0, 0], y)
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            inbox: pld.DistributedTensor[[1, SIZE], pl.FP32],
            signal: pld.DistributedTensor[[1, 1], pl.INT32],
        ):
            return self.pass_left(x, y, inbox, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def ring_shift(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ):
            inbox_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            for r in pl.range(nr):
                inbox = pld.window(inbox_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
                self.per_rank(x[r], y[r], inbox, signal, device=r)

    return RingShift


def expected_shift(inputs: torch.Tensor) -> torch.Tensor:
    return torch.roll(inputs, shifts=-1, dims=0)


def main() -> int:
    parser = argparse.ArgumentParser(description="ring shift built by a factory")
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1,2,3", help="comma-separated device ids")
    args = parser.parse_args()

    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_ring_shift(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    print("OK" if torch.equal(y, expected_shift(x)) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
