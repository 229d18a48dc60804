"""Loops over an input-dependent bound, summarised: every count at once (docs/model.md §1).

A `pl.range(n)` whose bound `n` has a symbolic form over the inputs splits the
concolic paths once per count it can take, and independent counts multiply (an
all_to_all_v receiver loops over P received counts). In a *summary run* such a loop
instead runs every iteration any input can reach: 0 .. K - 1, where K is the greatest
value the bound's form takes over its input elements' ranges (`symbolic.bounds`, so a
clamp `min(count, M)` gives K = M). Each input's run is then this run with the
iterations at and past its own count left out, provided that

* the loop's body has no synchronisation (notifies, waits) and decides nothing on
  input data (the run records no decision);
* no value the body computes outlives the loop, other than the tensor handles it
  stores through (the names it assigns are read nowhere else in the function, or
  hold a tensor view at the end);
* nothing reads what the body wrote (checked on the trace,
  `racecheck.symbolic_inputs`), and the bound itself steers nothing else.

Leaving data accesses out of a run changes no synchronisation, so a run free of races,
out-of-bounds accesses and deadlocks with every iteration is free of them with fewer.
The checks that need the whole run are `racecheck.symbolic_inputs`'s; this module runs
the loops and records what they did, and which loads steered anywhere.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from types import FrameType

from racecheck.dsl.active import current
from racecheck.dsl.context import RankContextProxy
from racecheck.dsl.location import innermost_user_frame, location_of
from racecheck.dsl.summary_state import SummarisedLoop, _state
from racecheck.dsl.symbolic import Expr, bounds
from racecheck.events import EventKind

MOST_ITERATIONS = 64
"""A summarised loop runs at most this many iterations; a bound that may reach past
it is explored path by path as before."""


def summarised(start: object, stop: object, step: int, form: Expr | None) -> Iterator[int] | None:
    """The iterations of `pl.range(start, stop, step)` in a summary run, when they
    can be summarised: a plain start, step 1, a bound with a form no operation of
    which can wrap (no `guards`) and at most `MOST_ITERATIONS` of them; else None."""
    from racecheck.dsl.scalars import Tainted  # scalars imports this module

    if not _state.active or step != 1 or form is None or not isinstance(stop, Tainted):
        return None
    if isinstance(start, Tainted) or stop.guards:
        return None
    found = bounds(form)
    context = current()
    rank = getattr(context, "rank", None)
    if found is None or not isinstance(rank, int) or not hasattr(context, "events"):
        return None
    if isinstance(context, RankContextProxy):
        return None  # a lane, group or parallel iteration may record its events otherwise
    first = int(start)  # type: ignore[call-overload]
    if found[1] - first > MOST_ITERATIONS:
        return None
    frame = innermost_user_frame(sys._getframe(1))
    if frame is None:
        return None
    loop = SummarisedLoop(
        rank=rank,
        location=location_of(frame),
        bound=form,
        iterations=max(0, found[1] - first),
        sources=stop.sources,
    )
    with _state.lock:
        _state.loops.append(loop)
    return _iterate(loop, first, found[1], context)


def _iterate(loop: SummarisedLoop, first: int, stop: int, context: object) -> Iterator[int]:
    from racecheck.dsl.scalars import DeviceIndex

    events: list = context.events  # type: ignore[attr-defined]
    frame = innermost_user_frame(sys._getframe(1))
    held = _bound_names(frame)
    for index in range(first, stop):
        before = len(events)
        yield DeviceIndex(index)
        for position in range(before, len(events)):
            loop.events.append(position)
            if events[position].kind not in (EventKind.LOAD, EventKind.STORE):
                loop.broken.append(
                    f"its body has a {events[position].kind.value} at line"
                    f" {events[position].location.line}"
                )
    loop.broken.extend(_outliving(innermost_user_frame(sys._getframe(1)), held))


def _bound_names(frame: FrameType | None) -> dict[str, object] | None:
    """What the names the loop running in `frame` assigns, and its function reads
    outside it, hold as it starts (None: the loop is not found)."""
    if frame is None:
        return None
    found = _loop_names(frame.f_code.co_filename, frame.f_lineno)
    if found is None:
        return None
    return {name: frame.f_locals.get(name) for name in found}


def _outliving(frame: FrameType | None, before: dict[str, object] | None) -> list[str]:
    """Why a value the loop running in `frame` computed may outlive it (empty: none):
    a name its `for` statement assigns that the function reads outside the loop and
    that holds anything but the tensor view it held when the loop started (a store
    through it hands it back)."""
    from racecheck.dsl.tensors import TensorView

    if frame is None or before is None:
        return ["its loop statement is not found in the user's file"]
    return [
        f"`{name}`, assigned in the loop, is read outside it"
        for name, held in sorted(before.items())
        if not (
            isinstance(frame.f_locals.get(name), TensorView) and frame.f_locals.get(name) == held
        )
    ]


def _parsed(filename: str) -> ast.Module | None:
    """The file's syntax tree as it is now (a file rewritten in place is parsed again)."""
    try:
        with open(filename, encoding="utf-8") as source:
            return _parsed_text(source.read())
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=64)
def _parsed_text(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _loop_names(filename: str, line: int) -> frozenset[str] | None:
    """The names the `for` statement at `line` assigns (its target and body) that its
    function also reads outside that statement; None if no such loop is found."""
    tree = _parsed(filename)
    if tree is None:
        return None
    found: frozenset[str] | None = None
    for function in ast.walk(tree):  # breadth first: the innermost function comes last
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.For) and node.lineno == line:
                inside = {id(inner) for inner in ast.walk(node)}
                assigned = {
                    name.id
                    for name in ast.walk(node)
                    if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)
                }
                read = {
                    name.id
                    for name in ast.walk(function)
                    if isinstance(name, ast.Name)
                    and isinstance(name.ctx, ast.Load)
                    and id(name) not in inside
                }
                found = frozenset(assigned & read)
    return found
