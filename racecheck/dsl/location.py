"""Where in the user's file a DSL call happens.

Assumes the loader registers every user file it executes (by the filename the code
was compiled with); the innermost stack frame from a registered file is "the user's
line" of any event, error or unsupported construct. Code that runs on a rank with no
user frame on its stack (a builtin collective the host dispatched) pins the line it
was called from with `pinned`.
"""

from __future__ import annotations

import ast
import functools
import linecache
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from racecheck.errors import UnsupportedConstruct
from racecheck.events import SourceLocation

_display_names: dict[str, str] = {}
_locations: dict[tuple[str, int, str], SourceLocation] = {}


def register_user_file(compiled_name: str, display_name: str) -> None:
    _display_names[compiled_name] = display_name


def user_files() -> frozenset[str]:
    return frozenset(_display_names)


def forget_user_files(compiled_names: frozenset[str]) -> None:
    """Unregister files and drop what was cached about their lines."""
    for name in compiled_names:
        _display_names.pop(name, None)
        linecache.checkcache(name)
    for key in [key for key in _locations if key[0] in compiled_names]:
        del _locations[key]


def is_user_file(compiled_name: str) -> bool:
    return compiled_name in _display_names


def display_name(compiled_name: str) -> str:
    return _display_names.get(compiled_name, compiled_name)


def innermost_user_frame(frame: FrameType | None = None) -> FrameType | None:
    current: FrameType | None = frame if frame is not None else sys._getframe(1)
    while current is not None:
        if current.f_code.co_filename in _display_names:
            return current
        current = current.f_back
    return None


def location_of(frame: FrameType) -> SourceLocation:
    code = frame.f_code
    key = (code.co_filename, frame.f_lineno, code.co_name)
    known = _locations.get(key)
    if known is None:
        text = linecache.getline(code.co_filename, frame.f_lineno).strip()
        known = SourceLocation(
            file=display_name(code.co_filename),
            line=frame.f_lineno,
            text=text,
            function=code.co_name,
        )
        _locations[key] = known
    return known


UNKNOWN_LOCATION = SourceLocation(file="<unknown>", line=0, text="")


_pinned = threading.local()


@contextmanager
def pinned(location: SourceLocation) -> Iterator[None]:
    """Within the block, a stack without user frames is at `location` (this thread only)."""
    previous = getattr(_pinned, "location", UNKNOWN_LOCATION)
    _pinned.location = location
    try:
        yield
    finally:
        _pinned.location = previous


@contextmanager
def attributed(location: SourceLocation) -> Iterator[None]:
    """Within the block, every location is `location`, whatever the stack (this thread
    only): what runs there is the deferred effect of the call at `location`."""
    previous = getattr(_pinned, "forced", None)
    _pinned.forced = location
    try:
        yield
    finally:
        _pinned.forced = previous


def user_location(frame: FrameType | None = None) -> SourceLocation:
    """The innermost user-file location on the stack (from `frame`, default: the caller),
    else the pinned one; inside `attributed`, its location."""
    forced = getattr(_pinned, "forced", None)
    if forced is not None:
        return forced  # type: ignore[no-any-return]
    found = innermost_user_frame(frame if frame is not None else sys._getframe(1))
    if found is not None:
        return location_of(found)
    return getattr(_pinned, "location", UNKNOWN_LOCATION)


def unsupported(message: str, where: SourceLocation | None = None) -> UnsupportedConstruct:
    """The refusal of a construct at `where` (default: the user's line running now)."""
    where = where or user_location()
    return UnsupportedConstruct(message, file=where.file, line=where.line)


def traceback_location(tb: object) -> SourceLocation | None:
    """The innermost user-file location in a traceback (where an exception was raised)."""
    found: SourceLocation | None = None
    while tb is not None:
        frame = tb.tb_frame  # type: ignore[attr-defined]
        if is_user_file(frame.f_code.co_filename):
            code = frame.f_code
            lineno = tb.tb_lineno  # type: ignore[attr-defined]
            text = linecache.getline(code.co_filename, lineno).strip()
            found = SourceLocation(
                file=display_name(code.co_filename),
                line=lineno,
                text=text,
                function=code.co_name,
            )
        tb = tb.tb_next  # type: ignore[attr-defined]
    return found


_ASSIGNED_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]")


def assigned_name(default: str) -> str:
    """The variable the user's line running now assigns (`name = ...`), else `default`."""
    match = _ASSIGNED_NAME.match(user_location().text)
    return match.group(1) if match else default


def parsed_file(filename: str) -> ast.Module | None:
    """The syntax tree of a user file as linecache holds it; None if it does not parse."""
    return _parsed_source("".join(linecache.getlines(filename)), filename)


@functools.lru_cache(maxsize=16)
def _parsed_source(source: str, filename: str) -> ast.Module | None:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError:
        return None


def loop_calls(frame: FrameType, names: frozenset[str]) -> frozenset[str] | None:
    """Which of `names` the body of the `for` statement at the frame's line calls (as
    `x.name(...)` or `name(...)`), in whatever function of the file it stands (an
    outlined body's frame is not its function's); None when racecheck cannot read it."""
    tree = parsed_file(frame.f_code.co_filename)
    if tree is None:
        return None
    line = frame.f_lineno
    loops = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.For) and node.lineno <= line < node.body[0].lineno
    ]
    if len(loops) != 1:
        return None
    called = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for statement in loops[0].body
        for node in ast.walk(statement)
        if isinstance(node, ast.Call)
    }
    return names & frozenset(called)
