"""A shift that scales its row when the rank's first input value exceeds 1.0: both
sides of the input-dependent branch are synchronised, so the program is proved.

The twin of example 74: which side a traced run takes depends on the input values,
so racecheck picks inputs for each side of the branch (concolic exploration) and
checks both; the verdict does not depend on ``--seed``.

racecheck expects:
    ranks 2..4: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 8


def build_input_scale(nr: int):
    @pl.program
    class InputScale:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[1, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(data))
            row = pl.load(x, [0, 0], [1, SIZE])
            if pl.read(x, [0, 0]) > 1.0:
                row = pl.add(row, row)
            data = pl.store(row, [0, 0], data)
            for peer in pl.range(nr):
                if peer != me:
                    pld.system.notify(
                        signal, peer=peer, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
                    )
            pld.system.wait(signal, offsets=[0, 0], expected=nr - 1, cmp=pld.WaitCmp.Ge)
            got = pld.tile.remote_load(data, peer=(me + 1) % nr, offsets=[0, 0], shape=[1, SIZE])
            y = pl.store(got, [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def input_scale(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                signal = pld.window(signal_buf, [1, 1], dtype=pl.INT32)
                self.step(x[r], y[r], data, signal, device=r)
            return y

    return InputScale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_input_scale(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    y = torch.zeros((nr, 1, SIZE), dtype=torch.float32)
    compiled(x, y)
    print(y)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
