"""One check's process-wide state, created per check and undone on exit.

Checking a file changes the process: racecheck's `pypto` modules are installed in
`sys.modules` (and `os._exit` raises), the user's file is registered so events find
their source lines (with a cache of those lines), and the user's module is entered in
`sys.modules` (dataclasses and pickling look modules up there). A `Session` owns all
of it for one check: whatever the check raises, leaving the session uninstalls the
modules, forgets the files it registered and removes the modules it loaded (the
user's file and the project modules it imported), so the
next check in the same process (the Python API, a test suite) starts clean.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from types import TracebackType

from racecheck.dsl.location import forget_user_files, user_files
from racecheck.dsl.modules import installed
from racecheck.load import USER_MODULE_PREFIX
from racecheck.project_imports import forget_project_modules


class Session:
    def __init__(self) -> None:
        self._installed: AbstractContextManager[None] = installed()
        self._files: frozenset[str] = frozenset()
        self._modules: frozenset[str] = frozenset()

    def __enter__(self) -> Session:
        self._installed.__enter__()
        self._files = user_files()
        self._modules = frozenset(sys.modules)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        forget_user_files(user_files() - self._files)
        forget_project_modules()
        for name in set(sys.modules) - self._modules:
            if name.startswith(USER_MODULE_PREFIX):
                del sys.modules[name]
        self._installed.__exit__(kind, error, traceback)
