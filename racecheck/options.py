"""What the user asked for, validated once: the options every stage reads.

`Options` checks its own fields when it is built, so the CLI and the API
(`racecheck.verify`) reject the same mistakes with the same messages.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from racecheck.assumptions import parse_assumption
from racecheck.errors import UsageError
from racecheck.report.reasons import ReasonCode, reason
from racecheck.rounds import Rounds, check_per_call

DEFAULT_RANKS = tuple(range(2, 9))
DEFAULT_CORES = 16
"""Cores per rank (`--cores`): the fewest PyPTO documents a rank's tasks running on,
the A2/A3 simulator's 16 AIV cores (docs/model.md, "Cores")."""
MAX_RANKS = 4096


def machine_cores() -> int:
    """The cores this process may run on (its affinity where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class EngineChoice(Enum):
    AUTO = "auto"
    SMT = "smt"
    EXPLORE = "explore"
    MONOTONE = "monotone"


class RuntimeOrder(Enum):
    """Which dependencies PyPTO's runtime tracks between the tasks of a rank (docs/model.md)."""

    CURRENT = "current"  # since PyPTO #1683: remote_store/put/get/notify targets are writes
    PRE_1683 = "pre-1683"  # before it: only the declared directions


_Choice = TypeVar("_Choice", bound=Enum)


RANKS_FIELD = "{P}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportConfig:
    """The command line, environment and import root the user's file is imported with."""

    argv: tuple[str, ...] = ()  # the file's sys.argv[1:]; "{P}" is the rank count
    env: tuple[tuple[str, str], ...] = ()  # NAME=VALUE; "{P}" in VALUE is the rank count
    import_root: str | None = None  # None: the nearest parent with pyproject.toml or .git

    @property
    def per_p(self) -> bool:
        """Whether the import depends on P (then each P is imported afresh)."""
        return any(RANKS_FIELD in text for text in (*self.argv, *(v for _, v in self.env)))

    def at(self, ranks: int) -> ImportConfig:
        """This configuration with `{P}` replaced by `ranks`."""
        count = str(ranks)
        return ImportConfig(
            argv=tuple(text.replace(RANKS_FIELD, count) for text in self.argv),
            env=tuple((name, value.replace(RANKS_FIELD, count)) for name, value in self.env),
            import_root=self.import_root,
        )


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
    rank_param: str | None = None  # --rank-param NAME: the factory parameter that gets P
    repeat: int = 1
    expect: str | None = None  # golden model name, e.g. "allreduce-sum"
    timeout: float = math.inf  # seconds per program and P; inf: none (work budgets end runs)
    seed: int = 0
    cores: int = DEFAULT_CORES  # --cores N: each rank's cores, one held by each running thread
    runtime_order: RuntimeOrder = RuntimeOrder.CURRENT
    reset_windows: bool = False  # with repeat: windows zeroed between calls (docs/model.md)
    rounds: Rounds = Rounds.FREE  # --rounds: how the repeated calls follow one another
    per_call: tuple[tuple[str, str], ...] = ()  # --per-call NAME=EXPR over {call}
    every_p: EveryP | None = None  # --ranks all: prove for every P (racecheck.allp)
    jobs: int = field(default_factory=machine_cores)  # --jobs N: worker processes
    assume: tuple[str, ...] = ()  # --assume EXPR (repeatable): racecheck.assumptions
    require_model: bool = False  # a proved P whose outputs match no golden model is unknown
    require_every_p: bool = False  # with every_p: a fallback to concrete P is unknown
    argv: tuple[str, ...] = ()  # --argv: the file's own command line; "{P}" is the rank count
    env: tuple[tuple[str, str], ...] = ()  # --env NAME=VALUE while the file is imported
    import_root: str | None = None  # --import-root DIR (else the nearest project root)

    @property
    def import_config(self) -> ImportConfig:
        return ImportConfig(argv=self.argv, env=self.env, import_root=self.import_root)

    def __post_init__(self) -> None:
        if not self.ranks or not all(_is_int(p) and 1 <= p <= MAX_RANKS for p in self.ranks):
            raise UsageError(
                reason(ReasonCode.USAGE_RANK_RANGE, ranks=repr(self.ranks), most=MAX_RANKS)
            )
        if not isinstance(self.engine, EngineChoice):
            raise UsageError(
                reason(ReasonCode.USAGE_NOT_CHOICE, what="engine", value=repr(self.engine))
            )
        if not isinstance(self.runtime_order, RuntimeOrder):
            raise UsageError(
                reason(
                    ReasonCode.USAGE_NOT_CHOICE,
                    what="runtime order",
                    value=repr(self.runtime_order),
                )
            )
        if not isinstance(self.rounds, Rounds):
            raise UsageError(
                reason(ReasonCode.USAGE_NOT_CHOICE, what="rounds", value=repr(self.rounds))
            )
        check_per_call(self.per_call, self.args)
        if self.per_call and self.reset_windows is True:
            raise UsageError(reason(ReasonCode.USAGE_PER_CALL_RESET))
        for flag in ("reset_windows", "require_model", "require_every_p"):
            if not isinstance(getattr(self, flag), bool):
                raise UsageError(
                    reason(ReasonCode.USAGE_NOT_BOOL, name=flag, value=repr(getattr(self, flag)))
                )
        _check_count("repeat", self.repeat, minimum=1)
        _check_count("seed", self.seed, minimum=0)
        _check_count("jobs", self.jobs, minimum=1)
        _check_count("cores", self.cores, minimum=1)
        check_seconds("timeout", self.timeout)
        for name in (*self.programs, *(name for name, _ in self.args)):
            if not isinstance(name, str) or not name:
                raise UsageError(reason(ReasonCode.USAGE_EMPTY_NAME, name=repr(name)))
        for text in self.assume:
            parse_assumption(text)
        if self.rank_param is not None and not self.rank_param.isidentifier():
            raise UsageError(reason(ReasonCode.USAGE_RANK_PARAM, name=repr(self.rank_param)))
        if not all(isinstance(text, str) for text in self.argv):
            raise UsageError(reason(ReasonCode.USAGE_ARGV_TYPES, argv=repr(self.argv)))
        for name, value in self.env:
            if not (isinstance(name, str) and name and "=" not in name and isinstance(value, str)):
                raise UsageError(reason(ReasonCode.USAGE_ENV, text=repr(f"{name}={value}")))
        if self.import_root is not None and not os.path.isdir(self.import_root):
            raise UsageError(reason(ReasonCode.USAGE_IMPORT_ROOT, root=repr(self.import_root)))
        if self.rank_param is not None and self.rank_param in dict(self.args):
            raise UsageError(reason(ReasonCode.USAGE_ARG_IS_P, name=self.rank_param))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_count(name: str, value: object, *, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise UsageError(
            reason(ReasonCode.USAGE_COUNT, name=name, value=repr(value), minimum=minimum)
        )


def check_seconds(name: str, value: object) -> None:
    number_ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number_ok or not 0 < value <= math.inf:  # type: ignore[operator]
        raise UsageError(reason(ReasonCode.USAGE_SECONDS, name=name, value=repr(value)))


def numeric(text: str) -> int | float | str:
    """A flag's text as the number it spells, else the text itself: the value is then
    validated as an API keyword's is, so both are rejected in the same words."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


_TRUE = frozenset({"true", "1", "yes", "on", "y", "t"})
_FALSE = frozenset({"false", "0", "no", "off", "n", "f"})


def parse_bool(what: str, text: str) -> bool:
    """`true`/`false` in any usual spelling (True, yes, on, 1 / False, no, off, 0);
    `what` names the value in the error, e.g. `--arg fence=maybe`."""
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise UsageError(reason(ReasonCode.USAGE_BOOL_TEXT, what=what))


def engine_choice(name: str) -> EngineChoice:
    return _choice(EngineChoice, "engine", name)


def runtime_order_choice(name: str) -> RuntimeOrder:
    return _choice(RuntimeOrder, "runtime order", name)


def rounds_choice(name: str) -> Rounds:
    return _choice(Rounds, "rounds", name)


def _choice(kind: type[_Choice], what: str, name: str) -> _Choice:
    try:
        return kind(name)
    except ValueError:
        names = ", ".join(member.value for member in kind)
        raise UsageError(
            reason(ReasonCode.USAGE_UNKNOWN_CHOICE, what=what, name=repr(name), names=names)
        ) from None


def parse_ranks(text: str) -> tuple[int, ...]:
    """`2..8`, `2,4,8`, `4`, or a mix like `1,2..4`; sorted, without repeats."""
    ranks: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if ".." in part:
            low_text, _, high_text = part.partition("..")
            low, high = _rank_number(low_text, text), _rank_number(high_text, text)
            if low > high:
                raise UsageError(
                    reason(ReasonCode.USAGE_EMPTY_RANGE, ranks=repr(text), part=repr(part))
                )
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
            raise UsageError(reason(ReasonCode.USAGE_FALLBACK))
        return None
    ranks = parse_ranks(fallback) if fallback is not None else DEFAULT_RANKS
    kept = tuple(rank for rank in ranks if rank >= low) or (low,)
    return EveryP(low=low, fallback=kept)


def _rank_number(text: str, whole: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise UsageError(
            reason(ReasonCode.USAGE_RANK_COUNT, ranks=repr(whole), text=repr(text))
        ) from None
    if not 1 <= value <= MAX_RANKS:
        raise UsageError(reason(ReasonCode.USAGE_RANK_RANGE, ranks=repr(whole), most=MAX_RANKS))
    return value


def parse_arg(text: str) -> tuple[str, str]:
    """`--arg NAME=VALUE` → (NAME, VALUE); VALUE stays unparsed (the loader evaluates it)."""
    name, equals, value = text.partition("=")
    name = name.strip()
    if not equals or not name.isidentifier():
        raise UsageError(reason(ReasonCode.USAGE_ARG, text=repr(text)))
    return name, value.strip()


def parse_env(text: str) -> tuple[str, str]:
    """`--env NAME=VALUE` → (NAME, VALUE)."""
    name, equals, value = text.partition("=")
    if not equals or not name.strip():
        raise UsageError(reason(ReasonCode.USAGE_ENV, text=repr(text)))
    return name.strip(), value
