"""When two accesses conflict: the relations racecheck decides, of different strictness
because they answer different questions, each with one home and named in `RELATIONS`.

The two on recorded events live here; the others are stated over their own stage's
records (every-P templates, sync-program steps, written bytes) and live with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from racecheck.events import AccessMode, Event, EventKind, NotifyOp


def modes_conflict(first: AccessMode | None, second: AccessMode | None) -> bool:
    """`modes`: two accesses to shared bytes, by their modes only, conflict unless both
    read or both are atomic (an unknown mode conflicts with everything)."""
    if first is None or second is None or AccessMode.WRITE in (first, second):
        return True
    return first is not second  # a plain read against an atomic access


def writes(event: Event) -> bool:
    """The event changes the bytes it accesses (a wait's atomic access only reads)."""
    return event.mode is AccessMode.WRITE or (
        event.mode is AccessMode.ATOMIC and event.kind is not EventKind.WAIT
    )


def race_conflict(a: Event, b: Event) -> bool:
    """`race`: two accesses to shared bytes by different ranks race when neither order
    is harmless: one writes, and they are not two atomics; two Sets race only with
    different values, and a Set races with any other write except a wait's read."""
    if not (writes(a) or writes(b)):
        return False
    set_a, set_b = _set_value(a), _set_value(b)
    if set_a is not None and set_b is not None:
        return set_a != set_b
    if (set_a is not None or set_b is not None) and EventKind.WAIT not in (a.kind, b.kind):
        return True
    return not (a.mode is AccessMode.ATOMIC and b.mode is AccessMode.ATOMIC)


def _set_value(event: Event) -> int | None:
    """The value of a Set notify; None for every other event."""
    if event.notify is None or event.notify.op is not NotifyOp.SET:
        return None
    return event.notify.value


@dataclass(frozen=True, slots=True, kw_only=True)
class Relation:
    name: str
    home: str  # module:function
    question: str


RELATIONS = (
    Relation(
        name="modes",
        home="racecheck.conflicts:modes_conflict",
        question="must two tasks or two pl.parallel iterations that share bytes keep"
        " their order (both atomic is never a conflict)",
    ),
    Relation(
        name="race",
        home="racecheck.conflicts:race_conflict",
        question="is an unordered pair of accesses of different ranks a race (Set values"
        " and wait reads refine `modes`)",
    ),
    Relation(
        name="every-P",
        home="racecheck.allp.obligations:_conflicting",
        question="must two event templates be ordered for every P (one writes, one is"
        " plain: atomics commute)",
    ),
    Relation(
        name="sync steps",
        home="racecheck.engines.syncprogram:conflict",
        question="are two sync-program steps on one cell dependent for partial-order"
        " reduction (int32 adds commute, wrap-around included)",
    ),
    Relation(
        name="commuting writes",
        home="racecheck.steering:_commute",
        question="do both orders of two writes leave the same bytes (equal Sets, or integer adds)",
    ),
)
"""The conflict relations, strictest question last."""
