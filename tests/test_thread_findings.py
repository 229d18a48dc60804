"""A race between two threads of one rank reads in every format as one between ranks:
both threads named beside both source lines (text, JSON, SARIF), the SARIF witness one
threadFlow per thread (#20 item 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import racecheck
from racecheck.findings import Report
from racecheck.report import OutputFormat, render
from racecheck.report.html import space_time_svg
from racecheck.report.phrases import describe_finding

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DECAY = EXAMPLES / "204_shift_then_decay_bug_war.py"
PUSH, DECAYED = "rank 0, task push_step", "rank 0, task decay_step"


def _line(marker: str, path: Path = DECAY) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if text.endswith(f"# @{marker}"))


@pytest.fixture(scope="module")
def report() -> Report:
    return racecheck.verify(str(DECAY), ranks=(2,), jobs=1)


def test_the_text_heading_and_both_source_lines_name_the_threads(report: Report) -> None:
    text = render(report, OutputFormat.TEXT, color=False).splitlines()
    start = next(n for n, line in enumerate(text) if "[race-war]" in line)
    heading, send, decay = text[start : start + 3]
    assert heading.endswith(
        f"write-after-read) between {PUSH} and {DECAYED} [ShiftAndDecay at P=2]"
    )
    assert send.startswith(f"  {DECAY}:{_line('send')}:") and send.endswith(f"  ({PUSH})")
    assert decay.startswith(f"  {DECAY}:{_line('decay')}:") and decay.endswith(f"  ({DECAYED})")


def test_json_names_the_threads_of_the_race_and_of_each_step(report: Report) -> None:
    (finding,) = json.loads(render(report, OutputFormat.JSON, color=False))["results"][0][
        "findings"
    ]
    assert [at["line"] for at in finding["locations"]] == [_line("send"), _line("decay")]
    assert (finding["ranks"], finding["threads"]) == ([0, 0], ["task push_step", "task decay_step"])
    assert [(step["thread"], step["location"]["line"]) for step in finding["witness"]] == [
        ("task decay_step", _line("decay")),
        ("task push_step", _line("send")),
    ]


def test_sarif_has_one_thread_flow_per_thread(report: Report) -> None:
    (result,) = json.loads(render(report, OutputFormat.SARIF, color=False))["runs"][0]["results"]
    assert result["message"]["text"].startswith(
        f"data race (write-after-read) between {PUSH} and {DECAYED} in ShiftAndDecay at P=2"
    )
    assert result["properties"]["threads"] == ["task push_step", "task decay_step"]
    flows = result["codeFlows"][0]["threadFlows"]
    assert [(flow["id"], len(flow["locations"])) for flow in flows] == [(DECAYED, 1), (PUSH, 1)]
    (store,) = flows[0]["locations"]
    assert store["location"]["message"]["text"] == f"{DECAYED}: store (write) x bytes 0..256"


def test_a_core_held_by_many_blocks_names_three_and_counts_the_rest(tmp_path: Path) -> None:
    """Example 348 with 6 blocks on 5 cores: five blocks of dispatch_push hold rank 0's
    cores, spinning at @block_wait, while block 2 waits for one. The summary names the
    program's own waits first (at 64 blocks the core waits filled it, and @block_wait
    was among "124 more threads"), then the block left without a core, with three
    holders named and the rest counted (at 64 blocks it named all 16, 2,800 characters)."""
    source = (EXAMPLES / "348_ep_spmd_dispatch_handshake_bug_wait_in_blocks.py").read_text()
    path = tmp_path / "blocks.py"
    path.write_text(source.replace("LANES = 64", "LANES = 6"))
    (finding,) = (
        racecheck.verify(str(path), ranks=(2,), cores=5, engine="smt", jobs=1).results[0].findings
    )
    held = " and ".join(f"rank 0, block {n} of dispatch_push" for n in (4, 0, 3))
    listed = describe_finding(finding).split("; ")
    assert listed[0] == (
        "rank 0, block 0 of dispatch_push waits forever on wait rank 0's arrived_buf[0, 0]"
        " >= 6 (it holds 5)"
    )
    assert finding.blocked[0].step.location.line == _line("block_wait", path)
    assert listed[3] == (
        "rank 0, block 2 of dispatch_push waits forever on a free core of rank 0 (it has 5),"
        f" held by {held} and 2 more threads"
    )


def test_html_draws_one_lane_per_thread_under_its_rank() -> None:
    """Example 223 in two joined calls: each rank's nine threads (four tasks per call and
    the host's join) are nine lanes under its `rank r` label, each labelled apart even
    where two tasks of a call share a name (line and call kept when the name is cut)."""
    path = EXAMPLES / "223_moe_retire_joined_calls_bug_one_element_anchor.py"
    report = racecheck.verify(str(path), ranks=(2,), repeat=2, rounds="joined", jobs=1)
    (finding,) = report.results[0].findings
    svg = space_time_svg(finding, 2)
    ranks = re.findall(r'<text class="lane-label" x="(\d+)"[^>]*>([^<]*)</text>', svg)
    lanes = re.findall(r'<text class="task-label" x="(\d+)"[^>]*><title>[^<]*</title>([^<]*)<', svg)
    assert [name for _, name in ranks] == ["rank 0", "rank 1"] and len(lanes) == 18
    for (middle, _), own in zip(ranks, (lanes[:9], lanes[9:]), strict=True):
        xs = [int(x) for x, _ in own]
        assert xs[0] < int(middle) < xs[-1]  # the rank's label sits over its own lanes
        assert len({label for _, label in own}) == 9
    assert [label for _, label in lanes[1:3]] == ["l…:95 #1", "l…:96 #1"]


def test_a_race_between_threads_of_one_rank_prints_the_wrong_numbers_it_produces(
    report: Report,
) -> None:
    """The output shown under a witness is the one the race makes wrong: in 204 the
    decay halves ``x``, the first output the program declares, in every order, and the
    race shows in ``y``, which receives half of every value; in 200 (a read-after-write
    between tasks of two ranks) ``y`` receives zeros."""
    split_wait = racecheck.verify(
        str(EXAMPLES / "200_split_wait_bug_unordered_read.py"), ranks=(2,), jobs=1
    )
    for checked, scale in ((report, 0.5), (split_wait, 0.0)):
        (finding,) = checked.results[0].findings
        diff = finding.diff
        assert diff is not None and diff.tensor == "y" and diff.model == "shift+1"
        assert diff.got == tuple(scale * value for value in diff.golden) != diff.golden
        text = render(checked, OutputFormat.TEXT, color=False)
        assert f"  output under this witness: rank {diff.rank}, y[0, 0:4] = [" in text
