"""`--jobs N`: independent units of a check run in N worker processes, their results
returned in the order of the units, so the report does not depend on N.

The workers are forked when a check first has several units to run (a check of one
unit, most of them, forks none: a pool costs a fork and a teardown of two processes,
about 0.15 s, for nothing). They start from the process as it is then, inside the
check's `Session`, exactly as the units would run in this process; each unit enters a
session of its own and imports the file afresh. A fork while one of racecheck's own
threads is alive (a user function stuck past `--timeout`, which may hold a lock the
child would wait on forever) is not made: the units run here instead. Forking costs
milliseconds (a fresh interpreter per worker, as 'spawn' and 'forkserver' start, costs
a few tenths of a second of imports) and does not run the caller's `__main__` again. A
unit and its function must be picklable (a module-level function). Without 'fork'
(Windows) there are no workers: every unit runs in the one process. A worker ignores
SIGINT; a parent that stops early (an error, an interrupt) ends its workers instead of
waiting for the units they are running.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from types import TracebackType
from typing import TypeVar

Unit = TypeVar("Unit")
Result = TypeVar("Result")


class Workers:
    """Up to `jobs` worker processes while entered, forked by the first `map`."""

    def __init__(self, jobs: int) -> None:
        self._jobs = jobs
        self._executor: ProcessPoolExecutor | None = None

    @property
    def parallel(self) -> bool:
        return self._jobs > 1 and "fork" in multiprocessing.get_all_start_methods()

    def map(self, function: Callable[[Unit], Result], units: Sequence[Unit]) -> Iterator[Result]:
        """`function` of each unit, computed by the workers, in the units' order."""
        if not self.parallel:
            raise RuntimeError("Workers.map with one job")
        if self._executor is None:
            if _racecheck_threads_alive():
                return map(function, units)
            for stream in (sys.stdout, sys.stderr):
                stream.flush()  # a forked worker flushes its copy of the buffers on exit
            self._executor = ProcessPoolExecutor(
                max_workers=self._jobs,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_start_worker,
            )
        return self._executor.map(function, units)

    def __enter__(self) -> Workers:
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


def _racecheck_threads_alive() -> bool:
    return any(thread.name.startswith("racecheck-") for thread in threading.enumerate())


_REAL_EXIT = os._exit  # a check's session makes os._exit raise; a worker must really exit


def _start_worker() -> None:
    """In a worker as it starts: SIGINT ignored, and `os._exit` the real one again
    (forked inside a session, the worker would otherwise raise where it must exit and
    unwind into its copy of the parent's stack)."""
    os._exit = _REAL_EXIT
    signal.signal(signal.SIGINT, signal.SIG_IGN)
