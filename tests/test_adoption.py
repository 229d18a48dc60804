"""Adopting racecheck in another repository: the pytest helper and the pre-commit hook,
on a repository laid out in a temp dir with one correct and one buggy collective."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import racecheck

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def repository(tmp_path: Path) -> Path:
    collectives = tmp_path / "collectives"
    collectives.mkdir()
    shutil.copy(ROOT / "examples" / "08_allreduce_mesh.py", collectives / "allreduce_mesh.py")
    shutil.copy(
        ROOT / "examples" / "09_allreduce_mesh_bug_no_barrier.py",
        collectives / "allreduce_mesh_fast.py",
    )
    return tmp_path


def test_assert_proved_passes_on_the_correct_collective(repository: Path) -> None:
    path = repository / "collectives" / "allreduce_mesh.py"
    report = racecheck.assert_proved(str(path), ranks="2..4", expect="allreduce-sum")
    assert [result.verdict for result in report.results] == [racecheck.Verdict.PROVED] * 3


def test_assert_proved_fails_on_the_buggy_one_with_the_human_report(repository: Path) -> None:
    path = repository / "collectives" / "allreduce_mesh_fast.py"
    with pytest.raises(AssertionError) as failure:
        racecheck.assert_proved(str(path), ranks="2..4")
    message = str(failure.value)
    assert "error: [race-raw] data race (read-after-write)" in message
    assert "pld.tile.remote_load(" in message
    assert "witness (replayed):" in message


def _hook_command(files: list[Path]) -> list[str]:
    """What pre-commit runs for our hook: entry, args, then the matching staged files."""
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "racecheck" and hook["language"] == "python"
    entry = shlex.split(hook["entry"])
    assert entry[0] == "racecheck"  # the console script; run it through this interpreter
    return [sys.executable, "-m", "racecheck", *entry[1:], *hook["args"], *map(str, files)]


def test_pre_commit_hook_passes_the_correct_file_and_fails_the_buggy_one(
    repository: Path,
) -> None:
    good = repository / "collectives" / "allreduce_mesh.py"
    bad = repository / "collectives" / "allreduce_mesh_fast.py"
    passing = subprocess.run(_hook_command([good]), capture_output=True, text=True, cwd=ROOT)
    assert passing.returncode == 0, passing.stdout + passing.stderr
    failing = subprocess.run(_hook_command([good, bad]), capture_output=True, text=True, cwd=ROOT)
    assert failing.returncode == 1
    assert "allreduce_mesh_fast.py" in failing.stdout
    assert "data race (read-after-write)" in failing.stdout
