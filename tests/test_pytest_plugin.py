"""`pytest --racecheck` in another repository: one item per (file, program, P) from its
`[tool.racecheck]`, the text report as the failure, spread by pytest-xdist."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

CONFIG = """[project]
name = "kernels"

[tool.racecheck]
ranks = "2..3"

[[tool.racecheck.files]]
path = "collectives/*.py"

[[tool.racecheck.files]]
path = "collectives/allreduce_mesh.py"
expect = "allreduce-sum"
"""


@pytest.fixture()
def repository(tmp_path: Path) -> Path:
    folder = tmp_path / "collectives"
    folder.mkdir()
    shutil.copy(EXAMPLES / "08_allreduce_mesh.py", folder / "allreduce_mesh.py")
    shutil.copy(EXAMPLES / "09_allreduce_mesh_bug_no_barrier.py", folder / "allreduce_fast.py")
    (folder / "__init__.py").write_text("")
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    return tmp_path


def _pytest(root: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *flags],
        cwd=root,
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
    )


def test_one_item_per_file_program_and_p(repository: Path) -> None:
    listed = _pytest(repository, "--racecheck", "--collect-only")
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert ids == [
        "pyproject.toml::collectives/__init__.py",
        "pyproject.toml::collectives/allreduce_fast.py::MeshAllreduceNoBarrier[P=2..3]",
        "pyproject.toml::collectives/allreduce_mesh.py::MeshAllreduce[P=2]",
        "pyproject.toml::collectives/allreduce_mesh.py::MeshAllreduce[P=3]",
    ], listed.stdout + listed.stderr


def test_xdist_spreads_the_checks_and_a_bug_fails_with_the_report(repository: Path) -> None:
    run = _pytest(repository, "-n", "2", "--racecheck")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 2 passed, 1 skipped" in run.stdout
    assert "[race-raw] data race (read-after-write)" in run.stdout
    assert "witness (replayed):" in run.stdout
    assert "gw0" in run.stdout or "gw1" in run.stdout  # ran in xdist workers


def test_without_the_flag_nothing_is_collected(repository: Path) -> None:
    assert _pytest(repository).returncode == 5  # pytest's "no tests ran"


def test_a_glob_that_matches_no_file_is_a_failing_item(repository: Path) -> None:
    config = repository / "pyproject.toml"
    config.write_text(config.read_text() + '\n[[tool.racecheck.files]]\npath = "colectives/*.py"\n')
    run = _pytest(repository, "--racecheck", "-k", "colectives")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "[[tool.racecheck.files]] #3 path 'colectives/*.py' matches no file" in run.stdout
