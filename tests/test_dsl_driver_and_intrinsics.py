"""Real PyPTO system tests import driver modules racecheck does not know and use the
four-argument allgather intrinsic that writes into a plain output tensor."""

import sys
from pathlib import Path

import numpy as np
import pytest

from racecheck.cosim import simulate
from racecheck.dsl.modules import installed
from racecheck.errors import UnsupportedConstruct, UserError
from racecheck.findings import Verdict
from racecheck.load import discover, load_file
from racecheck.options import Options
from racecheck.pipeline import check_program

FIXTURES = Path(__file__).parent / "fixtures"
GATHER = {spec.name: spec for spec in discover(load_file(str(FIXTURES / "gather_into_out.py")))}


@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_allgather_into_out_concatenates_every_rank_in_order(ranks: int) -> None:
    execution = simulate(GATHER["build_gather_into_out"].instantiate(ranks))
    x, y = execution.tensors
    gathered = np.concatenate([x.initial[r, 0] for r in range(ranks)])
    for rank in range(ranks):
        np.testing.assert_array_equal(y.final[rank, 0], gathered)


def test_allgather_into_out_is_proved() -> None:
    result = check_program(GATHER["build_gather_into_out"], 3, Options(ranks=(3,)))
    assert result.verdict is Verdict.PROVED


def test_an_l2_only_program_needs_annotated_orchestration_parameters() -> None:
    (spec,) = discover(load_file(str(FIXTURES / "kernel_only.py")))
    assert (spec.name, spec.single_device) == ("KernelOnly.on_device", True)
    with pytest.raises(UserError, match="parameter 'a' has no type annotation; an L2-only"):
        spec.instantiate(1)


def test_a_single_chip_program_beside_a_collective_is_left_out() -> None:
    loaded = load_file(str(FIXTURES / "gather_into_out.py"))
    assert [spec.name for spec in discover(loaded)] == ["build_gather_into_out"]


def test_unknown_driver_modules_import_but_never_run() -> None:
    with installed():
        from pypto.runtime.device_runner import compile_and_assemble

        with pytest.raises(UnsupportedConstruct, match="never runs"):
            compile_and_assemble("out")
    assert "pypto.runtime.device_runner" not in sys.modules


def test_unknown_language_modules_still_fail_to_import() -> None:
    with installed(), pytest.raises(ImportError):
        __import__("pypto.language.not_a_module")


def test_distributed_config_imports_from_pypto_ir_too() -> None:
    with installed():
        from pypto.ir import DistributedConfig

        config = DistributedConfig(device_ids=[0, 1], num_sub_workers=0)
        assert config.kwargs["device_ids"] == [0, 1]
