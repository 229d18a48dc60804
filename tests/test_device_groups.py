"""A `device=r` dispatch loop's device group, as PyPTO's MaterializeCommDomainScopes
reads it (src/ir/transforms/materialize_comm_domain_scopes_pass.cpp:225-257): a loop
up to `pld.world_size()` puts its windows in the all-devices group whatever its start
and step, so workers that wait for a device the loop never dispatches wait forever; a
loop up to a constant groups the devices it runs; any other loop is refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

import racecheck
from racecheck.cli import main
from racecheck.findings import FindingKind, Verdict

MESH = Path(__file__).resolve().parent.parent / "examples" / "08_allreduce_mesh.py"
LOOP = "for r in pl.range(pld.world_size()):"


def _mesh(tmp_path: Path, loop: str) -> Path:
    text = MESH.read_text()
    assert LOOP in text
    path = tmp_path / "mesh.py"
    path.write_text(text.replace(LOOP, loop))
    return path


@pytest.mark.parametrize(
    "loop",
    [
        "for r in pl.range(1, pld.world_size()):",
        "for r in pl.range(0, pld.world_size(), 2):",
        "stop = pld.world_size()\n        for r in pl.range(1, stop):",
    ],
)
def test_a_world_size_loop_that_skips_devices_deadlocks_at_every_p(
    tmp_path: Path, loop: str
) -> None:
    path = _mesh(tmp_path, loop)
    (result,) = racecheck.verify(str(path), ranks="4", jobs=1).results
    assert result.verdict is Verdict.BUG
    assert {finding.kind for finding in result.findings} == {FindingKind.DEADLOCK}
    every = racecheck.verify(str(path), ranks="all", jobs=1)
    assert all(answer.every_p is None for answer in every.results)
    assert every.exit_code == 1


def test_a_constant_loop_groups_the_devices_it_dispatches(tmp_path: Path) -> None:
    """Devices 1..3 of four: a three-device all-reduce among themselves."""
    path = _mesh(tmp_path, "for r in pl.range(1, 4):")
    (result,) = racecheck.verify(str(path), ranks="4", jobs=1).results
    assert result.verdict is Verdict.PROVED


@pytest.mark.parametrize(
    "loop",
    ["for r in pl.range(0, 4, 2):", "for r in pl.range(pld.world_size() - 1):"],
)
def test_a_loop_pypto_reads_no_group_from_is_refused_at_the_dispatch(
    tmp_path: Path, loop: str
) -> None:
    path = _mesh(tmp_path, loop)
    line = next(
        number
        for number, text in enumerate(path.read_text().splitlines(), start=1)
        if "device=r)" in text
    )
    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", str(path), "--ranks", "4", "--jobs", "1"], stdout=out, stderr=err)
    assert code == 2
    assert f"mesh.py:{line}: error: device=r over a pl.range" in err.getvalue()
    assert "PyPTO reads no device group from it" in err.getvalue()
