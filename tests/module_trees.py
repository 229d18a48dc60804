"""racecheck's modules, each parsed once per test process: the layering test
(tests/test_layers.py) and the one-home test of prose (tests/test_one_home.py) walk the
same trees."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "racecheck"


@functools.cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())
