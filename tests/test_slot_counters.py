"""Branches on input data with slot counters, summarised (racecheck/dsl/summary.py,
docs/model.md §1): example 266's route branches are taken for every routing with the
counter's exact form. Each probe below breaks one condition of that and must not be
proved; the correct one and the off-by-one twins must be what they are."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import racecheck
from racecheck.dsl.counters import counters_of
from racecheck.findings import Verdict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MOE = EXAMPLES / "266_moe_dispatch_combine_routing.py"
PUSH = "                            at = (e * nr + me) * LANE + slot\n"
BUMP = "                            slot = slot + 1\n                    pl.tile.write"
GATHER = "                    for s in pl.range(n):  # @gather"
STORE = "pld.tile.remote_store(row, recv, peer=dest, offsets=[at, 0])  # @push"


def _verify(tmp_path: Path, old: str, new: str) -> racecheck.ProgramResult:
    source = MOE.read_text()
    assert old in source
    path = tmp_path / "probe.py"
    path.write_text(source.replace(old, new, 1))
    (result,) = racecheck.verify(str(path), ranks="2").results
    return result


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # the slot counter and the token index mixed: the covered box is not in bounds
        (PUSH, PUSH.replace("+ slot", "+ (slot + t) // 2"), ""),
        # a counted value as a peer
        (STORE, STORE.replace("peer=dest", "peer=(dest + slot) % nr"), "slot counter"),
        # a counted value as a wait threshold
        (
            "                    pl.tile.write(counts, [0, e], slot)\n",
            "                    pl.tile.write(counts, [0, e], slot)\n"
            "                    pld.system.wait(arrived, offsets=[0, 0], expected=slot - 100,"
            " cmp=pld.WaitCmp.Ge)\n",
            "slot counter",
        ),
        # the branch's body notifies
        (
            BUMP,
            "                            slot = slot + 1\n"
            "                            pld.system.notify(returned, peer=dest, offsets=[me, 0],"
            " value=0, op=pld.NotifyOp.AtomicAdd)\n                    pl.tile.write",
            "has a notify",
        ),
        # the counter bumped only under an inner branch: no counter of the outer one
        (
            BUMP,
            "                            if me >= 0:\n"
            "                                slot = slot + 1\n                    pl.tile.write",
            "",
        ),
    ],
    ids=["box-out-of-bounds", "counted-peer", "counted-threshold", "notify-in-body", "inner-if"],
)
def test_a_routing_summary_that_cannot_stand_is_not_proved(
    tmp_path: Path, old: str, new: str, why: str
) -> None:
    result = _verify(tmp_path, old, new)
    assert result.verdict is Verdict.UNKNOWN, result
    assert why in result.message


def test_a_name_assigned_under_the_branch_and_read_after_it_is_named(tmp_path: Path) -> None:
    source = MOE.read_text()
    first = "                    slot = 0\n                    for t in pl.range(TOKENS):\n"
    assert source.count(first) == 2
    source = source.replace(
        first,
        "                    slot = 0\n                    last = 0\n"
        "                    for t in pl.range(TOKENS):\n",
        1,
    )
    after = (
        "                            slot = slot + 1\n                            last = LANE - 1\n"
        "                    pl.tile.write(counts, [0, e], slot)\n"
        "                    pld.tile.remote_store(pl.load(x, [0, 0], [1, SIZE]), recv,"
        " peer=dest, offsets=[(e * nr + me) * LANE + last, 0])\n"
    )
    source = source.replace(
        BUMP.replace("pl.tile.write", "pl.tile.write(counts, [0, e], slot)\n"), after, 1
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    (result,) = racecheck.verify(str(path), ranks="2").results
    assert result.verdict is Verdict.UNKNOWN
    assert "`last`, assigned under it, is read outside it" in result.message


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (GATHER, GATHER.replace("pl.range(n)", "pl.range(n + 1)")),  # one row past a lane
        (BUMP, BUMP.replace("slot + 1", "slot + 2")),  # slots two apart: past the lane
    ],
    ids=["gather-one-more", "counter-steps-two"],
)
def test_a_routing_that_overflows_a_lane_is_a_bug(tmp_path: Path, old: str, new: str) -> None:
    result = _verify(tmp_path, old, new)
    assert result.verdict is Verdict.BUG
    assert any(finding.inputs for finding in result.findings)  # shown with the routing


@pytest.mark.parametrize(
    ("source", "counters"),
    [
        ("if c:\n    slot = slot + 1", {"slot"}),
        ("if c:\n    slot += 2\n    row = 1", {"slot"}),
        ("if c:\n    slot = 1 + slot", {"slot"}),
        ("if c:\n    slot = slot + 1\n    slot = 0", set()),  # also assigned otherwise
        ("if c:\n    slot = slot + 1\nelse:\n    pass", set()),  # an else
        ("if c:\n    slot = slot + 1\n    break", set()),  # leaves the body
        ("if c:\n    if d:\n        slot = slot + 1", set()),  # only under an inner if
        ("if c:\n    slot = slot + k", set()),  # not a constant step
        ("if c:\n    for i in range(2):\n        slot = slot + 1", {"slot"}),
    ],
)
def test_the_counters_of_a_branch(source: str, counters: set[str]) -> None:
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.If)
    assert counters_of(node) == counters
