"""195_input_slot_bug_parity.py with a slot pair per rank: rank r's two slots are its own.

Each rank stores its ``SIZE`` values into rank 0's window at column
``(2 * rank + ((slot % 2) + 2) % 2) * SIZE``: whatever parity its input has, no other
rank's columns. The column depends on the input, so one run stands for no other:
racecheck follows the device's truncating `%` symbolically and tries every value each
rank's column takes (two per rank), and only then proves it.

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


def build_input_slot_per_rank(nr: int):
    @pl.program
    class InputSlotPerRank:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            slot: pl.Tensor[[1, 1], pl.INT32],
            gathered: pl.InOut[pld.DistributedTensor[[1, 2 * nr * SIZE], pl.FP32]],
        ):
            me = pld.rank(pld.get_comm_ctx(gathered))
            chosen = pl.read(slot, [0, 0])
            column = (2 * me + ((chosen % 2) + 2) % 2) * SIZE
            row = pl.load(x, [0, 0], [1, SIZE])
            pld.tile.remote_store(row, gathered, peer=0, offsets=[0, column])  # @put

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def input_slot_per_rank(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            slot: pl.Tensor[[nr, 1, 1], pl.INT32],
        ):
            gathered_buf = pld.alloc_window_buffer([1, 2 * nr * SIZE], dtype=pl.FP32)
            for r in pl.range(pld.world_size()):
                gathered = pld.window(gathered_buf, [1, 2 * nr * SIZE], dtype=pl.FP32)
                self.step(x[r], slot[r], gathered, device=r)

    return InputSlotPerRank


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_input_slot_per_rank(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    slot = torch.randint(-100, 100, (nr, 1, 1), dtype=torch.int32)
    compiled(x, slot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
