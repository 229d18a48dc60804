"""The proof obligations of an all-P proof, stated over instances of the templates.

An instance is a template with its rank and loop indices renamed apart; conditions
quantify over N implicitly (N is free, at least the lower bound). Each obligation is
a condition whose satisfiability is a counter-model:

* bounds — an access or view outside its memory;
* unique writer — two writes reach a cell some wait reads (or a plain write does);
* wait value — the cell's one notify does not turn a failing wait into a passing one;
* notify exists — a wait whose cell no notify targets (a deadlock);
* no circular wait — the notify a wait needs sits behind a wait that is not earlier in
  the common program order (the well-founded argument for deadlock freedom fails);
* ordered — two conflicting accesses on different ranks with no one-hop chain
  access → notify ⇒ wait → access either way.

Under the first four, a wait passes only after its cell's one notify, so a chain is
a happens-before edge; the fifth gives deadlock freedom. Multi-hop chains are not
searched: an access pair ordered only through a longer chain is a counter-model here,
and the prover confirms every counter-model concretely before calling it a bug.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from racecheck.allp.expr import (
    FALSE,
    TRUE,
    WORLD,
    All,
    Any_,
    Bin,
    Cmp,
    Cond,
    Const,
    Exists,
    Expr,
    Not,
    Op,
    Rel,
    Var,
    renamed,
    renamed_cond,
)
from racecheck.allp.solver import CounterModel, Undecided, counter_model
from racecheck.allp.templates import Effect, Footprint, LoopItem, Protocol, Template
from racecheck.events import NotifyOp, SourceLocation, WaitCmp


class Obligation(Enum):
    BOUNDS = "every access in bounds"
    UNIQUE_WRITER = (
        "each waited signal cell is fed by one notify, or by one +1 from every other rank"
        " with the wait at N - 1"
    )
    WAIT_VALUE = "each wait passes exactly when its cell's notify has landed"
    NOTIFY_EXISTS = "every wait's cell is notified (no wait without its notify)"
    NO_CIRCULAR_WAIT = "no circular wait (the notify a wait needs is behind earlier waits only)"
    ORDERED = "conflicting accesses of different ranks ordered by access → notify ⇒ wait → access"


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    obligation: Obligation
    model: CounterModel
    locations: tuple[SourceLocation, ...]


@dataclass(frozen=True, slots=True)
class _Instance:
    template: Template
    names: dict[str, str]
    rank: Expr

    def expr(self, item: Expr) -> Expr:
        return renamed(item, self.names)

    @property
    def guard(self) -> Cond:
        return renamed_cond(self.template.guard, self.names)

    @property
    def loop_names(self) -> tuple[str, ...]:
        return tuple(
            self.names[var] for var in self.template.loop_vars if var != self.template.rank
        )


def _instance(template: Template, tag: str, rank_tag: str) -> _Instance:
    names = {var: f"{var}@{tag}" for var in template.loop_vars}
    names[template.rank] = f"r@{rank_tag}"
    return _Instance(template=template, names=names, rank=Var(f"r@{rank_tag}"))


def _add(left: Expr, right: Expr) -> Expr:
    return Bin(Op.ADD, left, right)


def _mul(left: Expr, right: Expr) -> Expr:
    return Bin(Op.MUL, left, right)


def _byte(instance: _Instance, footprint: Footprint, tag: str) -> tuple[Expr, Cond]:
    """A byte of the footprint, with fresh index variables and their bounds."""
    element: Expr = Const(0)
    bounds: list[Cond] = []
    for dim, (offset, size, stride) in enumerate(
        zip(footprint.offsets, footprint.extent, footprint.strides, strict=True)
    ):
        index = Var(f"e{dim}@{tag}")
        bounds += [Cmp(Rel.LE, Const(0), index), Cmp(Rel.LT, index, instance.expr(size))]
        element = _add(element, _mul(_add(instance.expr(offset), index), instance.expr(stride)))
    byte = Var(f"b@{tag}")
    bounds += [Cmp(Rel.LE, Const(0), byte), Cmp(Rel.LT, byte, Const(footprint.itemsize))]
    address = _add(
        _add(instance.expr(footprint.base), _mul(element, Const(footprint.itemsize))), byte
    )
    return address, All(tuple(bounds))


def _cell_address(instance: _Instance) -> Expr:
    footprint = instance.template.footprint
    element: Expr = Const(0)
    for offset, stride in zip(footprint.offsets, footprint.strides, strict=True):
        element = _add(element, _mul(instance.expr(offset), instance.expr(stride)))
    return _add(instance.expr(footprint.base), _mul(element, Const(footprint.itemsize)))


def _same_owner(left: _Instance, right: _Instance) -> Cond | None:
    a, b = left.template.footprint, right.template.footprint
    if a.memory != b.memory:
        return None
    if a.owner is None or b.owner is None:
        return TRUE if a.owner is None and b.owner is None else None
    return Cmp(Rel.EQ, left.expr(a.owner), right.expr(b.owner))


def _overlap(left: _Instance, right: _Instance, tag: str) -> Cond:
    owner = _same_owner(left, right)
    if owner is None:
        return FALSE
    first, first_bounds = _byte(left, left.template.footprint, f"{tag}1")
    second, second_bounds = _byte(right, right.template.footprint, f"{tag}2")
    return All((owner, first_bounds, second_bounds, Cmp(Rel.EQ, first, second)))


def _same_cell(notify: _Instance, wait: _Instance) -> Cond:
    owner = _same_owner(notify, wait)
    if owner is None or notify.template.footprint.itemsize != wait.template.footprint.itemsize:
        return FALSE
    return All((owner, Cmp(Rel.EQ, _cell_address(notify), _cell_address(wait))))


def _before(first: _Instance, second: _Instance) -> Cond:
    """Program order of two instances on one rank: lexicographic over positions."""
    return _lex(first, second, first.template.position, second.template.position)


def _lex(first: _Instance, second: _Instance, left: tuple, right: tuple) -> Cond:
    if not left or not right:
        return FALSE
    head_left, head_right = left[0], right[0]
    if isinstance(head_left, LoopItem) and isinstance(head_right, LoopItem):
        if head_left.slot != head_right.slot:
            return TRUE if head_left.slot < head_right.slot else FALSE
        a, b = Var(first.names[head_left.var]), Var(second.names[head_right.var])
        rest = _lex(first, second, left[1:], right[1:])
        return Any_((Cmp(Rel.LT, a, b), All((Cmp(Rel.EQ, a, b), rest))))
    slot_left = head_left.slot if isinstance(head_left, LoopItem) else head_left
    slot_right = head_right.slot if isinstance(head_right, LoopItem) else head_right
    if slot_left != slot_right:
        return TRUE if slot_left < slot_right else FALSE
    return FALSE


def _may_feed(writer: _Instance, wait: _Instance) -> Cond:
    """The write can land before the wait passes: it is not the waiting rank's own write
    after the wait (a self-clearing epilogue's reset)."""
    return Any_((Cmp(Rel.NE, writer.rank, wait.rank), Not(_before(wait, writer))))


def _distinct(left: _Instance, right: _Instance) -> Cond:
    if left.template is not right.template:
        return TRUE
    differs = [Cmp(Rel.NE, left.rank, right.rank)]
    differs += [
        Cmp(Rel.NE, Var(a), Var(b)) for a, b in zip(left.loop_names, right.loop_names, strict=True)
    ]
    return Any_(tuple(differs))


class Prover:
    """Discharges the obligations of one protocol for every N >= low."""

    def __init__(self, protocol: Protocol, low: int, assumption: Cond, deadline: float) -> None:
        self.deadline = deadline
        self.protocol = protocol
        self.base = All((Cmp(Rel.LE, Const(low), Var(WORLD)), assumption))
        self.low = low
        templates = protocol.templates
        self.waits = [t for t in templates if t.effect is Effect.WAIT]
        self.notifies = [t for t in templates if t.effect is Effect.NOTIFY]
        self.writers = [t for t in templates if t.effect.writes]
        interned: dict[Cond, int] = {}
        self.contexts = {
            id(t): {(interned.setdefault(c, len(interned)), taken) for c, taken in t.context}
            for t in templates
        }

    def exclusive(self, *templates: Template) -> bool:
        """Whether no N admits all of `templates`: one took a branch on N the other did not."""
        for first, second in itertools.combinations(templates, 2):
            other = self.contexts[id(second)]
            if any((key, not taken) in other for key, taken in self.contexts[id(first)]):
                return True
        return False

    def failures(self) -> Iterator[Failure]:
        yield from self._bounds()
        for wait in self.waits:
            yield from self._fed(wait)
        yield from self._no_circular_wait()
        yield from self._ordered()

    def _fed(self, wait: Template) -> Iterator[Failure]:
        """The wait passes only once every notify that feeds its cell has landed, and they
        do land: one notify (unique writer), else one +1 from every other rank (counted)."""
        unique = next(self._unique(wait), None)
        if unique is None:
            return
        if next(self._counted(wait), None) is not None:
            yield unique

    def _unique(self, wait: Template) -> Iterator[Failure]:
        yield from self._unique_writer(wait)
        yield from self._wait_value(wait)
        yield from self._notify_exists(wait)

    def _refute(self, obligation: Obligation, cond: Cond, *templates: Template) -> Failure | None:
        if self.exclusive(*templates):
            return None
        if time.monotonic() > self.deadline:
            raise Undecided("the all-P time budget ran out")
        model = counter_model(All((self.base, cond)), self.low, deadline=self.deadline)
        if model is None:
            return None
        locations = tuple(dict.fromkeys(t.location for t in templates))
        return Failure(obligation=obligation, model=model, locations=locations)

    def _bounds(self) -> Iterator[Failure]:
        for check in self.protocol.checks:
            cond = All((self.base, check.guard, Not(check.holds)))
            model = counter_model(cond, self.low, deadline=self.deadline)
            if model is not None:
                yield Failure(
                    obligation=Obligation.BOUNDS, model=model, locations=(check.location,)
                )

    def _unique_writer(self, wait_template: Template) -> Iterator[Failure]:
        wait = _instance(wait_template, "w", "w")
        for x, y in itertools.combinations_with_replacement(self.writers, 2):
            first, second = _instance(x, "x", "x"), _instance(y, "y", "y")
            both = All(
                (
                    wait.guard,
                    first.guard,
                    second.guard,
                    _overlap(first, wait, "ox"),
                    _overlap(second, wait, "oy"),
                    _may_feed(first, wait),
                    _may_feed(second, wait),
                    _distinct(first, second),
                )
            )
            failure = self._refute(Obligation.UNIQUE_WRITER, both, wait_template, x, y)
            if failure is not None:
                yield failure
        for writer_template in self.writers:
            writer = _instance(writer_template, "x", "x")
            improper = Any_(
                (Not(_same_cell(writer, wait)),)
                if writer_template.effect is Effect.NOTIFY
                else (TRUE,)
            )
            cond = All(
                (
                    wait.guard,
                    writer.guard,
                    _overlap(writer, wait, "o"),
                    _may_feed(writer, wait),
                    improper,
                )
            )
            failure = self._refute(Obligation.UNIQUE_WRITER, cond, wait_template, writer_template)
            if failure is not None:
                yield failure

    def _wait_value(self, wait_template: Template) -> Iterator[Failure]:
        wait = _instance(wait_template, "w", "w")
        for notify_template in self.notifies:
            notify = _instance(notify_template, "n", "n")
            good = All((_fails_at_zero(wait), _passes(wait, notify)))
            cond = All(
                (
                    wait.guard,
                    notify.guard,
                    _same_cell(notify, wait),
                    _may_feed(notify, wait),
                    Not(good),
                )
            )
            failure = self._refute(Obligation.WAIT_VALUE, cond, wait_template, notify_template)
            if failure is not None:
                yield failure

    def _notifier(self, wait: _Instance, tag: str, sender: Expr | None = None) -> Cond:
        """Some notify instance (from `sender`, if given) feeds the wait's cell."""
        options = []
        for index, template in enumerate(self.notifies):
            if self.exclusive(template, wait.template):
                continue
            notify = _instance(template, f"{tag}{index}", f"{tag}{index}")
            names = (notify.rank.name, *notify.loop_names)  # type: ignore[union-attr]
            parts = [notify.guard, _same_cell(notify, wait), _may_feed(notify, wait)]
            if sender is not None:
                parts.append(Cmp(Rel.EQ, notify.rank, sender))
            options.append(Exists(names, All(tuple(parts))))
        return Any_(tuple(options))

    def _counted(self, wait_template: Template) -> Iterator[Failure]:
        """The cell is fed by exactly one AtomicAdd 1 from every rank but the waiting one,
        and the wait is for N - 1 of them: it passes once all have landed."""
        wait = _instance(wait_template, "w", "w")
        for writer_template in self.writers:
            writer = _instance(writer_template, "x", "x")
            feeds = (writer.guard, _overlap(writer, wait, "o"), _may_feed(writer, wait))
            one = _is_increment(writer, wait)
            improper = Any_((Not(one), Cmp(Rel.EQ, writer.rank, wait.rank)))
            yield from self._counter(All((wait.guard, *feeds, improper)), wait, writer_template)
        for x, y in itertools.combinations_with_replacement(self.writers, 2):
            first, second = _instance(x, "x", "x"), _instance(y, "y", "y")
            twice = All(
                (
                    wait.guard,
                    first.guard,
                    second.guard,
                    _overlap(first, wait, "ox"),
                    _overlap(second, wait, "oy"),
                    _may_feed(first, wait),
                    _may_feed(second, wait),
                    Cmp(Rel.EQ, first.rank, second.rank),
                    _distinct(first, second),
                )
            )
            yield from self._counter(twice, wait, x, y)
        sender = Var("s@w")
        silent = All(
            (
                wait.guard,
                Cmp(Rel.LE, Const(0), sender),
                Cmp(Rel.LT, sender, Var(WORLD)),
                Cmp(Rel.NE, sender, wait.rank),
                Not(self._notifier(wait, "m", sender)),
            )
        )
        yield from self._counter(silent, wait)
        threshold = All(
            (
                Cmp(
                    Rel.EQ, wait.expr(wait_template.value or Const(0)), _add(Var(WORLD), Const(-1))
                ),
                _fails_at_zero(wait),
            )
        )
        yield from self._counter(All((wait.guard, Not(threshold))), wait)

    def _counter(self, cond: Cond, wait: _Instance, *others: Template) -> Iterator[Failure]:
        failure = self._refute(Obligation.UNIQUE_WRITER, cond, wait.template, *others)
        if failure is not None:
            yield failure

    def _notify_exists(self, wait_template: Template) -> Iterator[Failure]:
        wait = _instance(wait_template, "w", "w")
        cond = All((wait.guard, _fails_at_zero(wait), Not(self._notifier(wait, "m"))))
        failure = self._refute(Obligation.NOTIFY_EXISTS, cond, wait_template)
        if failure is not None:
            yield failure

    def _no_circular_wait(self) -> Iterator[Failure]:
        for wait_template, notify_template, earlier_template in itertools.product(
            self.waits, self.notifies, self.waits
        ):
            wait = _instance(wait_template, "w", "w")
            notify = _instance(notify_template, "n", "n")
            earlier = _instance(earlier_template, "v", "n")
            cond = All(
                (
                    wait.guard,
                    notify.guard,
                    earlier.guard,
                    _same_cell(notify, wait),
                    _may_feed(notify, wait),
                    _before(earlier, notify),
                    Not(_lex(earlier, wait, earlier_template.position, wait_template.position)),
                )
            )
            failure = self._refute(
                Obligation.NO_CIRCULAR_WAIT, cond, wait_template, earlier_template
            )
            if failure is not None:
                yield failure

    def _chain(self, first: _Instance, second: _Instance, tag: str) -> Cond:
        """Some notify after `first` on its rank feeds a wait before `second` on its rank."""
        options = []
        for (n_index, notify_template), (w_index, wait_template) in itertools.product(
            enumerate(self.notifies), enumerate(self.waits)
        ):
            if self.exclusive(first.template, notify_template, wait_template, second.template):
                continue
            notify = _instance(notify_template, f"{tag}n{n_index}", "a")
            notify = _Instance(
                template=notify.template,
                names={**notify.names, notify_template.rank: first.names[first.template.rank]},
                rank=first.rank,
            )
            wait = _instance(wait_template, f"{tag}w{w_index}", "b")
            wait = _Instance(
                template=wait.template,
                names={**wait.names, wait_template.rank: second.names[second.template.rank]},
                rank=second.rank,
            )
            body = All(
                (
                    notify.guard,
                    wait.guard,
                    _before(first, notify),
                    _before(wait, second),
                    _same_cell(notify, wait),
                )
            )
            options.append(Exists((*notify.loop_names, *wait.loop_names), body))
        return Any_(tuple(options))

    def _ordered(self) -> Iterator[Failure]:
        accesses = [t for t in self.protocol.templates if t.effect is not Effect.WAIT]
        accesses += self.waits
        for left, right in itertools.combinations_with_replacement(accesses, 2):
            if not _conflicting(left.effect, right.effect) or self.exclusive(left, right):
                continue
            if left.footprint.memory != right.footprint.memory:
                continue
            first, second = _instance(left, "a", "a"), _instance(right, "b", "b")
            cond = All(
                (
                    first.guard,
                    second.guard,
                    Cmp(Rel.NE, first.rank, second.rank),
                    _overlap(first, second, "o"),
                    Not(self._chain(first, second, "c")),
                    Not(self._chain(second, first, "d")),
                )
            )
            failure = self._refute(Obligation.ORDERED, cond, left, right)
            if failure is not None:
                yield failure


def _conflicting(left: Effect, right: Effect) -> bool:
    writes = left.writes or right.writes
    plain = left.plain or right.plain
    return writes and plain


def _is_increment(writer: _Instance, wait: _Instance) -> Cond:
    """The write is an AtomicAdd of 1 on exactly the wait's cell."""
    template = writer.template
    if template.effect is not Effect.NOTIFY or template.notify_op is not NotifyOp.ATOMIC_ADD:
        return FALSE
    value = writer.expr(template.value or Const(0))
    return All((_same_cell(writer, wait), Cmp(Rel.EQ, value, Const(1))))


def _fails_at_zero(wait: _Instance) -> Cond:
    expected = wait.expr(wait.template.value or Const(0))
    if wait.template.cmp is WaitCmp.EQ:
        return Cmp(Rel.NE, expected, Const(0))
    return Cmp(Rel.LT, Const(0), expected)


def _passes(wait: _Instance, notify: _Instance) -> Cond:
    expected = wait.expr(wait.template.value or Const(0))
    value = notify.expr(notify.template.value or Const(0))
    if notify.template.notify_op not in (NotifyOp.ATOMIC_ADD, NotifyOp.SET):
        return FALSE
    if wait.template.cmp is WaitCmp.EQ:
        return Cmp(Rel.EQ, value, expected)
    return Cmp(Rel.LE, expected, value)
