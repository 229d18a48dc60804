"""The symbolic tracer: one run of the program per branch path, with N and the rank symbolic.

Decides nothing; records. Each run follows a recorded prefix of branch decisions and
then the first feasible side of every new branch, queueing the other side (the
CrossHair scheme). A `pl.range` is one symbolic iteration: a fresh index variable
bounded by the loop's range, whose conditions are dropped again when the loop ends.
Loop-carried scalars, a value from an iteration that escapes its loop, and a
precondition raised inside a loop are outside the fragment.

Branches inside a kernel's loop are explored pass by pass within the run: the body
runs once per path through it, each pass from the loop's entry facts with an index
variable of its own, and the code after the loop runs once. This is sound because
what an iteration leaves behind must be the same whichever path it took (checked
after every pass), and a value of one pass's index cannot reach another pass (its
variable is out of scope there). Paths through consecutive loops then add up
instead of multiplying. A branch decided again on one path (`a % b` then `a // b`)
takes the recorded side without a new decision. The passes share one frame, so a
name one pass binds is still bound in the next and after the loop: a name the loop
binds on some paths only, or in a loop that may run zero times, is refused where the
source reads it without a binding path before it.
"""

from __future__ import annotations

import ast
import dataclasses
import dis
import functools
import itertools
import linecache
import sys
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import CodeType

from racecheck.allp.expr import (
    TRUE,
    WORLD,
    All,
    Any_,
    Bin,
    Cmp,
    Cond,
    Const,
    Expr,
    Not,
    Op,
    Opaque,
    OutsideFragment,
    Rel,
    Span,
    Sym,
    SymBool,
    Var,
    int32_for_ranks,
    int32_span,
    quotient_is,
    renamed,
    span_of,
    variables,
)
from racecheck.allp.templates import (
    BoundsCheck,
    Case,
    Effect,
    Footprint,
    LoopItem,
    PositionItem,
    Rejection,
    Template,
    WindowRead,
)
from racecheck.dsl.location import user_location
from racecheck.events import NotifyOp, SourceLocation, WaitCmp
from racecheck.report.reasons import ReasonCode, reason

Feasible = Callable[[Cond], bool]
MAX_DECISIONS = 400
MAX_PASSES = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class _Fact:
    cond: Cond
    names: frozenset[str]
    options: tuple[Cond, ...] = ()  # the branch this fact decided (empty: an assumption)
    choice: int = 0
    input_range: bool = False  # the range of an input value read (`Tracer.input_value`)


@dataclass(slots=True, kw_only=True)
class _Scope:
    var: str | None
    counter: int = 0
    branched: bool = False  # a branch in the body depended on this loop's index
    dispatches: bool = False  # the host loop whose index is the rank: nothing observable follows
    passes: bool = False  # a kernel loop: branches in its body are explored pass by pass
    forced: list[int] = field(default_factory=list)  # this pass's recorded decisions
    taken: list[int] = field(default_factory=list)
    pending: list[list[int]] = field(default_factory=list)  # decisions of passes to come


@dataclass(slots=True, kw_only=True)
class PathRecord:
    """What one run recorded."""

    templates: list[Template] = field(default_factory=list)
    checks: list[BoundsCheck] = field(default_factory=list)
    scalars: list[BoundsCheck] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    window_reads: list[WindowRead] = field(default_factory=list)
    rejection: Rejection | None = None


class Tracer:
    """The state of one run: decisions, path conditions, loop scopes, records."""

    def __init__(self, forced: list[int], feasible: Feasible, base: Cond) -> None:
        self.feasible = feasible
        self.facts: list[_Fact] = [_Fact(cond=base, names=frozenset())]
        self.scopes: list[_Scope] = [_Scope(var=None, forced=forced)]
        self.record = PathRecord()
        self.rank: str | None = None
        self.loops = 0
        self.inputs = 0  # input and window values read so far (`input_value`)
        self.spans: dict[str, Span] = {}  # the interval each such value lies in
        self.slots: list[LoopItem] = []
        self.bounds: list[tuple[Expr, int]] = []  # each open loop's start and step
        self.left_early = ""
        self.context: set[tuple[Cond, bool]] = set()

    # --- symbolic values and branches ---------------------------------------------------

    def sym(self, expr: Expr) -> Sym:
        return Sym(expr, self)

    def __call__(self, cond: Cond) -> bool:
        return self.decide(cond)

    def world(self) -> Sym:
        return self.sym(Var(WORLD))

    @property
    def alternatives(self) -> list[list[int]]:
        """Decision prefixes of the runs still to do (branches outside kernel loops)."""
        return self.scopes[0].pending

    def guard(self) -> Cond:
        return All(tuple(fact.cond for fact in self.facts))

    def decide(self, cond: Cond) -> bool:
        return self.choose((cond, Not(cond))) == 0

    def choose(self, options: tuple[Cond, ...]) -> int:
        """Which of mutually exclusive, exhaustive `options` holds: the first feasible one
        on this run (or pass), the other feasible ones on runs (or passes) of their own."""
        decided = next((fact.choice for fact in self.facts if fact.options == options), None)
        if decided is not None:
            return decided  # its variables are in scope: its fact still is
        for option in options:
            self._check_scope(option, "a branch")
        scope = self._deciding_scope()
        index = len(scope.taken)
        if index >= MAX_DECISIONS:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_DECISIONS, decisions=MAX_DECISIONS))
        if index < len(scope.forced):
            choice = scope.forced[index]
        else:
            now = self.guard()
            feasible = [n for n, option in enumerate(options) if self.feasible(All((now, option)))]
            choice = feasible[0] if feasible else 0
            scope.pending += [[*scope.taken, other] for other in feasible[1:]]
        scope.taken.append(choice)
        self._assume(options[choice], options, choice)
        self.record.cases.append(Case(guard=self.guard(), location=user_location()))
        mentioned = set().union(*(variables(option) for option in options))
        for loop in self.scopes:
            loop.branched = loop.branched or loop.var in mentioned
        for number, option in enumerate(options):
            if variables(option) <= {WORLD}:
                self.context.add((option, number == choice))
        return choice

    def _deciding_scope(self) -> _Scope:
        """The innermost kernel loop (its passes explore the branch), else the run."""
        return next((scope for scope in reversed(self.scopes) if scope.passes), self.scopes[0])

    def _assume(self, cond: Cond, options: tuple[Cond, ...] = (), choice: int = 0) -> None:
        self.facts.append(_Fact(cond=cond, names=variables(cond), options=options, choice=choice))

    def _active_loops(self) -> frozenset[str]:
        return frozenset(scope.var for scope in self.scopes if scope.var is not None)

    def _check_scope(self, item: Expr | Cond, what: str) -> None:
        escaped = {name for name in variables(item) if _is_loop_var(name)}
        escaped -= self._active_loops()
        if escaped:
            raise OutsideFragment(
                reason(ReasonCode.OUTSIDE_ESCAPED_INDEX, what=what, at=str(user_location()))
            )

    # --- loops --------------------------------------------------------------------------

    def loop(
        self, start: object, stop: object, step: int, *, parallel: bool = False
    ) -> Iterator[Sym]:
        if step <= 0:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_STEP, step=step))
        low, high = _expr(start), _expr(stop)
        self._check_scope(low, "a loop bound")
        self._check_scope(high, "a loop bound")
        outer = self.scopes[-1]
        self.slots.append(LoopItem(slot=outer.counter, var="", parallel=parallel))
        self.bounds.append((low, step))
        outer.counter += 1
        scope = _Scope(var=None, passes=self.rank is not None)
        self.scopes.append(scope)
        frame = sys._getframe(1)  # the frame iterating the loop
        if not _iterated_by_for(frame.f_code, frame.f_lasti):
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_RANGE_NOT_FOR, at=str(user_location())))
        site = (frame.f_code, frame.f_lasti)
        before = dict(frame.f_locals)
        sizes = _sizes(before)
        empty = All((self.guard(), Cmp(Rel.LE, high, low)))  # the loop runs zero times
        entry_facts, entry_context = len(self.facts), set(self.context)
        left: dict[str, object] | None = None
        bound: list[frozenset[str]] = []  # the names each pass bound
        for count in itertools.count(1):
            name = self._enter_pass(scope, low, high, step)
            start = dict(frame.f_locals)
            try:
                yield self.sym(Var(name))
            except GeneratorExit:
                # Raised here it would be swallowed: the run's driver reads `left_early`.
                self.left_early = reason(ReasonCode.OUTSIDE_LEFT_EARLY, name=name)
                return
            if not scope.dispatches:
                after = dict(frame.f_locals)
                left = self._left_behind(scope, after, before, sizes, left, count)
                bound.append(
                    frozenset(n for n, v in after.items() if start.get(n, _UNBOUND) is not v)
                )
            if not scope.pending:
                break
            if count >= MAX_PASSES:
                raise OutsideFragment(reason(ReasonCode.OUTSIDE_PASSES, passes=MAX_PASSES))
            scope.forced, scope.taken = scope.pending.pop(), []
            del self.facts[entry_facts:]
            self.context = set(entry_context)
        if left is not None:
            outer_loops = self._active_loops() - {scope.var}
            self._bound_after(left, before, bound, outer_loops, empty, site)
        self.scopes.pop()
        self.slots.pop()
        self.bounds.pop()
        if scope.passes:
            del self.facts[entry_facts:]
            self.context = entry_context
        else:
            self.facts = [fact for fact in self.facts if scope.var not in fact.names]

    def _left_behind(
        self,
        scope: _Scope,
        after: dict[str, object],
        before: dict[str, object],
        sizes: dict[str, int],
        left: dict[str, object] | None,
        count: int,
    ) -> dict[str, object]:
        """What this pass through the body left behind, checked against the loop's entry
        and against what the earlier passes left."""
        outer_loops = self._active_loops() - {scope.var}
        several = count > 1 or bool(scope.pending)  # a name may be bound on some paths only
        _check_loop_exit(before, sizes, after, outer_loops, scope.branched or several)
        return _same_exit(left, after, outer_loops)

    def _bound_after(
        self,
        left: dict[str, object],
        before: dict[str, object],
        bound: list[frozenset[str]],
        outer_loops: frozenset[str],
        empty: Cond,
        site: tuple[CodeType, int],
    ) -> None:
        """A name the loop introduces may be unbound where it is read: on a path through
        the body that does not bind it (at some P no iteration may take a path that
        does), or after a loop that runs zero times at some P. The passes share one
        frame, so a later pass sees what an earlier one bound: the source decides."""
        new = {
            name
            for name, value in left.items()
            if name not in before and not _of_inner_loop(value, outer_loops)
        }
        partial = new - frozenset.intersection(*bound)
        if partial and (name := _read_unbound(*site, partial, body=True)) is not None:
            raise OutsideFragment(
                reason(ReasonCode.OUTSIDE_PARTLY_BOUND, at=str(user_location()), name=repr(name))
            )
        if new and self.feasible(empty) and (name := _read_unbound(*site, new, body=False)):
            raise OutsideFragment(
                reason(ReasonCode.OUTSIDE_ZERO_TRIPS, at=str(user_location()), name=repr(name))
            )

    def _enter_pass(self, scope: _Scope, low: Expr, high: Expr, step: int) -> str:
        """A fresh index variable for the next pass through the body, within its bounds."""
        self.loops += 1
        name = f"i{self.loops}"
        index = Var(name)
        scope.var, scope.counter = name, 0
        self.slots[-1] = dataclasses.replace(self.slots[-1], var=name)
        self._assume(Cmp(Rel.LE, low, index))
        self._assume(Cmp(Rel.LT, index, high))
        if step != 1:
            offset = self.sym(index) - self.sym(low)
            self._assume(Cmp(Rel.EQ, _expr(offset % step), Const(0)))
        return name

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
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_DISPATCH_OUTSIDE_LOOP))
        scope.dispatches = True
        self.rank = scope.var
        return scope.var

    def rank_var(self) -> str:
        if self.rank is None:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_NO_DISPATCH, at=str(user_location())))
        return self.rank

    def event(
        self,
        effect: Effect,
        footprint: Footprint,
        *,
        notify_op: NotifyOp | None = None,
        value: Expr | None = None,
        cmp: WaitCmp | None = None,
        written: Expr | None = None,
    ) -> None:
        """`written`: the value a `pl.write` stores into an INT32 window cell, whose
        interval a later read of the window takes (`window_value`)."""
        owner = () if footprint.owner is None else (footprint.owner,)
        parts = (*footprint.offsets, *footprint.extent, *owner)
        for part in parts:
            self._check_scope(part, "an access")
        if value is not None:
            self._check_scope(value, "a signal value")
        guard = self.guard() if effect.plain else self._sync_guard()
        placed = _input_vars(*parts, guard)
        valued = _input_vars(value) if value is not None else frozenset()
        stored = effect is Effect.NOTIFY and notify_op is NotifyOp.SET
        if not effect.plain and (placed or (valued and not stored)):
            # the obligations' chains quantify over the notifies and waits that order
            # an access: an input value there would be theirs to choose, not the input's.
            # A Set's value is data to a pl.read of its cell; the prover refuses it on
            # a cell some wait reads (`allp._require_fragment`).
            raise OutsideFragment(
                reason(ReasonCode.OUTSIDE_INPUT_SYNC, effect=effect.value, at=str(user_location()))
            )
        kept = value if stored else written
        if written is not None:
            self._check_scope(written, "a written value")
        span = int32_span(span_of(kept, self.spans)) if kept is not None else None
        self.record.templates.append(
            Template(
                effect=effect,
                footprint=footprint,
                guard=guard,
                position=self.position(),
                location=user_location(),
                rank=self.rank_var(),
                loop_vars=tuple(sorted(self._active_loops())),
                inputs=tuple(sorted(placed | valued)),
                notify_op=notify_op,
                span=span,
                value=value,
                cmp=cmp,
                context=frozenset(self.context),
            )
        )

    def input_value(self, low: int, high: int) -> Sym:
        """A value read from an input tensor in a kernel: a fresh variable within
        `low..high` (its dtype's range narrowed by the user's assumptions). Every event
        instance names it apart (`Template.inputs`), so two instances may see different
        values, as two ranks or iterations reading two cells do: a proof covers them all."""
        return self._fresh_value(lambda value: _within(value, low, high), (low, high))

    def window_value(self, memory: str, itemsize: int, location: SourceLocation) -> Sym:
        """A value read from window `memory` in a kernel: 0 (never written) or a value in
        the interval of the values this path's Set notifies on `memory` store so far, a
        fresh variable as an input value is. The protocol records the read
        (`WindowRead`): every path's writers of `memory` must stay inside it."""
        spans = [
            template.span
            for template in self.record.templates
            if template.footprint.memory == memory and template.span is not None
        ]
        low = min((span[0] for span in spans), default=None)
        high = max((span[1] for span in spans), default=None)
        self.record.window_reads.append(
            WindowRead(memory=memory, itemsize=itemsize, low=low, high=high, location=location)
        )

        def stored(value: Var) -> Cond:
            zero = Cmp(Rel.EQ, value, Const(0))
            if low is None or high is None:
                return zero
            return Any_((zero, _within(value, low, high)))

        hull = (0, 0) if low is None or high is None else (min(low, 0), max(high, 0))
        return self._fresh_value(stored, hull)

    def _fresh_value(self, within: Callable[[Var], Cond], span: tuple[int, int]) -> Sym:
        self.rank_var()
        self.inputs += 1
        value = Var(f"{INPUT_PREFIX}{self.inputs}")
        self.spans[value.name] = span
        cond = within(value)
        self.facts.append(_Fact(cond=cond, names=frozenset({value.name}), input_range=True))
        return self.sym(value)

    def _sync_guard(self) -> Cond:
        """The path condition without the input values' ranges: each a satisfiable
        conjunct of a variable of its own, true of some value, so a notify or wait after
        a read does not depend on it."""
        return All(tuple(fact.cond for fact in self.facts if not fact.input_range))

    def computed(self, value: Expr) -> None:
        """`value` fits INT32 on this path (`int32_for_ranks`). A division or modulus by
        a constant is no branch, but each case of its quotient is a situation the
        concrete checks must meet (`p % 8` wraps first at p = 8)."""
        if isinstance(value, Bin) and value.op in (Op.TDIV, Op.TMOD):
            for case in _quotient_cases(value.left, value.right):
                self.record.cases.append(
                    Case(guard=All((self.guard(), case)), location=user_location())
                )
        holds = int32_for_ranks(value)
        names = {WORLD: "P"} if self.rank is None else {WORLD: "P", self.rank: "rank"}
        what = str(renamed(value, names))
        self.record.scalars.append(
            BoundsCheck(holds=holds, guard=self.guard(), location=user_location(), what=what)
        )

    def check(self, holds: Cond, what: str) -> None:
        self._check_scope(holds, what)
        self.record.checks.append(
            BoundsCheck(holds=holds, guard=self.guard(), location=user_location(), what=what)
        )

    def reject(self, message: str) -> None:
        if self._active_loops():
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_RAISES_IN_LOOP, message=message))
        conditions = [fact.cond for fact in self.facts[1:]]
        if not conditions:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_RAISES_ALWAYS, message=message))
        if any(fact.names - {WORLD} for fact in self.facts[1:]):
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_RAISES_ON_SOME_RANKS, message=message))
        self.record.rejection = Rejection(guard=All(tuple(conditions)), message=message)


def _quotient_cases(left: Expr, right: Expr) -> tuple[Cond, ...]:
    """The quotient of `left` by a nonzero constant is -1, 0 or 1, or beyond them."""
    if not isinstance(right, Const) or right.value == 0:
        return ()
    divisor = Const(abs(right.value))
    cases = tuple(quotient_is(quotient, left, divisor) for quotient in (-1, 0, 1))
    return (*cases, Not(Any_(cases)))


def _expr(value: object) -> Expr:
    if isinstance(value, Sym):
        return value.expr
    if isinstance(value, int) and not isinstance(value, bool):
        return Const(value)
    raise OutsideFragment(reason(ReasonCode.OUTSIDE_NOT_BOUND, value=repr(value)))


_WRAPPERS = frozenset(
    {"enumerate", "zip", "reversed", "sorted", "list", "tuple", "map", "filter", "iter"}
)


def _iterated_by_for(code: CodeType, offset: int) -> bool:
    """Whether the instruction at `offset` is the FOR_ITER of a `for` statement whose
    iterable is the pl.range call itself (not a wrapper that would consume it)."""
    found = _for_statement(code, offset)
    return found is not None and _plain_call(found[0].iter)


@functools.cache
def _for_statement(code: CodeType, offset: int) -> tuple[ast.For, ast.AST] | None:
    """The `for` statement whose FOR_ITER is at `offset`, and the innermost function
    around it (or the module)."""
    instructions = list(dis.get_instructions(code))
    here = next((i for i in instructions if i.offset == offset), None)
    get_iters = [i for i in instructions if i.offset < offset and i.opname == "GET_ITER"]
    if here is None or here.opname != "FOR_ITER" or not get_iters:
        return None
    line = get_iters[-1].positions.lineno if get_iters[-1].positions else None
    if line is None:
        return None
    try:
        tree = _tree(_source(code))
    except (OSError, SyntaxError):
        return None
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For) and node.lineno == line]
    if len(loops) != 1:
        return None
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    return loops[0], max(functions, key=lambda node: node.lineno, default=tree)


@functools.lru_cache(maxsize=32)
def _tree(source: str) -> ast.Module:
    """The parse of a file's text, shared by every fresh import of it (each unit's
    import makes new code objects, so `_for_statement`'s own cache misses)."""
    return ast.parse(source)


def _read_unbound(
    code: CodeType, offset: int, names: AbstractSet[str], *, body: bool
) -> str | None:
    """A name of `names` (bound by the loop at `offset`, maybe not on every path or not
    at all) that the code may read where the loop did not bind it: outside the loop
    statement, or, with `body`, in the loop body before its path binds it. Unknown
    source counts as such a read."""
    found = _for_statement(code, offset)
    if found is None:
        return min(names)
    loop, scope = found
    inside = {id(node) for node in ast.walk(loop)}
    following = _following(scope, loop)
    if following:  # the statements after the loop: a read there after a reassignment is none
        unbound = _Assigned(names).block(following, frozenset()).unbound
        if unbound is not None:
            return unbound
        inside |= {id(node) for statement in following for node in ast.walk(statement)}
    for node in ast.walk(scope):
        if id(node) not in inside and _reads(node, names):
            return node.id  # type: ignore[attr-defined,no-any-return]
    if body:
        return _Assigned(names).block(loop.body, frozenset()).unbound
    return None


def _following(scope: ast.AST, loop: ast.For) -> list[ast.stmt]:
    """The statements after `loop` in the block that holds it, in order."""
    for node in ast.walk(scope):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and any(statement is loop for statement in block):
                return block[next(i for i, s in enumerate(block) if s is loop) + 1 :]
    return []


def _reads(node: ast.AST, names: AbstractSet[str]) -> bool:
    return isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names


_EXITS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


@dataclass(slots=True)
class _Assigned:
    """Definite assignment through a loop body: a read of one of `names` on a path that
    has not assigned it yet is recorded in `unbound`."""

    names: AbstractSet[str]
    unbound: str | None = None

    def block(self, statements: list[ast.stmt], assigned: frozenset[str]) -> _Assigned:
        self._flow(statements, assigned)
        return self

    def _flow(self, statements: list[ast.stmt], assigned: frozenset[str]) -> frozenset[str] | None:
        """The names assigned after `statements` (None: no path falls through)."""
        for statement in statements:
            if isinstance(statement, ast.If):
                self._read(statement.test, assigned)
                sides = [self._flow(side, assigned) for side in (statement.body, statement.orelse)]
                live = [side for side in sides if side is not None]
                if not live:
                    return None
                assigned = frozenset.intersection(*live)
            elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
                value = statement.value
                if value is not None:
                    self._read(value, assigned)
                if isinstance(statement, ast.AugAssign):
                    self._read(statement.target, assigned, target=True)
                targets = (
                    statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                )
                assigned |= {
                    node.id
                    for target in targets
                    for node in ast.walk(target)
                    if isinstance(node, ast.Name)
                }
            elif isinstance(statement, ast.For | ast.While):
                self._read(
                    statement.iter if isinstance(statement, ast.For) else statement.test, assigned
                )
                for part in (statement.body, statement.orelse):
                    self._flow(part, assigned)  # may run zero times: assigns nothing after
            else:
                self._read(statement, assigned)  # with, try, ...: their assignments do not count
                if isinstance(statement, _EXITS):
                    return None
        return assigned

    def _read(self, node: ast.AST, assigned: frozenset[str], *, target: bool = False) -> None:
        for part in ast.walk(node):
            if (
                self.unbound is None
                and isinstance(part, ast.Name)
                and (target or isinstance(part.ctx, ast.Load))
                and part.id in self.names
                and part.id not in assigned
            ):
                self.unbound = part.id


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
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_CARRIES_CONTAINER, name=repr(name)))
    for name, now in after.items():
        if isinstance(now, Opaque) or _of_inner_loop(now, outer_loops):
            continue
        if name in before and _unchanged(now, before[name]):
            continue
        if name not in before and not branched:
            continue
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_CARRIES_VALUE, name=repr(name)))


_UNBOUND = object()


def _same_exit(
    left: dict[str, object] | None, after: dict[str, object], outer_loops: frozenset[str]
) -> dict[str, object]:
    """What the earlier passes through a loop body left behind, checked to be what this
    pass left behind (a tile may be bound on some paths only): the code after the loop
    runs once, for all of them."""
    if left is None:
        return after
    for name in left.keys() | after.keys():
        first, now = left.get(name, _UNBOUND), after.get(name, _UNBOUND)
        if all(_unusable(value, outer_loops) for value in (first, now)):
            continue
        if _same_tile(first, now) or _unchanged(now, first):
            continue
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_CARRIES_BY_PATH, name=repr(name)))
    return {**after, **left}


def _unusable(value: object, outer_loops: frozenset[str]) -> bool:
    """Unbound, or of an index the code after the loop cannot use (the scope check)."""
    return value is _UNBOUND or _of_inner_loop(value, outer_loops)


def _same_tile(first: object, now: object) -> bool:
    """Tiles are data: the same tile, or one bound on some paths only."""
    tiles = [value for value in (first, now) if isinstance(value, Opaque)]
    unbound = [value for value in (first, now) if value is _UNBOUND]
    return len(tiles) + len(unbound) == 2 and (len(tiles) < 2 or first == now)


def _of_inner_loop(value: object, outer_loops: frozenset[str]) -> bool:
    """A symbolic value of an index of this loop (or of a loop inside it)."""
    if isinstance(value, Sym):
        names = variables(value.expr)
    elif isinstance(value, SymBool):
        names = variables(value.cond)
    else:
        return False
    return any(_is_loop_var(name) and name not in outer_loops for name in names)


INPUT_PREFIX = "v"


def is_input_var(name: str) -> bool:
    return name.startswith(INPUT_PREFIX) and name[len(INPUT_PREFIX) :].isdigit()


def _input_vars(*items: Expr | Cond) -> frozenset[str]:
    mentioned = frozenset().union(*(variables(item) for item in items))
    return frozenset(name for name in mentioned if is_input_var(name))


def _within(value: Var, low: int, high: int) -> Cond:
    return All((Cmp(Rel.LE, Const(low), value), Cmp(Rel.LE, value, Const(high))))


def _is_loop_var(name: str) -> bool:
    return name.startswith("i") and name[1:].isdigit()


def _unchanged(now: object, value: object) -> bool:
    if isinstance(now, Sym) or isinstance(value, Sym):
        return isinstance(now, Sym) and isinstance(value, Sym) and now.expr == value.expr
    if isinstance(now, int) and isinstance(value, int):
        return now == value
    return now is value


__all__ = ["TRUE", "PathRecord", "Tracer"]
