"""The user documentation holds to the tool: every option is documented, the JSON the CLI
prints fits docs/report.schema.json, links resolve, the code cites only docs that ship,
and the pre-commit snippet pins a commit (the repository has no release tags)."""

from __future__ import annotations

import importlib
import io
import json
import re
from pathlib import Path

import jsonschema
import pytest

from racecheck.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCHEMA = json.loads((DOCS / "report.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
EXAMPLES = ROOT / "examples"


def _run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    assert not err.getvalue(), err.getvalue()
    return status, out.getvalue()


def _options(command: str) -> set[str]:
    _, text = _run(command, "--help")
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text)) - {"--help"}


@pytest.mark.parametrize("command", ["verify", "trace", "export"])
def test_every_option_the_help_lists_is_in_the_cli_doc(command: str) -> None:
    documented = set(re.findall(r"`(--[a-z][a-z-]*)", (DOCS / "cli.md").read_text()))
    options = _options(command)
    assert {"--ranks", "--program"} <= options
    assert options <= documented, sorted(options - documented)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


# (example, extra arguments, the finding kinds the JSON must carry)
REPORTS = [
    ("08_allreduce_mesh.py", (), set()),
    ("09_allreduce_mesh_bug_no_barrier.py", (), {"race"}),
    ("65_broadcast_bug_set_add_mix.py", (), {"race"}),
    ("10_allreduce_mesh_bug_double_count.py", ("--expect", "allreduce-sum"), {"wrong-result"}),
    ("18_allgather_bug_threshold.py", (), {"deadlock"}),
    ("03_ring_shift_p2p_bug_negative_peer.py", (), {"out-of-bounds"}),
    (
        "13_allreduce_two_phase_bug_chunk_off.py",
        ("--expect", "allreduce-sum"),
        {"stale-read", "wrong-result"},
    ),
]


@pytest.mark.parametrize(("name", "extra", "kinds"), REPORTS, ids=[r[0] for r in REPORTS])
def test_json_output_of_the_examples_fits_the_schema(
    name: str, extra: tuple[str, ...], kinds: set[str]
) -> None:
    status, text = _run("verify", str(EXAMPLES / name), "--ranks", "3", "--format", "json", *extra)
    document = json.loads(text)
    VALIDATOR.validate(document)
    found = {f["kind"] for result in document["results"] for f in result["findings"]}
    assert found == kinds
    assert document["exit_code"] == status == (1 if kinds else 0)
    assert [result["ranks"] for result in document["results"]] == [3]


def test_json_output_of_an_every_p_proof_fits_the_schema() -> None:
    _, text = _run(
        "verify", str(EXAMPLES / "08_allreduce_mesh.py"), "--ranks", "all", "--format", "json"
    )
    document = json.loads(text)
    VALIDATOR.validate(document)
    (result,) = document["results"]
    assert result["ranks"] == "all" and result["every_p"]["outputs_checked_at"] == list(range(2, 9))


def test_json_output_of_a_skipped_rank_count_fits_the_schema() -> None:
    example = str(EXAMPLES / "13_allreduce_two_phase_bug_chunk_off.py")
    _, text = _run("verify", example, "--ranks", "5", "--format", "json")
    document = json.loads(text)
    VALIDATOR.validate(document)
    assert [result["verdict"] for result in document["results"]] == ["skipped"]
    assert document["results"][0]["message"]


def test_the_schema_rejects_a_report_that_breaks_the_contract() -> None:
    example = str(EXAMPLES / "09_allreduce_mesh_bug_no_barrier.py")
    _, text = _run("verify", example, "--ranks", "2", "--format", "json")
    document = json.loads(text)
    document["results"][0]["verdict"] = "ok"
    assert not VALIDATOR.is_valid(document)
    del document["results"][0]["verdict"]
    assert not VALIDATOR.is_valid(document)
    finding = json.loads(text)
    finding["results"][0]["findings"][0]["locations"][0]["line"] = "47"
    assert not VALIDATOR.is_valid(finding)


MARKDOWN = sorted([ROOT / "README.md", ROOT / "models" / "README.md", *DOCS.glob("*.md")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


SOURCES = sorted(
    path
    for folder in ("racecheck", "examples", "models", "tests", "bench")
    for path in (ROOT / folder).rglob("*.py")
)
UNSHIPPED = re.compile(r"SPEC\.md|SPEC §|RUNTIME\.md|RUNTIME §|DSL\.md|DSL §|/work/shared")


def test_code_cites_only_docs_that_ship() -> None:
    cited = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in SOURCES
        if path.name != "test_docs.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if UNSHIPPED.search(line)
    ]
    assert not cited


def test_the_pre_commit_snippet_pins_a_commit_not_a_tag() -> None:
    """Release tags do not reach racecheck's repository: ci.md pins by commit only."""
    text = (DOCS / "ci.md").read_text()
    revisions = re.findall(r"rev: (\S+)", text)
    assert revisions and all(re.fullmatch(r"[0-9a-f]{40}", rev) for rev in revisions)
    assert "racecheck@v" not in text and not re.search(r"\bv\d+\.\d+\.\d+", text)


def test_the_guide_calls_no_modelled_name_unmodelled() -> None:
    """A name listed after "does not model" is one the DSL racecheck loads lacks."""
    from racecheck.dsl import modules

    language = modules.MODULES["pypto.language"]
    text = " ".join((DOCS / "guide.md").read_text().split())
    listed = [
        name
        for group in re.findall(r"does not model \(([^)]*)\)", text)
        for name in re.findall(r"`pl\.(\w+)", group)
    ]
    assert listed, "the guide says what racecheck does not model"
    modelled = [name for name in listed if name != "NAME" and hasattr(language, name)]
    assert not modelled


CODE_NAME = re.compile(r"`([a-z_]+(?:\.[A-Za-z_]+)+)`")


def _is_module(name: str) -> bool:
    package = ROOT / "racecheck"
    return (package / f"{name}.py").is_file() or (package / name / "__init__.py").is_file()


def _resolves(dotted: str) -> bool:
    """Whether `dotted` (`stages.check_path`, `paths.Path.applied`) names a module of
    racecheck or something in one."""
    parts = dotted.removeprefix("racecheck.").split(".")
    for cut in range(len(parts), -1, -1):
        try:
            found: object = importlib.import_module(".".join(["racecheck", *parts[:cut]]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_the_architecture_page_names_only_code_that_exists() -> None:
    """docs/architecture.md names the stages by their modules and functions: each such
    name resolves, so the page cannot keep a name the code moved or removed."""
    text = (DOCS / "architecture.md").read_text()
    names = [
        name
        for name in CODE_NAME.findall(text)
        if not name.endswith(".py")
        and (name.startswith("racecheck.") or _is_module(name.split(".")[0]))
    ]
    assert "stages.check_path" in names and "pipeline.check" in names
    assert [name for name in names if not _resolves(name)] == []
    assert not _resolves("stages.no_such_stage")


def test_the_architecture_table_lists_the_stages_the_layering_test_enforces() -> None:
    """Each row of the stage table names the modules of that stage in tests/test_layers.py,
    in its order: the page and the import rule cannot drift apart."""
    from test_layers import STAGES

    rows = re.findall(
        r"^\| (\d+) \| [^|]+ \| ([^|]+) \|", (DOCS / "architecture.md").read_text(), re.M
    )
    assert [int(number) for number, _ in rows] == list(range(len(STAGES)))
    for (number, modules), stage in zip(rows, STAGES, strict=True):
        named = {
            "racecheck" if name == "racecheck" else "racecheck." + name.strip("/").replace("/", ".")
            for name in re.findall(r"`([\w/]+)`", modules)
        }
        assert named == set(stage), f"row {number}"


GLOSSARY_TERMS = (
    "rank",
    "thread",
    "task",
    "event",
    "region",
    "window",
    "signal cell",
    "notify / wait",
    "dispatch",
    "path",
    "witness",
    "finding",
    "verdict",
    "golden",
)


def test_the_glossary_defines_each_term_once() -> None:
    defined = re.findall(r"^\* \*\*(.+?)\*\*", (DOCS / "glossary.md").read_text(), re.MULTILINE)
    assert sorted(defined) == sorted(set(defined))
    assert set(GLOSSARY_TERMS) <= set(defined)
