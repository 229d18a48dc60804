"""The text report on hand-built reports: result lines, finding blocks, grouping, colour."""

from __future__ import annotations

import dataclasses

from report_samples import FILE, mixed_report, proved_report, race, result, stale_warning

from racecheck.findings import Report, Verdict
from racecheck.report import render_text
from racecheck.report.phrases import describe_rank_counts, describe_ranks


def test_proved_lines_name_program_ranks_verdict_events_time_and_model() -> None:
    text = render_text(proved_report(), color=False)
    assert "  MeshAllreduce  P=2  proved  26 events  0.03s  allreduce-sum" in text
    assert "  MeshAllreduce  P=4  proved  52 events  0.03s  allreduce-sum" in text
    assert text.rstrip().endswith("3 proved, 0 bugs, 0 skipped, 0 unknown")
    assert "error:" not in text


def test_skipped_and_unknown_carry_their_message_and_bug_lines_name_no_model() -> None:
    lines = render_text(mixed_report(), color=False).splitlines()
    assert "  MeshAllreduce  P=5  skipped  SIZE must be divisible by the rank count" in lines
    assert "  MeshAllreduce  P=6  unknown  78 events  0.03s  timeout after 60s" in lines
    assert "  MeshAllreduce  P=3  bug  39 events  0.03s" in lines
    assert lines[-1] == "1 proved, 2 bugs, 1 skipped, 1 unknown"


def test_finding_block_is_actionable() -> None:
    text = render_text(mixed_report(), color=False)
    header = (
        f"{FILE}:42: error: [race-raw] data race (read-after-write) between rank 0 and rank 1"
        " [MeshAllreduce at P=3..4]"
    )
    assert header in text
    assert (
        f"  {FILE}:42: recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0])  (rank 0)"
        in text
    )
    assert f"  {FILE}:30: data = pl.store(local, [0, 0], data)  (rank 1)" in text
    assert "  witness (replayed):" in text
    diff = "rank 2, y[0, 0:4] = [1.0, 0.0, 0.0, 0.0], golden [6.0, 6.0, 6.0, 6.0]"
    assert f"  output under this witness: {diff}" in text


def test_witness_is_numbered_indented_per_rank_and_highlights_the_pair() -> None:
    text = render_text(mixed_report(), color=False)
    steps = [line for line in text.splitlines() if line.lstrip(" >")[:2] in ("1.", "2.", "3.")]
    assert steps == [
        f"    1.   rank 1: notify rank 0's signal[1, 0] += 1  ({FILE}:33)",
        f"  > 2. rank 0: remote_load (read) rank 1's data bytes 0..256  ({FILE}:42)",
        f"  > 3.   rank 1: afterwards: store (write) rank 1's data bytes 0..256  ({FILE}:30)",
    ]


def test_identical_findings_across_rank_counts_print_once() -> None:
    text = render_text(mixed_report(), color=False)
    assert text.count("error: [race-raw] data race") == 1
    assert "[MeshAllreduce at P=3..4]" in text


def test_findings_on_different_lines_stay_separate() -> None:
    moved = dataclasses.replace(race(), locations=(race().locations[0], race().locations[0]))
    report = Report(
        file=FILE,
        results=(
            result(2, Verdict.BUG, findings=(race(),)),
            result(3, Verdict.BUG, findings=(moved,)),
        ),
    )
    text = render_text(report, color=False)
    assert text.count("error: [race-raw] data race") == 2
    assert "[MeshAllreduce at P=2]" in text and "[MeshAllreduce at P=3]" in text


def test_unconfirmed_witness_says_so() -> None:
    report = Report(file=FILE, results=(result(2, Verdict.BUG, findings=(race(confirmed=False),)),))
    assert "  witness (not replayed):" in render_text(report, color=False)


def test_notes_are_grouped_note_lines() -> None:
    text = render_text(mixed_report(), color=False)
    assert "note: MeshAllreduce at P=2, 4: signal cells left non-zero" in text.splitlines()


def test_colour_only_when_asked() -> None:
    plain = render_text(mixed_report(), color=False)
    coloured = render_text(mixed_report(), color=True)
    assert "\033[" not in plain
    assert "\033[32mproved\033[0m" in coloured
    assert "\033[31mbug\033[0m" in coloured
    assert "\033[1;31merror:\033[0m" in coloured


def test_rank_count_and_rank_phrases() -> None:
    assert describe_rank_counts([8, 2, 3, 4, 6, 3]) == "2..4, 6, 8"
    assert describe_rank_counts([5]) == "5"
    assert describe_ranks((1,)) == "on rank 1"
    assert describe_ranks((0, 3)) == "between rank 0 and rank 3"
    assert describe_ranks((0, 1, 3)) == "among ranks 0, 1 and 3"


def test_a_stale_read_warning_prints_with_its_line_and_the_result_stays_proved() -> None:
    report = Report(
        file=FILE,
        results=(result(2, Verdict.PROVED, model="allreduce-sum", findings=(stale_warning(),)),),
    )
    text = render_text(report, color=False)
    assert "P=2  proved  26 events  0.03s  allreduce-sum  (1 warning)" in text
    assert f"{FILE}:42: warning: [stale-read] stale read on rank 0" in text
    assert text.rstrip().endswith("1 proved, 0 bugs, 0 skipped, 0 unknown")
