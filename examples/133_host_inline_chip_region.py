"""A single-device program written with inline regions in its host function.

The host function holds a ``with pl.at(level=pl.Level.CHIP, ...)`` region and a
``with pl.at(level=pl.Level.HOST, role=pl.Role.Worker)`` region that checks the
result on the host. PyPTO outlines each region into a function of its level and role
(docs/model.md): the CHIP region becomes a CHIP orchestration the host calls without
``device=`` (on its one device), whose kernel calls are its tasks; the HOST Worker
region becomes a host sub-worker callback. The first kernel copies ``a`` into ``f``;
the second clears ``a`` for the next request. PyPTO's runtime does not order a write
after an earlier task's read (write-after-read is not tracked), so the clearing
kernel is submitted with ``deps=`` naming the copy. The host check only reads, so it
cannot change what the device computes and is not run.
134_host_inline_chip_region_bug_untracked_war.py drops the ``deps=``.

racecheck expects:
    ranks 1: proved
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
            out_f, copied = pl.submit(self.copy_step, a, f)
            pl.submit(self.clear_step, a, deps=[copied])
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
