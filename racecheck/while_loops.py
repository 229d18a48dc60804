"""Python `while` loops in a file's DSL functions, for a note in the report.

PyPTO's parser takes `while cond:` in a DSL function as a natural while loop (a device
`WhileStmt`, python/pypto/language/parser/ast_parser.py `parse_while_loop`); its
documented form is `pl.while_` with `pl.cond` (docs/en/user/language/02-control-flow.md).
racecheck runs the loop as Python, as many times as its condition holds on this trace,
so the note says so at the loop's line.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from racecheck.report.reasons import ReasonCode, reason


def while_notes(path: str) -> tuple[str, ...]:
    """One note per `while` statement inside a function decorated with `pl.*`."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    return _notes(path, source)


@lru_cache(maxsize=64)
def _notes(path: str, source: str) -> tuple[str, ...]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    notes: list[str] = []
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef) and _is_dsl(function):
            for node in ast.walk(function):
                if isinstance(node, ast.While):
                    where = f"{path}:{node.lineno}"
                    notes.append(reason(ReasonCode.WHILE_LOOP, where=where, function=function.name))
    return tuple(dict.fromkeys(notes))


def _is_dsl(function: ast.FunctionDef) -> bool:
    """Decorated with `pl.function(...)`, `pl.jit...` or another `pl.` decorator."""
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        while isinstance(target, ast.Attribute):
            target = target.value
        if isinstance(target, ast.Name) and target.id in ("pl", "pld"):
            return True
    return False
