"""The inputs and golden a file hands to its own harness (racecheck.file_goldens)."""

from __future__ import annotations

from pathlib import Path

from racecheck import file_goldens

HARNESS = """
def build_tensor_specs():
    {imports}
    return [TensorSpec("x", [2, 4], "float32", init_value={init})]

def golden(values):
    values["y"][:] = values["x"] * 2

if __name__ == "__main__":
    from golden import run_jit
    run_jit(fn=l3_entry, specs=build_tensor_specs(), golden_fn=golden, rtol=1e-3)
"""


def _file(tmp_path: Path, imports: str, init: str) -> str:
    path = tmp_path / "model.py"
    path.write_text(HARNESS.format(imports=imports, init=init), encoding="utf-8")
    return str(path)


def test_a_harness_call_run_up_to_is_left_to_the_run(tmp_path: Path) -> None:
    """The run says whether it reached the call (racecheck.models.file_golden)."""
    path = _file(tmp_path, "import numpy as np", "np.ones((2, 4))")
    assert file_goldens.golden_notes(path) == ()


def _not_run(tmp_path: Path, imports: str, init: str) -> str:
    """The harness call in a function the `__main__` block does not call."""
    path = _file(tmp_path, imports, init)
    source = Path(path).read_text(encoding="utf-8")
    source = source.replace('if __name__ == "__main__":', "def not_called():")
    Path(path).write_text(source, encoding="utf-8")
    return path


def test_a_harness_call_not_run_to_says_inputs_are_drawn(tmp_path: Path) -> None:
    path = _not_run(tmp_path, "import numpy as np", "np.ones((2, 4))")
    (note,) = file_goldens.golden_notes(path)
    assert "specs=build_tensor_specs(), golden_fn=golden at" in note and ":11)" in note
    assert "does not run the file's test code" in note and "torch" not in note


def test_a_torch_harness_not_run_to_without_torch_says_so_in_one_line(tmp_path: Path) -> None:
    path = _not_run(tmp_path, "import torch", "torch.ones((2, 4))")
    source = Path(path).read_text(encoding="utf-8")
    (note,) = file_goldens._notes(path, source, False)
    assert "torch, which is not installed" in note and "install torch" in note
    (installed,) = file_goldens._notes(path, source, True)
    assert "not installed" not in installed


def test_a_file_without_a_harness_call_has_no_note(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text("def run(x):\n    return x\n\nrun(3)\n", encoding="utf-8")
    assert file_goldens.golden_notes(str(path)) == ()
