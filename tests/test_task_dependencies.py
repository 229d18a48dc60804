"""Dependencies between the tasks of a rank (docs/model.md, tasks within a rank): tensors a
per-device function creates (`pl.create_tensor`, `manual_dep=True`), the kernel calls a
reordered run holds back, `pl.system.task_dummy`, `pl.scope` and task ids passed to and
returned by orchestration helpers (`pl.Scalar[pl.TASK_ID]`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.cosim import Execution, simulate
from racecheck.cosim.tasks import ordered_pairs
from racecheck.dsl.scopes import declared_results
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
JOINED = "146_staged_halves_task_dummy.py"
ONE_HALF = "147_staged_halves_task_dummy_bug_one_half.py"
HELPER = "148_staged_shift_manual_scope_helper.py"
NO_TASK = "149_staged_shift_manual_scope_helper_bug_invalid.py"


def _run(path: Path, ranks: int) -> Execution:
    (spec,) = discover(load_file(str(path)), programs=(), args={})
    return simulate(spec.instantiate(ranks))


def _order_of(path: Path) -> tuple[list[str], list[list[bool]]]:
    """Rank 0's tasks (name:line) and which the runtime runs after which, at P=2."""
    execution = _run(path, 2)
    tasks, (events, memories) = execution.tasks[0], execution.in_program_order
    before = ordered_pairs(tasks, events[0], RuntimeOrder.CURRENT, memories)
    return [f"{task.spec.name}:{task.spec.location.line}" for task in tasks], before


def _order(name: str) -> dict[tuple[str, str], bool]:
    named, before = _order_of(EXAMPLES / name)
    return {(named[i], named[j]): before[i][j] for j in range(len(named)) for i in range(j)}


def _submit_line(path: Path, kernel: str, nth: int = 0) -> int:
    lines = path.read_text().splitlines()
    calls = [n for n, text in enumerate(lines, 1) if f"pl.submit(self.{kernel}," in text]
    return calls[nth]


def _task(name: str, kernel: str, nth: int = 0) -> str:
    return f"{kernel}:{_submit_line(EXAMPLES / name, kernel, nth)}"


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


def _ordered(name: str, first: str, second: str, nth: int = 0) -> bool:
    return _order(name)[(_task(name, first, nth), _task(name, second))]


def test_a_created_tensor_orders_its_reader_after_its_writer_and_manual_dep_drops_it() -> None:
    assert _ordered(CREATED, "stage_step", "push_step")  # read-after-write, inferred
    assert not _ordered(MANUAL_DEP, "stage_step", "push_step")
    assert _ordered(MANUAL_DEP, "push_step", "receive_step")  # deps= still order
    assert _ordered(MANUAL_DEP_DEPS, "stage_step", "push_step")


def test_write_after_read_on_a_created_tensor_is_not_tracked() -> None:
    assert _ordered(RESTAGE_WAR, "stage_step", "restage_step")  # both write staging
    assert not _ordered(RESTAGE_WAR, "push_step", "restage_step")  # the push only reads
    assert _ordered(RESTAGE, "push_step", "restage_step")


def test_a_task_dummy_orders_what_names_it_after_every_task_it_joins() -> None:
    for nth in (0, 1):
        assert _ordered(JOINED, "stage_half", "push_step", nth)
    assert _ordered(ONE_HALF, "stage_half", "push_step", 0)
    assert not _ordered(ONE_HALF, "stage_half", "push_step", 1)
    low, high = _task(JOINED, "stage_half", 0), _task(JOINED, "stage_half", 1)
    assert not _order(JOINED)[(low, high)]  # manual_dep: the halves may run at once


def test_a_task_id_passed_to_and_returned_by_a_helper_orders_a_manual_scope() -> None:
    assert _ordered(HELPER, "stage_step", "push_step")
    assert _ordered(HELPER, "push_step", "receive_step")
    assert not _ordered(NO_TASK, "stage_step", "push_step")


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        (MANUAL_DEP, ("stage_step", 0), "push_step"),
        (RESTAGE_WAR, ("push_step", 0), "restage_step"),
        (ONE_HALF, ("stage_half", 1), "push_step"),
        (NO_TASK, ("stage_step", 0), "push_step"),
    ],
)
def test_a_missing_edge_is_a_race_naming_both_tasks(
    name: str, first: tuple[str, int], second: str
) -> None:
    path = EXAMPLES / name
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    (race,) = result.findings
    assert (race.kind, tuple(race.ranks)) == (FindingKind.RACE, (0, 0)) and race.confirmed
    # a kernel called on two lines is named with the line of the call
    named = {thread.split(" (line ")[0] for thread in race.threads}
    assert named == {f"task {first[0]}", f"task {second}"}
    assert race.diff is not None and race.diff.got != race.diff.golden


def test_a_held_back_task_gives_its_caller_the_tensor_it_writes() -> None:
    """`staging, staged = pl.submit(self.stage_step, x, staging)` is held back while
    the push runs first: the push gets `staging` itself and sends its zeros."""
    (result,) = racecheck.verify(str(EXAMPLES / MANUAL_DEP), ranks=[2]).results
    (finding,) = result.findings
    assert finding.diff is not None and finding.diff.tensor == "y"
    assert finding.diff.got == (0.0, 0.0, 0.0, 0.0) != finding.diff.golden


STAGE_OUT = "        staging: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],\n    ) -> pl.Tensor"
KERNEL_MANUAL_DEP = "        scratch = pl.create_tensor([1, SIZE], dtype=pl.FP32, manual_dep=True)"
KERNEL_DUMMY = "        gate = pl.system.task_dummy(deps=[])"
PUSH_LOAD = "        data = pl.load(staging, [0, 0], [1, SIZE])  # @load\n"
STAGE = "        staging, staged = pl.submit(self.stage_step, x, staging)\n"
AUTO = "        with pl.scope():\n"
PER_RANK = "    @pl.function(type=pl.FunctionType.Orchestration)\n    def per_rank("


@pytest.mark.parametrize(
    ("name", "old", "new", "at", "message"),
    [
        (
            MANUAL_DEP,
            STAGE_OUT,
            STAGE_OUT.replace(
                "pl.Out[pl.Tensor[[1, SIZE], pl.FP32]]", "pl.Tensor[[1, SIZE], pl.FP32]"
            ),
            "pl.submit(self.stage_step,",
            "task stage_step runs apart from its caller, and its 1 declared result(s) are "
            "neither its 0 pl.Out/pl.InOut tensor(s) nor its 0 pl.Out one(s)",
        ),
        (
            MANUAL_DEP,
            "        return staging\n",
            "        return x\n",
            "pl.submit(self.stage_step,",
            "task stage_step runs as a thread of its own and gave its caller staging@0",
        ),
        (
            MANUAL_DEP,
            PUSH_LOAD,
            f"{KERNEL_MANUAL_DEP}\n{PUSH_LOAD}",
            KERNEL_MANUAL_DEP,
            "pl.create_tensor(manual_dep=True) outside a per-device function is not modelled",
        ),
        (
            MANUAL_DEP,
            "pl.create_tensor([1, SIZE], dtype=pl.FP32, manual_dep=True)",
            "pl.full([1, SIZE], pl.FP32, 0.0)",
            "pl.submit(self.stage_step,",
            "task stage_step writes its argument staging, a value local to its caller",
        ),
        (
            MANUAL_DEP,
            "pl.submit(self.push_step, staging, inbox, signal)",
            "pl.submit(self.push_step, staging, inbox, signal, staged)",
            "pl.submit(self.push_step,",
            "kernel push_step is passed a task id",
        ),
        (
            MANUAL_DEP,
            PUSH_LOAD,
            f"{KERNEL_DUMMY}\n{PUSH_LOAD}",
            KERNEL_DUMMY,
            "pl.system.task_dummy is modelled in a per-device function only",
        ),
        (
            MANUAL_DEP,
            STAGE,
            f"{AUTO}    {STAGE}",
            AUTO.strip(),
            "pl.scope() (AUTO) is rejected by PyPTO outside a function declared with"
            " auto_scope=False",
        ),
        (
            HELPER,
            f"    {STAGE}",
            f"    {AUTO}        {STAGE}",
            AUTO.strip(),
            "pl.scope() (AUTO) inside a manual scope is rejected by PyPTO",
        ),
    ],
)
def test_what_it_cannot_hold_back_or_order_is_refused_at_its_line(
    tmp_path: Path, name: str, old: str, new: str, at: str, message: str
) -> None:
    source = (EXAMPLES / name).read_text()
    assert source.count(old) == 1
    refused = tmp_path / "refused.py"
    refused.write_text(source.replace(old, new))
    line = next(n for n, text in enumerate(refused.read_text().splitlines(), 1) if at in text)
    report = racecheck.verify(str(refused), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and message in result.message
    assert any(f"refused.py:{line}:" in error for error in report.errors)


def test_an_auto_scope_in_a_function_that_places_its_own_changes_no_order(tmp_path: Path) -> None:
    source = (EXAMPLES / MANUAL_DEP).read_text()
    own = PER_RANK.replace("Orchestration)", "Orchestration, auto_scope=False)")
    scoped = tmp_path / "scoped.py"
    scoped.write_text(source.replace(STAGE, f"{AUTO}    {STAGE}").replace(PER_RANK, own))
    assert not _order_of(scoped)[1][0][1]  # the stage and the push: still unordered
    (result,) = racecheck.verify(str(scoped), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    assert [finding.code.value for finding in result.findings] == ["race-raw"]


def test_a_postponed_tuple_annotation_declares_each_of_its_results() -> None:
    """This file postpones annotations: `-> tuple[...]` is a string until evaluated."""

    def two(x: int) -> tuple[int, int]:
        return x, x

    def none(x: int) -> None:
        del x

    assert (declared_results(two), declared_results(none)) == (2, 0)
