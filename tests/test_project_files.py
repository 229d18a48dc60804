"""Real PyPTO files as their repository lays them out (issue 11): helpers imported by
project-rooted names, factories built in such helpers with string annotations, and
factory parameters that are sizes rather than the rank count."""

from __future__ import annotations

import sys
from pathlib import Path

import racecheck
from racecheck import FindingKind, Verdict

FIXTURES = Path(__file__).parent / "fixtures"
SUITE = FIXTURES / "rcproject" / "suite"
BUILDERS = SUITE / "builders.py"


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_factory_imported_from_the_project_is_checked_at_the_helpers_lines() -> None:
    report = racecheck.verify(str(SUITE / "shift_suite.py"), ranks="2..3")
    assert not report.errors
    verdicts = {(result.program, result.ranks): result.verdict for result in report.results}
    assert verdicts == {
        ("build_shift[fenced=True]", 2): Verdict.PROVED,
        ("build_shift[fenced=True]", 3): Verdict.PROVED,
        ("build_shift[fenced=False]", 2): Verdict.BUG,
        ("build_shift[fenced=False]", 3): Verdict.BUG,
    }
    bug = next(result for result in report.results if result.verdict is Verdict.BUG)
    (finding,) = bug.findings
    assert finding.kind is FindingKind.RACE
    load, store = _line(BUILDERS, "remote_load(data"), _line(BUILDERS, "[0, 0], data)")
    assert {(site.file, site.line) for site in finding.locations} == {
        (str(BUILDERS), load),
        (str(BUILDERS), store),
    }
    assert "rcproject" not in sys.modules  # the project's modules leave with the check


def test_a_keyword_only_size_with_a_default_is_not_the_rank_count() -> None:
    report = racecheck.verify(str(FIXTURES / "sized_by_default.py"), ranks="2..3")
    assert [(result.ranks, result.verdict) for result in report.results] == [
        (2, Verdict.PROVED),
        (3, Verdict.PROVED),
    ]
    assert {result.rank_param for result in report.results} == {None}


SINGLE = FIXTURES / "single_device.py"


def _results(program: str) -> tuple[racecheck.Report, list[racecheck.ProgramResult]]:
    report = racecheck.verify(str(SINGLE), ranks="2..3", programs=[program])
    return report, list(report.results)


def test_an_l2_only_program_is_checked_at_one_device_per_orchestration() -> None:
    report = racecheck.verify(str(SINGLE), ranks="2..3")
    chip = [result for result in report.results if result.program.startswith("ChipOnly.")]
    assert [(result.program, result.ranks) for result in chip] == [
        ("ChipOnly.copy_only", 1),
        ("ChipOnly.copy_then_scrub", 1),
    ]
    copy_only, copy_then_scrub = chip
    assert copy_only.verdict is Verdict.PROVED
    assert any("runs on one device" in note for note in copy_only.notes)
    # The scrub's write-after-read is not ordered after the copy: a race of the two tasks.
    assert copy_then_scrub.verdict is Verdict.BUG
    (race,) = copy_then_scrub.findings
    assert (race.code.value, race.threads, race.confirmed) == (
        "race-war",
        ("task copy", "task scrub"),
        True,
    )


def test_a_host_without_device_is_one_device_and_a_reading_sub_worker_is_not_run() -> None:
    _, jit = _results("jit_one_device")
    assert [(result.ranks, result.verdict) for result in jit] == [(1, Verdict.PROVED)]
    _, results = _results("OneDeviceHost")
    assert [(result.ranks, result.verdict) for result in results] == [(1, Verdict.PROVED)]
    (result,) = results
    assert any(note.startswith("check() is a host sub-worker callback") for note in result.notes)


def test_a_sub_worker_that_writes_a_host_tensor_is_not_modelled() -> None:
    report, results = _results("WritingSubWorker")
    assert [result.verdict for result in results] == [Verdict.UNKNOWN]
    assert report.errors == (
        f"{SINGLE}:{_line(SINGLE, 'self.fill(x)')}: error: fill() is a host sub-worker callback"
        " that writes x; racecheck does not run sub-workers",
    )


def test_an_inline_chip_region_in_the_host_makes_a_single_device_program() -> None:
    report, results = _results("InlineChipRegion")
    assert [(result.ranks, result.verdict) for result in results] == [(1, Verdict.PROVED)]
    assert not report.errors


def test_a_host_slice_past_its_tensor_is_an_out_of_bounds_bug_at_the_host_line() -> None:
    path = FIXTURES / "host_slice_bounds.py"
    report = racecheck.verify(str(path), ranks="2..3")
    verdicts = {(result.program, result.ranks): result.verdict for result in report.results}
    assert verdicts == {
        ("ChunkCopy", 2): Verdict.PROVED,
        ("ChunkCopy", 3): Verdict.PROVED,
        ("ChunkCopyBugNarrowOutput", 2): Verdict.BUG,
        ("ChunkCopyBugNarrowOutput", 3): Verdict.BUG,
    }
    bug = next(result for result in report.results if result.verdict is Verdict.BUG)
    (finding,) = bug.findings
    assert finding.kind is FindingKind.OUT_OF_BOUNDS
    line = _line(path, "outputs[r, 0:1, c * SIZE : (c + 1) * SIZE],")
    assert [(site.file, site.line) for site in finding.locations] == [(str(path), line)]
    assert finding.reason == "slice 8:16 of outputs[0] (shape [1, 8], FP32) in dim 1"
    assert finding.ranks == ()  # the host, not a rank


def test_a_host_builtin_that_returns_at_once_is_said_with_its_line() -> None:
    path = FIXTURES / "host_builtin_refused.py"
    report = racecheck.verify(str(path), ranks="2..3")
    ring, scatter = _line(path, 'mode="ring")'), _line(path, "pld.tensor.reduce_scatter(")
    for result in report.results:
        assert result.verdict is Verdict.PROVED  # nothing races: the call does nothing
        (said,) = [note for note in result.notes if "returns at once" in note]
        if result.program == "build_refused[ring=True]":
            assert said.startswith(f"line {ring}: pld.tensor.allreduce(mode='ring') needs Sum")
        else:
            assert said.startswith(
                f"line {scatter}: pld.tensor.reduce_scatter needs {result.ranks} rows"
            )


def test_an_l2_only_program_is_selected_by_class_or_by_orchestration() -> None:
    by_class = racecheck.verify(str(SINGLE), ranks="2", programs=["ChipOnly"])
    assert [result.program for result in by_class.results] == [
        "ChipOnly.copy_only",
        "ChipOnly.copy_then_scrub",
    ]
    _, results = _results("ChipOnly.copy_only")
    assert [(result.program, result.ranks, result.verdict) for result in results] == [
        ("ChipOnly.copy_only", 1, Verdict.PROVED)
    ]


def test_a_module_next_to_the_file_imports_by_its_plain_name() -> None:
    report = racecheck.verify(str(SUITE / "shift_sibling.py"), ranks="2")
    assert [(result.program, result.verdict) for result in report.results] == [
        ("build_shift[fenced=True]", Verdict.PROVED),
        ("build_shift[fenced=False]", Verdict.BUG),
    ]
    assert "builders" not in sys.modules
