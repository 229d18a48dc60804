"""Threads of one rank (docs/model.md §1): a race between two tasks of a rank is found and
reported like one between ranks, start edges order tasks, and a task that never starts
is part of a deadlock, named by what it waits for."""

from __future__ import annotations

import time
from pathlib import Path

from tracebuild import TraceBuilder

import racecheck
from racecheck.analysis import find_hazards, to_finding
from racecheck.engines import ENGINES
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.events import Thread, Trace
from racecheck.findings import Finding, FindingKind, RaceDetail, StepStatus, Verdict
from racecheck.report.phrases import describe_finding

PUSH, STORE, NOTIFY, WAIT, READ = 5, 10, 20, 30, 40


def split_wait(*, read_after_wait: bool, notify: bool = True) -> Trace:
    """PyPTO #1670 as it survives #1683: rank 0's push stores into rank 1's data and
    notifies; rank 1 runs `wait_step` (the wait) and `read_step` (the load) as two
    tasks, read_step ordered after wait_step only if `read_after_wait`."""
    threads = (
        Thread(rank=0, name="task push_step", task=0, task_name="push_step"),
        Thread(rank=1, name="task wait_step", task=1, task_name="wait_step"),
        Thread(
            rank=1,
            name="task read_step",
            task=2,
            task_name="read_step",
            after=(1,) if read_after_wait else (),
        ),
    )
    build = TraceBuilder(3, threads)
    data = build.window("data", 16)
    signal = build.window("signal", 4)
    build.store(0, data, 1, 0, 16, STORE)
    if notify:
        build.notify(0, signal, 1, 0, NOTIFY)
    build.wait(1, signal, 0, WAIT)
    build.load(2, data, 1, 0, 16, READ)
    return build.build()


def findings(trace: Trace, engine: str) -> list[Finding]:
    skeleton = SyncSkeleton(trace)
    oracle = ENGINES[engine]().order(skeleton, deadline=time.monotonic() + 30)
    return [to_finding(trace, oracle, hazard)[0] for hazard in find_hazards(trace, oracle)]


def test_a_task_the_runtime_leaves_unordered_with_the_wait_races_with_the_push() -> None:
    for engine in sorted(ENGINES):
        (race,) = findings(split_wait(read_after_wait=False), engine)
        assert race.kind is FindingKind.RACE
        assert race.detail == RaceDetail.READ_AFTER_WRITE.value
        assert [location.line for location in race.locations] == [READ, STORE]
        assert race.ranks == (1, 0)
        assert race.threads == ("task read_step", "task push_step")
        message = describe_finding(race)
        assert message.startswith(
            "rank 1, task read_step can read rank 1's data bytes 0..16 before"
        )
        # the witness reads, and the store comes afterwards
        *_, read, store = race.witness
        assert (read.rank, read.task, read.location.line) == (1, "task read_step", READ)
        assert (store.rank, store.location.line, store.status) == (0, STORE, StepStatus.AFTERWARDS)


def test_a_start_edge_after_the_wait_orders_the_read() -> None:
    for engine in sorted(ENGINES):
        assert findings(split_wait(read_after_wait=True), engine) == []


def test_a_task_that_cannot_start_is_named_in_the_deadlock() -> None:
    for engine in sorted(ENGINES):
        (stuck,) = findings(split_wait(read_after_wait=True, notify=False), engine)
        assert stuck.kind is FindingKind.DEADLOCK
        message = describe_finding(stuck)
        assert "rank 1, task wait_step waits forever on wait rank 1's signal[0, 0] >= 1" in message
        assert (
            "rank 1, task read_step cannot start: it starts after rank 1, task wait_step,"
            " which never ends;"
        ) in message + ";"
        assert "tasks[" not in message


EXAMPLES = Path(__file__).parent.parent / "examples"


def _marker(path: Path, name: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if text.endswith(f"# @{name}"))


def test_the_split_wait_of_pypto_1670_is_a_replayed_race_when_tasks_are_threads() -> None:
    path = EXAMPLES / "200_split_wait_bug_unordered_read.py"
    for result in racecheck.verify(str(path), ranks=[2, 3]).results:
        assert result.verdict is Verdict.BUG
        (race,) = result.findings
        assert race.code.value == "race-raw" and race.confirmed
        assert [loc.line for loc in race.locations] == [
            _marker(path, "read"),
            _marker(path, "push"),
        ]
        assert race.threads == ("task read_step", "task push_step")
        assert race.diff is not None and race.diff.got != race.diff.golden


def test_its_twin_with_push_and_barrier_in_one_kernel_is_proved() -> None:
    path = EXAMPLES / "201_push_barrier_then_read.py"
    results = racecheck.verify(str(path), ranks=[2, 3]).results
    assert [result.verdict for result in results] == [Verdict.PROVED] * 2
