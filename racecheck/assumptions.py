"""User-declared preconditions on input elements: `--assume "NAME in LOW..HIGH"`.

An assumption narrows every element of the host input tensor NAME (a parameter of the
host entry) to LOW..HIGH, both included: `NAME in 0..4`, `NAME <= 4`, `NAME >= 0`. The
inputs racecheck draws (`--seed`) and z3 picks then lie in that range, the symbolic
bounds of a summary run use it, and every answer says it assumed it (docs/model.md §1).
An input outside the range is not checked: that is the declaration's meaning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from racecheck.errors import UsageError

_INT = r"-?\d+"
_FORMS = (
    (re.compile(rf"^(\w+)\s+in\s+({_INT})\s*\.\.\s*({_INT})$"), "range"),
    (re.compile(rf"^(\w+)\s*<=\s*({_INT})$"), "upper"),
    (re.compile(rf"^(\w+)\s*>=\s*({_INT})$"), "lower"),
)
_UNBOUNDED = 2**63


@dataclass(frozen=True, slots=True)
class Assumption:
    tensor: str
    low: int
    high: int

    def __str__(self) -> str:
        if self.low <= -_UNBOUNDED:
            return f"{self.tensor} <= {self.high}"
        if self.high >= _UNBOUNDED:
            return f"{self.tensor} >= {self.low}"
        return f"{self.tensor} in {self.low}..{self.high}"


def parse_assumption(text: str) -> Assumption:
    """`text` as an assumption; a UsageError naming the accepted forms if it is none."""
    stripped = text.strip()
    for pattern, form in _FORMS:
        match = pattern.match(stripped)
        if match is None:
            continue
        name, *numbers = match.groups()
        if form == "range":
            low, high = int(numbers[0]), int(numbers[1])
        elif form == "upper":
            low, high = -_UNBOUNDED, int(numbers[0])
        else:
            low, high = int(numbers[0]), _UNBOUNDED
        if low > high:
            raise UsageError(f"--assume {text!r}: the range {low}..{high} is empty")
        return Assumption(name, low, high)
    raise UsageError(
        f"--assume {text!r}: write `NAME in LOW..HIGH`, `NAME <= HIGH` or `NAME >= LOW`,"
        " NAME an input tensor of the host entry"
    )


def narrowed(
    limits: tuple[int, int], assumed: tuple[Assumption, ...], tensor: str
) -> tuple[int, int]:
    """`limits` (an element type's) narrowed by the assumptions on `tensor`."""
    low, high = limits
    for assumption in assumed:
        if assumption.tensor == tensor:
            low, high = max(low, assumption.low), min(high, assumption.high)
    return low, high


def stated(assumed: tuple[Assumption, ...]) -> str:
    return "assuming " + ", ".join(str(assumption) for assumption in assumed)
