"""Buggy twin of 133_host_inline_chip_region.py: the clearing kernel has no ``deps=``.

The CHIP region outlined from the host function calls two kernels: the first reads
``a`` to copy it into ``f``, the second overwrites ``a``. The only edge PyPTO's
runtime could infer between them is a write-after-read, which it does not track
(docs/model.md): the clearing kernel may run first, and the copy then reads zeros.

racecheck expects:
    ranks 1: bug race write-after-read at @copy, @clear
"""

import pypto.language as pl
import pypto.language.distributed as pld  # noqa: F401 - imported as PyPTO's programs do
import torch
from pypto import ir
from pypto.ir import DistributedConfig

ROWS = 16
COLS = 32


@pl.program
class InlineRegions:
    @pl.function(type=pl.FunctionType.InCore)
    def copy_step(
        self,
        a: pl.Tensor[[ROWS, COLS], pl.FP32],
        f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
    ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        tile = pl.load(a, [0, 0], [ROWS, COLS])  # @copy
        return pl.store(tile, [0, 0], f)

    @pl.function(type=pl.FunctionType.InCore)
    def clear_step(self, a: pl.InOut[pl.Tensor[[ROWS, COLS], pl.FP32]]):
        tile = pl.load(a, [0, 0], [ROWS, COLS])
        pl.store(pl.sub(tile, tile), [0, 0], a)  # @clear

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host_orch(
        self,
        f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],
        a: pl.InOut[pl.Tensor[[ROWS, COLS], pl.FP32]],
    ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:
        with pl.at(level=pl.Level.CHIP, role=pl.Role.Orchestrator):
            out_f = self.copy_step(a, f)
            self.clear_step(a)
        with pl.at(level=pl.Level.HOST, role=pl.Role.Worker):
            if not torch.allclose(out_f, torch.ones((ROWS, COLS))):
                raise AssertionError("the device's copy is wrong")
        return out_f


def main() -> int:
    compiled = ir.compile(
        InlineRegions,
        platform="a2a3sim",
        distributed_config=DistributedConfig(device_ids=[0], num_sub_workers=1),
    )
    f = torch.zeros((ROWS, COLS))
    compiled(f, torch.ones((ROWS, COLS)))
    print("OK" if torch.allclose(f, torch.ones((ROWS, COLS))) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
