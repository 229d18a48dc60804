"""The layout is the data path: every module imports only from its own stage or the
stages before it (types → DSL → load → co-simulate → decide → analyse → execute the
reference → pipeline → report → CLI), modules of one stage import each other without
cycles (every import counts: deferred into a function or under `TYPE_CHECKING`), and z3
stays inside the solver modules."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from module_trees import PACKAGE, tree

STAGES: tuple[tuple[str, ...], ...] = (
    (
        "racecheck.cells",
        "racecheck.report.reasons",  # the wording of reasons: a leaf every stage reads
        "racecheck.conflicts",
        "racecheck.events",
        "racecheck.errors",
        "racecheck.findings",
        "racecheck.options",
        "racecheck.rounds",  # what --rounds and --per-call mean (options validate them)
        "racecheck.assumptions",
        "racecheck.model_names",
        "racecheck.config",
        "racecheck.clock",
    ),
    ("racecheck.describe",),
    ("racecheck.dsl",),
    (
        "racecheck.load",
        "racecheck.session",
        "racecheck.project_imports",
        "racecheck.while_loops",
        "racecheck.file_goldens",
        "racecheck.file_harness",
        "racecheck.torch_shapes",
    ),
    ("racecheck.cosim",),
    ("racecheck.engines", "racecheck.allp"),
    ("racecheck.analysis", "racecheck.steering", "racecheck.symbolic_inputs"),
    ("racecheck.models", "racecheck.reference"),
    ("racecheck.judge", "racecheck.gate"),
    (
        "racecheck.stages",
        "racecheck.pipeline",
        "racecheck.paths",
        "racecheck.export",
        "racecheck.workers",
    ),
    ("racecheck.report",),
    ("racecheck.cli", "racecheck.__main__", "racecheck", "racecheck.pytest_plugin"),
)

SOLVER_HOMES = frozenset(
    {
        "racecheck.engines.smt",
        "racecheck.engines.inputs_smt",
        "racecheck.allp.solver",
        "racecheck.engines.solving",
    }
)
"""The solver modules: orderings (the smt engine), concolic input choice, all-P proofs,
and z3's budgets (`engines.solving`)."""


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


MODULES = sorted(PACKAGE.rglob("*.py"))
NAMES = {module_name(path) for path in MODULES}


def _base_of(node: ast.ImportFrom, importer: Path) -> str:
    """The absolute module an import-from names, relative imports resolved."""
    if node.level == 0:
        return node.module or ""
    package = module_name(importer).split(".")
    if importer.name != "__init__.py":
        package = package[:-1]
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def _names(node: ast.Import | ast.ImportFrom, path: Path) -> Iterator[str]:
    """The modules one import statement names; `from p import m` names p.m when m is a
    module of the package."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = _base_of(node, path)
    for alias in node.names:
        yield submodule if (submodule := f"{base}.{alias.name}") in NAMES else base


def _imports(path: Path) -> Iterator[str]:
    """Every module `path` imports, anywhere in its body."""
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _names(node, path)


def imported_modules(path: Path) -> set[str]:
    """The racecheck modules `path` imports."""
    return {name for name in _imports(path) if name.split(".")[0] == "racecheck"}


GRAPH = {module_name(path): imported_modules(path) - {module_name(path)} for path in MODULES}
"""Every import counts for cycles: one deferred into a function or kept for the type
checker is still a dependency, only hidden."""


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_module_imports_point_downstream_only(path: Path) -> None:
    importer = module_name(path)
    for imported in imported_modules(path):
        assert stage_of(imported) <= stage_of(importer), (
            f"{importer} (stage {stage_of(importer)}) imports {imported}"
            f" (stage {stage_of(imported)}), a later stage"
        )


def _cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A chain of import-time imports from `start` back to itself within its stage."""
    stage = stage_of(start)
    stack = [(start, [start])]
    seen = set()
    while stack:
        module, chain = stack.pop()
        for imported in sorted(graph.get(module, ())):
            if imported == start:
                return [*chain, start]
            if imported not in seen and stage_of(imported) == stage:
                seen.add(imported)
                stack.append((imported, [*chain, imported]))
    return None


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_cycle_within_a_stage(module: str) -> None:
    cycle = _cycle_from(module, GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_the_cycle_finder_finds_a_cycle_and_ignores_a_chain() -> None:
    chain = {"racecheck.dsl.a": {"racecheck.dsl.b"}, "racecheck.dsl.b": {"racecheck.dsl.c"}}
    assert _cycle_from("racecheck.dsl.a", chain) is None
    looped = {**chain, "racecheck.dsl.c": {"racecheck.dsl.a"}}
    assert _cycle_from("racecheck.dsl.a", looped) == [
        "racecheck.dsl.a",
        "racecheck.dsl.b",
        "racecheck.dsl.c",
        "racecheck.dsl.a",
    ]


def test_relative_imports_resolve_to_their_package() -> None:
    compare = PACKAGE / "models" / "compare.py"
    assert "racecheck.models.catalog" in imported_modules(compare)
    init = PACKAGE / "models" / "__init__.py"
    assert {"racecheck.models.catalog", "racecheck.models.compare"} <= imported_modules(init)


def test_deferred_and_type_checking_imports_count_for_cycles() -> None:
    rank = PACKAGE / "cosim" / "rank.py"
    assert "racecheck.cosim.turns" in GRAPH["racecheck.cosim.rank"]  # under TYPE_CHECKING
    json_renderer = "racecheck.report.json"  # deferred into render()
    assert json_renderer in GRAPH["racecheck.report"]
    assert "racecheck.cosim.scheduler" not in imported_modules(rank)


def test_the_golden_models_are_a_real_package_directory() -> None:
    models = PACKAGE / "models"
    assert not models.is_symlink()
    assert (models / "__init__.py").is_file()
    assert "racecheck.models" in GRAPH["racecheck.reference"]


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_z3_is_imported_only_by_the_solver_modules(path: Path) -> None:
    uses_z3 = any(name.split(".")[0] == "z3" for name in _imports(path))
    assert uses_z3 == (module_name(path) in SOLVER_HOMES), module_name(path)


REPORT_READS_ONLY = (
    "racecheck.events",
    "racecheck.findings",
    "racecheck.report",
    "racecheck.errors",
)


@pytest.mark.parametrize(
    "path",
    [path for path in MODULES if module_name(path).startswith("racecheck.report")],
    ids=lambda path: module_name(path),
)
def test_report_layer_reads_findings_not_analysis_internals(path: Path) -> None:
    """Findings are data: the renderers word them without reaching into the analysis."""
    for imported in imported_modules(path):
        assert imported.startswith(REPORT_READS_ONLY), f"{module_name(path)} imports {imported}"
