"""The builtin collectives, modelled by their documented lowering (a self-clearing
signal barrier plus their data movement), are proved race-free and compute their
collective — also when called back to back."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    ("args", "model"),
    [
        ({}, "allreduce-sum"),
        ({"op": "pld.ReduceOp.Max"}, "allreduce-max"),
        ({"op": "pld.ReduceOp.Min"}, "allreduce-min"),
        ({"mode": "ring"}, "allreduce-sum"),
    ],
)
def test_builtin_allreduce(args: dict[str, str], model: str) -> None:
    report = racecheck.verify(str(FIXTURES / "builtin_allreduce.py"), ranks="2..5", args=args)
    assert {(result.verdict, result.model) for result in report.results} == {
        (racecheck.Verdict.PROVED, model)
    }


def test_builtin_allreduce_is_reusable_back_to_back() -> None:
    report = racecheck.verify(
        str(FIXTURES / "builtin_allreduce.py"),
        ranks="2..4",
        repeat=3,
        args={"op": "pld.ReduceOp.Max"},
    )
    assert report.exit_code == 0
    notes = [note for result in report.results for note in result.notes]
    assert not any("single-use" in note for note in notes)  # its signal self-clears


@pytest.mark.parametrize(
    ("program", "model"),
    [
        ("build_broadcast", "broadcast-root1"),
        ("build_allgather", "allgather"),
        ("build_reduce_scatter", "reduce_scatter-sum"),
    ],
)
def test_builtin_collectives(program: str, model: str) -> None:
    report = racecheck.verify(
        str(FIXTURES / "builtin_collectives.py"), ranks="2..5", programs=[program]
    )
    assert {(result.verdict, result.model) for result in report.results} == {
        (racecheck.Verdict.PROVED, model)
    }


def test_broadcast_from_a_root_outside_the_world_is_out_of_bounds() -> None:
    report = racecheck.verify(
        str(FIXTURES / "builtin_collectives.py"), ranks="1", programs=["build_broadcast"]
    )
    (result,) = report.results
    assert [finding.kind for finding in result.findings] == [racecheck.FindingKind.OUT_OF_BOUNDS]


def test_an_unmodelled_builtin_call_is_unknown_and_names_its_line() -> None:
    path = FIXTURES / "allgather_same_buffer.py"
    call_line = next(
        number
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "pld.tensor.allgather(" in line
    )
    report = racecheck.verify(str(path), ranks="2")
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    assert report.errors[0].startswith(f"{path}:{call_line}: error: pld.tensor.allgather")
    assert report.exit_code == 2
