"""User code under a time limit: it runs on a worker thread that is interrupted past the
limit, so a file that loops at import, in a factory or in its host entry ends the
check with an error naming the line it was on, never a hang."""

from __future__ import annotations

import ctypes
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from racecheck import clock
from racecheck.dsl.location import innermost_user_frame, location_of
from racecheck.events import SourceLocation
from racecheck.report.reasons import ReasonCode, reason

T = TypeVar("T")

GRACE = 1.0
"""Seconds past `--timeout` that user code stuck in a loop gets before it is cut (and,
interrupted, to unwind): the margin by which a run can outlast `--timeout`."""


class Interrupted(BaseException):
    """Raised inside a worker that ran past its limit; never seen by the caller."""


class Overrun(Exception):
    """The call did not finish in time; `where` is the user line it was on."""

    def __init__(self, where: SourceLocation | None) -> None:
        super().__init__(
            reason(ReasonCode.WATCHDOG_OVERRUN)
            if where is None
            else reason(ReasonCode.WATCHDOG_OVERRUN_AT, where=str(where), text=where.text)
        )
        self.where = where


POLL = 0.05  # seconds between two looks at the clock while user code runs


def within(call: Callable[[], T], seconds: float) -> T:
    """`call()`, or Overrun once `seconds` have passed on racecheck's clock
    (`racecheck.clock`, which tests move). What the call raises is raised here."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = call()
        except Interrupted:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            outcome["error"] = error

    worker = threading.Thread(target=work, name="racecheck-user-code", daemon=True)
    deadline = clock.now() + seconds
    worker.start()
    worker.join(min(max(seconds, 0.001), POLL))
    while worker.is_alive() and not clock.passed(deadline):
        worker.join(POLL)
    if worker.is_alive():
        where = thread_location(worker)
        interrupt(worker, Interrupted)
        worker.join(GRACE)
        raise Overrun(where)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def interrupt(thread: threading.Thread, error: type[BaseException]) -> None:
    """Raise `error` inside `thread` at its next bytecode (a loop without events)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(error)
        )


def thread_location(thread: threading.Thread | None) -> SourceLocation | None:
    """The user's line `thread` is running, if any."""
    if thread is None:
        return None
    frame = sys._current_frames().get(thread.ident or 0)
    user_frame = innermost_user_frame(frame) if frame is not None else None
    return location_of(user_frame) if user_frame is not None else None
