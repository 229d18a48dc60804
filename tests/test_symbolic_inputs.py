"""A loop over an input-dependent bound, summarised (racecheck/dsl/summary.py): one run
with every iteration any input reaches stands for every input, and only when nothing
else depends on the inputs. Each probe below breaks one condition and must not be
proved (the counts alone give 3^9 paths at P = 3, past the path budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.findings import Verdict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CORRECT = EXAMPLES / "262_input_counts_all_to_all_v.py"
CLAMP = "count = pl.max(pl.min(pl.read(send_counts, [dest, 0]), MAX_ROWS), 0)  # @clamp"
COPY = """                for row in pl.range(received):  # @copy
                    tile = pl.load(inbox, [MAX_ROWS * source + row, 0], [1, SIZE])
                    y = pl.store(tile, [MAX_ROWS * source + row, 0], y)
"""


def _verify(tmp_path: Path, *replacements: tuple[str, str], ranks: str = "3") -> list:
    source = CORRECT.read_text()
    for old, new in replacements:
        assert old in source
        source = source.replace(old, new)
    path = tmp_path / "probe.py"
    path.write_text(source)
    return list(racecheck.verify(str(path), ranks=ranks).results)


def test_every_count_is_proved_with_the_loop_named(tmp_path: Path) -> None:
    (result,) = _verify(tmp_path)
    assert result.verdict is Verdict.PROVED
    (note,) = [note for note in result.notes if note.startswith("for every input")]
    assert "runs at most 2 times for any input" in note
    assert "max(min(send_counts.flat[" in note


def test_a_negative_count_runs_no_iteration_so_an_upper_clamp_is_enough(tmp_path: Path) -> None:
    upper = CLAMP.replace("pl.max(pl.min(", "pl.min(").replace("MAX_ROWS), 0)", "MAX_ROWS)")
    (result,) = _verify(tmp_path, (CLAMP, upper))
    assert result.verdict is Verdict.PROVED


@pytest.mark.parametrize(
    "probe",
    [
        # a value the body computed outlives the loop and places a later load
        "                last = 0\n"
        + COPY.replace("y = pl.store(tile", "last = row\n                    y = pl.store(tile")
        + "                again = pl.load(inbox, [MAX_ROWS * source + last, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source, 0], y)\n",
        # a name holds another tensor view after the loop than before it
        "                view = y\n"
        + COPY.replace("y = pl.store(tile", "view = inbox\n                    y = pl.store(tile")
        + "                again = pl.load(view, [MAX_ROWS * source, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source, 0], y)\n",
        # the body notifies: the number of notifies depends on the count
        COPY.replace(
            "y = pl.store(tile",
            "pld.system.notify(signal, peer=me, offsets=[source, 0], value=1,"
            " op=pld.NotifyOp.AtomicAdd)\n                    y = pl.store(tile",
        ),
        # the body stores into a signal cell: a wait may see it
        COPY.replace(
            "y = pl.store(tile",
            "pl.write(counts, [source, 0], 0)\n                    y = pl.store(tile",
        ),
        # a later load reads what the iterations stored, and that value steers
        COPY + "                again = pl.read(y, [MAX_ROWS * source, 0])\n"
        "                if again > 0.5:\n"
        "                    y = pl.store(tile, [MAX_ROWS * source, 0], y)\n",
        # the bound steers past the loop too (a row offset)
        COPY + "                last = pl.max(received - 1, 0)\n"
        "                again = pl.load(inbox, [MAX_ROWS * source + last, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source, 0], y)\n",
        # reassigned before the later read only in a branch not taken: no kill
        "                last = 0\n"
        + COPY.replace("y = pl.store(tile", "last = row\n                    y = pl.store(tile")
        + "                if MAX_ROWS > 100:\n"
        "                    last = 0\n"
        "                again = pl.load(inbox, [MAX_ROWS * source + last, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source, 0], y)\n",
        # a counter bumped twice per iteration places a later load (past the block)
        "                slot = 0\n"
        + COPY.replace(
            "y = pl.store(tile",
            "slot = slot + 1\n"
            "                    slot = slot + 1\n"
            "                    y = pl.store(tile",
        )
        + "                again = pl.load(inbox, [MAX_ROWS * source + slot, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source, 0], y)\n",
    ],
    ids=[
        "value-outlives",
        "view-swapped",
        "notify-in-body",
        "signal-store",
        "read-back",
        "bound-steers",
        "reassigned-in-a-branch",
        "counter-bumped-twice",
    ],
)
def test_a_loop_whose_count_shows_elsewhere_is_not_proved_by_its_summary(
    tmp_path: Path, probe: str
) -> None:
    (result,) = _verify(tmp_path, (COPY, probe))
    assert result.verdict is not Verdict.PROVED, result.notes
    assert not any(note.startswith("for every input") for note in result.notes)


def test_a_bound_whose_arithmetic_can_wrap_is_not_summarised(tmp_path: Path) -> None:
    squared = "received = pl.read(counts, [source, 0]) * pl.read(counts, [source, 0])  # @count"
    (result,) = _verify(tmp_path, ("received = pl.read(counts, [source, 0])  # @count", squared))
    assert result.verdict is not Verdict.PROVED


def test_the_unknown_names_the_value_that_outlives_the_loop(tmp_path: Path) -> None:
    carried = (
        "                last = 0\n"
        + COPY.replace("y = pl.store(tile", "last = row\n                    y = pl.store(tile")
        + "                again = pl.load(inbox, [MAX_ROWS * source + last, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source, 0], y)\n"
    )
    (result,) = _verify(tmp_path, (COPY, carried))
    assert result.verdict is Verdict.UNKNOWN
    assert "past the budget of 16 paths" in result.message
    assert "`last`, assigned in the loop, is read outside it" in result.message


def test_a_name_assigned_afresh_before_its_later_read_does_not_outlive_the_loop(
    tmp_path: Path,
) -> None:
    fresh = (
        COPY.replace("y = pl.store(tile", "last = row\n                    y = pl.store(tile")
        + "                last = 0\n"
        "                again = pl.load(inbox, [MAX_ROWS * source + last, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source, 0], y)\n"
    )
    (result,) = _verify(tmp_path, (COPY, fresh))
    assert result.verdict is Verdict.PROVED, result.message


def test_a_loop_from_the_count_to_the_capacity_is_summarised_from_its_least_start(
    tmp_path: Path,
) -> None:
    rest = COPY + COPY.replace("pl.range(received)", "pl.range(received, MAX_ROWS)")
    (result,) = _verify(tmp_path, (COPY, rest))
    assert result.verdict is Verdict.PROVED, result.message
    (note,) = [note for note in result.notes if note.startswith("for every input")]
    assert note.count("runs at most 2 times") == 2


def test_a_start_below_every_row_is_a_bug_with_the_count(tmp_path: Path) -> None:
    upper = CLAMP.replace("pl.max(pl.min(", "pl.min(").replace("MAX_ROWS), 0)", "MAX_ROWS)")
    rest = COPY.replace("pl.range(received)", "pl.range(received, MAX_ROWS)")
    (result,) = _verify(tmp_path, (CLAMP, upper), (COPY, rest), ranks="2")
    assert result.verdict is Verdict.BUG
    assert any(value < 0 for finding in result.findings for _, _, value in finding.inputs)


def test_a_threshold_the_count_sets_that_no_notify_reaches_is_a_deadlock_with_the_count(
    tmp_path: Path,
) -> None:
    count = "received = pl.read(counts, [source, 0])  # @count\n"
    waits = count + (
        "                pld.system.wait(signal, offsets=[source, 0], expected=received,"
        " cmp=pld.WaitCmp.Ge)\n"
    )
    (result,) = _verify(tmp_path, (count, waits), ranks="2")
    assert result.verdict is Verdict.BUG
    (stuck,) = [f for f in result.findings if f.kind.value == "deadlock"]
    assert stuck.inputs  # the counts it shows with


MOE = EXAMPLES / "266_moe_dispatch_combine_routing.py"
MOE_SMALL_LANE = EXAMPLES / "267_moe_dispatch_combine_routing_bug_small_lane.py"


def test_the_routing_that_overflows_a_lane_is_shown_with_the_finding() -> None:
    (result,) = racecheck.verify(str(MOE_SMALL_LANE), ranks="2").results
    assert result.verdict is Verdict.BUG
    # P=2, two tokens per rank, 4 experts: the ids shown are every token's
    for finding in result.findings:
        assert {name for name, _, _ in finding.inputs} == {"experts"}
        assert sorted(index for _, index, _ in finding.inputs) == [0, 1, 2, 3]


def test_a_later_load_of_what_the_iterations_stored_as_data_only_is_proved(
    tmp_path: Path,
) -> None:
    """The iterations a count leaves out change the bytes a later load reads, not which
    events run: a value that moves only data decides nothing the summary checks."""
    data_only = (
        COPY + "                again = pl.load(y, [MAX_ROWS * source, 0], [1, SIZE])\n"
        "                y = pl.store(again, [MAX_ROWS * source + 1, 0], y)\n"
    )
    (result,) = _verify(tmp_path, (COPY, data_only))
    assert result.verdict is Verdict.PROVED


def test_the_routing_with_slot_counters_is_proved_with_its_branches_named() -> None:
    (result,) = racecheck.verify(str(MOE), ranks="2").results
    assert result.verdict is Verdict.PROVED
    (note,) = [note for note in result.notes if note.startswith("for every input")]
    route = next(
        n for n, text in enumerate(MOE.read_text().splitlines(), 1) if text.endswith("# @route")
    )
    assert f"the branch at line {route} is taken or not for each input" in note
    assert "counted exactly by `slot`" in note
