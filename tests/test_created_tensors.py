"""Tensors a per-device function creates (`pl.create_tensor`, `manual_dep=True`) and the
kernel calls a reordered run holds back (docs/model.md, tasks within a rank)."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.cosim import Execution, simulate
from racecheck.cosim.tasks import ordered_pairs
from racecheck.dsl.types import Direction
from racecheck.events import MemoryKind
from racecheck.findings import FindingKind, Verdict
from racecheck.load import discover, load_file
from racecheck.options import RuntimeOrder

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CREATED = "141_staged_shift_create_tensor.py"
MANUAL_DEP = "142_staged_shift_create_tensor_bug_manual_dep.py"
MANUAL_DEP_DEPS = "143_staged_shift_manual_dep_deps.py"
RESTAGE_WAR = "144_staged_shift_restage_bug_war.py"
RESTAGE = "145_staged_shift_restage.py"


def _run(path: Path, ranks: int) -> Execution:
    (spec,) = discover(load_file(str(path)), programs=(), args={})
    return simulate(spec.instantiate(ranks))


def _order(name: str) -> dict[tuple[str, str], bool]:
    """Which of rank 0's tasks the runtime runs after which, by task name."""
    execution = _run(EXAMPLES / name, 2)
    tasks, trace = execution.tasks[0], execution.trace
    before = ordered_pairs(tasks, trace.events[0], RuntimeOrder.CURRENT, trace.memories)
    return {
        (tasks[i].spec.name, tasks[j].spec.name): before[i][j]
        for j in range(len(tasks))
        for i in range(j)
    }


def _submit_line(path: Path, kernel: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if f"pl.submit(self.{kernel}," in text)


def test_a_created_tensor_is_one_storage_per_rank_its_tasks_are_tagged_with() -> None:
    execution = _run(EXAMPLES / CREATED, 2)
    created = [memory for memory in execution.trace.memories if "@" in memory.name]
    assert [(memory.name, memory.kind, memory.manual_dep) for memory in created] == [
        ("staging@0", MemoryKind.HOST, False),
        ("staging@1", MemoryKind.HOST, False),
    ]
    for rank, memory in enumerate(created):
        tags = {
            task.spec.name: [tag.direction for tag in task.spec.tags if tag.memory == memory.id]
            for task in execution.tasks[rank]
        }
        assert tags == {
            "stage_step": [Direction.OUT],
            "push_step": [Direction.IN],
            "receive_step": [],
        }
        stores = [
            event
            for event in execution.trace.events[rank]
            if event.access is not None and event.access.memory == memory.id
        ]
        assert [(event.label, event.rank) for event in stores] == [
            ("pl.store", rank),
            ("pl.load", rank),
        ]


def test_a_created_tensor_orders_its_reader_after_its_writer_and_manual_dep_drops_it() -> None:
    assert _order(CREATED)[("stage_step", "push_step")]  # read-after-write, inferred
    assert not _order(MANUAL_DEP)[("stage_step", "push_step")]
    assert _order(MANUAL_DEP)[("push_step", "receive_step")]  # deps= still order
    assert _order(MANUAL_DEP_DEPS)[("stage_step", "push_step")]


def test_write_after_read_on_a_created_tensor_is_not_tracked() -> None:
    unordered = _order(RESTAGE_WAR)
    assert unordered[("stage_step", "restage_step")]  # both write staging
    assert not unordered[("push_step", "restage_step")]  # the push only reads it
    assert _order(RESTAGE)[("push_step", "restage_step")]


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [(MANUAL_DEP, "stage_step", "push_step"), (RESTAGE_WAR, "push_step", "restage_step")],
)
def test_a_missing_edge_on_a_created_tensor_is_a_wrong_result_naming_both_tasks(
    name: str, first: str, second: str
) -> None:
    path = EXAMPLES / name
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    (finding,) = result.findings
    assert (finding.kind, tuple(finding.ranks)) == (FindingKind.WRONG_RESULT, (0,))
    note = (
        f"rank 0: task {second} (line {_submit_line(path, second)}) may run before or "
        f"during task {first} (line {_submit_line(path, first)})"
    )
    assert any(text.startswith(note) for text in result.notes)


def test_a_held_back_task_gives_its_caller_the_tensor_it_writes() -> None:
    """`staging, staged = pl.submit(self.stage_step, x, staging)` is held back while
    the push runs first: the push gets `staging` itself and sends its zeros."""
    (result,) = racecheck.verify(str(EXAMPLES / MANUAL_DEP), ranks=[2]).results
    (finding,) = result.findings
    assert finding.diff is not None and finding.diff.tensor == "y"
    assert finding.diff.got == (0.0, 0.0, 0.0, 0.0) != finding.diff.golden


STAGE_OUT = "        staging: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],\n    ) -> pl.Tensor"
KERNEL_MANUAL_DEP = "        scratch = pl.create_tensor([1, SIZE], dtype=pl.FP32, manual_dep=True)"
PUSH_LOAD = "        data = pl.load(staging, [0, 0], [1, SIZE])  # @load\n"


@pytest.mark.parametrize(
    ("old", "new", "at", "message"),
    [
        (
            STAGE_OUT,
            STAGE_OUT.replace(
                "pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]", "pl.Tensor[[1, SIZE], pl.FP32]"
            ),
            "pl.submit(self.stage_step,",
            "a reordered run holds task stage_step back, and its 1 declared result(s) are "
            "not the 0 pl.Out/pl.InOut tensor(s) it is passed",
        ),
        (
            "        return staging\n",
            "        return x\n",
            "pl.submit(self.stage_step,",
            "a reordered run held task stage_step back and gave its caller staging@0",
        ),
        (
            PUSH_LOAD,
            f"{KERNEL_MANUAL_DEP}\n{PUSH_LOAD}",
            KERNEL_MANUAL_DEP,
            "pl.create_tensor(manual_dep=True) outside a per-device function is not modelled",
        ),
    ],
)
def test_what_it_cannot_hold_back_or_tag_is_refused_at_its_line(
    tmp_path: Path, old: str, new: str, at: str, message: str
) -> None:
    source = (EXAMPLES / MANUAL_DEP).read_text()
    assert source.count(old) == 1
    refused = tmp_path / "refused.py"
    refused.write_text(source.replace(old, new))
    line = next(n for n, text in enumerate(refused.read_text().splitlines(), 1) if at in text)
    report = racecheck.verify(str(refused), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and message in result.message
    assert any(f"refused.py:{line}:" in error for error in report.errors)
