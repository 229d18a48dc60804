"""Adopting racecheck in another repository: the pytest helper and the pre-commit hook,
on a repository laid out in a temp dir with one correct and one buggy collective."""

from __future__ import annotations

import os
import re
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


def test_pre_commit_hook_skips_a_file_that_defines_no_program(repository: Path) -> None:
    init = repository / "collectives" / "__init__.py"
    init.write_text('"""The collectives package."""\n')
    good = repository / "collectives" / "allreduce_mesh.py"
    alone = subprocess.run(_hook_command([init]), capture_output=True, text=True, cwd=ROOT)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert f"skipped {init}: no program found" in alone.stderr
    both = subprocess.run(_hook_command([init, good]), capture_output=True, text=True, cwd=ROOT)
    assert both.returncode == 0 and "P=8  proved" in both.stdout
    broken = repository / "collectives" / "broken.py"
    broken.write_text("def f(:\n")
    failed = subprocess.run(_hook_command([broken]), capture_output=True, text=True, cwd=ROOT)
    assert failed.returncode == 2  # a file that does not load is still an error


# --- docs/ci.md, followed as written ----------------------------------------------------

CI_DOC = (ROOT / "docs" / "ci.md").read_text()


def _block(language: str, containing: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", CI_DOC, flags=re.S)
    (found,) = [block for block in blocks if containing in block]
    return found


def _walkthrough_repository(root: Path) -> Path:
    collectives = root / "kernels" / "collectives"
    collectives.mkdir(parents=True)
    (collectives / "__init__.py").write_text("")
    shutil.copy(ROOT / "examples" / "08_allreduce_mesh.py", collectives / "allreduce_mesh.py")
    shutil.copy(ROOT / "examples" / "17_allgather.py", collectives / "allgather.py")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "kernels"\n\n' + _block("toml", "[tool.racecheck]")
    )
    return collectives


def _pre_commit(root: Path) -> subprocess.CompletedProcess[str]:
    """What pre-commit runs for the docs' .pre-commit-config.yaml on every file of `root`:
    the hook's entry and args, then the files its `files:` pattern matches."""
    (repo,) = yaml.safe_load(_block("yaml", "repos:"))["repos"]
    (configured,) = repo["hooks"]
    assert re.fullmatch(r"[0-9a-f]{40}", str(repo["rev"]))
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    pattern = re.compile(configured.get("files", hook["files"]))
    files = sorted(
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        if pattern.search(path.relative_to(root).as_posix())
    )
    entry = shlex.split(hook["entry"])
    args = configured.get("args", hook["args"])
    command = [sys.executable, "-m", "racecheck", *entry[1:], *args, *files]
    return subprocess.run(command, capture_output=True, text=True, cwd=root, timeout=600)


def _docs_pytest(root: Path) -> subprocess.CompletedProcess[str]:
    (line,) = [line for line in _block("sh", "--racecheck").splitlines() if "--racecheck" in line]
    words = shlex.split(line)
    assert words[:3] == ["python", "-m", "pytest"] and "-n" in words
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, *words[1:], "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=root,
        env=environment,
        timeout=900,
    )


def test_a_new_repository_follows_ci_md_to_a_working_gate(tmp_path: Path) -> None:
    collectives = _walkthrough_repository(tmp_path)
    hooked = _pre_commit(tmp_path)
    assert hooked.returncode == 0, hooked.stdout + hooked.stderr
    assert "allgather" in hooked.stdout and "allreduce-sum" in hooked.stdout
    assert "skipped kernels/collectives/__init__.py" in hooked.stderr
    gathered = subprocess.run(
        [sys.executable, "-m", "racecheck", "verify", "kernels/collectives/allgather.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert gathered.returncode == 0 and "P=4  proved" in gathered.stdout
    assert "P=5" not in gathered.stdout  # the file's own ranks
    tested = _docs_pytest(tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "10 passed, 1 skipped" in tested.stdout  # 7 P of the mesh, 3 of the allgather
    # wrong numbers, race-free: the gate now fails them in both places
    shutil.copy(
        ROOT / "examples" / "290_allreduce_mesh_doubled_matches_no_model.py",
        collectives / "allreduce_mesh.py",
    )
    hooked = _pre_commit(tmp_path)
    assert hooked.returncode == 1 and "wrong result" in hooked.stdout
    tested = _docs_pytest(tmp_path)
    assert tested.returncode == 1 and "7 failed, 3 passed, 1 skipped" in tested.stdout
