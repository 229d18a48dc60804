"""A race between two threads of one rank reads in every format as one between ranks:
both threads named beside both source lines (text, JSON, SARIF), the SARIF witness one
threadFlow per thread (#20 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import racecheck
from racecheck.findings import Report
from racecheck.report import OutputFormat, render

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DECAY = EXAMPLES / "204_shift_then_decay_bug_war.py"
PUSH, DECAYED = "rank 0, task push_step", "rank 0, task decay_step"


def _line(marker: str) -> int:
    lines = DECAY.read_text().splitlines()
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
