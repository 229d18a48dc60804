"""How `--repeat N` calls follow one another, and the values that change per call.

`--rounds free` (the default) runs each rank's N calls back to back on persistent
windows: a fast rank starts its next call while a peer is still in the last one (a
kernel looped inside one launch). `--rounds joined` is how serving and benchmarks drive
a model: the host waits for every rank to finish call k before it launches call k + 1,
and the windows persist (no reset). `--per-call NAME=EXPR` gives host scalar NAME the
value of EXPR at each call, `{call}` being the call's number from 1 (`epoch={call}`).
The co-simulation's side is `racecheck.cosim.rounds`; docs/model.md "Repeated calls".
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from racecheck.errors import UsageError
from racecheck.report.reasons import ReasonCode, reason


class Rounds(Enum):
    FREE = "free"  # calls back to back, each rank at its own pace
    JOINED = "joined"  # the host waits for every rank between calls


CALL = "{call}"

_OPERATORS: dict[type[ast.AST], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def call_value(name: str, template: str, call: int) -> int:
    """The value of `--per-call NAME=TEMPLATE` at call `call` (from 1): TEMPLATE is an
    integer expression of numbers, + - * // % and parentheses over `{call}`."""
    text = template.replace(CALL, f"({call})")
    try:
        return _evaluate(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        raise UsageError(
            reason(ReasonCode.USAGE_PER_CALL, text=repr(f"{name}={template}"))
        ) from None


def _evaluate(node: ast.AST) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError(ast.dump(node))


def check_per_call(
    per_call: tuple[tuple[str, str], ...], args: tuple[tuple[str, str], ...]
) -> None:
    """Each entry is NAME=EXPR with NAME an identifier given once, not also an `--arg`,
    and EXPR an integer expression over `{call}`."""
    seen: set[str] = set()
    for entry in per_call:
        if not (
            isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(x, str) for x in entry)
        ):
            raise UsageError(reason(ReasonCode.USAGE_PER_CALL, text=repr(entry)))
        name, template = entry
        if not name.isidentifier() or name in seen:
            raise UsageError(reason(ReasonCode.USAGE_PER_CALL, text=repr(f"{name}={template}")))
        if name in dict(args):
            raise UsageError(reason(ReasonCode.USAGE_PER_CALL_ARG, name=name))
        seen.add(name)
        call_value(name, template, 1)


def parse_per_call(text: str) -> tuple[str, str]:
    """`NAME=EXPR` from the command line."""
    name, found, template = text.partition("=")
    if not found:
        raise UsageError(reason(ReasonCode.USAGE_PER_CALL, text=repr(text)))
    return name.strip(), template.strip()


@dataclass(frozen=True, slots=True, kw_only=True)
class Calls:
    """What the co-simulation needs of `--rounds` and `--per-call` for one instance."""

    joined: bool = False
    per_call: tuple[tuple[str, str], ...] = ()

    def values(self, call: int) -> dict[str, int]:
        """The per-call host scalars at call `call` (from 1)."""
        return {name: call_value(name, template, call) for name, template in self.per_call}


NO_CALLS = Calls()


def calls_of(
    program: str, scalars: tuple[str, ...], rounds: Rounds, per_call: tuple[tuple[str, str], ...]
) -> Calls:
    """The instance's calls; a `--per-call` name that is no host scalar of the program's
    entry is the user's mistake."""
    for name, _ in per_call:
        if name not in scalars:
            raise UsageError(
                reason(
                    ReasonCode.PER_CALL_NOT_SCALAR,
                    name=name,
                    program=program,
                    scalars=", ".join(scalars) or "none",
                )
            )
    return Calls(joined=rounds is Rounds.JOINED, per_call=per_call)
