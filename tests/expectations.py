"""Parse an example's `racecheck expects:` block and resolve its `@marker`s to line numbers.

Grammar of one line (indented under `racecheck expects:` in the module docstring):

    ranks <R> [--arg NAME=VALUE]... [--repeat N] [--rounds MODE] [--reset-windows]
          [--per-call NAME=EXPR]...
          [--expect MODEL] [--runtime-order ORDER]:
        <verdict> [<kind> [<detail>]] [model] [at @m1, @m2] [ranks r1 r2]

R uses the `--ranks` syntax. A line for every P (`--ranks all`) starts with `all`
instead of `ranks <R>`, takes the same flags, and claims one of

    all [flags]: proved for every P
    all [flags]: bug at P=<N> <kind> [<detail>] [at @m1, @m2] [ranks r1 r2]

the first a proof for every P (the report's every-P proof), the second a refutation:
the prover's smallest failing P is N and the ordinary check there shows that finding.
A line for `--ranks all` that falls back to a concrete range is written as that range.
A marker `@name` refers to the source line that carries the
trailing comment `# @name`. The block ends at the first blank or unindented line.

A known gap, where racecheck does not yet say what it must, is a second block in the
same grammar stating what it says today, headed by why:

    racecheck today (known gap: <why>):
        ranks <R> [flags]: <what racecheck says now>

The example test then expects each `racecheck expects:` line with the same ranks and
flags to fail (strictly: a gap that closes fails until the block is removed) and holds
racecheck to the `today` line, so the gap stays exactly as described.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from racecheck.options import parse_ranks

VERDICTS = ("proved", "bug", "skipped", "unknown")
KINDS = ("race", "deadlock", "out-of-bounds", "stale-read", "wrong-result")
RACE_DETAILS = ("read-after-write", "write-after-read", "write-after-write", "set-add-mix")
HEADER = "racecheck expects:"
_GAP_HEADER = re.compile(r"racecheck today \(known gap: (?P<why>.+)\):")
_MARKER_COMMENT = re.compile(r"#\s*((?:@[\w-]+\s*)+)$")
_LINE = re.compile(
    r"(?:ranks\s+(?P<ranks>[\d.,\s]+?)|(?P<every>all))"
    r"(?P<args>(?:\s+--arg\s+\w+=\S+)*)"
    r"(?:\s+--repeat\s+(?P<repeat>\d+))?"
    r"(?:\s+--rounds\s+(?P<rounds>\w+))?"
    r"(?P<reset>\s+--reset-windows)?"
    r"(?P<per_call>(?:\s+--per-call\s+\w+=\S+)*)"
    r"(?:\s+--expect\s+(?P<expect>\S+))?"
    r"(?:\s+--runtime-order\s+(?P<order>\S+))?"
    r"\s*:\s*(?P<claim>.+)"
)


class ExpectationError(ValueError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Expectation:
    text: str  # the line as written, for test ids and messages
    ranks: tuple[int, ...]  # for every P: () if proved, else the smallest failing P
    every_p: bool = False  # a line for `--ranks all`
    args: tuple[tuple[str, str], ...] = ()  # --arg NAME=VALUE
    repeat: int = 1
    rounds: str | None = None  # --rounds MODE; None: the default (free)
    reset_windows: bool = False  # --reset-windows
    per_call: tuple[tuple[str, str], ...] = ()  # --per-call NAME=EXPR
    expect: str | None = None
    runtime_order: str | None = None  # None: today's rules
    verdict: str
    kind: str | None = None
    detail: str | None = None
    model: str | None = None
    markers: tuple[str, ...] = ()
    lines: frozenset[int] = frozenset()  # the markers' source lines
    finding_ranks: tuple[int, ...] | None = None


def markers_of(source: str) -> dict[str, int]:
    """`# @name` trailing comments → their 1-based line numbers; a name may appear once."""
    found: dict[str, int] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        match = _MARKER_COMMENT.search(line)
        if match is None:
            continue
        for name in match.group(1).split():
            if name[1:] in found:
                raise ExpectationError(
                    f"marker {name} appears on lines {found[name[1:]]} and {number}"
                )
            found[name[1:]] = number
    return found


def block_of(source: str) -> list[str]:
    """The stripped lines of the module docstring's expectation block."""
    lines = _docstring_lines(source)
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == HEADER)
    except StopIteration:
        raise ExpectationError(f"the module docstring has no {HEADER!r} block") from None
    return _indented_after(lines, start, HEADER)


def _docstring_lines(source: str) -> list[str]:
    return (ast.get_docstring(ast.parse(source)) or "").splitlines()


def _indented_after(lines: list[str], start: int, header: str) -> list[str]:
    block: list[str] = []
    for line in lines[start + 1 :]:
        if not line.strip() or not line[:1].isspace():
            break
        block.append(line.strip())
    if not block:
        raise ExpectationError(f"the {header!r} block is empty")
    return block


@dataclass(frozen=True, slots=True)
class KnownGap:
    why: str
    today: tuple[Expectation, ...]  # what racecheck says now, per ranks and flags

    def covers(self, expectation: Expectation) -> Expectation | None:
        """Today's line for the same ranks and flags as `expectation`, if any."""
        return next((line for line in self.today if _flags(line) == _flags(expectation)), None)


def _flags(line: Expectation) -> tuple[object, ...]:
    return (
        line.ranks,
        line.every_p,
        line.args,
        line.repeat,
        line.rounds,
        line.reset_windows,
        line.per_call,
        line.expect,
        line.runtime_order,
    )


def known_gap_of(path: Path) -> KnownGap | None:
    """The file's `racecheck today (known gap: ...):` block, or None."""
    source = path.read_text()
    lines = _docstring_lines(source)
    for number, line in enumerate(lines):
        match = _GAP_HEADER.fullmatch(line.strip())
        if match is not None:
            markers = markers_of(source)
            block = _indented_after(lines, number, line.strip())
            today = tuple(parse_line(text, markers) for text in block)
            return KnownGap(why=match.group("why"), today=today)
    return None


def parse_line(text: str, markers: dict[str, int]) -> Expectation:
    match = _LINE.fullmatch(text)
    if match is None:
        raise ExpectationError(f"cannot parse expectation {text!r}")
    every_p = match.group("every") is not None
    claim: str = match.group("claim")
    ranks: tuple[int, ...]
    if every_p:
        claim, ranks = _every_p_claim(text, claim)
    else:
        ranks = parse_ranks(match.group("ranks").strip())
    claim, at_part, pinned = _split_claim(claim)
    words = claim.split()
    verdict, rest = words[0], words[1:]
    if verdict not in VERDICTS:
        raise ExpectationError(f"{text!r}: verdict must be one of {VERDICTS}")
    kind = detail = model = None
    if verdict == "bug" and rest:
        kind, rest = rest[0], rest[1:]
        if kind not in KINDS:
            raise ExpectationError(f"{text!r}: kind must be one of {KINDS}")
        if rest and rest[0] in RACE_DETAILS:
            detail, rest = rest[0], rest[1:]
    if verdict == "proved" and rest:
        model, rest = rest[0], rest[1:]
    if rest:
        raise ExpectationError(f"{text!r}: unexpected words {rest}")
    names = tuple(name.strip().removeprefix("@") for name in at_part.split(",") if name.strip())
    unknown = [name for name in names if name not in markers]
    if unknown:
        raise ExpectationError(f"{text!r}: no `# @{unknown[0]}` comment in the file")
    return Expectation(
        text=text,
        ranks=ranks,
        every_p=every_p,
        args=tuple(
            tuple(arg.split("=", 1))  # type: ignore[misc]
            for arg in match.group("args").split()
            if arg != "--arg"
        ),
        repeat=int(match.group("repeat") or 1),
        rounds=match.group("rounds"),
        reset_windows=match.group("reset") is not None,
        per_call=tuple(
            tuple(item.split("=", 1))  # type: ignore[misc]
            for item in match.group("per_call").split()
            if item != "--per-call"
        ),
        expect=match.group("expect"),
        runtime_order=match.group("order"),
        verdict=verdict,
        kind=kind,
        detail=detail,
        model=model,
        markers=names,
        lines=frozenset(markers[name] for name in names),
        finding_ranks=tuple(int(r) for r in pinned.split()) if pinned is not None else None,
    )


_EVERY_P_PROVED = "proved for every P"
_EVERY_P_BUG = re.compile(r"bug at P=(?P<world>\d+) (?P<rest>.+)")


def _every_p_claim(text: str, claim: str) -> tuple[str, tuple[int, ...]]:
    """An every-P claim as an ordinary one, and the P its result is at (none: proved)."""
    if claim.strip() == _EVERY_P_PROVED:
        return "proved", ()
    bug = _EVERY_P_BUG.fullmatch(claim.strip())
    if bug is None:
        raise ExpectationError(
            f"{text!r}: for every P, claim {_EVERY_P_PROVED!r} or 'bug at P=N <kind> ...'"
        )
    return f"bug {bug.group('rest')}", (int(bug.group("world")),)


def _split_claim(claim: str) -> tuple[str, str, str | None]:
    """`<verdict...> [at @a, @b] [ranks 0 1]` → (verdict part, markers part, pinned ranks)."""
    pinned = None
    head, found, tail = claim.partition(" ranks ")
    if found:
        claim, pinned = head, tail
    head, found, tail = claim.partition(" at ")
    return (head, tail, pinned) if found else (claim, "", pinned)


def expectations_of(path: Path) -> list[Expectation]:
    source = path.read_text()
    markers = markers_of(source)
    return [parse_line(line, markers) for line in block_of(source)]
