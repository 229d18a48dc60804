"""Settings from three places, layered into one `Options`: a `[tool.racecheck]` table in
the nearest `pyproject.toml` (its top-level keys, then each `[[tool.racecheck.files]]`
table whose `path` glob matches the file, later tables winning), then what the caller
gave (CLI flags, API keywords). Every value passes through `Options`, so a bad one is
rejected in the same words wherever it came from.

    [tool.racecheck]
    ranks = "2..8"
    require_model = true

    [[tool.racecheck.files]]
    path = "collectives/allgather*.py"
    expect = "allgather"
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from racecheck.errors import UsageError
from racecheck.model_names import check_model_name
from racecheck.options import (
    Options,
    engine_choice,
    machine_cores,
    parse_every_p,
    parse_ranks,
    rounds_choice,
    runtime_order_choice,
)
from racecheck.report.reasons import ReasonCode, reason

RANKS_DEFAULT = "2..8"
_GOLDEN_FILE = re.compile(r"([^/:][^:]*\.py):(\w+)")  # a relative `file.py:function`


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Option values as given; None where a layer says nothing. `ranks` is the text of
    `--ranks` (or a list of rank counts), `args` maps names to unparsed values."""

    ranks: str | tuple[int, ...] | None = None
    fallback: str | None = None
    engine: str | None = None
    expect: str | None = None
    programs: tuple[str, ...] | None = None
    args: tuple[tuple[str, str], ...] | None = None
    rank_param: str | None = None
    repeat: object = None
    timeout: object = None
    seed: object = None
    cores: object = None
    runtime_order: str | None = None
    reset_windows: bool | None = None
    rounds: str | None = None  # --rounds free|joined
    per_call: tuple[tuple[str, str], ...] | None = None  # --per-call NAME=EXPR
    jobs: object = None
    require_model: bool | None = None
    require_every_p: bool | None = None
    argv: tuple[str, ...] | None = None  # the file's sys.argv at import time, per P
    env: tuple[tuple[str, str], ...] | None = None  # environment variables at import time
    import_root: str | None = None  # where the file's absolute imports resolve
    assumptions: tuple[str, ...] | None = None  # preconditions on symbolic inputs

    def over(self, base: Settings) -> Settings:
        """These settings where given, else `base`'s; `args` merge by name."""
        merged = {
            item.name: getattr(self, item.name)
            if getattr(self, item.name) is not None
            else getattr(base, item.name)
            for item in dataclasses.fields(self)
        }
        if self.args is not None and base.args is not None:
            merged["args"] = tuple({**dict(base.args), **dict(self.args)}.items())
        return Settings(**merged)


_LISTS = ("programs", "argv", "assumptions")
_BOOLS = ("reset_windows", "require_model", "require_every_p")
_TEXTS = ("fallback", "engine", "expect", "rank_param", "runtime_order", "import_root", "rounds")
_NUMBERS = ("repeat", "timeout", "seed", "jobs", "cores")
KEYS = tuple(item.name for item in dataclasses.fields(Settings))


def options_of(settings: Settings) -> Options:
    """The validated options; what no layer gave takes `Options`' default."""
    ranks = RANKS_DEFAULT if settings.ranks is None else settings.ranks
    every_p = parse_every_p(ranks, settings.fallback) if isinstance(ranks, str) else None
    if every_p is None and settings.fallback is not None:
        parse_every_p(RANKS_DEFAULT, settings.fallback)  # the one wording of a stray fallback
    if every_p is not None:
        counts = every_p.fallback
    else:
        counts = parse_ranks(ranks) if isinstance(ranks, str) else tuple(sorted(set(ranks)))
    given = {
        name: getattr(settings, name)
        for name in (*_NUMBERS, *_BOOLS, "expect", "rank_param")
        if getattr(settings, name) is not None
    }
    options = Options(
        ranks=counts,
        every_p=every_p,
        engine=engine_choice(settings.engine or "auto"),
        runtime_order=runtime_order_choice(settings.runtime_order or "current"),
        rounds=rounds_choice(settings.rounds or "free"),
        per_call=settings.per_call or (),
        programs=settings.programs or (),
        args=settings.args or (),
        argv=settings.argv or (),
        env=settings.env or (),
        import_root=settings.import_root,
        assume=settings.assumptions or (),
        **{"jobs": machine_cores(), **given},  # type: ignore[arg-type]
    )
    return options


def given_options(given: Settings) -> Options:
    """The caller's own settings validated before any file is read. A fallback without
    ranks is checked as for `ranks = "all"`: the file's configuration may supply them."""
    if given.ranks is None and given.fallback is not None:
        given = dataclasses.replace(given, ranks="all")
    return options_of(given)


# --- pyproject.toml ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FileTable:
    patterns: tuple[str, ...]  # globs relative to the pyproject.toml's folder
    settings: Settings


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    source: Path  # the pyproject.toml
    defaults: Settings
    files: tuple[FileTable, ...] = ()

    @property
    def root(self) -> Path:
        return self.source.parent

    def settings_for(self, path: str | Path) -> Settings:
        """The top-level settings with every matching file table laid over them in order."""
        relative = _relative(Path(path), self.root)
        settings = self.defaults
        for table in self.files:
            if relative is not None and any(_matches(relative, p) for p in table.patterns):
                settings = table.settings.over(settings)
        return settings

    def unmatched(self) -> list[str]:
        """The file tables' globs that match no file (a typo would check nothing)."""
        return [
            reason(ReasonCode.CONFIG_UNMATCHED, number=number, pattern=pattern)
            for number, table in enumerate(self.files, start=1)
            for pattern in table.patterns
            if not any(path.is_file() for path in self.root.glob(pattern))
        ]

    def paths(self) -> list[Path]:
        """The files the file tables name, in their order, each once."""
        found: dict[Path, None] = {}
        for table in self.files:
            for pattern in table.patterns:
                for path in sorted(self.root.glob(pattern)):
                    if path.is_file():
                        found.setdefault(path, None)
        return list(found)


def settings_for(path: str | Path, given: Settings) -> Settings:
    """What checks `path`: the caller's settings over its configuration's."""
    config = find_config(Path(path))
    if config is None:
        return given
    merged = given.over(config.settings_for(path))
    if given.fallback is None and not _every_p(merged.ranks):
        merged = dataclasses.replace(merged, fallback=None)  # the file's, for ranks "all" only
    return merged


def _every_p(ranks: str | tuple[int, ...] | None) -> bool:
    return isinstance(ranks, str) and parse_every_p(ranks, None) is not None


def find_config(start: Path) -> Config | None:
    """The `[tool.racecheck]` of the nearest pyproject.toml in `start`'s folder or above
    (the first pyproject.toml found ends the search, as ruff and pytest do)."""
    folder = start.resolve() if start.is_dir() else start.resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / "pyproject.toml").is_file():
            return load_config(candidate / "pyproject.toml")
    return None


def load_config(source: Path) -> Config | None:
    return _load(source.resolve(), source.stat().st_mtime_ns)


@lru_cache(maxsize=16)
def _load(source: Path, _mtime: int) -> Config | None:
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        why = reason(ReasonCode.CONFIG_UNREADABLE, why=str(error))
        raise UsageError(why, file=str(source)) from None
    table = data.get("tool", {}).get("racecheck")
    if table is None:
        return None
    where = reason(ReasonCode.CONFIG_TABLE)
    if not isinstance(table, dict):
        raise UsageError(reason(ReasonCode.CONFIG_NOT_TABLE, where=where), file=str(source))
    files = table.get("files", [])
    if not isinstance(files, list) or not all(isinstance(entry, dict) for entry in files):
        why = reason(ReasonCode.CONFIG_FILES_NOT_TABLES, where=where)
        raise UsageError(why, file=str(source))
    defaults = _settings(table, where, source, allowed=frozenset({"files"}))
    tables = tuple(
        _file_table(entry, reason(ReasonCode.CONFIG_FILE_TABLE, number=number), source)
        for number, entry in enumerate(files, start=1)
    )
    return Config(source=source, defaults=defaults, files=tables)


def _file_table(entry: Mapping[str, object], where: str, source: Path) -> FileTable:
    patterns = entry.get("path")
    if isinstance(patterns, str):
        patterns = [patterns]
    if (
        not isinstance(patterns, list)
        or not patterns
        or not all(isinstance(p, str) and p for p in patterns)
    ):
        why = reason(ReasonCode.CONFIG_NO_PATH, where=where, source=source.name)
        raise UsageError(why, file=str(source))
    settings = _settings(entry, where, source, allowed=frozenset({"path"}))
    return FileTable(patterns=tuple(patterns), settings=settings)


def _settings(
    table: Mapping[str, object], where: str, source: Path, *, allowed: frozenset[str]
) -> Settings:
    values: dict[str, object] = {}
    for key, value in table.items():
        if key in allowed:
            continue
        if key not in KEYS:
            known = ", ".join((*KEYS, *sorted(allowed)))
            why = reason(ReasonCode.CONFIG_UNKNOWN_KEY, where=where, key=key, known=known)
            raise UsageError(why, file=str(source))
        values[key] = _value(key, value, f"{where} {key}", source)
    settings = Settings(**values)  # type: ignore[arg-type]
    try:
        given_options(settings)  # every value checked when read
    except UsageError as error:
        why = reason(ReasonCode.CONFIG_IN_TABLE, where=where, why=error.message)
        raise UsageError(why, file=str(source)) from None
    return settings


def _value(key: str, value: object, what: str, source: Path) -> object:
    def wrong(expected: ReasonCode) -> UsageError:
        why = reason(
            ReasonCode.CONFIG_WRONG_VALUE, what=what, value=repr(value), expected=reason(expected)
        )
        return UsageError(why, file=str(source))

    if key == "ranks":
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, list) and all(isinstance(v, int) for v in value):
            return tuple(value)
        if not isinstance(value, str):
            raise wrong(ReasonCode.CONFIG_EXPECTED_RANKS)
        return value
    if key == "args":
        if not isinstance(value, dict):
            raise wrong(ReasonCode.CONFIG_EXPECTED_ARGS)
        return tuple((name, _arg_text(item)) for name, item in value.items())
    if key in ("env", "per_call"):
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise wrong(ReasonCode.CONFIG_EXPECTED_TEXTS)
        return tuple(value.items())
    if key in _LISTS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise wrong(ReasonCode.CONFIG_EXPECTED_STRINGS)
        return tuple(value)
    if key in _BOOLS:
        if not isinstance(value, bool):
            raise wrong(ReasonCode.CONFIG_EXPECTED_BOOL)
        return value
    if key in _TEXTS and not isinstance(value, str):
        raise wrong(ReasonCode.CONFIG_EXPECTED_STRING)
    if key == "expect":
        return _expect(str(value), what, source)
    return value  # the numbers: Options checks them


def _expect(name: str, what: str, source: Path) -> str:
    """The model name as the check will read it: a relative golden file resolved beside
    pyproject.toml, which must hold it; a misspelt name is this table's error."""
    try:
        check_model_name(name)
    except UsageError as error:
        why = reason(ReasonCode.CONFIG_BAD_EXPECT, what=what, name=name, why=error.message)
        raise UsageError(why, file=str(source)) from None
    if match := _GOLDEN_FILE.fullmatch(name):
        golden = source.parent / match.group(1)
        if not golden.is_file():
            why = reason(ReasonCode.CONFIG_NO_GOLDEN, what=what, name=name, golden=str(golden))
            raise UsageError(why, file=str(source))
        return f"{golden}:{match.group(2)}"
    return name


def _arg_text(value: object) -> str:
    """A TOML value as `--arg NAME=VALUE` would spell it: strings as written, others as
    the Python literal of their value."""
    return value if isinstance(value, str) else repr(value)


# --- globs ----------------------------------------------------------------------------


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def _matches(relative: str, pattern: str) -> bool:
    return _glob_regex(pattern).fullmatch(relative) is not None


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """`*` and `?` within one path segment, `**/` any number of folders, `[...]` a set."""
    return re.compile("".join(_glob_parts(pattern.removeprefix("./"))))


def _glob_parts(pattern: str) -> Iterator[str]:
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            yield "(?:[^/]*/)*"
            index += 3
        elif pattern.startswith("**", index):
            yield ".*"
            index += 2
        elif pattern[index] == "*":
            yield "[^/]*"
            index += 1
        elif pattern[index] == "?":
            yield "[^/]"
            index += 1
        elif pattern[index] == "[" and (close := pattern.find("]", index + 1)) > index + 1:
            body = pattern[index + 1 : close]
            yield "[" + ("^" + body[1:] if body.startswith("!") else body) + "]"
            index = close + 1
        else:
            yield re.escape(pattern[index])
            index += 1
