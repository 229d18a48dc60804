"""Loading user files and discovering their programs, including every load error."""

import sys
from pathlib import Path

import pytest

from racecheck.cosim import simulate
from racecheck.dsl.types import ReduceOp
from racecheck.errors import LoadError, UnsupportedConstruct, UserError
from racecheck.load import discover, load_file, parse_arg

FIXTURES = Path(__file__).parent / "fixtures"
HEADER = "import pypto.language as pl\nimport pypto.language.distributed as pld\n"


def _write(tmp_path: Path, body: str, name: str = "user.py") -> str:
    path = tmp_path / name
    path.write_text(HEADER + body)
    return str(path)


def test_missing_file() -> None:
    with pytest.raises(LoadError) as caught:
        load_file("/no/such/collective.py")
    assert caught.value.render() == "/no/such/collective.py: error: no such file"


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "x = 1\ndef broken(:\n    pass\n")
    with pytest.raises(LoadError) as caught:
        load_file(path)
    assert caught.value.line == 4 and caught.value.message.startswith("syntax error")


def test_import_time_exception_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "SIZE = 4\nCHUNK = SIZE // 0\n")
    with pytest.raises(LoadError) as caught:
        load_file(path)
    assert caught.value.line == 4 and "ZeroDivisionError" in caught.value.message


def test_unknown_pld_call_at_import(tmp_path: Path) -> None:
    path = _write(tmp_path, "\nOP = pld.foo\n")
    with pytest.raises(UnsupportedConstruct) as caught:
        load_file(path)
    assert caught.value.render() == (
        f"{path}:4: error: pld.foo is not part of the DSL racecheck models"
    )


def test_a_dsl_call_refused_at_import_names_the_line(tmp_path: Path) -> None:
    # probe: a module-level `pld.world_size()` was "racecheck: error: ..." with no file
    path = _write(tmp_path, "\nNR = pld.world_size()\n")
    with pytest.raises(UnsupportedConstruct) as caught:
        load_file(path)
    assert caught.value.render() == (
        f"{path}:4: error: pld.world_size() is only known while a program runs"
    )


def test_unknown_pld_call_in_a_kernel_is_reported_when_traced(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
@pl.jit.incore
def kernel(y):
    pld.system.fence(y)

@pl.jit
def per_rank(y):
    kernel(y)

@pl.jit.host
def entry(y: pl.Out[pl.Tensor[[2, 4], pl.FP32]]):
    for r in pl.range(pld.world_size()):
        per_rank(y[r], device=r)
""",
    )
    (spec,) = discover(load_file(path))
    with pytest.raises(UnsupportedConstruct) as caught:
        simulate(spec.instantiate(2))
    assert caught.value.line == 6 and "pld.system.fence" in caught.value.message


def test_main_is_never_run_and_modules_are_restored() -> None:
    before = {name: sys.modules.get(name) for name in ("pypto", "pypto.language", "torch")}
    loaded = load_file(str(FIXTURES / "mesh_class.py"))
    assert [spec.name for spec in discover(loaded)] == ["MeshAllreduce"]
    assert {name: sys.modules.get(name) for name in before} == before


def test_a_torch_result_at_import_time_is_unsupported_only_when_used(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    if "torch" in sys.modules:
        pytest.skip("real torch is installed")
    path = _write(tmp_path, "import torch\nDTYPES = {'f': torch.float32}\nX = torch.zeros(3)\n")
    assert repr(load_file(path).namespace["X"]) == "torch.zeros(...)"
    path = _write(tmp_path, "import torch\nX = torch.zeros(3)\nY = X.sum()\n")
    used = r"computes with torch \(torch.zeros\(...\) at line 4\)"
    with pytest.raises(UnsupportedConstruct, match=used) as caught:
        load_file(path)
    assert caught.value.line == 5


def test_unset_factory_parameter_names_the_arg(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
def build(nr, size):
    @pl.jit.host
    def entry(y: pl.Out[pl.Tensor[[nr, size], pl.FP32]]):
        pass
    return entry
""",
    )
    loaded = load_file(path)
    with pytest.raises(UserError) as caught:
        discover(loaded)
    assert "parameter 'size' without a default; pass --arg size=VALUE" in caught.value.message
    (spec,) = discover(loaded, args={"size": "3"})
    assert spec.instantiate(2).shape_of(spec.instantiate(2).parameters[0].annotation) == (2, 3)


def test_bool_factory_parameter_yields_both_programs() -> None:
    names = [spec.name for spec in discover(load_file(str(FIXTURES / "shift_factory.py")))]
    assert names == ["build_shift[use_builtin=True]", "build_shift[use_builtin=False]"]


def test_program_selection_and_unknown_program() -> None:
    loaded = load_file(str(FIXTURES / "features.py"))
    assert [spec.name for spec in discover(loaded, programs=("carry",))] == ["carry"]
    with pytest.raises(UserError, match="no such program"):
        discover(loaded, programs=("nothing",))


def test_dynamic_dim_that_is_not_the_rank_count_needs_an_arg(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
NR = pl.dynamic("NR")
M = pl.dynamic("M")

@pl.jit.host
def entry(y: pl.Out[pl.Tensor[[NR, M * 2], pl.FP32]]):
    pass
""",
    )
    loaded = load_file(path)
    (spec,) = discover(loaded)
    with pytest.raises(UserError, match="pass --arg M=VALUE"):
        spec.instantiate(2)
    (spec,) = discover(loaded, args={"M": "3"})
    instance = spec.instantiate(4)
    assert instance.shape_of(instance.parameters[0].annotation) == (4, 6)


def test_arg_values_are_literals_expressions_or_strings() -> None:
    loaded = load_file(str(FIXTURES / "mesh_class.py"))
    assert parse_arg("3", loaded) == 3
    assert parse_arg("pld.ReduceOp.Max", loaded) is ReduceOp.Max
    assert parse_arg("ring", loaded) == "ring"
    # probe: `--arg op=max` was Python's builtin max, and `op == "max"` took the other branch
    assert parse_arg("max", loaded) == "max"
    assert parse_arg("pow", loaded) == "pow"
