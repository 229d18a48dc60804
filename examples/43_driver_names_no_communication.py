"""A file that imports every driver-only name PyPTO's tests use, and communicates not at all.

Real PyPTO files import the compiler and runtime drivers (``ir.compile``,
``DistributedConfig``, ``RunConfig``, ``DistributedWorker``, device tensors, the
runner modules, PyPTO's own ``examples.runtime`` helpers) and may declare a
``pl.Role.SubWorker`` host callback. racecheck treats all of them as inert names: the
file loads, its main() never runs, and a program whose ranks only copy their own row
is proved — with no communication there is nothing to race.

racecheck expects:
    ranks 1..3: proved
"""

import argparse

import pypto.language as pl
import pypto.language.distributed as pld
import pytest
import torch
from examples.runtime.multi_program_kv_cache import build_kv_cache_program
from pypto import ir
from pypto.ir import DistributedConfig as IrDistributedConfig
from pypto.ir.distributed_compiled_program import DistributedCompiledProgram, DistributedConfig
from pypto.runtime import (
    DeviceTensor,
    DistributedWorker,
    RunConfig,
    StackedDeviceTensor,
    benchmark,
)
from pypto.runtime.device_runner import compile_and_assemble
from pypto.runtime.distributed_runner import _tensor_from_continuous

SIZE = 32
DEFAULT_CONFIG = RunConfig(platform="a2a3sim")
DRIVERS = (
    IrDistributedConfig,
    DistributedCompiledProgram,
    DeviceTensor,
    DistributedWorker,
    StackedDeviceTensor,
    benchmark,
    compile_and_assemble,
    _tensor_from_continuous,
    build_kv_cache_program,
)


def build_copy(nr: int):
    @pl.program
    class LocalCopy:
        @pl.function(type=pl.FunctionType.InCore)
        def copy(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], y)

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            return self.copy(x, y)

        @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
        def log_progress(self, step: pl.Scalar[pl.INT32]):
            print("step", step)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def host_orch(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            for r in pl.range(pld.world_size()):
                self.per_rank(x[r], y[r], device=r)
            return y

    return LocalCopy


@pytest.mark.parametrize("n_ranks", [1, 2])
def test_local_copy(test_config, device_ids, n_ranks):
    compiled = ir.compile(
        build_copy(n_ranks),
        platform=test_config.platform,
        distributed_config=DistributedConfig(device_ids=device_ids[:n_ranks], num_sub_workers=0),
    )
    x = torch.randn((n_ranks, 1, SIZE))
    y = torch.zeros((n_ranks, 1, SIZE))
    compiled(x, y)
    assert torch.equal(x, y)


def main() -> int:
    parser = argparse.ArgumentParser(description="driver names, no communication")
    parser.add_argument("-d", "--device", default="0,1")
    args = parser.parse_args()
    device_ids = [int(d) for d in args.device.split(",")]
    compiled = ir.compile(
        build_copy(len(device_ids)),
        distributed_config=DistributedConfig(device_ids=device_ids, num_sub_workers=0),
    )
    x = torch.randn((len(device_ids), 1, SIZE))
    y = torch.zeros_like(x)
    compiled(x, y, config=DEFAULT_CONFIG)
    print("OK" if torch.equal(x, y) else "MISMATCH")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
