"""`--jobs N`: independent units of a check run in N worker processes, their results
returned in the order of the units, so the report does not depend on N.

The workers are forked when a check begins, before its `Session` is entered: they start
from the process as it is between checks — no racecheck `pypto` module installed, no
user module loaded, no cache of the check — and each unit enters a session of its own.
Forking then costs milliseconds (a fresh interpreter per worker, as 'spawn' and
'forkserver' start, costs a few tenths of a second of imports) and does not run the
caller's `__main__` again. A unit and its function must be picklable (a module-level
function). Without 'fork' (Windows) there are no workers: every unit runs in the one
process. A worker ignores SIGINT; a parent that stops early (an error, an interrupt)
ends its workers instead of waiting for the units they are running.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from types import TracebackType
from typing import TypeVar

Unit = TypeVar("Unit")
Result = TypeVar("Result")


class Workers:
    """`jobs` worker processes while entered (none for one job)."""

    def __init__(self, jobs: int) -> None:
        self._jobs = jobs
        self._executor: ProcessPoolExecutor | None = None

    @property
    def parallel(self) -> bool:
        return self._executor is not None

    def map(self, function: Callable[[Unit], Result], units: Sequence[Unit]) -> Iterator[Result]:
        """`function` of each unit, computed by the workers, in the units' order."""
        if self._executor is None:
            raise RuntimeError("Workers.map outside `with`, or with one job")
        return self._executor.map(function, units)

    def __enter__(self) -> Workers:
        if self._jobs > 1 and "fork" in multiprocessing.get_all_start_methods():
            for stream in (sys.stdout, sys.stderr):
                stream.flush()  # a forked worker flushes its copy of the buffers on exit
            self._executor = ProcessPoolExecutor(
                max_workers=self._jobs,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_ignore_interrupts,
            )
            # With 'fork', the first task forks every worker: now, before the session.
            self._executor.submit(os.getpid).result()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        if error is None:
            executor.shutdown(wait=True)
            return
        processes = list(executor._processes.values())  # no public way to stop a running unit
        executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        for process in processes:
            process.join()


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
