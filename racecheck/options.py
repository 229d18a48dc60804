"""What the user asked for, validated once: the options every stage reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from racecheck.errors import UsageError

DEFAULT_RANKS = tuple(range(2, 9))
MAX_RANKS = 4096


class EngineChoice(Enum):
    AUTO = "auto"
    SMT = "smt"
    EXPLORE = "explore"
    MONOTONE = "monotone"


@dataclass(frozen=True, slots=True, kw_only=True)
class EveryP:
    """`--ranks all` / `--ranks LOW..`: one proof for every P >= low, else `fallback`."""

    low: int = 2
    fallback: tuple[int, ...] = DEFAULT_RANKS


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    ranks: tuple[int, ...] = DEFAULT_RANKS
    engine: EngineChoice = EngineChoice.AUTO
    programs: tuple[str, ...] = ()  # --program NAME (repeatable)
    args: tuple[tuple[str, str], ...] = ()  # --arg NAME=VALUE, VALUE unparsed
    repeat: int = 1
    expect: str | None = None  # golden model name, e.g. "allreduce-sum"
    timeout: float = 60.0  # seconds per program and rank count
    seed: int = 0
    extra: dict[str, str] = field(default_factory=dict)
    every_p: EveryP | None = None  # --ranks all: prove for every P (racecheck.allp)


def engine_choice(name: str) -> EngineChoice:
    try:
        return EngineChoice(name)
    except ValueError:
        names = ", ".join(choice.value for choice in EngineChoice)
        raise UsageError(f"unknown engine {name!r}; choose one of {names}") from None


def parse_ranks(text: str) -> tuple[int, ...]:
    """`2..8`, `2,4,8`, `4`, or a mix like `1,2..4`; sorted, without repeats."""
    ranks: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if ".." in part:
            low_text, _, high_text = part.partition("..")
            low, high = _rank_number(low_text, text), _rank_number(high_text, text)
            if low > high:
                raise UsageError(f"--ranks {text!r}: range {part!r} is empty; write LOW..HIGH")
            ranks.update(range(low, high + 1))
        else:
            ranks.add(_rank_number(part, text))
    return tuple(sorted(ranks))


def parse_every_p(text: str, fallback: str | None) -> EveryP | None:
    """`all` (every P >= 2) or an open range `LOW..`; None for a concrete `--ranks`."""
    stripped = text.strip()
    if stripped == "all":
        low = 2
    elif stripped.endswith("..") and "," not in stripped:
        low = _rank_number(stripped[:-2], text)
    else:
        if fallback is not None:
            raise UsageError("--fallback goes with --ranks all or an open range such as 2..")
        return None
    ranks = parse_ranks(fallback) if fallback is not None else DEFAULT_RANKS
    kept = tuple(rank for rank in ranks if rank >= low) or (low,)
    return EveryP(low=low, fallback=kept)


def _rank_number(text: str, whole: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise UsageError(
            f"--ranks {whole!r}: {text!r} is not a rank count; use e.g. 4, 2,4,8 or 2..8"
        ) from None
    if not 1 <= value <= MAX_RANKS:
        raise UsageError(f"--ranks {whole!r}: rank counts must be between 1 and {MAX_RANKS}")
    return value


def parse_arg(text: str) -> tuple[str, str]:
    """`--arg NAME=VALUE` → (NAME, VALUE); VALUE stays unparsed (the loader evaluates it)."""
    name, equals, value = text.partition("=")
    name = name.strip()
    if not equals or not name.isidentifier():
        raise UsageError(f"--arg {text!r}: expected NAME=VALUE, e.g. --arg mode=ring")
    return name, value.strip()


def parse_count(flag: str, text: str, *, minimum: int) -> int:
    """An integer flag value of at least `minimum`."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a whole number") from None
    if value < minimum:
        raise UsageError(f"{flag} {text!r}: must be at least {minimum}")
    return value


def parse_seconds(flag: str, text: str) -> float:
    """A positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a number of seconds") from None
    if not 0 < value < float("inf"):
        raise UsageError(f"{flag} {text!r}: must be a positive number of seconds")
    return value
