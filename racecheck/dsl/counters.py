"""Slot counters: the names an `if` without `else` bumps by a constant in its body
(`racecheck.dsl.summary` summarises such a branch; `racecheck.dsl.device_source`
recompiles it for that). Syntax only: a leaf both import."""

from __future__ import annotations

import ast

_LEAVING = (ast.Return, ast.Break, ast.Continue, ast.Raise, ast.Yield, ast.YieldFrom, ast.Await)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def counters_of(node: ast.If) -> frozenset[str]:
    """The slot counters of `if C: BODY` (no `else`, nothing in BODY that leaves it or
    opens a scope): the names every assignment of which in BODY is a bump by an integer
    constant (`n = n + K`, `n = K + n`, `n += K`) outside any `if` inside BODY."""
    if node.orelse or any(isinstance(inner, _LEAVING + _SCOPES) for inner in _inside(node)):
        return frozenset()
    bumps = [statement for statement in own_statements(node) if bump_of(statement)]
    targets = {id(_target(statement)) for statement in bumps}
    plain = {
        inner.id
        for inner in _inside(node)
        if isinstance(inner, ast.Name)
        and isinstance(inner.ctx, ast.Store)
        and id(inner) not in targets
    }
    return frozenset(bump_of(statement)[0] for statement in bumps) - plain  # type: ignore[index]


def _target(statement: ast.stmt) -> ast.expr:
    if isinstance(statement, ast.AugAssign):
        return statement.target
    assert isinstance(statement, ast.Assign)
    return statement.targets[0]


def _inside(node: ast.If) -> list[ast.AST]:
    return [inner for statement in node.body for inner in ast.walk(statement)]


def own_statements(node: ast.If) -> list[ast.stmt]:
    """The statements of `node`'s body at any depth, but not inside an inner `if`."""
    found: list[ast.stmt] = []
    pending = list(node.body)
    while pending:
        statement = pending.pop()
        found.append(statement)
        if not isinstance(statement, ast.If):
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(statement, field, None)
                if isinstance(inner, list):
                    pending.extend(inner)
    return found


def bump_of(statement: ast.AST) -> tuple[str, int] | None:
    """`n = n + K`, `n = K + n` or `n += K` (K an integer constant) as (n, K)."""
    if isinstance(statement, ast.AugAssign):
        target, op, step = statement.target, statement.op, statement.value
        if isinstance(target, ast.Name) and isinstance(op, ast.Add) and _integer(step):
            return target.id, step.value  # type: ignore[attr-defined]
        return None
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None
    assigned, value = statement.targets[0], statement.value
    if not isinstance(assigned, ast.Name) or not isinstance(value, ast.BinOp):
        return None
    if not isinstance(value.op, ast.Add):
        return None
    for counter, step in ((value.left, value.right), (value.right, value.left)):
        if isinstance(counter, ast.Name) and counter.id == assigned.id and _integer(step):
            return assigned.id, step.value  # type: ignore[attr-defined]
    return None


def _integer(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    )
