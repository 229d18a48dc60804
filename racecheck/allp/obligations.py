"""The proof obligations of an all-P proof, stated over instances of the templates.

An instance is a template with its rank and loop indices renamed apart; conditions
quantify over N implicitly (N is free, at least the lower bound). Each obligation is
a condition whose satisfiability is a counter-model:

* bounds — an access or view outside its memory;
* unique writer — two writes reach a cell some wait reads (or a plain write does);
* wait value — the cell's one notify does not turn a failing wait into a passing one;
* notify exists — a wait whose cell no notify targets (a deadlock);
* no circular wait — the notify a wait needs sits behind a wait that is not earlier in
  one well-founded order of all waits: their code positions (common to all ranks),
  else rank first (the argument for deadlock freedom fails under both);
* ordered — two conflicting accesses on different ranks with no one-hop chain
  access → notify ⇒ wait → access either way;
* parallel — two instances on one rank in different iterations of a kernel's
  `pl.parallel` loop (which PyPTO may run concurrently) that conflict, or of which one
  notifies or waits: the co-simulation refuses such a loop, and program order, which
  the chains above rely on, does not hold between its iterations.

Footprints of one view layout apart by constant offsets in some dimension share no
byte (in-bounds row-major indices, which the bounds obligation proves): those pairs
need no solver call. The candidates of an obligation are decided by one solver call
when none has a counter-model, else one by one.

Under the first four, a wait passes only after its cell's one notify, so a chain is
a happens-before edge; the fifth gives deadlock freedom. Multi-hop chains are not
searched: an access pair ordered only through a longer chain is a counter-model here,
and the prover confirms every counter-model concretely before calling it a bug.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from racecheck import clock
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
    int32_for_ranks,
    renamed,
    renamed_cond,
    variables,
)
from racecheck.allp.solver import (
    BudgetUsedUp,
    CounterModel,
    Undecided,
    counter_model,
    model_of,
)
from racecheck.allp.templates import Effect, Footprint, LoopItem, Protocol, Template
from racecheck.events import NotifyOp, SourceLocation, WaitCmp
from racecheck.report.reasons import ReasonCode, reason

BATCH_RLIMIT = 4_000_000
"""z3 resource units for one call on all candidates of an obligation at once
(docs/model.md, "Budgets"); past them, each candidate is decided on its own."""


class Obligation(Enum):
    BOUNDS = reason(ReasonCode.OBLIGATION_BOUNDS)
    UNIQUE_WRITER = reason(ReasonCode.OBLIGATION_UNIQUE_WRITER)
    WAIT_VALUE = reason(ReasonCode.OBLIGATION_WAIT_VALUE)
    NOTIFY_EXISTS = reason(ReasonCode.OBLIGATION_NOTIFY_EXISTS)
    NO_CIRCULAR_WAIT = reason(ReasonCode.OBLIGATION_NO_CIRCULAR_WAIT)
    ORDERED = reason(ReasonCode.OBLIGATION_ORDERED)
    PARALLEL = reason(ReasonCode.OBLIGATION_PARALLEL)


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    obligation: Obligation
    model: CounterModel  # at the smallest N at which `cond` holds
    locations: tuple[SourceLocation, ...]
    cond: Cond  # holds (with the protocol's base) exactly where the obligation fails


@dataclass(frozen=True, slots=True, kw_only=True)
class _Candidate:
    """A condition whose satisfiability is a counter-model to `obligation`."""

    obligation: Obligation
    cond: Cond
    templates: tuple[Template, ...]
    where: SourceLocation | None = None  # a bounds check's own location

    @property
    def location(self) -> SourceLocation | None:
        return self.where or next((t.location for t in self.templates), None)


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
    names = {var: f"{var}@{tag}" for var in (*template.loop_vars, *template.inputs)}
    names[template.rank] = f"r@{rank_tag}"
    return _Instance(template=template, names=names, rank=Var(f"r@{rank_tag}"))


def _on_rank_of(other: _Instance, template: Template, tag: str) -> _Instance:
    """An instance of `template` on the rank of `other`, its loop indices its own."""
    instance = _instance(template, tag, "b")
    return _Instance(
        template=template,
        names={**instance.names, template.rank: other.names[other.template.rank]},
        rank=other.rank,
    )


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
    return _add(_mul(element, Const(footprint.itemsize)), byte), All(tuple(bounds))


def _cell_address(instance: _Instance) -> Expr:
    footprint = instance.template.footprint
    element: Expr = Const(0)
    for offset, stride in zip(footprint.offsets, footprint.strides, strict=True):
        element = _add(element, _mul(instance.expr(offset), instance.expr(stride)))
    return _mul(element, Const(footprint.itemsize))


def _same_owner(left: _Instance, right: _Instance) -> Cond | None:
    a, b = left.template.footprint, right.template.footprint
    if a.memory != b.memory:
        return None
    if a.owner is None or b.owner is None:
        return TRUE if a.owner is None and b.owner is None else None
    return Cmp(Rel.EQ, left.expr(a.owner), right.expr(b.owner))


def _overlap(left: _Instance, right: _Instance, tag: str) -> Cond:
    owner = _same_owner(left, right)
    if owner is None or _apart(left, right, _disjoint_ranges):
        return FALSE
    a, b = left.template.footprint, right.template.footprint
    if _same_layout(left, right):
        # in-bounds row-major indices: one byte in common exactly when every
        # dimension's index ranges meet (linear, where the byte address multiplies)
        meets = tuple(
            _ranges_meet(left.expr(offset), left.expr(size), right.expr(other), right.expr(extent))
            for offset, size, other, extent in zip(
                a.offsets, a.extent, b.offsets, b.extent, strict=True
            )
        )
        return All((owner, *meets))
    first, first_bounds = _byte(left, left.template.footprint, f"{tag}1")
    second, second_bounds = _byte(right, right.template.footprint, f"{tag}2")
    return All((owner, first_bounds, second_bounds, Cmp(Rel.EQ, first, second)))


def _same_cell(notify: _Instance, wait: _Instance) -> Cond:
    owner = _same_owner(notify, wait)
    if owner is None or notify.template.footprint.itemsize != wait.template.footprint.itemsize:
        return FALSE
    if _apart(notify, wait, _distinct_offsets):
        return FALSE
    if _same_layout(notify, wait):
        offsets = zip(
            notify.template.footprint.offsets, wait.template.footprint.offsets, strict=True
        )
        equal = tuple(Cmp(Rel.EQ, notify.expr(a), wait.expr(b)) for a, b in offsets)
        return All((owner, *equal))
    return All((owner, Cmp(Rel.EQ, _cell_address(notify), _cell_address(wait))))


def _same_layout(left: _Instance, right: _Instance) -> bool:
    """One item size and one row-major layout: in-bounds indices (which the bounds
    obligation proves of every access) then have one address each, so two footprints
    share a byte exactly when their index ranges meet in every dimension."""
    a, b = left.template.footprint, right.template.footprint
    return a.itemsize == b.itemsize and tuple(map(left.expr, a.strides)) == tuple(
        map(right.expr, b.strides)
    )


def _ranges_meet(offset: Expr, extent: Expr, other: Expr, other_extent: Expr) -> Cond:
    """`[offset, offset + extent)` and `[other, other + other_extent)` share an integer."""
    return All(
        (
            Cmp(Rel.LT, Const(0), extent),
            Cmp(Rel.LT, Const(0), other_extent),
            Cmp(Rel.LT, offset, _add(other, other_extent)),
            Cmp(Rel.LT, other, _add(offset, extent)),
        )
    )


def _apart(left: _Instance, right: _Instance, dim_apart: Callable[..., bool]) -> bool:
    """Two footprints of one layout apart in some dim by constant offsets: they share no
    byte (`_same_layout`)."""
    a, b = left.template.footprint, right.template.footprint
    return _same_layout(left, right) and any(
        dim_apart(*dim) for dim in zip(a.offsets, a.extent, b.offsets, b.extent, strict=True)
    )


def _distinct_offsets(offset: Expr, _extent: Expr, other: Expr, _other_extent: Expr) -> bool:
    return isinstance(offset, Const) and isinstance(other, Const) and offset != other


def _disjoint_ranges(offset: Expr, extent: Expr, other: Expr, other_extent: Expr) -> bool:
    parts = (offset, extent, other, other_extent)
    if not all(isinstance(part, Const) for part in parts):
        return False
    low, size, other_low, other_size = (part.value for part in parts)  # type: ignore[union-attr]
    return low + size <= other_low or other_low + other_size <= low


def _before(first: _Instance, second: _Instance) -> Cond:
    """Program order of two instances on one rank: lexicographic over positions."""
    return _lex(first, second, first.template.position, second.template.position)


def _lex(
    first: _Instance, second: _Instance, left: tuple, right: tuple, *, ranks: bool = True
) -> Cond:
    """`left` before `right`; without `ranks`, the dispatch loop's item (the rank) is
    skipped: the order of code positions common to all ranks."""
    if not left or not right:
        return FALSE
    head_left, head_right = left[0], right[0]
    if isinstance(head_left, LoopItem) and isinstance(head_right, LoopItem):
        if head_left.slot != head_right.slot:
            return TRUE if head_left.slot < head_right.slot else FALSE
        rest = _lex(first, second, left[1:], right[1:], ranks=ranks)
        if not ranks and head_left.var == first.template.rank:
            return rest
        a, b = Var(first.names[head_left.var]), Var(second.names[head_right.var])
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


class _Slow(Exception):
    """The candidates of an obligation are too many to decide at once."""


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
        self.signals: dict[tuple[int, int], bool] = {}
        self.exclusions: dict[tuple[int, int], bool] = {}
        interned: dict[Cond, int] = {}
        self.contexts = {
            id(t): {(interned.setdefault(c, len(interned)), taken) for c, taken in t.context}
            for t in templates
        }

    def exclusive(self, *templates: Template) -> bool:
        """Whether no N admits all of `templates`: one took a branch on N the other did not."""
        return any(
            self._exclusive_pair(first, second)
            for first, second in itertools.combinations(templates, 2)
        )

    def _exclusive_pair(self, first: Template, second: Template) -> bool:
        key = (id(first), id(second))
        if key not in self.exclusions:
            other = self.contexts[id(second)]
            self.exclusions[key] = any(
                (branch, not taken) in other for branch, taken in self.contexts[id(first)]
            )
        return self.exclusions[key]

    def failures(self) -> Iterator[Failure]:
        yield from self._refutations(self._bounds())
        unique = itertools.chain.from_iterable(self._unique(wait) for wait in self.waits)
        if self._refutations(unique):
            for wait in self.waits:
                yield from self._fed(wait)
        yield from self._no_circular_wait()
        yield from self._refutations(self._ordered())
        yield from self._refutations(self._parallel())

    def _fed(self, wait: Template) -> Iterator[Failure]:
        """The wait passes only once every notify that feeds its cell has landed, and they
        do land: one notify (unique writer), else one +1 from every other rank (counted)."""
        unique = self._refutations(self._unique(wait))
        if unique:
            yield from self._both(unique, self._refutations(self._counted(wait)))

    def _both(self, failures: list[Failure], others: list[Failure]) -> Iterator[Failure]:
        """Where two arguments fail at once: the obligation holds at every N at which
        either holds, so it fails only where some candidate of each does (their
        instances named apart), the smallest such N its counter-model."""
        if not others:
            return
        cond = All((_either(failures), _named_apart(_either(others))))
        model = self._counter_model(cond)
        if model is not None:
            found = (*failures, *others)
            locations = tuple(dict.fromkeys(at for f in found for at in f.locations))
            yield Failure(
                obligation=failures[0].obligation, model=model, locations=locations, cond=cond
            )

    def _unique(self, wait: Template) -> Iterator[_Candidate]:
        yield from self._unique_writer(wait)
        yield from self._wait_value(wait)
        yield from self._notify_exists(wait)

    def _candidate(
        self, obligation: Obligation, cond: Cond, *templates: Template
    ) -> Iterator[_Candidate]:
        where = templates[0].location if templates else None
        self._check_clock(obligation, where)
        if not (self.exclusive(*templates) or _false(cond)):
            yield _Candidate(obligation=obligation, cond=cond, templates=templates)

    def _refutations(self, candidates: Iterable[_Candidate]) -> list[Failure]:
        """The failure of the candidates (a list of none or one): one solver call for all
        of them when none has one, the usual case; else their union, whose smallest N is
        the smallest over every failing candidate, named after one failing there."""
        pending = list(candidates)
        union = Any_(tuple(candidate.cond for candidate in pending))
        if not pending:
            return []
        self._check_clock(pending[0].obligation, pending[0].location)
        try:
            if self._batch(union) is None:
                return []
            model = self._counter_model(union)
        except _Slow:  # decided one by one, then over those that fail
            pending = [c for c in pending if self._counter_model(c.cond) is not None]
            union = Any_(tuple(candidate.cond for candidate in pending))
            model = self._counter_model(union) if pending else None
        if model is None:
            return []
        at = All((self.base, Cmp(Rel.EQ, Var(WORLD), Const(model.world))))
        culprit = next(
            (c for c in pending if model_of(All((at, c.cond)), deadline=self.deadline)),
            pending[0],
        )
        locations = tuple(dict.fromkeys(t.location for t in culprit.templates))
        if culprit.where is not None:
            locations = (culprit.where,)
        return [
            Failure(obligation=culprit.obligation, model=model, locations=locations, cond=union)
        ]

    def _check_clock(self, obligation: Obligation, where: SourceLocation | None) -> None:
        clock.check(self.deadline, f"proving every P ({obligation.value})", where)

    def _counter_model(self, cond: Cond) -> CounterModel | None:
        return counter_model(All((self.base, cond)), self.low, deadline=self.deadline)

    def _batch(self, cond: Cond) -> CounterModel | None:
        """Some model of all candidates at once, or None; unknown (past `BATCH_RLIMIT`)
        raises `_Slow`: each candidate is then decided on its own."""
        try:
            return model_of(All((self.base, cond)), deadline=self.deadline, rlimit=BATCH_RLIMIT)
        except BudgetUsedUp:
            raise
        except Undecided:
            raise _Slow from None

    def _bounds(self) -> Iterator[_Candidate]:
        for check in self.protocol.checks:
            cond = All((check.guard, Not(check.holds)))
            yield _Candidate(
                obligation=Obligation.BOUNDS, cond=cond, templates=(), where=check.location
            )

    def _feeders(self, wait_template: Template) -> list[Template]:
        """The writers that may touch the wait's cell: the others provably cannot."""
        wait = _instance(wait_template, "w", "w")
        return [
            writer
            for writer in self.writers
            if not self.exclusive(writer, wait_template)
            and not _false(_overlap(_instance(writer, "x", "x"), wait, "o"))
        ]

    def _unique_writer(self, wait_template: Template) -> Iterator[_Candidate]:
        wait = _instance(wait_template, "w", "w")
        feeders = self._feeders(wait_template)
        for x, y in itertools.combinations_with_replacement(feeders, 2):
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
            yield from self._candidate(Obligation.UNIQUE_WRITER, both, wait_template, x, y)
        for writer_template in feeders:
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
            yield from self._candidate(
                Obligation.UNIQUE_WRITER, cond, wait_template, writer_template
            )

    def _wait_value(self, wait_template: Template) -> Iterator[_Candidate]:
        wait = _instance(wait_template, "w", "w")
        for notify_template in self.notifies:
            notify = _instance(notify_template, "n", "n")
            good = All((_fails_at_zero(wait), _passes(wait, notify), _held_exactly(wait, notify)))
            cond = All(
                (
                    wait.guard,
                    notify.guard,
                    _same_cell(notify, wait),
                    _may_feed(notify, wait),
                    Not(good),
                )
            )
            yield from self._candidate(Obligation.WAIT_VALUE, cond, wait_template, notify_template)

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

    def _counted(self, wait_template: Template) -> Iterator[_Candidate]:
        """The cell is fed by exactly one AtomicAdd 1 from every rank but the waiting one,
        and the wait is for N - 1 of them: it passes once all have landed."""
        wait = _instance(wait_template, "w", "w")
        feeders = self._feeders(wait_template)
        for writer_template in feeders:
            writer = _instance(writer_template, "x", "x")
            feeds = (writer.guard, _overlap(writer, wait, "o"), _may_feed(writer, wait))
            one = _is_increment(writer, wait)
            improper = Any_((Not(one), Cmp(Rel.EQ, writer.rank, wait.rank)))
            yield from self._counter(All((wait.guard, *feeds, improper)), wait, writer_template)
        for x, y in itertools.combinations_with_replacement(feeders, 2):
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

    def _counter(self, cond: Cond, wait: _Instance, *others: Template) -> Iterator[_Candidate]:
        yield from self._candidate(Obligation.UNIQUE_WRITER, cond, wait.template, *others)

    def _notify_exists(self, wait_template: Template) -> Iterator[_Candidate]:
        wait = _instance(wait_template, "w", "w")
        cond = All((wait.guard, _fails_at_zero(wait), Not(self._notifier(wait, "m"))))
        yield from self._candidate(Obligation.NOTIFY_EXISTS, cond, wait_template)

    def _no_circular_wait(self) -> Iterator[Failure]:
        """Waits ordered by code position alone, or else by rank first: either order is
        well-founded, and under it a wait needs only notifies behind earlier waits."""
        failures = self._refutations(self._circular(ranks=False))
        if failures:
            yield from self._both(failures, self._refutations(self._circular(ranks=True)))

    def _circular(self, *, ranks: bool) -> Iterator[_Candidate]:
        for wait_template, notify_template, earlier_template in itertools.product(
            self.waits, self.notifies, self.waits
        ):
            if self.exclusive(wait_template, notify_template, earlier_template):
                continue
            wait = _instance(wait_template, "w", "w")
            notify = _instance(notify_template, "n", "n")
            earlier = _instance(earlier_template, "v", "n")
            earlier_than_wait = _lex(
                earlier, wait, earlier_template.position, wait_template.position, ranks=ranks
            )
            cond = All(
                (
                    wait.guard,
                    notify.guard,
                    earlier.guard,
                    _same_cell(notify, wait),
                    _may_feed(notify, wait),
                    _before(earlier, notify),
                    Not(earlier_than_wait),
                )
            )
            yield from self._candidate(
                Obligation.NO_CIRCULAR_WAIT, cond, wait_template, earlier_template
            )

    def _may_signal(self, notify: Template, wait: Template) -> bool:
        """Whether the notify may target the wait's cell (not provably another cell)."""
        key = (id(notify), id(wait))
        if key not in self.signals:
            cell = _same_cell(_instance(notify, "n", "n"), _instance(wait, "w", "w"))
            self.signals[key] = not _false(cell)
        return self.signals[key]

    def _chain(self, first: _Instance, second: _Instance, tag: str) -> Cond:
        """Some notify after `first` on its rank — or `first` itself, a notify (a count
        published with a Set and read back after the wait for it) — feeds a wait before
        `second` on its rank."""
        options = []
        notifies = [
            (index, notify)
            for index, notify in enumerate(self.notifies)
            if not self.exclusive(first.template, notify, second.template)
        ]
        waits = [
            (index, wait)
            for index, wait in enumerate(self.waits)
            if not self.exclusive(first.template, wait, second.template)
        ]
        for (n_index, notify_template), (w_index, wait_template) in itertools.product(
            notifies, waits
        ):
            if self.exclusive(notify_template, wait_template) or not self._may_signal(
                notify_template, wait_template
            ):
                continue
            notify = _instance(notify_template, f"{tag}n{n_index}", "a")
            notify = _Instance(
                template=notify.template,
                names={**notify.names, notify_template.rank: first.names[first.template.rank]},
                rank=first.rank,
            )
            wait = _on_rank_of(second, wait_template, f"{tag}w{w_index}")
            body = All(
                (
                    notify.guard,
                    wait.guard,
                    _before(first, notify),
                    _before(wait, second),
                    _same_cell(notify, wait),
                )
            )
            if not _false(body):
                options.append(Exists((*notify.loop_names, *wait.loop_names), body))
        for w_index, wait_template in waits if first.template.effect is Effect.NOTIFY else ():
            if not self._may_signal(first.template, wait_template):
                continue
            wait = _on_rank_of(second, wait_template, f"{tag}s{w_index}")
            body = All((wait.guard, _before(wait, second), _same_cell(first, wait)))
            if not _false(body):
                options.append(Exists(wait.loop_names, body))
        return Any_(tuple(options))

    def _ordered(self) -> Iterator[_Candidate]:
        accesses = [t for t in self.protocol.templates if t.effect is not Effect.WAIT]
        accesses += self.waits
        for left, right in itertools.combinations_with_replacement(accesses, 2):
            if not _conflicting(left.effect, right.effect) or self.exclusive(left, right):
                continue
            if left.footprint.memory != right.footprint.memory:
                continue
            first, second = _instance(left, "a", "a"), _instance(right, "b", "b")
            overlap = _overlap(first, second, "o")
            if _false(overlap):
                continue
            cond = All(
                (
                    first.guard,
                    second.guard,
                    Cmp(Rel.NE, first.rank, second.rank),
                    overlap,
                    Not(self._chain(first, second, "c")),
                    Not(self._chain(second, first, "d")),
                )
            )
            yield from self._candidate(Obligation.ORDERED, cond, left, right)

    def _parallel(self) -> Iterator[_Candidate]:
        templates = [t for t in self.protocol.templates if _in_parallel(t)]
        for left, right in itertools.combinations_with_replacement(templates, 2):
            signals = {left.effect, right.effect} & {Effect.NOTIFY, Effect.WAIT}
            if not signals and not (
                _conflicting(left.effect, right.effect)
                and left.footprint.memory == right.footprint.memory
            ):
                continue
            first, second = _instance(left, "a", "a"), _instance(right, "b", "b")
            together = _concurrent(first, second)
            if _false(together):
                continue
            clash = TRUE if signals else _overlap(first, second, "o")
            cond = All((first.guard, second.guard, together, clash))
            yield from self._candidate(Obligation.PARALLEL, cond, left, right)


def _either(failures: list[Failure]) -> Cond:
    return Any_(tuple(failure.cond for failure in failures))


def _named_apart(cond: Cond) -> Cond:
    """`cond` with every variable but N renamed: instances of its own."""
    return renamed_cond(cond, {name: f"{name}'" for name in variables(cond) - {WORLD}})


def conflict_situations(protocol: Protocol) -> Iterator[tuple[Cond, SourceLocation]]:
    """For each template that conflicts with itself, the condition under which two of
    its instances (other ranks or other iterations) touch one byte: a situation the
    concrete checks must see, first met at some P (the output row two iterations both
    write, say)."""
    for template in protocol.templates:
        if not _conflicting(template.effect, template.effect):
            continue
        first, second = _instance(template, "a", "a"), _instance(template, "b", "b")
        overlap = _overlap(first, second, "o")
        if not _false(overlap):
            cond = All((first.guard, second.guard, _distinct(first, second), overlap))
            yield cond, template.location


def _in_parallel(template: Template) -> bool:
    return any(isinstance(item, LoopItem) and item.parallel for item in template.position)


def _concurrent(first: _Instance, second: _Instance) -> Cond:
    """The two instances are on one rank, in different iterations of one `pl.parallel`
    loop (and in the same iteration of every loop around it)."""
    options: list[Cond] = []
    same: list[Cond] = []
    for a, b in zip(first.template.position, second.template.position, strict=False):
        if not (isinstance(a, LoopItem) and isinstance(b, LoopItem) and a.slot == b.slot):
            break
        index, other = Var(first.names[a.var]), Var(second.names[b.var])
        if a.parallel:
            options.append(All((*same, Cmp(Rel.NE, index, other))))
        same.append(Cmp(Rel.EQ, index, other))
    return Any_(tuple(options))


def _false(cond: Cond) -> bool:
    """Syntactically unsatisfiable: a conjunction with a false part, or an empty
    disjunction (no solver call needed)."""
    if isinstance(cond, All):
        return any(_false(part) for part in cond.parts)
    if isinstance(cond, Any_):
        return all(_false(part) for part in cond.parts)
    return False


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


def _held_exactly(wait: _Instance, notify: _Instance) -> Cond:
    """The notify's value and the wait's threshold are int32 numbers: the device casts
    others to the i32 cell (docs/model.md), which the unbounded integers here do not
    (`int32_for_ranks`)."""
    expected = wait.expr(wait.template.value or Const(0))
    value = notify.expr(notify.template.value or Const(0))
    return int32_for_ranks(expected, value)


def _passes(wait: _Instance, notify: _Instance) -> Cond:
    expected = wait.expr(wait.template.value or Const(0))
    value = notify.expr(notify.template.value or Const(0))
    if notify.template.notify_op not in (NotifyOp.ATOMIC_ADD, NotifyOp.SET):
        return FALSE
    if wait.template.cmp is WaitCmp.EQ:
        return Cmp(Rel.EQ, value, expected)
    return Cmp(Rel.LE, expected, value)
