"""What a file says it computes: the `specs=` and `golden_fn=` it hands to its own
harness (`run_jit(fn=..., specs=build_tensor_specs(), golden_fn=golden_x)`, pypto-lib's
`golden.run_jit`/`golden.run`, PyPTO's test harness).

A harness call in the file's `__main__` block is run up to (`racecheck.file_harness`):
the scalars, dynamic dims and input tensors it states are used, and its golden is run
on them and compared with the run's outputs (`racecheck.models.file_golden`, a note).
One note per harness call says which, in the user's terms, and names the missing piece
when the file computes them with torch and torch is not installed (then inputs are
drawn by --seed; scalars stated by `ScalarSpec` are read from the text:
`racecheck.load.file_scalars`).
"""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path

from racecheck.file_harness import harness_lines

HARNESS_CALLS = ("run_jit", "run")
_STATED = ("specs", "golden_fn")


def golden_notes(path: str) -> tuple[str, ...]:
    """One note per harness call of the file that states its inputs or its golden."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    return _notes(path, source, _torch_installed())


def _torch_installed() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


@lru_cache(maxsize=64)
def _notes(path: str, source: str, torch_installed: bool) -> tuple[str, ...]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    needs_torch = not torch_installed and _imports_torch(tree)
    run_lines = set(harness_lines(tree))  # run up to (racecheck.file_harness)
    notes = []
    for call in _harness_calls(tree):
        stated = ", ".join(
            f"{keyword.arg}={ast.unparse(keyword.value)}"
            for keyword in call.keywords
            if keyword.arg in _STATED
        )
        where = f"{path}:{call.lineno}"
        if needs_torch and call.lineno in run_lines:
            notes.append(
                f"the file states its inputs and golden ({stated} at {where}); racecheck"
                " runs its test up to that call, but torch is not installed: where its spec"
                " builders need torch, inputs are drawn by --seed and scalars and dynamic"
                " dims need --arg (install torch to use the file's own)"
            )
        elif needs_torch:
            notes.append(
                f"the file states its inputs and golden ({stated} at {where}) with torch,"
                " which is not installed: inputs are drawn by --seed and no golden of the"
                " file's is checked (install torch to compute them)"
            )
        elif call.lineno in run_lines:
            notes.append(
                f"the file states its inputs and golden ({stated} at {where}); racecheck"
                " ran its test up to that call: its scalars, dynamic dims and input"
                " tensors are used (a tensor over 8 MiB starts as zeros) and its golden's"
                " outputs compared with the run's"
            )
        else:
            notes.append(
                f"the file states its inputs and golden ({stated} at {where}); racecheck"
                " does not run the file's test code: inputs are drawn by --seed and no"
                " golden of the file's is checked"
            )
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
