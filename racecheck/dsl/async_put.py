"""`pld.tensor.put_async`, `pld.system.async_session`, `pld.system.wait_async_event`.

PyPTO's asynchronous put (docs/model.md#asynchronous-put) issues an SDMA transfer of
the local `src` into the peer's `dst` and returns at once; the transfer reads and
writes its bytes at some point before `wait_async_event(event, session)` returns,
which drains it, and only a notify after that wait publishes the data. racecheck
records the transfer's read and write, at the put_async line, when the wait drains
it: the latest point the transfer can land. That is every execution only while the
rank neither waits on a signal nor touches the transfer's bytes between the issue and
the drain (a wait could order a peer's access before the late placement that the
early one races with); such a kernel, a transfer never drained, or one drained
through another session, is refused.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from racecheck.dsl import dist_ops
from racecheck.dsl.context import RankContextProxy, current, is_rank_context, rank_context
from racecheck.dsl.local_ops import require_view
from racecheck.dsl.location import attributed, unsupported, user_location
from racecheck.events import AccessMode, Event, EventKind, SourceLocation
from racecheck.report.reasons import ReasonCode, reason

LABEL = "pld.tensor.put_async"
SYNC_IDS = range(8)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AsyncSession:
    """`pld.system.async_session()`: the SDMA session a kernel's transfers run on."""

    sync_id: int


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class AsyncEvent:
    """One issued transfer: `transfer` performs it; `issued` counts the rank's events
    before it. It is pending (in `_pending`) until its wait drains it."""

    session: AsyncSession
    location: SourceLocation
    issued: int
    transfer: Callable[[], None]


_pending: weakref.WeakKeyDictionary[object, list[AsyncEvent]] = weakref.WeakKeyDictionary()
"""The transfers in flight, by rank (its innermost context: the same under any wrapper,
a `pl.parallel` iteration or a group's numbering)."""


def _in_flight(context: object) -> list[AsyncEvent]:
    while isinstance(context, RankContextProxy):
        context = context.inner
    return _pending.setdefault(context, [])


def async_session(*, sync_id: int = 0, block_bytes: int = 0) -> AsyncSession:
    rank_context("pld.system.async_session")
    if sync_id not in SYNC_IDS:
        raise unsupported(reason(ReasonCode.ASYNC_SYNC_ID, sync_id=repr(sync_id)))
    return AsyncSession(sync_id=sync_id)


def put_async(dst: object, peer: object, src: object, session: object) -> AsyncEvent:
    context = rank_context(LABEL)
    if not isinstance(session, AsyncSession):
        raise unsupported(reason(ReasonCode.ASYNC_NO_SESSION, label=LABEL, session=repr(session)))
    require_view(src, LABEL, "src")
    dist_ops._window(require_view(dst, LABEL, "dst"), LABEL, "dst")
    event = AsyncEvent(
        session=session,
        location=user_location(),
        issued=len(context.events),
        transfer=lambda: dist_ops._transfer(
            LABEL, dst, src, "local", peer, (None, None, None), accumulate=False
        ),
    )
    _in_flight(context).append(event)
    return event


def wait_async_event(event: object, session: object) -> bool:
    context = rank_context("pld.system.wait_async_event")
    pending = _in_flight(context)
    if not isinstance(event, AsyncEvent) or event not in pending:
        raise unsupported(reason(ReasonCode.ASYNC_NOT_PENDING, event=repr(event)))
    if session is not event.session:
        raise unsupported(reason(ReasonCode.ASYNC_OTHER_SESSION, line=event.location.line))
    between = list(context.events[event.issued :])
    with attributed(event.location):
        event.transfer()
    transfer = context.events[event.issued + len(between) :]
    if len(transfer) == 2:  # the cube lane of a mixed kernel records no transfer
        _check_window(event, between, transfer[0], transfer[1])
    pending.remove(event)
    return True


def _check_window(event: AsyncEvent, between: list[Event], read: Event, write: Event) -> None:
    """Refuse what the late placement of the transfer would not check exactly."""
    for other in between:
        if other.kind is EventKind.WAIT:
            why = reason(
                ReasonCode.ASYNC_WAIT_IN_FLIGHT, line=other.location.line, put=event.location.line
            )
            raise unsupported(why, other.location)
        if other.access is None:
            continue
        hits_read = other.mode is not AccessMode.READ and other.access.overlaps(read.access)  # type: ignore[arg-type]
        if hits_read or other.access.overlaps(write.access):  # type: ignore[arg-type]
            why = reason(
                ReasonCode.ASYNC_TOUCH_IN_FLIGHT, line=other.location.line, put=event.location.line
            )
            raise unsupported(why, other.location)


@contextmanager
def drained_by_the_end() -> Iterator[None]:
    """A kernel drains every transfer it issues: one still in flight at its end is refused."""
    context = current()
    if context is None or not is_rank_context(context):
        yield
        return
    before = list(_in_flight(context))
    yield
    left = [event for event in _in_flight(context) if event not in before]
    if left:
        why = reason(ReasonCode.ASYNC_NEVER_DRAINED, line=left[0].location.line)
        raise unsupported(why, left[0].location)
