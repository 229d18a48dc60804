"""A long witness reads short in the text report: the steps of the finding, the chain of
waits and the writes that let them pass (or, for a deadlock, the writes into the cell
that never reaches its threshold), the rest elided with a count; JSON keeps it all."""

from __future__ import annotations

import json
from pathlib import Path

import racecheck
from racecheck.events import SourceLocation
from racecheck.findings import Place, StepKind, StepStatus, WitnessStep
from racecheck.report import OutputFormat, render
from racecheck.report.witness import SHORT, Elided, shortened

THRESHOLD = Path(__file__).resolve().parent.parent / "examples" / "18_allgather_bug_threshold.py"
HERE = SourceLocation(file="k.py", line=1, text="")


def _cell(owner: int, row: int) -> Place:
    return Place(memory="signal", owner=owner, ranges=((4 * row, 4 * row + 4),), cell=(row, 0))


def _step(rank: int, kind: StepKind, place: Place | None = None, **more: object) -> WitnessStep:
    return WitnessStep(rank=rank, index=0, kind=kind, location=HERE, place=place, **more)


def test_a_race_keeps_its_pair_and_the_chain_that_let_the_reader_run() -> None:
    data = Place(memory="data", owner=0, ranges=((0, 256),))
    noise = [_step(5, StepKind.NOTIFY, _cell(6, 5), value=1) for _ in range(40)]
    steps = [
        *noise[:10],
        _step(3, StepKind.NOTIFY, _cell(2, 3), value=1),  # 11: lets rank 2's wait pass
        *noise[10:20],
        _step(2, StepKind.WAIT, _cell(2, 3), value=1),  # 22
        _step(2, StepKind.NOTIFY, _cell(1, 2), value=1),  # 23: lets rank 1's wait pass
        *noise[20:30],
        _step(1, StepKind.WAIT, _cell(1, 2), value=1),  # 34
        _step(1, StepKind.READ, data, call="remote_load", highlight=True),  # 35
        *noise[30:],
        _step(0, StepKind.WRITE, data, highlight=True, status=StepStatus.AFTERWARDS),  # 46
    ]
    assert len(steps) > SHORT
    shown = shortened(steps)
    numbers = [entry[0] for entry in shown if not isinstance(entry, Elided)]
    assert numbers == [11, 22, 23, 34, 35, 46]
    elided = sum(entry.count for entry in shown if isinstance(entry, Elided))
    assert elided + len(numbers) == len(steps)


def test_a_short_witness_is_shown_whole() -> None:
    steps = [_step(r, StepKind.NOTIFY, _cell(0, r), value=1) for r in range(SHORT)]
    assert [entry[0] for entry in shortened(steps)] == list(range(1, SHORT + 1))  # type: ignore[index]


def test_a_deadlock_at_p_32_reads_in_a_screen_and_json_keeps_every_step() -> None:
    report = racecheck.verify(str(THRESHOLD), ranks="32", jobs=1)
    text = render(report, OutputFormat.TEXT, color=False)
    witness = text[text.index("  witness (") :].split("\n\n")[0].splitlines()
    assert witness[0] == "  witness (replayed, 1016 of 1024 steps elided: --format json has all):"
    assert len(witness) < 20 and max(len(line) for line in text.splitlines()) < 1200
    # columns bounded; a blocked wait also names its loop iteration (`round peer = 31`)
    assert max(len(line) - len(str(THRESHOLD)) for line in witness) < 110
    blocked = [line for line in witness if "blocked forever" in line]
    assert len(blocked) == 4 and all(line.startswith("  > ") for line in blocked)
    assert "and 28 more ranks wait forever likewise" in text
    (finding,) = json.loads(render(report, OutputFormat.JSON, color=False))["results"][0][
        "findings"
    ]
    assert len(finding["witness"]) == 1024


RING_SINGLE_SLOT = THRESHOLD.parent / "16_allreduce_ring_outbox_bug_single_slot.py"


def test_the_racing_steps_name_their_loop_iteration_in_text_and_json() -> None:
    """Example 16's outbox is reused in round k = 0 of its `for k in pl.range(rounds)`:
    both racing steps say so; JSON gives every step its loops."""
    report = racecheck.verify(str(RING_SINGLE_SLOT), ranks=[3], jobs=1)
    text = render(report, OutputFormat.TEXT, color=False)
    pair = [line for line in text.splitlines() if line.startswith("  > ")]
    assert len(pair) == 2 and all(line.endswith(", round k = 0)") for line in pair), pair
    found = json.loads(render(report, OutputFormat.JSON, color=False))["results"][0]["findings"]
    steps = found[0]["witness"]
    highlighted = [step for step in steps if step["highlight"]]
    assert [step["loops"] for step in highlighted] == [[{"variable": "k", "value": 0}]] * 2
    outside = [step for step in steps if step["location"]["line"] == 56]  # before the loop
    assert outside and all(step["loops"] == [] for step in outside)
