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


def test_a_numpy_harness_in_main_is_run_up_to_and_its_golden_compared(tmp_path: Path) -> None:
    path = _file(tmp_path, "import numpy as np", "np.ones((2, 4))")
    (note,) = file_goldens.golden_notes(path)
    assert "specs=build_tensor_specs(), golden_fn=golden at" in note and ":11)" in note
    assert "torch" not in note and "drawn by --seed" not in note
    assert "ran its test up to that call" in note and "golden's outputs compared" in note


def test_a_torch_golden_without_torch_says_so_in_one_line(tmp_path: Path) -> None:
    path = _file(tmp_path, "import torch", "torch.ones((2, 4))")
    source = Path(path).read_text(encoding="utf-8")
    (note,) = file_goldens._notes(path, source, False)
    assert "torch is not installed" in note and "install torch" in note
    (installed,) = file_goldens._notes(path, source, True)
    assert "not installed" not in installed


def test_a_file_without_a_harness_call_has_no_note(tmp_path: Path) -> None:
    path = tmp_path / "plain.py"
    path.write_text("def run(x):\n    return x\n\nrun(3)\n", encoding="utf-8")
    assert file_goldens.golden_notes(str(path)) == ()
