"""The all-P tracer's templates instantiated at one P, beside the co-simulation's events.

For the agreement test: a template stands for every event of every rank whose values
of N, the rank and the loop indices satisfy its guard (each loop index bounded by
its facts `low <= i < high`). Each instance becomes the key an event of the concrete
trace has too — kind, memory, owner, bytes, notify value or wait threshold — and
the two sides are compared as one multiset per rank, so the symbolic surface and the
concrete pipeline cannot silently disagree. The builtins both run one lowering
(racecheck/dsl/lowering.py); this holds its two interpreters to the same events.
Windows are named by allocation order (`windowK`), host tensors by parameter name.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator

from racecheck.allp.expr import (
    WORLD,
    All,
    Any_,
    Cmp,
    Cond,
    Const,
    Expr,
    Not,
    Op,
    Rel,
    Var,
    truncating_div,
)
from racecheck.allp.templates import Effect, Footprint, Protocol, Template
from racecheck.cosim.simulate import simulate
from racecheck.events import EventKind, MemoryKind
from racecheck.load import ProgramSpec

Key = tuple[EventKind, str, int | None, frozenset[int], int | None]

_FOLD: dict[Op, Callable[[int, int], int]] = {
    Op.ADD: lambda a, b: a + b,
    Op.SUB: lambda a, b: a - b,
    Op.MUL: lambda a, b: a * b,
    Op.TDIV: truncating_div,
    Op.TMOD: lambda a, b: a - b * truncating_div(a, b),
}
_REL: dict[Rel, Callable[[int, int], bool]] = {
    Rel.EQ: lambda a, b: a == b,
    Rel.NE: lambda a, b: a != b,
    Rel.LT: lambda a, b: a < b,
    Rel.LE: lambda a, b: a <= b,
}
_KIND = {
    Effect.READ: EventKind.LOAD,
    Effect.WRITE: EventKind.STORE,
    Effect.ATOMIC_ADD: EventKind.ATOMIC_ADD,
    Effect.NOTIFY: EventKind.NOTIFY,
    Effect.WAIT: EventKind.WAIT,
}


def value(expr: Expr, env: dict[str, int]) -> int:
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        return env[expr.name]
    return _FOLD[expr.op](value(expr.left, env), value(expr.right, env))


def holds(cond: Cond, env: dict[str, int]) -> bool:
    if isinstance(cond, Cmp):
        return _REL[cond.rel](value(cond.left, env), value(cond.right, env))
    if isinstance(cond, Not):
        return not holds(cond.inner, env)
    if isinstance(cond, All):
        return all(holds(part, env) for part in cond.parts)
    if isinstance(cond, Any_):
        return any(holds(part, env) for part in cond.parts)
    raise TypeError(f"a guard holds no {cond!r}")


def _bounds(guard: Cond, name: str) -> tuple[Expr, Expr]:
    assert isinstance(guard, All)
    lows = [
        p.left
        for p in guard.parts
        if isinstance(p, Cmp) and p.rel is Rel.LE and p.right == Var(name)
    ]
    highs = [
        p.right
        for p in guard.parts
        if isinstance(p, Cmp) and p.rel is Rel.LT and p.left == Var(name)
    ]
    return lows[0], highs[0]


def _bindings(template: Template, ranks: int) -> Iterator[dict[str, int]]:
    names = sorted(template.loop_vars, key=lambda name: int(name[1:]))

    def extend(env: dict[str, int], rest: list[str]) -> Iterator[dict[str, int]]:
        if not rest:
            if holds(template.guard, env):
                yield env
            return
        low, high = _bounds(template.guard, rest[0])
        for index in range(value(low, env), value(high, env)):
            yield from extend({**env, rest[0]: index}, rest[1:])

    yield from extend({WORLD: ranks}, names)


def _bytes(footprint: Footprint, env: dict[str, int]) -> frozenset[int]:
    found: set[int] = set()
    extents = (range(value(size, env)) for size in footprint.extent)
    for index in itertools.product(*extents):
        element = sum(
            (value(offset, env) + i) * value(stride, env)
            for offset, i, stride in zip(footprint.offsets, index, footprint.strides, strict=True)
        )
        start = element * footprint.itemsize
        found.update(range(start, start + footprint.itemsize))
    return frozenset(found)


def symbolic_events(protocol: Protocol, ranks: int) -> list[Counter[Key]]:
    per_rank: list[Counter[Key]] = [Counter() for _ in range(ranks)]
    for template in protocol.templates:
        footprint = template.footprint
        for env in _bindings(template, ranks):
            owner = None if footprint.owner is None else value(footprint.owner, env)
            amount = None if template.value is None else value(template.value, env)
            key = (_KIND[template.effect], footprint.memory, owner, _bytes(footprint, env), amount)
            per_rank[env[template.rank]][key] += 1
    return per_rank


def concrete_events(spec: ProgramSpec, ranks: int) -> list[Counter[Key]]:
    trace = simulate(spec.instantiate(ranks)).trace
    windows = [memory.id for memory in trace.memories if memory.kind is MemoryKind.WINDOW]
    names = {
        memory.id: f"window{windows.index(memory.id) + 1}"
        if memory.kind is MemoryKind.WINDOW
        else f"host {memory.name}"
        for memory in trace.memories
    }
    per_rank: list[Counter[Key]] = [Counter() for _ in range(ranks)]
    for rank, events in enumerate(trace.events):
        for event in events:
            region = event.access
            assert region is not None
            window = region.memory in windows
            amount = (
                event.notify.value if event.notify else event.wait.expected if event.wait else None
            )
            touched = frozenset(b for start, end in region.ranges for b in range(start, end))
            owner = region.owner if window else None
            per_rank[rank][(event.kind, names[region.memory], owner, touched, amount)] += 1
    return per_rank
