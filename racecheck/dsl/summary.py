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
    can be summarised: step 1, bounds whose forms no operation of which can wrap (no
    `guards`), from the least start to the greatest stop any input gives (`form` is
    the stop's) and at most `MOST_ITERATIONS` of them; else None."""
    from racecheck.dsl.scalars import Tainted  # scalars imports this module

    if not _state.active or step != 1:
        return None
    span = _span(start, stop, form)
    context = current()
    rank = getattr(context, "rank", None)
    if span is None or not isinstance(rank, int) or not hasattr(context, "events"):
        return None
    if isinstance(context, RankContextProxy):
        return None  # a lane, group or parallel iteration may record its events otherwise
    first, last = span
    if last - first > MOST_ITERATIONS:
        return None
    frame = innermost_user_frame(sys._getframe(1))
    if frame is None:
        return None
    bound = form if form is not None else start.symbolic  # type: ignore[attr-defined]
    sources = frozenset().union(
        *(side.sources for side in (start, stop) if isinstance(side, Tainted))
    )
    loop = SummarisedLoop(
        rank=rank,
        location=location_of(frame),
        bound=bound,
        iterations=max(0, last - first),
        sources=sources,
    )
    with _state.lock:
        _state.loops.append(loop)
    return _iterate(loop, first, last, context)


def _span(start: object, stop: object, form: Expr | None) -> tuple[int, int] | None:
    """The least start and the greatest stop of a loop over every input (None: a
    bound read from memory has no form, may wrap, or is not an integer)."""
    from racecheck.dsl.scalars import Tainted

    ends: list[int] = []
    for side, kept in ((start, 0), (stop, 1)):
        if isinstance(side, Tainted):
            shape = form if side is stop else side.symbolic
            found = None if shape is None or side.guards else bounds(shape)
            if found is None:
                return None
            ends.append(found[kept])
        elif isinstance(side, int):
            ends.append(int(side))
        else:
            return None
    return ends[0], ends[1]


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


def _loop_names(filename: str, line: int) -> frozenset[str] | None:
    """The names the `for` statement at `line` assigns (its target and body) that its
    function also reads outside that statement, where the loop's value may reach them;
    None if no such loop is found. The file is read as it is now (one rewritten in
    place is parsed again)."""
    try:
        with open(filename, encoding="utf-8") as source:
            return _names_in(source.read(), line)
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=256)
def _names_in(text: str, line: int) -> frozenset[str] | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found: tuple[ast.AST, ast.For] | None = None
    for function in ast.walk(tree):  # breadth first: the innermost function comes last
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.For) and node.lineno == line:
                found = function, node
    if found is None:
        return None
    function, loop = found
    inside = {id(inner) for inner in ast.walk(loop)}
    assigned = {
        name.id
        for name in ast.walk(loop)
        if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)
    }
    statements = _statement_ids(loop)
    read = {
        name.id
        for name in ast.walk(function)
        if isinstance(name, ast.Name)
        and isinstance(name.ctx, ast.Load)
        and name.id in assigned
        and id(name) not in inside
        and not _reassigned_before(function, statements, name)
    }
    return frozenset(assigned & read)


def _reassigned_before(function: ast.AST, loop: set[int], read: ast.Name) -> bool:
    """Whether a plain assignment to `read`'s name comes before the statement holding
    `read` in one statement list, with the loop (its nodes' ids) in neither nor between:
    what the loop left in the name never reaches `read`."""
    for node in ast.walk(function):
        if _binds_for_body(node, read, loop):
            return True
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if not isinstance(statements, list):
                continue
            held = [_statement_ids(statement) for statement in statements]
            at = next((n for n, ids in enumerate(held) if id(read) in ids), None)
            if at is None:
                continue
            if held[at] & loop:
                continue  # the loop may run between an assignment here and the read
            for before in range(at - 1, -1, -1):
                if held[before] & loop:
                    break
                if _assigns(statements[before], read.id):
                    return True
    return False


def _binds_for_body(node: ast.AST, read: ast.Name, loop: set[int]) -> bool:
    """Whether `node` is another `for` whose target binds `read`'s name and whose body
    holds `read`, with the loop not inside it: each iteration binds it afresh."""
    if not isinstance(node, ast.For) or not isinstance(node.target, ast.Name):
        return False
    inside = set().union(*map(_statement_ids, node.body))
    return node.target.id == read.id and id(read) in inside and not (_statement_ids(node) & loop)


def _statement_ids(node: ast.AST) -> set[int]:
    """The ids of the statements and expressions in `node` (not their shared contexts)."""
    return {id(inner) for inner in ast.walk(node) if isinstance(inner, ast.stmt | ast.expr)}


def _assigns(statement: ast.stmt, name: str) -> bool:
    return isinstance(statement, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == name for target in statement.targets
    )
