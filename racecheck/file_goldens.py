"""What a file says it computes: the `specs=` and `golden_fn=` it hands to its own
harness (`run_jit(fn=..., specs=build_tensor_specs(), golden_fn=golden_x)`, pypto-lib's
`golden.run_jit`/`golden.run`, PyPTO's test harness).

A harness call in the file's `__main__` block is run up to (`racecheck.file_harness`):
the scalars, dynamic dims and input tensors it states are used, and its golden is run
on them and compared with the run's outputs; the run's own notes say whether the call
was reached and what it gave (`racecheck.models.file_golden`). Here, one note per
harness call racecheck does not run to (outside the `__main__` block and the functions
it calls) says so, and names the missing piece when the file computes with torch and
torch is not installed (then inputs are drawn by --seed; scalars stated by
`ScalarSpec` are read from the text: `racecheck.load.file_scalars`).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from racecheck.file_harness import harness_lines, torch_installed
from racecheck.report.reasons import ReasonCode, reason

HARNESS_CALLS = ("run_jit", "run")
_STATED = ("specs", "golden_fn")


def golden_notes(path: str) -> tuple[str, ...]:
    """One note per harness call of the file that states its inputs or its golden and
    that racecheck does not run its test up to."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    return _notes(path, source, torch_installed())


@lru_cache(maxsize=64)
def _notes(path: str, source: str, torch_installed: bool) -> tuple[str, ...]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    needs_torch = not torch_installed and _imports_torch(tree)
    run_lines = set(harness_lines(tree))  # run up to: the run says what it used
    notes = []
    for call in _harness_calls(tree):
        if call.lineno in run_lines:
            continue  # racecheck.models.file_golden: what the run up to it gave
        stated = ", ".join(
            f"{keyword.arg}={ast.unparse(keyword.value)}"
            for keyword in call.keywords
            if keyword.arg in _STATED
        )
        code = ReasonCode.FILE_INPUTS_NEED_TORCH if needs_torch else ReasonCode.FILE_INPUTS_NOT_RUN
        notes.append(reason(code, stated=stated, where=f"{path}:{call.lineno}"))
    return tuple(dict.fromkeys(notes))


def _harness_calls(tree: ast.Module) -> list[ast.Call]:
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
        if name in HARNESS_CALLS and any(k.arg in _STATED for k in node.keywords):
            calls.append(node)
    return sorted(calls, key=lambda call: call.lineno)


def _imports_torch(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            alias.name.split(".")[0] == "torch" for alias in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            return True
    return False
