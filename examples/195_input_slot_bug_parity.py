"""Every rank stores its row into rank 0's window at a slot chosen by its input's parity.

Each rank reads an INT32 ``slot`` from its input and stores its ``SIZE`` values into
rank 0's window at column ``((slot % 2) + 2) % 2 * SIZE``: two slots for any number of
ranks. Two ranks whose inputs have equal parity store into the same columns, in no
order. Whether a traced run shows it depends on the inputs drawn, so the answer must
not: the device's `%` truncates toward zero (``-3 % 2 == -1``, hence the ``+ 2``), and
racecheck follows it symbolically, tries every value each rank's column takes and
reports the race whatever ``--seed`` is.

racecheck expects:
    ranks 2: bug race write-after-write at @put ranks 0 1
    ranks 3: bug race write-after-write at @put
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import torch
from pypto import ir
from pypto.ir.distributed_compiled_program import DistributedConfig

SIZE = 16


def build_input_slot(nr: int):
    @pl.program
    class InputSlot:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            slot: pl.Tensor[[1, 1], pl.INT32],
            gathered: pl.InOut[pld.DistributedTensor[[1, 2 * SIZE], pl.FP32]],
        ):
            chosen = pl.read(slot, [0, 0])
            column = ((chosen % 2) + 2) % 2 * SIZE
            row = pl.load(x, [0, 0], [1, SIZE])
            pld.tile.remote_store(row, gathered, peer=0, offsets=[0, column])  # @put

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def input_slot(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            slot: pl.Tensor[[nr, 1, 1], pl.INT32],
        ):
            gathered_buf = pld.alloc_window_buffer([1, 2 * SIZE], dtype=pl.FP32)
            for r in pl.range(pld.world_size()):
                gathered = pld.window(gathered_buf, [1, 2 * SIZE], dtype=pl.FP32)
                self.step(x[r], slot[r], gathered, device=r)

    return InputSlot


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--platform", default="a2a3sim")
    parser.add_argument("-d", "--device", default="0,1", help="comma-separated device ids")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    nr = len(device_ids)
    compiled = ir.compile(
        build_input_slot(nr),
        platform=args.platform,
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((nr, 1, SIZE), dtype=torch.float32)
    slot = torch.randint(-100, 100, (nr, 1, 1), dtype=torch.int32)
    compiled(x, slot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
