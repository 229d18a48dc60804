"""Why the symbolic run could not follow the user's code, in the user's terms: the line,
its source text and the construct, never the tracer's own classes. The symbolic run
hands the user's code a symbolic integer for P and the rank; Python's own operations
that need a concrete integer (or that the symbolic integer does not offer) stop it.
"""

from __future__ import annotations

import re

from racecheck.dsl.location import traceback_location, user_location
from racecheck.events import SourceLocation

SYMBOLIC = "a value that depends on P or the rank"
_CLASS = r"'Sym\w*'"
_BINARY = re.compile(
    rf"unsupported operand type\(s\) for (.+?): (?:{_CLASS} and '\w+'|'\w+' and {_CLASS})"
)
_UNARY = re.compile(rf"bad operand type for unary (.+?): {_CLASS}")
_ATTRIBUTE = re.compile(rf"{_CLASS} object has no attribute '(\w+)'")
_PROTOCOL = re.compile(rf"{_CLASS} object (is not \w+|cannot be interpreted as an integer)")


def untraceable(error: BaseException) -> str:
    """The reason for an exception the user's code raised on a symbolic value."""
    where = traceback_location(error.__traceback__)
    return f"{place(where)}: {_construct(error)} is outside the symbolic fragment"


def needs_concrete(value: str) -> str:
    """The reason for a symbolic value used where Python needs a concrete integer."""
    return (
        f"{place(user_location())}: {_in_user_terms(value)} is used where Python needs a"
        " concrete integer (range(), int(), a list index, math); outside the symbolic"
        " fragment, use pl.range or arithmetic on P"
    )


def place(where: SourceLocation | None) -> str:
    """`file.py:12 (`x = n & 1`)`: the line and what it says."""
    if where is None or where.line <= 0:
        return "in the program"
    return f"{where} (`{where.text}`)" if where.text else str(where)


def _construct(error: BaseException) -> str:
    message = str(error)
    if isinstance(error, TypeError) and (match := _BINARY.search(message)):
        return f"the operator {match.group(1)} on {SYMBOLIC}"
    if isinstance(error, TypeError) and (match := _UNARY.search(message)):
        return f"the unary operator {match.group(1)} on {SYMBOLIC}"
    if isinstance(error, AttributeError) and (match := _ATTRIBUTE.search(message)):
        return f"`.{match.group(1)}` of {SYMBOLIC} (it is symbolic here, not a Python int)"
    if isinstance(error, TypeError) and (match := _PROTOCOL.search(message)):
        return f"{SYMBOLIC}, which {match.group(1)} while symbolic,"
    text = re.sub(_CLASS, "symbolic value", message)
    return f"this line ({type(error).__name__}: {text}) on {SYMBOLIC}"


def _in_user_terms(expression: str) -> str:
    """`N - 1` → `the symbolic value P - 1`: the tracer's world-size variable is P."""
    return "the symbolic value " + re.sub(r"\bN\b", "P", expression)
