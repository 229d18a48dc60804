"""The layout is the data path: every module imports only from its own stage or the
stages before it (types → DSL → load → co-simulate → decide → analyse → execute the
reference → pipeline → report → CLI)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "racecheck"

STAGES: tuple[tuple[str, ...], ...] = (
    ("racecheck.events", "racecheck.errors", "racecheck.findings", "racecheck.options"),
    ("racecheck.describe",),
    ("racecheck.dsl",),
    ("racecheck.load",),
    ("racecheck.cosim",),
    ("racecheck.engines", "racecheck.hb", "racecheck.allp"),
    ("racecheck.analysis",),
    ("racecheck.models", "racecheck.reference"),
    ("racecheck.check", "racecheck.export"),
    ("racecheck.report",),
    ("racecheck.cli", "racecheck.__main__", "racecheck"),
)


def stage_of(module: str) -> int:
    best = None
    for number, prefixes in enumerate(STAGES):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                length = len(prefix)
                if best is None or length > best[1]:
                    best = (number, length)
    assert best is not None, f"{module} belongs to no stage; add it to STAGES"
    return best[0]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "racecheck":
                found.update(f"racecheck.{alias.name}" for alias in node.names)
            elif node.module.startswith("racecheck."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("racecheck"))
    return found


MODULES = sorted(
    path for path in PACKAGE.rglob("*.py") if "models" not in path.relative_to(PACKAGE).parts
)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_module_imports_point_downstream_only(path: Path) -> None:
    importer = module_name(path)
    for imported in imported_modules(path):
        assert stage_of(imported) <= stage_of(importer), (
            f"{importer} (stage {stage_of(importer)}) imports {imported}"
            f" (stage {stage_of(imported)}), a later stage"
        )
