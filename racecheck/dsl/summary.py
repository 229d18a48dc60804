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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from racecheck.dsl.active import current
from racecheck.dsl.context import RankContextProxy
from racecheck.dsl.counters import counters_of
from racecheck.dsl.location import innermost_user_frame, location_of
from racecheck.dsl.summary_state import (
    ForcedBranch,
    Offsets,
    SummarisedLoop,
    Widening,
    _state,
    pending,
)
from racecheck.dsl.symbolic import Expr, bounds, counted
from racecheck.events import EventKind, EventRef
from racecheck.report.reasons import ReasonCode, reason

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
        _state.local.loops = getattr(_state.local, "loops", 0) + 1
        try:
            yield DeviceIndex(index)
        finally:
            _state.local.loops -= 1
        for position in range(before, len(events)):
            loop.events.append(position)
            if events[position].kind not in (EventKind.LOAD, EventKind.STORE):
                loop.broken.append(
                    reason(
                        ReasonCode.SUMMARY_BODY_SYNCS,
                        kind=events[position].kind.value,
                        line=events[position].location.line,
                    )
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
        return [reason(ReasonCode.SUMMARY_LOOP_NOT_FOUND)]
    return [
        reason(ReasonCode.SUMMARY_LOOP_OUTLIVES, name=name)
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
def _names_in(text: str, line: int, kind: str = "for") -> frozenset[str] | None:
    found = _found_at(text, line, kind)
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


def _statement_at(text: str, line: int, kind: str) -> ast.stmt | None:
    found = _found_at(text, line, kind)
    return None if found is None else found[1]


@functools.lru_cache(maxsize=256)
def _found_at(text: str, line: int, kind: str) -> tuple[ast.AST, ast.stmt] | None:
    """The innermost function holding a `kind` statement (\"for\", \"if\") at `line`, and
    the statement."""
    wanted = ast.For if kind == "for" else ast.If
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found: tuple[ast.AST, ast.stmt] | None = None
    for function in ast.walk(tree):  # breadth first: the innermost function comes last
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, wanted) and node.lineno == line:
                found = function, node
    return found


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


# -- branches on input data with slot counters (docs/model.md §1)
#
# A DSL body's `if C:` without `else` whose body bumps a name by a constant (`n = n + K`,
# `n += K`: a slot counter) is recompiled (`racecheck.dsl.device_source`) as
# `if branch(C, line): BODY'; branch_end(line)` with each bump `n = bump(n, K, line)`.
# Outside a summary run these are the branch and the addition. In one, a condition with
# a symbolic form is taken for every input: each input's own run is then this run with
# some bodies left out, provided the body synchronises nothing and leaves nothing
# behind but its counters (and tensor views it stores through), and every counter is
# the exact `n + K * when(C)`; an offset computed from a counter covers every value
# its form takes (`Widening`), so the accesses of every input's run are among the run's.


@dataclass(slots=True, kw_only=True)
class _Open:
    """A branch being taken for every input on this thread."""

    record: ForcedBranch
    condition: Expr
    sources: frozenset[EventRef]
    events: list[Any]
    start: int
    held: dict[str, object]


def branch(test: object, line: int) -> bool:
    """`if test:` at `line` (see above): True for every input in a summary run, where
    it can stand for them; else `bool(test)`."""
    from racecheck.dsl.scalars import Tainted

    opened = getattr(_state.local, "branches", None)
    if opened is None:
        opened = _state.local.branches = {}
    frame = innermost_user_frame(sys._getframe(1))
    key = (frame.f_code.co_filename if frame else "", line)
    opened.pop(key, None)
    if not _state.active or not isinstance(test, Tainted) or test.symbolic is None:
        return bool(test)
    context = current()
    rank = getattr(context, "rank", None)
    events = getattr(context, "events", None)
    if (
        test.guards
        or frame is None
        or not isinstance(rank, int)
        or events is None
        or isinstance(context, RankContextProxy)
        or bool(getattr(_state.local, "loops", 0))  # in a summarised loop: a decision
        or bool(opened)  # inside another branch taken for every input: a decision
    ):
        return bool(test)
    names = _branch_names(frame.f_code.co_filename, line)
    record = ForcedBranch(
        rank=rank,
        location=location_of(frame),
        counters=names[0] if names else (),
        sources=test.sources,
    )
    if names is None:
        record.broken.append(reason(ReasonCode.SUMMARY_BRANCH_NOT_FOUND))
    with _state.lock:
        _state.branches.append(record)
    held = {name: frame.f_locals.get(name) for name in (names[1] if names else ())}
    opened[key] = _Open(
        record=record,
        condition=test.symbolic,
        sources=test.sources,
        events=events,
        start=len(events),
        held=held,
    )
    return True


def bump(count: object, step: int, line: int) -> object:
    """`count + step` in the body of the branch at `line`: in a branch taken for every
    input, the counter's exact form `count + step * when(condition)`."""
    from racecheck.dsl.scalars import INDEX, Tainted, promoted, scalar_type, sources_of

    frame = innermost_user_frame(sys._getframe(1))
    key = (frame.f_code.co_filename if frame else "", line)
    taken = getattr(_state.local, "branches", {}).get(key)
    if taken is None:
        return count + step  # type: ignore[operator]
    form = count.symbolic if isinstance(count, Tainted) else _constant(count)
    counted_form = counted(form, taken.condition, step)
    value = (count.value if isinstance(count, Tainted) else count) + step  # type: ignore[operator]
    if counted_form is None:
        taken.record.broken.append(reason(ReasonCode.SUMMARY_COUNTER_FORM, line=line))
        return count + step  # type: ignore[operator]
    dtype = promoted(scalar_type(count) or INDEX, INDEX)
    return Tainted(value, sources_of(count) | taken.sources, counted_form, dtype=dtype)


def branch_end(line: int) -> None:
    """The end of the body of the branch at `line`: what it did stands for every input
    only if it synchronised nothing and left nothing behind but its counters."""
    from racecheck.dsl.tensors import TensorView

    frame = innermost_user_frame(sys._getframe(1))
    key = (frame.f_code.co_filename if frame else "", line)
    taken = getattr(_state.local, "branches", {}).pop(key, None)
    if taken is None:
        return
    for event in taken.events[taken.start :]:
        if event.kind not in (EventKind.LOAD, EventKind.STORE):
            taken.record.broken.append(
                reason(
                    ReasonCode.SUMMARY_BODY_SYNCS, kind=event.kind.value, line=event.location.line
                )
            )
    now = frame.f_locals if frame is not None else {}
    for name, held in sorted(taken.held.items()):
        value = now.get(name)
        if not (isinstance(value, TensorView) and value == held):
            taken.record.broken.append(reason(ReasonCode.SUMMARY_BRANCH_OUTLIVES, name=name))


def _constant(value: object) -> Expr | None:
    from racecheck.dsl.symbolic import Const

    if isinstance(value, int) and not isinstance(value, bool):
        return Const(int(value))
    return None


def _branch_names(filename: str, line: int) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The counters of the `if` at `line`, and the other names its body assigns that
    its function reads outside it (None: not found)."""
    try:
        with open(filename, encoding="utf-8") as source:
            text = source.read()
    except (OSError, ValueError):
        return None
    return _if_names(text, line)


@functools.lru_cache(maxsize=256)
def _if_names(text: str, line: int) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    live = _names_in(text, line, "if")
    if live is None:
        return None
    found = _statement_at(text, line, "if")
    if not isinstance(found, ast.If):
        return None
    counters = counters_of(found)
    return tuple(sorted(counters)), tuple(sorted(live - counters))


def widened_indices(values: Sequence[object]) -> list[int]:
    """`as_index` of each offset in a summary run; one counted by a slot counter
    (`Widening`) makes the offsets an `Offsets` covering all its values."""
    from racecheck.dsl.scalars import as_index

    found: list[int] = []
    spans: dict[int, Widening] = {}
    pending()
    for axis, value in enumerate(values):
        found.append(as_index(value))
        revealed = pending()
        if len(revealed) == 1 and revealed[0].span is not None:
            spans[axis] = revealed[0]
    return Offsets(found, spans) if spans else found
