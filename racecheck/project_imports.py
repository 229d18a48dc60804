"""Imports of the user's own project modules while a file loads (docs/guide.md).

PyPTO's tests import their helpers by repository-rooted names
(`from tests.st.distributed.l3_gemm import build_l3_gemm_program`), which resolve
only when run from the repository root. While racecheck loads a file, an absolute
import whose top-level package is a directory the file lies in is served from that
directory's parent, ahead of any other module of that name (a top-level package
importable elsewhere, such as racecheck's own `tests`, keeps its meaning; its
submodules found in the project are still served). As for `python file.py`, modules
next to the file are importable by their plain names too, and so is every module under the
project root: the nearest parent directory holding `pyproject.toml` or `.git`, or the
directory `--import-root` names (pypto-lib's models import `from golden import ...`). The
modules served are registered as user files, so events and findings inside them name their
own lines, and `forget_project_modules` removes them from `sys.modules` when the check ends.

`ImportConfig` is what the file's import sees besides its files: its own command line
(`sys.argv[1:]`, `--argv`) and environment variables (`--env`), either of which may hold
`{P}` for the rank count; such a file is imported afresh, with its project modules, at
each P (`racecheck.load`), because a model library fixes P in its shapes at import.
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
from racecheck.options import ImportConfig

_served: set[str] = set()
_roots_used: set[str] = set()  # project roots that served a module (for the report)
_ROOT_MARKERS = ("pyproject.toml", ".git")


def describe_import(config: ImportConfig, path: str) -> tuple[str, ...]:
    """What the file was imported with, for the report: one line per setting."""
    lines = []
    if config.argv:
        lines.append(f"argv: {' '.join(config.argv)}")
    lines += [f"env: {name}={value}" for name, value in config.env]
    root = project_root(path, config.import_root)
    if root is not None and (config.import_root is not None or root in _roots_used):
        lines.append(f"import root: {root}")
    return tuple(lines)


def project_root(path: str, import_root: str | None = None) -> str | None:
    """`import_root`, else the nearest parent of `path` holding pyproject.toml or .git."""
    if import_root is not None:
        return os.path.abspath(import_root)
    directory = os.path.dirname(os.path.abspath(path))
    while True:
        if any(os.path.exists(os.path.join(directory, mark)) for mark in _ROOT_MARKERS):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


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
    def __init__(self, path: str, import_root: str | None) -> None:
        self._roots = _roots(path)
        self._own = os.path.dirname(os.path.abspath(path))
        root = project_root(path, import_root)
        self._root = root
        self._bases = (self._own,) if root is None or root == self._own else (self._own, root)

    def find_spec(
        self, fullname: str, path: object, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if "." not in fullname and importlib.machinery.PathFinder.find_spec(fullname):
            return None  # a top-level name found elsewhere keeps its meaning
        for base in (*self._roots.get(fullname.split(".", 1)[0], ()), *self._bases):
            spec = _spec_under(base, fullname)
            if spec is not None:
                _served.add(fullname)
                if base == self._root and base != self._own:
                    _roots_used.add(base)
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
def project_imports(path: str, config: ImportConfig | None = None) -> Iterator[None]:
    """Serve the project's own modules to imports made while the block runs, with the
    file's command line and environment in place (both restored afterwards)."""
    config = config or ImportConfig()
    finder = _ProjectFinder(path, config.import_root)
    sys.meta_path.insert(0, finder)
    saved_argv, saved_env = sys.argv, dict(os.environ)
    sys.argv = [os.path.abspath(path), *config.argv]
    os.environ.update(dict(config.env))
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)


def project_module_names() -> frozenset[str]:
    return frozenset(_served)


def forget_project_modules(*, between_imports: bool = False) -> None:
    """Remove the served modules from `sys.modules`; `between_imports`: the same check
    imports the file again (at another P), so what it was imported with is kept."""
    for name in _served:
        sys.modules.pop(name, None)
    _served.clear()
    if not between_imports:
        _roots_used.clear()
