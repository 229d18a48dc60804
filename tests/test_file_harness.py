"""The file's own test run up to its harness call (racecheck.file_harness)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

import racecheck
from racecheck import file_harness, load
from racecheck.cosim.host import HostContext
from racecheck.cosim.inputs import create_host_arguments
from racecheck.dsl.memory import MemoryState
from racecheck.errors import UserError
from racecheck.file_harness import FileInputs, NotCaptured
from racecheck.options import Options

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SHIFT = EXAMPLES / "246_shift_rows_from_file_test.py"


@pytest.fixture(autouse=True)
def _no_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["harness.py"])  # the file's own command line


def _capture(
    source: str, entry: object = None, path: str = "harness.py"
) -> FileInputs | NotCaptured | None:
    tree = ast.parse(source)
    namespace: dict[str, object] = {"__name__": "module", "ENTRY": entry}
    exec(compile(tree, path, "exec"), namespace)
    return file_harness.capture(tree, path, namespace, lambda fn: fn is entry)


HARNESS = """
class Spec:
    def __init__(self, name, shape=None, value=None, init_value=None, is_output=False):
        self.name = name
        if shape is not None:
            self.shape, self.init_value, self.is_output = shape, init_value, is_output
        else:
            self.value = value

def run_jit(fn, specs, golden_fn=None, **config):
    raise RuntimeError("a device run")

def build(rows):
    return [Spec("x", [2, rows], init_value=float(rows)), Spec("rows", value=rows)]

if __name__ == "__main__":
    import argparse, sys
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=3)
    args = parser.parse_args()
    result = run_jit(fn=OTHER, specs=build(1))
    assert result.passed
    for rows in (args.rows, args.rows - 1):
        run_jit(fn=ENTRY, specs=build(rows), golden_fn=print, rtol=1e-2)
"""


def test_the_first_harness_call_for_the_entry_states_its_scalars_and_tensors() -> None:
    entry = object()
    given = _capture(HARNESS.replace("OTHER", "None"), entry)
    assert isinstance(given, FileInputs)
    assert given.scalars == {"rows": 3} and given.line == 24 and given.rtol == 1e-2
    assert given.tensors["x"].shape == (2, 3) and given.golden is print
    np.testing.assert_array_equal(given.values("x", (2, 3)), np.full((2, 3), 3.0))
    assert given.values("x", (2, 4)) is None  # another shape: the spec states none


def test_the_block_reads_the_files_own_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["harness.py", "--rows", "7"])
    given = _capture(HARNESS.replace("OTHER", "None"), object())
    assert isinstance(given, FileInputs) and given.scalars == {"rows": 7}


def test_another_entrys_harness_call_states_nothing_for_this_one() -> None:
    assert _capture(HARNESS.replace("fn=ENTRY", "fn=None").replace("OTHER", "None"), 1) is None


def test_a_failing_test_block_is_not_captured_and_says_why() -> None:
    failing = HARNESS.replace("OTHER", "None").replace("float(rows)", "rows / 0")
    given = _capture(failing, object())
    assert isinstance(given, NotCaptured) and "ZeroDivisionError" in given.reason


def test_a_test_block_failing_on_a_torch_line_without_torch_says_install_torch(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(file_harness, "torch_installed", lambda: False)
    stood_in = "class torch:\n    Tensor = None\n" + HARNESS.replace("OTHER", "None")
    path = tmp_path / "harness.py"  # the failing line is read from the file
    path.write_text(stood_in.replace("float(rows)", "isinstance(rows, torch.Tensor)"))
    given = _capture(path.read_text(), object(), str(path))
    assert isinstance(given, NotCaptured) and "install torch" in given.reason


def test_a_refused_command_line_is_not_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["harness.py", "--no-such-flag"])
    given = _capture(HARNESS.replace("OTHER", "None"), object())
    assert isinstance(given, NotCaptured) and "exited with 2" in given.reason


def test_a_file_without_a_main_harness_call_has_nothing_to_run() -> None:
    assert _capture("def run_jit(fn, specs):\n    pass\n", object()) is None


def test_the_entry_is_bound_and_started_from_what_its_test_states() -> None:
    (spec,) = load.load_programs(str(SHIFT), Options(ranks=(2,)))
    instance = spec.instantiate(2)
    assert dict(instance.bindings)["ROWS"] == 2
    assert [p.value for p in instance.parameters if p.name == "rows"] == [2]
    memory = MemoryState(2)
    host = HostContext(instance.ranks, memory, dict(instance.bindings))
    _, tensors = create_host_arguments(instance, memory, host, seed=0)
    (x,) = [tensor for tensor in tensors if tensor.name == "x"]
    np.testing.assert_array_equal(x.initial, np.arange(64, dtype=np.float32).reshape(2, 2, 16))


def test_a_bf16_input_keeps_its_negative_values(tmp_path: Path) -> None:
    """BF16 is stored as 16-bit unsigned integers: clipping an input to its storage's
    range made every negative value 0 (pypto-lib's -7 output sentinels started at 0)."""
    path = tmp_path / "shift.py"
    source = SHIFT.read_text(encoding="utf-8").replace("pl.FP32", "pl.BF16")
    path.write_text(source.replace("values = np.arange(", "values = -np.arange("), "utf-8")
    (spec,) = load.load_programs(str(path), Options(ranks=(2,)))
    instance = spec.instantiate(2)
    memory = MemoryState(2)
    host = HostContext(instance.ranks, memory, dict(instance.bindings))
    _, tensors = create_host_arguments(instance, memory, host, seed=0)
    (x,) = [tensor for tensor in tensors if tensor.name == "x"]
    np.testing.assert_array_equal(x.initial, -np.arange(64, dtype=np.float32).reshape(2, 2, 16))


def test_without_the_files_test_an_unbound_scalar_says_why(tmp_path: Path) -> None:
    source = SHIFT.read_text(encoding="utf-8").replace(
        "values = np.arange", "values = np.no_such_function"
    )
    path = tmp_path / "shift.py"
    path.write_text(source, encoding="utf-8")
    (spec,) = load.load_programs(str(path), Options(ranks=(2,)))
    with pytest.raises(UserError, match="the file's own test states it, but its test code"):
        spec.instantiate(2)


def test_a_spec_whose_values_need_torch_without_it_leaves_them_to_the_seed() -> None:
    def made_with_torch() -> object:
        raise TypeError("isinstance() arg 2 must be a type")  # torch.Tensor, stood in

    without_torch = file_harness._Tensors()
    without_torch.mode = None
    spec = file_harness.TensorInput(name="x", shape=(2, 3), is_output=False, make=made_with_torch)
    given = FileInputs(line=1, scalars={}, tensors={"x": spec}, tensors_made=without_torch)
    assert given.values("x", (2, 3)) is None


def test_large_tensors_run_shape_only_with_torch() -> None:
    torch = pytest.importorskip("torch")
    from racecheck.torch_shapes import ShapeOnlyAbove

    mode = ShapeOnlyAbove(1 << 20)
    with mode:
        small = torch.ones(4)
        weights = torch.randn(1024, 1024)  # 4 MiB: shape-only
        scale = torch.zeros(1024)
        scale[:] = weights.abs().amax(dim=1)  # a small tensor written from a large one
        table = torch.argsort(torch.rand(8, 6), dim=1)
    assert not small.is_meta and weights.is_meta and mode.shape_only(scale)
    assert not mode.shape_only(table) and table.shape == (8, 6)
    with mode, pytest.raises(RuntimeError):
        scale.sum().item()  # the values were needed


def test_a_shape_only_tensor_inside_a_list_argument_makes_the_result_shape_only() -> None:
    torch = pytest.importorskip("torch")
    from racecheck.torch_shapes import ShapeOnlyAbove

    with ShapeOnlyAbove(1 << 20):
        weights = torch.randn(1024, 1024)  # shape-only
        small = torch.ones(2, 1024)
        joined = torch.cat([small, weights])
        named = torch.cat(tensors=(small, [weights][0]), dim=0)
        real = torch.cat([small, small])
    assert joined.is_meta and named.is_meta and joined.shape == (1026, 1024)
    assert not real.is_meta


def test_the_files_golden_is_run_on_the_runs_inputs_and_compared(tmp_path: Path) -> None:
    (result,) = racecheck.verify(str(SHIFT), ranks=[2]).results
    assert "the output y matches the file's golden golden_shift (rtol=1e-05, atol=1e-05)" in (
        result.notes
    )
    (used,) = [note for note in result.notes if "harness call" in note]
    assert used.startswith(f"racecheck ran the file's test up to its harness call at {SHIFT}:")
    wrong = tmp_path / "shift.py"
    source = SHIFT.read_text(encoding="utf-8")
    wrong.write_text(source.replace("axis=0)  #", "axis=1)  #"), encoding="utf-8")
    (result,) = racecheck.verify(str(wrong), ranks=[2]).results
    (note,) = [note for note in result.notes if "differs from the file's golden" in note]
    assert "the output y differs from the file's golden golden_shift at [0, 0, 0]" in note
    assert "not judged" in note and result.verdict.value == "proved"


@pytest.mark.skipif(sys.platform != "linux", reason="zero pages past the machine's memory")
def test_a_host_tensor_larger_than_the_machine_costs_only_what_is_touched() -> None:
    from racecheck.dsl.memory import zero_pages

    weights = zero_pages((2, 5 << 30), np.dtype(np.float32))  # 40 GiB, never touched
    weights[1, 7] = 3.0
    assert weights.reshape(-1)[(5 << 30) + 7] == 3.0 and weights[0, :4].tolist() == [0] * 4


def test_a_test_that_exits_before_its_harness_call_says_its_inputs_were_not_used(
    tmp_path: Path,
) -> None:
    """pypto-lib's tests refuse a device list shorter than the P (`-d 0`): the file's
    inputs are then drawn by --seed, which the one note about them says."""
    early = tmp_path / "shift.py"
    refusal = '    raise SystemExit("need exactly 2 devices, got [0]")\n    parser ='
    source = SHIFT.read_text(encoding="utf-8").replace("    parser =", refusal, 1)
    early.write_text(source, encoding="utf-8")
    (result,) = racecheck.verify(str(early), ranks=[2], args={"rows": 2, "ROWS": 2}).results
    (note,) = [note for note in result.notes if "harness call" in note]
    assert note == (
        "the file's test code did not reach its harness call for l3_shift: its test code"
        " exited with 'need exactly 2 devices, got [0]' before its harness call; its inputs"
        " are drawn by --seed and no golden of the file's is checked"
    )


def test_a_torch_golden_without_torch_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from racecheck.models import file_golden

    monkeypatch.setattr(file_golden, "torch_installed", lambda: False)
    torch_like = tmp_path / "shift.py"
    source = SHIFT.read_text(encoding="utf-8")
    torch_like.write_text(source.replace("axis=0)  #", "dim=0)  #"), encoding="utf-8")
    (result,) = racecheck.verify(str(torch_like), ranks=[2]).results
    (note,) = [note for note in result.notes if "golden_shift" in note]
    assert note == (
        "the file's golden golden_shift was not run: it computes with torch, which is not"
        " installed (install torch to compare the outputs with it)"
    )


def test_the_files_golden_is_not_run_on_more_bytes_than_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from racecheck.models import file_golden

    monkeypatch.setattr(file_golden, "GOLDEN_BYTES", 16)
    (result,) = racecheck.verify(str(SHIFT), ranks=[2]).results
    assert any("golden golden_shift was not run: its tensors take" in n for n in result.notes)


def test_a_function_binding_an_inline_helper_is_no_program_factory(tmp_path: Path) -> None:
    binder = (
        "\n\ndef _bind_helper():\n    @pl.jit.inline\n    def helper(x):\n"
        "        return x\n    return helper\n\n\nhelper = _bind_helper()\n"
    )
    path = tmp_path / "shift.py"  # pypto-lib binds a preset's inline helper this way
    path.write_text(SHIFT.read_text(encoding="utf-8") + binder, encoding="utf-8")
    report = racecheck.verify(str(path), ranks=[2])
    assert not report.errors and [r.verdict.value for r in report.results] == ["proved"]


def test_a_jit_function_names_its_parameters_as_pyptos_does() -> None:
    """pypto-lib's spec builders order their specs by `entry._param_names()`."""
    loaded = load.load_file(str(SHIFT))
    assert loaded.namespace["l3_shift"]._param_names() == ["x", "y", "rows"]
