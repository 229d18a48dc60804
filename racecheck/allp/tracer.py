"""The symbolic tracer: one run of the program per branch path, with N and the rank symbolic.

Decides nothing; records. Each run follows a recorded prefix of branch decisions and
then the first feasible side of every new branch, queueing the other side (the
CrossHair scheme). A `pl.range` is one symbolic iteration: a fresh index variable
bounded by the loop's range, whose conditions are dropped again when the loop ends.
Loop-carried scalars, a value from an iteration that escapes its loop, and a
precondition raised inside a loop are outside the fragment.
"""

from __future__ import annotations

import ast
import dis
import functools
import linecache
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import CodeType

from racecheck.allp.expr import (
    TRUE,
    WORLD,
    All,
    Cmp,
    Cond,
    Const,
    Expr,
    Not,
    Opaque,
    OutsideFragment,
    Rel,
    Sym,
    SymBool,
    Var,
    variables,
)
from racecheck.allp.templates import (
    BoundsCheck,
    Effect,
    Footprint,
    LoopItem,
    PositionItem,
    Rejection,
    Template,
)
from racecheck.dsl.location import user_location
from racecheck.events import NotifyOp, WaitCmp

Feasible = Callable[[Cond], bool]
MAX_DECISIONS = 400


@dataclass(frozen=True, slots=True, kw_only=True)
class _Fact:
    cond: Cond
    names: frozenset[str]


@dataclass(slots=True, kw_only=True)
class _Scope:
    var: str | None
    counter: int = 0
    branched: bool = False  # a branch in the body depended on this loop's index
    dispatches: bool = False  # the host loop whose index is the rank: nothing observable follows


@dataclass(slots=True, kw_only=True)
class PathRecord:
    """What one run recorded."""

    templates: list[Template] = field(default_factory=list)
    checks: list[BoundsCheck] = field(default_factory=list)
    rejection: Rejection | None = None


class Tracer:
    """The state of one run: decisions, path conditions, loop scopes, records."""

    def __init__(self, forced: list[int], feasible: Feasible, base: Cond) -> None:
        self.forced = forced
        self.taken: list[int] = []
        self.alternatives: list[list[int]] = []
        self.feasible = feasible
        self.facts: list[_Fact] = [_Fact(cond=base, names=frozenset())]
        self.scopes: list[_Scope] = [_Scope(var=None)]
        self.record = PathRecord()
        self.rank: str | None = None
        self.loops = 0
        self.slots: list[LoopItem] = []
        self.left_early = ""
        self.context: set[tuple[Cond, bool]] = set()

    # --- symbolic values and branches ---------------------------------------------------

    def sym(self, expr: Expr) -> Sym:
        return Sym(expr, self)

    def __call__(self, cond: Cond) -> bool:
        return self.decide(cond)

    def world(self) -> Sym:
        return self.sym(Var(WORLD))

    def guard(self) -> Cond:
        return All(tuple(fact.cond for fact in self.facts))

    def decide(self, cond: Cond) -> bool:
        return self.choose((cond, Not(cond))) == 0

    def choose(self, options: tuple[Cond, ...]) -> int:
        """Which of mutually exclusive, exhaustive `options` holds: the first feasible one
        on this run, the other feasible ones on runs of their own."""
        for option in options:
            self._check_scope(option, "a branch")
        index = len(self.taken)
        if index >= MAX_DECISIONS:
            raise OutsideFragment(
                f"more than {MAX_DECISIONS} symbolic branches on one path"
                " (a loop whose bound is symbolic but is not a pl.range?)"
            )
        if index < len(self.forced):
            choice = self.forced[index]
        else:
            now = self.guard()
            feasible = [n for n, option in enumerate(options) if self.feasible(All((now, option)))]
            choice = feasible[0] if feasible else 0
            self.alternatives += [[*self.taken, other] for other in feasible[1:]]
        self.taken.append(choice)
        self._assume(options[choice])
        mentioned = set().union(*(variables(option) for option in options))
        for scope in self.scopes:
            scope.branched = scope.branched or scope.var in mentioned
        for number, option in enumerate(options):
            if variables(option) <= {WORLD}:
                self.context.add((option, number == choice))
        return choice

    def _assume(self, cond: Cond) -> None:
        self.facts.append(_Fact(cond=cond, names=variables(cond)))

    def _active_loops(self) -> frozenset[str]:
        return frozenset(scope.var for scope in self.scopes if scope.var is not None)

    def _check_scope(self, item: Expr | Cond, what: str) -> None:
        escaped = {name for name in variables(item) if _is_loop_var(name)}
        escaped -= self._active_loops()
        if escaped:
            raise OutsideFragment(
                f"{what} at {user_location()} uses a loop index after its loop ended"
            )

    # --- loops --------------------------------------------------------------------------

    def loop(self, start: object, stop: object, step: int) -> Iterator[Sym]:
        if step <= 0:
            raise OutsideFragment(f"pl.range with step {step} is outside the fragment")
        self.loops += 1
        name = f"i{self.loops}"
        index = Var(name)
        low, high = _expr(start), _expr(stop)
        self._check_scope(low, "a loop bound")
        self._check_scope(high, "a loop bound")
        scope = self.scopes[-1]
        slot = scope.counter
        scope.counter += 1
        self.scopes.append(_Scope(var=name))
        self._assume(Cmp(Rel.LE, low, index))
        self._assume(Cmp(Rel.LT, index, high))
        if step != 1:
            offset = self.sym(index) - self.sym(low)
            self._assume(Cmp(Rel.EQ, _expr(offset % step), Const(0)))
        self.scopes[-1].counter = 0
        self.slots.append(LoopItem(slot=slot, var=name))
        frame = sys._getframe(1)  # the frame iterating the loop
        if not _iterated_by_for(frame.f_code, frame.f_lasti):
            raise OutsideFragment(
                f"a pl.range at {user_location()} that is not the iterable of a for statement"
                " (a comprehension, list(), enumerate(), zip() ... would see one iteration)"
            )
        before = dict(frame.f_locals)
        sizes = _sizes(before)
        try:
            yield self.sym(index)
        except GeneratorExit:
            # Raised here it would be swallowed: the run's driver reads `left_early`.
            self.left_early = f"a loop left early (break, return or an exception) in {name}"
            return
        scope = self.scopes.pop()
        self.slots.pop()
        if not scope.dispatches:
            after = dict(frame.f_locals)
            _check_loop_exit(before, sizes, after, self._active_loops(), scope.branched)
        self.facts = [fact for fact in self.facts if name not in fact.names]

    def position(self) -> tuple[PositionItem, ...]:
        scope = self.scopes[-1]
        slot = scope.counter
        scope.counter += 1
        return (*self.slots, slot)

    # --- records ------------------------------------------------------------------------

    def enter_rank(self) -> str:
        """The innermost loop's index becomes the rank (a dispatch `device=` index)."""
        scope = self.scopes[-1]
        if scope.var is None:
            raise OutsideFragment("a dispatch outside the host loop")
        scope.dispatches = True
        self.rank = scope.var
        return scope.var

    def rank_var(self) -> str:
        if self.rank is None:
            raise OutsideFragment(f"a per-rank operation outside a dispatch at {user_location()}")
        return self.rank

    def event(
        self,
        effect: Effect,
        footprint: Footprint,
        *,
        notify_op: NotifyOp | None = None,
        value: Expr | None = None,
        cmp: WaitCmp | None = None,
    ) -> None:
        for part in (*footprint.offsets, *footprint.extent, footprint.base):
            self._check_scope(part, "an access")
        self.record.templates.append(
            Template(
                effect=effect,
                footprint=footprint,
                guard=self.guard(),
                position=self.position(),
                location=user_location(),
                rank=self.rank_var(),
                loop_vars=tuple(sorted(self._active_loops())),
                notify_op=notify_op,
                value=value,
                cmp=cmp,
                context=frozenset(self.context),
            )
        )

    def check(self, holds: Cond, what: str) -> None:
        self._check_scope(holds, what)
        self.record.checks.append(
            BoundsCheck(holds=holds, guard=self.guard(), location=user_location(), what=what)
        )

    def reject(self, message: str) -> None:
        if self._active_loops():
            raise OutsideFragment(f"the program raises inside a loop: {message}")
        conditions = [fact.cond for fact in self.facts[1:]]
        if not conditions:
            raise OutsideFragment(f"the program raises on every path: {message}")
        if any(fact.names - {WORLD} for fact in self.facts[1:]):
            raise OutsideFragment(f"the program raises on some ranks only: {message}")
        self.record.rejection = Rejection(guard=All(tuple(conditions)), message=message)


def _expr(value: object) -> Expr:
    if isinstance(value, Sym):
        return value.expr
    if isinstance(value, int) and not isinstance(value, bool):
        return Const(value)
    raise OutsideFragment(f"{value!r} is not an integer bound")


_WRAPPERS = frozenset(
    {"enumerate", "zip", "reversed", "sorted", "list", "tuple", "map", "filter", "iter"}
)


@functools.cache
def _iterated_by_for(code: CodeType, offset: int) -> bool:
    """Whether the instruction at `offset` is the FOR_ITER of a `for` statement whose
    iterable is the pl.range call itself (not a wrapper that would consume it)."""
    instructions = list(dis.get_instructions(code))
    here = next((i for i in instructions if i.offset == offset), None)
    get_iters = [i for i in instructions if i.offset < offset and i.opname == "GET_ITER"]
    if here is None or here.opname != "FOR_ITER" or not get_iters:
        return False
    line = get_iters[-1].positions.lineno if get_iters[-1].positions else None
    if line is None:
        return False
    try:
        tree = ast.parse(_source(code))
    except (OSError, SyntaxError):
        return False
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For) and node.lineno == line]
    return len(loops) == 1 and _plain_call(loops[0].iter)


def _source(code: CodeType) -> str:
    return "".join(linecache.getlines(code.co_filename))


def _plain_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name not in _WRAPPERS


def _sizes(local_names: dict[str, object]) -> dict[str, int]:
    return {
        name: len(value)
        for name, value in local_names.items()
        if isinstance(value, (list, dict, set, bytearray))
    }


def _check_loop_exit(
    before: dict[str, object],
    sizes: dict[str, int],
    after: dict[str, object],
    outer_loops: frozenset[str],
    branched: bool,
) -> None:
    """One symbolic iteration stands for all of them only if what it leaves behind is the
    same after every iteration: tiles (opaque data), values of its own indices (whose
    later use the scope checks refuse), and new names bound in a body that took no
    branch on its index. A changed variable or a grown container is a loop carry; a new
    name bound under a branch on the index may hold another iteration's value: both
    are outside the fragment."""
    for name, size in sizes.items():
        value = after.get(name)
        if value is not before[name] or len(value) != size:  # type: ignore[arg-type]
            raise OutsideFragment(f"the loop carries the container {name!r}")
    for name, now in after.items():
        if isinstance(now, Opaque) or _of_inner_loop(now, outer_loops):
            continue
        if name in before and _unchanged(now, before[name]):
            continue
        if name not in before and not branched:
            continue
        raise OutsideFragment(
            f"the loop carries {name!r}: set in one iteration and still bound after the loop"
        )


def _of_inner_loop(value: object, outer_loops: frozenset[str]) -> bool:
    """A symbolic value of an index of this loop (or of a loop inside it)."""
    if isinstance(value, Sym):
        names = variables(value.expr)
    elif isinstance(value, SymBool):
        names = variables(value.cond)
    else:
        return False
    return any(_is_loop_var(name) and name not in outer_loops for name in names)


def _is_loop_var(name: str) -> bool:
    return name.startswith("i") and name[1:].isdigit()


def _unchanged(now: object, value: object) -> bool:
    if isinstance(now, Sym) or isinstance(value, Sym):
        return isinstance(now, Sym) and isinstance(value, Sym) and now.expr == value.expr
    if isinstance(now, int) and isinstance(value, int):
        return now == value
    return now is value


__all__ = ["TRUE", "PathRecord", "Tracer"]
