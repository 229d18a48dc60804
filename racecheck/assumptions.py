"""User-declared preconditions on input elements: `--assume "NAME in LOW..HIGH"`, the
`[tool.racecheck] assumptions` key, or in the kernel's own file a comment line
`# racecheck: assume NAME in LOW..HIGH` (one per line; `in_file`).

An assumption narrows every element of the host input tensor NAME (a parameter of the
host entry) to LOW..HIGH, both included: `NAME in 0..4`, `NAME <= 4`, `NAME >= 0`. The
inputs racecheck draws (`--seed`) and z3 picks then lie in that range, the symbolic
bounds of a summary run use it, and every answer says it assumed it (docs/model.md §1).
An input outside the range is not checked: that is the declaration's meaning.
"""

from __future__ import annotations

import functools
import io
import re
import tokenize
from dataclasses import dataclass

from racecheck.errors import UsageError
from racecheck.report.reasons import ReasonCode, reason

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
            raise UsageError(
                reason(ReasonCode.ASSUME_EMPTY_RANGE, text=repr(text), low=low, high=high)
            )
        return Assumption(name, low, high)
    raise UsageError(reason(ReasonCode.ASSUME_FLAG_SYNTAX, text=repr(text)))


_PRAGMA = re.compile(r"^\s*#\s*racecheck:\s*assume\b(.*)$")


def gathered(
    declared: tuple[str, ...], path: str, program: str, inputs: set[str]
) -> tuple[Assumption, ...]:
    """The assumptions `program` (in the file at `path`, whose host entry takes the
    tensors `inputs`) is checked under: the command line's and settings' (`declared`),
    then the file's own (`in_file`), each once; a UsageError for one on no input."""
    found: dict[Assumption, str] = {}
    for text in declared:
        found.setdefault(parse_assumption(text), reason(ReasonCode.ASSUME_FLAG, text=text))
    for line, assumption in in_file(path):
        written = reason(
            ReasonCode.ASSUME_COMMENT, path=path, line=line, assumption=str(assumption)
        )
        found.setdefault(assumption, written)
    for assumption, origin in found.items():
        if assumption.tensor not in inputs:
            raise UsageError(
                reason(
                    ReasonCode.ASSUME_NO_TENSOR,
                    origin=origin,
                    program=program,
                    tensor=repr(assumption.tensor),
                    inputs=", ".join(sorted(inputs)),
                )
            )
    return tuple(found)


def in_file(path: str) -> tuple[tuple[int, Assumption], ...]:
    """The assumptions the file at `path` declares in `# racecheck: assume EXPR` comment
    lines, with their lines; a UsageError naming the line of one that does not parse."""
    try:
        with open(path, encoding="utf-8") as source:
            return _declared(source.read(), path)
    except (OSError, UnicodeDecodeError):
        return ()


@functools.lru_cache(maxsize=64)
def _declared(text: str, path: str) -> tuple[tuple[int, Assumption], ...]:
    found: list[tuple[int, Assumption]] = []
    for number, comment in _comment_lines(text):
        match = _PRAGMA.match(comment)
        if match is None:
            continue
        written = match.group(1).strip()
        try:
            found.append((number, parse_assumption(written)))
        except UsageError:
            raise UsageError(
                reason(ReasonCode.ASSUME_COMMENT_SYNTAX, path=path, line=number, text=written)
            ) from None
    return tuple(found)


def _comment_lines(text: str) -> list[tuple[int, str]]:
    """The comments that are whole lines of `text` (not in strings), with their lines."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [
        (token.start[0], token.string)
        for token in tokens
        if token.type == tokenize.COMMENT and token.line.strip().startswith("#")
    ]


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
