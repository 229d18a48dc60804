"""Imports of the user's own project modules while a file loads (docs/guide.md).

PyPTO's tests import their helpers by repository-rooted names
(`from tests.st.distributed.l3_gemm import build_l3_gemm_program`), which resolve
only when run from the repository root. While racecheck loads a file, an absolute
import whose top-level package is a directory the file lies in is served from that
directory's parent, ahead of any other module of that name (a top-level package
importable elsewhere, such as racecheck's own `tests`, keeps its meaning; its
submodules found in the project are still served). As for `python file.py`, modules
next to the file are importable by their plain names too. The modules served are registered
as user files, so events and findings inside them name their own lines, and
`forget_project_modules` removes them from `sys.modules` when the check ends.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from racecheck.dsl.location import register_user_file

_served: set[str] = set()


def _roots(path: str) -> dict[str, list[str]]:
    """Each directory name on the file's path → the directories holding one, innermost first."""
    roots: dict[str, list[str]] = {}
    directory = os.path.dirname(os.path.abspath(path))
    while os.path.dirname(directory) != directory:
        parent = os.path.dirname(directory)
        roots.setdefault(os.path.basename(directory), []).append(parent)
        directory = parent
    return roots


class _ProjectFinder(importlib.abc.MetaPathFinder):
    def __init__(self, path: str) -> None:
        self._roots = _roots(path)
        self._own = os.path.dirname(os.path.abspath(path))

    def find_spec(
        self, fullname: str, path: object, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if "." not in fullname and importlib.machinery.PathFinder.find_spec(fullname):
            return None  # a top-level name found elsewhere keeps its meaning
        for base in (*self._roots.get(fullname.split(".", 1)[0], ()), self._own):
            spec = _spec_under(base, fullname)
            if spec is not None:
                _served.add(fullname)
                return spec
        return None


def _spec_under(base: str, fullname: str) -> importlib.machinery.ModuleSpec | None:
    location = os.path.join(base, *fullname.split("."))
    if os.path.isdir(location):
        init = os.path.join(location, "__init__.py")
        if os.path.isfile(init):
            register_user_file(init, init)
            return importlib.util.spec_from_file_location(
                fullname, init, submodule_search_locations=[location]
            )
        spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
        spec.submodule_search_locations = [location]  # a namespace package
        return spec
    if os.path.isfile(f"{location}.py"):
        register_user_file(f"{location}.py", f"{location}.py")
        return importlib.util.spec_from_file_location(fullname, f"{location}.py")
    return None


@contextmanager
def project_imports(path: str) -> Iterator[None]:
    """Serve the project's own modules to imports made while the block runs."""
    finder = _ProjectFinder(path)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def project_module_names() -> frozenset[str]:
    return frozenset(_served)


def forget_project_modules() -> None:
    for name in _served:
        sys.modules.pop(name, None)
    _served.clear()
