"""Tasks within a rank (docs/model.md): which the runtime orders, which it may overlap,
and what racecheck answers for them; window lifetime under --repeat (docs/model.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.cosim import Execution, simulate
from racecheck.cosim.tasks import ordered_pairs
from racecheck.events import EventKind
from racecheck.findings import FindingCode, FindingKind, Verdict
from racecheck.load import discover, load_file
from racecheck.options import RuntimeOrder
from racecheck.report.reasons import ReasonCode, has_code

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(name: str, ranks: int) -> Execution:
    loaded = load_file(str(EXAMPLES / name))
    (spec,) = discover(loaded, programs=(), args={})
    return simulate(spec.instantiate(ranks))


def _order(execution: Execution, rank: int, rules: RuntimeOrder) -> dict[tuple[str, str], bool]:
    tasks, (events, memories) = execution.tasks[rank], execution.in_program_order
    before = ordered_pairs(tasks, events[rank], rules, memories)
    return {
        (tasks[i].spec.name, tasks[j].spec.name): before[i][j]
        for j in range(len(tasks))
        for i in range(j)
    }


def _line(name: str, marker: str, folder: Path = EXAMPLES) -> int:
    lines = (folder / name).read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if text.endswith(f"# @{marker}"))


def test_write_after_read_between_tasks_is_not_tracked() -> None:
    order = _order(_run("91_receive_then_scrub_bug_war.py", 2), 0, RuntimeOrder.CURRENT)
    assert order == {
        ("push_step", "receive_step"): True,  # the remote_store writes inbox: RAW
        ("push_step", "scrub_step"): True,  # both write inbox: WAW
        ("receive_step", "scrub_step"): False,  # WAR: untracked
    }


def test_remote_store_targets_are_writes_only_since_1683() -> None:
    execution = _run("90_push_then_unpack.py", 2)
    assert _order(execution, 1, RuntimeOrder.CURRENT) == {("push_step", "unpack_step"): True}
    assert _order(execution, 1, RuntimeOrder.PRE_1683) == {("push_step", "unpack_step"): False}


def _all_pairs(name: str) -> list[bool]:
    execution = _run(name, 2)
    tasks, (events, memories) = execution.tasks[0], execution.in_program_order
    assert len(tasks) == 3
    before = ordered_pairs(tasks, events[0], RuntimeOrder.CURRENT, memories)
    return [before[i][j] for j in range(3) for i in range(j)]


def test_deps_order_regions_and_manual_scope_drops_inferred_edges() -> None:
    assert _all_pairs("92_receive_then_scrub.py") == [True, True, True]
    assert _all_pairs("93_manual_scope_bug_no_deps.py") == [False, False, False]
    assert _all_pairs("94_manual_scope_deps.py") == [True, True, True]


def test_single_kernel_orchestrations_have_one_task_and_nothing_to_reorder() -> None:
    execution = _run("08_allreduce_mesh.py", 4)
    trace = execution.trace
    for rank, tasks in enumerate(execution.tasks):
        assert [task.spec.name for task in tasks] == ["reduce_step"]
        assert (tasks[0].first, tasks[0].end) == (0, len(trace.events[rank]))
    assert execution.plan is None  # one task a rank: nothing to run as threads


def test_a_write_after_read_race_is_reported_with_both_lines_and_both_tasks() -> None:
    name = "91_receive_then_scrub_bug_war.py"
    report = racecheck.verify(str(EXAMPLES / name), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.BUG
    scrub, push, receive = _line(name, "scrub"), _line(name, "push"), _line(name, "receive")
    races = {
        (finding.detail, frozenset(loc.line for loc in finding.locations), finding.threads)
        for finding in result.findings
        if finding.kind is FindingKind.RACE and finding.confirmed
    }
    assert (
        "write-after-write",
        frozenset({scrub, push}),
        ("task push_step", "task scrub_step"),
    ) in races
    war = ("task receive_step", "task scrub_step")
    assert ("write-after-read", frozenset({receive, scrub}), war) in races


def test_unordered_regions_race_as_threads_naming_both(tmp_path: Path) -> None:
    source = (EXAMPLES / "92_receive_then_scrub.py").read_text()
    assert ", deps=[received]" in source
    unordered = tmp_path / "no_deps.py"
    unordered.write_text(source.replace(", deps=[received]", ""))
    (result,) = racecheck.verify(str(unordered), ranks=[2]).results
    assert result.verdict is Verdict.BUG
    war = [
        finding
        for finding in result.findings
        if finding.kind is FindingKind.RACE and finding.detail == "write-after-read"
    ]
    assert war and war[0].confirmed
    receive = _line("92_receive_then_scrub.py", "receive")
    scrub = _line("92_receive_then_scrub.py", "scrub")
    assert set(war[0].threads) == {f"task pl.at (line {receive})", f"task pl.at (line {scrub})"}


@pytest.mark.parametrize("order", ["current", "pre-1683"])
def test_1670_pattern_depends_on_the_runtime_rules(order: str) -> None:
    name = "90_push_then_unpack.py"
    (result,) = racecheck.verify(str(EXAMPLES / name), ranks=[3], runtime_order=order).results
    if order == "current":
        assert result.verdict is Verdict.PROVED
        return
    assert result.verdict is Verdict.BUG
    (race,) = result.findings
    assert race.detail == "read-after-write"
    assert {location.line for location in race.locations} == {
        _line(name, "unpack"),
        _line(name, "push"),
    }


def test_repeat_says_windows_persist_and_reset_windows_makes_single_use_kernels_correct() -> None:
    path = str(EXAMPLES / "06_shift_counter_barrier_bug_no_reset.py")
    (persistent,) = racecheck.verify(path, ranks=[2], repeat=2).results
    assert persistent.verdict is Verdict.BUG
    assert any("never zeroed" in note for note in persistent.notes)
    (reset,) = racecheck.verify(path, ranks=[2], repeat=2, reset_windows=True).results
    assert reset.verdict is Verdict.PROVED and reset.model == "shift+1"
    assert any("--reset-windows" in note for note in reset.notes)
    assert not any("single-use" in note for note in reset.notes)


def test_dispatches_without_windows_are_ordered_only_by_their_tags() -> None:
    path = Path(__file__).parent / "fixtures" / "host_war_dispatches.py"
    results = {result.program: result for result in racecheck.verify(str(path), ranks=[2]).results}
    for program, first in (
        ("read_then_overwrite", "double"),
        ("inout_then_overwrite", "double_inout"),  # Out looks nothing up
    ):
        untracked = results[program]  # the overwrite may run first: a write-after-read
        assert untracked.verdict is Verdict.BUG
        (race,) = untracked.findings
        assert race.kind is FindingKind.RACE and race.confirmed
        assert race.detail == "write-after-read"
        assert len(race.locations) == 2  # the reader's load, the overwrite's store
        assert set(race.threads) == {f"task {first}", "task overwrite"}
    ordered = results["inout_then_inout"]
    assert ordered.verdict is Verdict.PROVED


def test_a_kernel_mixing_cube_ops_and_comm_gets_a_cube_lane_with_its_sync_only() -> None:
    execution = _run("95_shift_matmul_bug_cube_lane_notify.py", 2)
    vector, cube = execution.tasks[0]
    assert (vector.spec.name, cube.spec.name) == ("shift_matmul", "shift_matmul (cube lane)")
    events = execution.in_program_order[0][0]  # the run the threads are planned from
    assert [event.kind for event in events[cube.first : cube.end]] == [
        EventKind.NOTIFY,
        EventKind.WAIT,
    ]
    assert EventKind.STORE in {event.kind for event in events[vector.first : vector.end]}
    assert _order(execution, 0, RuntimeOrder.CURRENT) == {
        ("shift_matmul", "shift_matmul (cube lane)"): False
    }


def test_the_cube_lane_notify_publishes_before_the_push_lands() -> None:
    name = "95_shift_matmul_bug_cube_lane_notify.py"
    (result,) = racecheck.verify(str(EXAMPLES / name), ranks=[2]).results
    assert result.verdict is Verdict.BUG
    (race,) = result.findings
    assert race.detail == "read-after-write"
    assert {location.line for location in race.locations} == {
        _line(name, "fetch"),
        _line(name, "push"),
    }
    assert race.confirmed
    assert any(step.task == "task shift_matmul (cube lane)" for step in race.witness)


def test_matmul_and_communication_in_different_tasks_of_one_function_make_no_cube_lane(
    tmp_path: Path,
) -> None:
    name = "213_spmd_matmul_then_push.py"
    execution = _run(name, 2)
    assert [task.spec.thread_name for task in execution.tasks[0]] == [
        "block 0 of project",
        "block 0 of push",
        "block 1 of push",
        "task arrive",
        "task fetch",
    ]
    source = (EXAMPLES / name).read_text()
    notify = "        pld.system.notify(signal, peer=right"
    assert notify in source
    mixed = tmp_path / "mixed.py"  # the project block notifies too: one task mixes
    mixed.write_text(
        source.replace(
            "        pl.store(pl.matmul(left, weights), [0, 0], product)\n",
            "        pl.store(pl.matmul(left, weights), [0, 0], product)\n"
            f"{notify}, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)\n",
        )
    )
    report = racecheck.verify(str(mixed), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and "this kernel mixes" in result.message


def test_deps_on_a_mixed_kernel_order_the_dependent_after_both_its_lanes(
    tmp_path: Path,
) -> None:
    source = (EXAMPLES / "97_receive_then_scrub_submit.py").read_text()
    edits = {  # the receive mixes a cube op in (its wait runs on both lanes) ...
        "        y = pl.store(recv, [0, 0], y)\n": (
            "        pl.move(recv, target_memory=pl.Mem.Left)\n"
            "        y = pl.store(recv, [0, 0], y)\n"
        ),
        # ... and the scrub, named in deps=, takes back the credit that wait reads
        "    def scrub_step(self, inbox: pl.Out[pld.DistributedTensor[[1, SIZE], pl.FP32]]):\n": (
            "    def scrub_step(\n"
            "        self,\n"
            "        inbox: pl.Out[pld.DistributedTensor[[1, SIZE], pl.FP32]],\n"
            "        signal: pld.DistributedTensor[[1, 1], pl.INT32],\n"
            "    ):\n"
            "        me = pld.rank(pld.get_comm_ctx(signal))\n"
            "        pld.system.notify(\n"
            "            signal, peer=me, offsets=[0, 0], value=-1, op=pld.NotifyOp.AtomicAdd\n"
            "        )\n"
        ),
        "pl.submit(self.scrub_step, inbox, deps=[received])": (
            "pl.submit(self.scrub_step, inbox, signal, deps=[received])"
        ),
    }
    for old, new in edits.items():
        assert old in source
        source = source.replace(old, new)
    variant = tmp_path / "mixed_receive.py"
    variant.write_text(source)
    execution = simulate(discover(load_file(str(variant)), programs=(), args={})[0].instantiate(2))
    names = [task.spec.name for task in execution.tasks[0]]
    assert names == ["push_step", "receive_step", "receive_step (cube lane)", "scrub_step"]
    order = _order(execution, 0, RuntimeOrder.CURRENT)
    assert order[("receive_step (cube lane)", "scrub_step")]
    (result,) = racecheck.verify(str(variant), ranks=[2]).results
    assert result.verdict is Verdict.PROVED


def test_no_dep_args_drops_a_regions_edges(tmp_path: Path) -> None:
    source = (EXAMPLES / "92_receive_then_scrub.py").read_text()
    dropped = tmp_path / "no_dep_args.py"
    dropped.write_text(source.replace("deps=[received]", "no_dep_args=[inbox]"))
    execution = simulate(discover(load_file(str(dropped)), programs=(), args={})[0].instantiate(2))
    tasks, (events, memories) = execution.tasks[0], execution.in_program_order
    before = ordered_pairs(tasks, events[0], RuntimeOrder.CURRENT, memories)
    assert (before[0][1], before[0][2], before[1][2]) == (True, False, False)


def test_witness_steps_name_the_overlapping_tasks_that_ran_them() -> None:
    name = "95_shift_matmul_bug_cube_lane_notify.py"
    (result,) = racecheck.verify(str(EXAMPLES / name), ranks=[2]).results
    (race,) = result.findings
    tasks = {(step.rank, step.location.line, step.task) for step in race.witness}
    assert (1, _line(name, "fetch"), "task shift_matmul") in tasks
    assert (0, _line(name, "push"), "task shift_matmul") in tasks
    assert {task for _, _, task in tasks} == {"task shift_matmul", "task shift_matmul (cube lane)"}


def test_witness_steps_of_a_rank_running_one_task_at_a_time_name_no_task() -> None:
    (result,) = racecheck.verify(
        str(EXAMPLES / "09_allreduce_mesh_bug_no_barrier.py"), ranks=[2]
    ).results
    assert result.findings
    assert {step.task for finding in result.findings for step in finding.witness} == {""}


def test_submit_deps_order_a_write_after_read_and_a_wrong_dep_leaves_it_open() -> None:
    assert _all_pairs("97_receive_then_scrub_submit.py") == [True, True, True]
    assert _all_pairs("98_receive_then_scrub_submit_bug_wrong_dep.py") == [True, True, False]


def test_submit_returns_the_results_then_the_task_id_flat(tmp_path: Path) -> None:
    source = (EXAMPLES / "97_receive_then_scrub_submit.py").read_text()
    unpacked = "y, received = pl.submit(self.receive_step, inbox, signal, y, deps=[pushed])"
    assert unpacked in source
    whole = tmp_path / "whole_tuple.py"
    whole.write_text(
        source.replace(
            unpacked,
            "submitted = pl.submit(self.receive_step, inbox, signal, y, deps=[pushed])\n"
            "        assert len(submitted) == 2 and submitted[0] is y\n"
            "        received = submitted[1]",
        )
    )
    (result,) = racecheck.verify(str(whole), ranks=[3]).results
    assert result.verdict is Verdict.PROVED


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("pl.submit(self.per_rank, x, y, inbox, signal)", "takes a kernel written self.<kernel>"),
        ("pl.submit(self.scrub_step, inbox, predicate=(1,))", "predicate=...) is not modelled"),
    ],
)
def test_submit_refuses_what_it_does_not_model(tmp_path: Path, call: str, message: str) -> None:
    source = (EXAMPLES / "97_receive_then_scrub_submit.py").read_text()
    scrub = "pl.submit(self.scrub_step, inbox, deps=[received])"
    refused = tmp_path / "refused.py"
    refused.write_text(source.replace(scrub, call))
    line = refused.read_text().splitlines().index(f"        {call}") + 1
    report = racecheck.verify(str(refused), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and message in result.message
    assert any(f"refused.py:{line}:" in error for error in report.errors)


SPLIT = "122_matmul_shift_split_aiv.py"


def _split_variant(tmp_path: Path, old: str, new: str) -> Path:
    source = (EXAMPLES / SPLIT).read_text()
    assert old in source
    variant = tmp_path / "variant.py"
    variant.write_text(source.replace(old, new))
    return variant


def _split_line() -> int:
    lines = (EXAMPLES / SPLIT).read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if "in pl.split_aiv(" in text)


def test_split_aiv_pins_its_communication_to_the_vector_lane_and_each_sub_lane_is_a_thread() -> (
    None
):
    execution = _run(SPLIT, 2)
    assert [[task.spec.name for task in tasks] for tasks in execution.tasks] == [
        ["matmul_shift", "matmul_shift (AIV sub-lane 1)"],
        ["matmul_shift", "matmul_shift (AIV sub-lane 1)"],
    ]  # no cube lane: the notify, wait and remote_store run inside the region
    assert execution.inexact == ()
    threads = execution.trace.threads
    kinds = [
        event.kind
        for key, events in enumerate(execution.trace.events)
        if threads[key].rank == 0
        for event in events
    ]
    assert kinds.count(EventKind.NOTIFY) == 1 and kinds.count(EventKind.WAIT) == 1


def test_a_sub_lane_after_the_first_doing_the_work_is_proved(tmp_path: Path) -> None:
    variant = _split_variant(tmp_path, "if aiv_id == 0:", "if aiv_id == 1:")
    for result in racecheck.verify(str(variant), ranks=[1, 2, 3]).results:
        assert result.verdict is Verdict.PROVED  # the sub-lanes are threads: every order


_WAIT = "pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)"
_FETCH = "recv = pl.load(inbox, [0, 0], [SIZE, SIZE])  # @fetch"
_STORE = "y = pl.store(recv, [0, 0], y)"


@pytest.mark.parametrize(
    ("old", "new", "label"),
    [
        (f"            {_STORE}\n", f"    {_STORE}  # @after\n", "pl.store"),
        (
            f"            {_WAIT}\n            {_FETCH}\n            {_STORE}\n",
            f"    {_WAIT}  # @after\n    {_FETCH}\n    {_STORE}\n",
            "pld.system.wait",
        ),
        (  # a load of a window another rank writes
            f"            {_FETCH}\n            {_STORE}\n",
            f"    {_FETCH}  # @after\n    {_STORE}\n",
            "pl.load",
        ),
    ],
)
def test_code_after_a_split_aiv_region_is_never_proved(
    tmp_path: Path, old: str, new: str, label: str
) -> None:
    variant = _split_variant(tmp_path, old, new)
    execution = simulate(discover(load_file(str(variant)), programs=(), args={})[0].instantiate(2))
    after = _line("variant.py", "after", tmp_path)
    threads = execution.trace.threads
    running = {
        threads[key].task_name
        for key, events in enumerate(execution.trace.events)
        for event in events
        if event.location.line == after
    }
    assert "matmul_shift" in running  # modelled on sub-lane 0 only: PyPTO leaves it open
    assert "matmul_shift (AIV sub-lane 1)" not in running
    (result,) = racecheck.verify(str(variant), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN and not result.findings
    assert has_code(result.message, ReasonCode.SPLIT_AIV_OUTSIDE)
    assert result.message.startswith(f"line {after} ({label}) is outside every pl.split_aiv")
    assert "whether the second AIV sub-lane repeats it" in result.message


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("pl.aiv_shard(product)", "product"),  # a full-width body: the compiler halves it
        ("pl.aiv_shard(product)", "pl.aic_gather(pl.aiv_shard(product))"),
    ],
)
def test_split_aiv_halving_modes_are_refused_at_their_line_unless_the_body_shards(
    tmp_path: Path, old: str, new: str
) -> None:
    variant = _split_variant(tmp_path, "pl.SplitMode.NONE", "pl.SplitMode.UP_DOWN")
    variant.write_text(variant.read_text().replace(old, new))
    report = racecheck.verify(str(variant), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and "halves every tile" in result.message
    assert any(f"variant.py:{_split_line()}:" in error for error in report.errors)


def test_up_down_gives_each_sub_lane_half_the_rows_and_left_right_half_the_columns(
    tmp_path: Path,
) -> None:
    name = "217_split_aiv_up_down.py"
    pushed = _pushed_bytes(_run(name, 1))
    assert pushed == {"matmul_shift": ((0, 512),), "matmul_shift (AIV sub-lane 1)": ((512, 1024),)}
    source = (EXAMPLES / name).read_text()
    columns = tmp_path / "left_right.py"
    for old, new in {
        "UP_DOWN": "LEFT_RIGHT",
        "[aiv_id * HALF, 0]": "[0, aiv_id * HALF]",
        "[HALF, SIZE]": "[SIZE, HALF]",
    }.items():
        assert old in source
        source = source.replace(old, new)
    columns.write_text(source)
    execution = simulate(discover(load_file(str(columns)), programs=(), args={})[0].instantiate(1))
    row = 16 * 4  # bytes
    assert _pushed_bytes(execution)["matmul_shift (AIV sub-lane 1)"][:2] == (
        (row // 2, row),
        (row + row // 2, 2 * row),
    )
    (result,) = racecheck.verify(str(columns), ranks=[2]).results
    assert result.verdict is Verdict.PROVED


def test_a_halving_region_in_an_outlined_spmd_block_is_read_from_its_line(tmp_path: Path) -> None:
    source = (EXAMPLES / "213_spmd_matmul_then_push.py").read_text()
    block = (
        '    for half in pl.spmd(2, name_hint="push"):\n'
        "        rows = pl.load(product, [half * HALF, 0], [HALF, SIZE])\n"
    )
    assert block in source
    halved = tmp_path / "halved.py"  # in a block, not a kernel: its sub-lanes are threads too
    halved.write_text(
        source.replace(
            block,
            '    for _ in pl.spmd(1, name_hint="push"):\n'
            "      for half in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):\n"
            "        rows = pl.aiv_shard(pl.load(product, [0, 0], [SIZE, SIZE]))\n",
        )
    )
    execution = simulate(discover(load_file(str(halved)), programs=(), args={})[0].instantiate(1))
    pushed = _pushed_bytes(execution)
    assert pushed == {
        "block 0 of push": ((0, 512),),
        "block 0 of push (AIV sub-lane 1)": ((512, 1024),),
    }
    (result,) = racecheck.verify(str(halved), ranks=[2]).results
    assert result.verdict is Verdict.PROVED  # was unknown while they ran one after another


def _pushed_bytes(execution: Execution) -> dict[str, tuple[tuple[int, int], ...]]:
    threads = execution.trace.threads
    return {
        threads[key].task_name: event.access.ranges
        for key, events in enumerate(execution.trace.events)
        for event in events
        if event.label == "pld.tile.remote_store" and event.access is not None
    }


SPMD = "124_ring_shift_spmd_push.py"


def test_an_spmd_loop_runs_each_block_as_a_task_ordered_before_the_kernel_reading_its_pushes() -> (
    None
):
    execution = _run(SPMD, 2)
    tasks = execution.tasks[0]
    assert [task.spec.thread_name for task in tasks] == [
        "block 0 of pl.spmd",
        "block 1 of pl.spmd",
        "task receive_step",
    ]
    events = execution.in_program_order[0][0]
    for block in tasks[:2]:
        kinds = [event.kind for event in events[block.first : block.end]]
        assert kinds == [EventKind.LOAD, EventKind.STORE]
    before = ordered_pairs(tasks, events, RuntimeOrder.CURRENT, execution.in_program_order[1])
    assert (before[0][1], before[0][2], before[1][2]) == (False, True, True)
    assert execution.plan is not None and execution.inexact == ()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "for block in pl.spmd(2):",
            "with pl.spmd(2) as t: pass  # noqa\n    for block in range(2):",
            "on lines of its own",
        ),
        ("for block in pl.spmd(2):", "for block in pl.spmd(2, predicate=(1,)):", "predicate"),
    ],
)
def test_spmd_forms_it_does_not_model_are_refused_at_their_line(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    source = (EXAMPLES / SPMD).read_text()
    line = source.splitlines().index(f"    {old}") + 1
    variant = tmp_path / "variant.py"
    variant.write_text(source.replace(old, new))
    report = racecheck.verify(str(variant), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and message in result.message
    assert any(f"variant.py:{line}:" in error for error in report.errors)


CHIP = "126_chip_all_to_all_v.py"


def test_a_builtin_in_a_per_device_function_is_a_task_ordered_by_its_directions() -> None:
    execution = _run(CHIP, 2)
    assert _order(execution, 0, RuntimeOrder.CURRENT) == {
        ("stage_step", "pld.tensor.all_to_all_v"): True,  # reads what stage_step writes
        ("stage_step", "consume_step"): True,
        ("pld.tensor.all_to_all_v", "consume_step"): True,  # writes what consume_step reads
    }
    collective = execution.tasks[0][1]
    notifies = [
        event
        for event in execution.trace.events[0][collective.first : collective.end]
        if event.kind is EventKind.NOTIFY
    ]
    # the host kernel: a Set of the count into each destination, then the barrier and -1
    assert [event.notify.op.name for event in notifies if event.notify] == [
        "SET",
        "SET",
        "ATOMIC_ADD",
        "ATOMIC_ADD",
    ]


def test_other_builtins_in_a_per_device_function_are_refused_as_pypto_does(
    tmp_path: Path,
) -> None:
    source = (EXAMPLES / CHIP).read_text()
    call = "data = pld.tensor.all_to_all_v(stage, data, signal, counts, recv)"
    assert call in source
    refused = tmp_path / "barrier.py"
    refused.write_text(source.replace(call, "pld.tensor.barrier(signal)"))
    line = source.splitlines().index(f"            {call}") + 1
    report = racecheck.verify(str(refused), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and "PyPTO lowers only" in result.message
    assert any(f"barrier.py:{line}:" in error for error in report.errors)


def test_the_dispatch_form_of_spmd_runs_its_kernel_once_per_block_index() -> None:
    execution = _run("128_ring_shift_spmd_dispatch.py", 2)
    *blocks, receive = execution.tasks[0]
    assert [block.spec.thread_name for block in blocks] == [
        "block 0 of pl.spmd",
        "block 1 of pl.spmd",
    ]
    assert receive.spec.name == "receive_step"
    events = execution.in_program_order[0][0]
    stores = [
        event.access.ranges
        for block in blocks
        for event in events[block.first : block.end]
        if event.kind is EventKind.STORE and event.access is not None
    ]
    half = 32 * 4  # the bytes of HALF FP32 elements
    assert stores == [((0, half),), ((half, 2 * half),)]
    assert execution.inexact == ()


def test_spmd_submit_runs_the_kernel_on_each_block_as_a_task_of_its_own(tmp_path: Path) -> None:
    execution = _run("130_ring_shift_spmd_submit.py", 2)
    names = [task.spec.thread_name for task in execution.tasks[0]]
    assert names == ["block 0 of push_half", "block 1 of push_half", "task receive_step"]
    events = execution.in_program_order[0][0]
    for block in execution.tasks[0][:2]:  # a load and a store per block
        assert len([e for e in events[block.first : block.end] if e.access]) == 2
    assert execution.inexact == ()
    source = (EXAMPLES / "130_ring_shift_spmd_submit.py").read_text()
    same_half = tmp_path / "same_half.py"
    same_half.write_text(source.replace("pl.tile.get_block_idx() * HALF", "0"))
    for result in racecheck.verify(str(same_half), ranks=[2, 3]).results:
        assert result.verdict is not Verdict.PROVED
        races = [finding for finding in result.findings if finding.kind is FindingKind.RACE]
        assert races, result.message
        assert {"block 0 of push_half", "block 1 of push_half"} <= {
            thread for finding in races for thread in finding.threads
        }


STAGED = "137_staged_shift_no_dep.py"
ARRAY = "139_staged_shift_task_id_array.py"


def _stage_then_push(source: str, tmp_path: Path) -> bool:
    variant = tmp_path / "variant.py"
    variant.write_text(source)
    execution = simulate(discover(load_file(str(variant)), programs=(), args={})[0].instantiate(2))
    return _order(execution, 0, RuntimeOrder.CURRENT)[("stage_step", "push_step")]


def test_no_dep_drops_the_edge_a_kernel_call_would_get(tmp_path: Path) -> None:
    ordered = (EXAMPLES / STAGED).read_text()
    assert ", deps=[staged])" in ordered and "pl.no_dep(staging)" in ordered
    unordered = ordered.replace(", deps=[staged])", ")")
    assert _stage_then_push(ordered, tmp_path)  # by deps=
    assert not _stage_then_push(unordered, tmp_path)
    assert _stage_then_push(unordered.replace("pl.no_dep(staging)", "staging"), tmp_path)  # RAW


def test_deps_naming_a_task_id_array_names_every_slot(tmp_path: Path) -> None:
    unset = (EXAMPLES / "140_staged_shift_task_id_array_bug_unset_slot.py").read_text()
    assert _stage_then_push((EXAMPLES / ARRAY).read_text(), tmp_path)
    assert not _stage_then_push(unset, tmp_path)  # its slot holds pl.system.task_invalid()


@pytest.mark.parametrize(
    "name",
    [
        "138_staged_shift_no_dep_bug_missing_deps.py",
        "140_staged_shift_task_id_array_bug_unset_slot.py",
    ],
)
def test_a_dropped_edge_lets_the_push_send_the_unstaged_tensor(name: str) -> None:
    stage, load = _line(name, "stage"), _line(name, "load")
    (result,) = racecheck.verify(str(EXAMPLES / name), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    (finding,) = result.findings
    assert (finding.code.value, tuple(finding.ranks)) == ("race-raw", (0, 0))
    assert [loc.line for loc in finding.locations] == [load, stage] and finding.confirmed
    assert finding.threads == ("task push_step", "task stage_step")


STAGE = "        _, staged = pl.submit(self.stage_step, x, staging)\n"
PUSH = "(pushed,) = pl.submit(self.push_step, pl.no_dep(staging), inbox, signal, deps=[ready])"
NO_DEP_IN_MANUAL = "            _, staged = pl.submit(self.stage_step, x, pl.no_dep(staging))"
INIT_VALUE = "        scratch = pl.create_tensor([1, SIZE], dtype=pl.BF16, init_value=1.0)"
INVALID = "        ready[0] = pl.system.task_invalid()\n"


@pytest.mark.parametrize(
    ("name", "old", "new", "at", "message"),
    [
        (
            STAGED,
            STAGE,
            f"        with pl.manual_scope():\n{NO_DEP_IN_MANUAL}\n",
            NO_DEP_IN_MANUAL,
            "pl.no_dep(...) inside pl.manual_scope() is rejected by PyPTO",
        ),
        (
            STAGED,
            STAGE,
            f"{INIT_VALUE}\n{STAGE}",
            INIT_VALUE,
            "only init_value=0 fills 16-bit floats",  # other fills are PyPTO's since #823
        ),
        (ARRAY, INVALID, "        ready[0] = 7\n", "ready[0] = 7", "holds task ids; got 7"),
        (
            ARRAY,
            f"{INVALID}{STAGE}        ready[0] = staged\n",
            STAGE,
            PUSH,
            "slot 0 of a pl.TASK_ID array is used before it is set: not modelled",
        ),
    ],
)
def test_task_dependency_constructs_it_does_not_model_are_refused_at_their_line(
    tmp_path: Path, name: str, old: str, new: str, at: str, message: str
) -> None:
    source = (EXAMPLES / name).read_text()
    assert old in source
    refused = tmp_path / "refused.py"
    refused.write_text(source.replace(old, new))
    line = next(n for n, text in enumerate(refused.read_text().splitlines(), 1) if at in text)
    report = racecheck.verify(str(refused), ranks=[2])
    (result,) = report.results
    assert result.verdict is Verdict.UNKNOWN and message in result.message
    assert any(f"refused.py:{line}:" in error for error in report.errors)


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_a_hang_that_a_later_unordered_task_releases_is_not_a_deadlock() -> None:
    """Example 160: each rank's receive waits for a push called after it. In program
    order every rank hangs; on the device the push runs alongside the blocked receive,
    at P=1 too (its push then writes the rank's own inbox, which the receive reads only
    once the push's notify has passed its wait)."""
    report = racecheck.verify(str(EXAMPLES / "160_receive_before_push_tasks.py"), ranks=[1, 2, 3])
    assert [result.verdict for result in report.results] == [Verdict.PROVED] * 3
    assert [result.findings for result in report.results] == [()] * 3


def test_a_reordering_shows_the_race_the_hang_in_program_order_hid() -> None:
    name = "161_receive_before_push_tasks_bug_scrub.py"
    (result,) = racecheck.verify(str(EXAMPLES / name), ranks=[2]).results
    assert result.verdict is Verdict.BUG
    found = {(f.code, tuple(loc.line for loc in f.locations)) for f in result.findings}
    push, scrub = _line(name, "push"), _line(name, "scrub")
    receive = _line(name, "receive")
    assert found == {
        (FindingCode.RACE_WAW, (push, scrub)),
        (FindingCode.RACE_WAW, (scrub, push)),
        (FindingCode.RACE_WAR, (receive, scrub)),  # the push task's scrub, untracked
    }


def test_tasks_that_overlap_on_one_input_path_only_are_checked_on_that_path() -> None:
    """The later task clears the tensor the earlier one reads only when x[0, 0] == 7:
    the overlap exists on that path, not the first one explored."""
    name = "war_on_one_input_path.py"
    (result,) = racecheck.verify(str(FIXTURES / name), ranks=[1]).results
    assert result.verdict is Verdict.BUG
    (race,) = result.findings
    assert race.kind is FindingKind.RACE and race.confirmed
    assert race.threads == ("task read_step", "task maybe_clear")
    assert race.inputs == (("x", 0, 7),)


def test_a_later_task_storing_into_a_signal_cell_releases_a_hang_like_a_notify() -> None:
    """The push signals with a `remote_store` into the neighbour's signal cell: it runs
    alongside the blocked receive and releases it, so no deadlock (was one at every P)."""
    name = "signal_store_release.py"
    results = racecheck.verify(str(FIXTURES / name), ranks=[1, 2, 3]).results
    assert [result.verdict for result in results] == [Verdict.PROVED] * 3


def test_a_signal_stored_by_an_unordered_task_can_land_before_the_data() -> None:
    """The signal is a `remote_store` into a signal cell in a task unordered with the
    push: its order matters as a notify's would (was proved at every P)."""
    name = "signal_store_split.py"
    one, two = racecheck.verify(str(FIXTURES / name), ranks=[1, 2]).results
    assert one.verdict is Verdict.PROVED
    assert two.verdict is Verdict.BUG
    found = {(f.code, tuple(loc.line for loc in f.locations)) for f in two.findings}
    push, load = _line(name, "push", FIXTURES), _line(name, "load", FIXTURES)
    assert found == {(FindingCode.RACE_RAW, (load, push))}
    assert two.findings[0].threads == ("task receive_step", "task push_step")


def test_spmd_blocks_one_of_which_stores_into_a_signal_cell_race() -> None:
    """Block 1 publishes with a `remote_store` into the signal cell the receiver waits
    on, block 0 the data: as concurrent threads the signal may land before the data
    (was proved at every P while the blocks ran one after another)."""
    name = "spmd_block_signal_store.py"
    results = racecheck.verify(str(FIXTURES / name), ranks=[2, 3]).results
    push = _line(name, "push", FIXTURES)
    for result in results:
        assert result.verdict is Verdict.BUG
        (race,) = [finding for finding in result.findings if finding.kind is FindingKind.RACE]
        assert race.detail == "read-after-write" and race.confirmed
        assert push in {location.line for location in race.locations}
        assert "block 0 of pl.spmd" in race.threads


def test_a_hang_in_the_reordered_order_that_nothing_can_release_is_a_deadlock() -> None:
    name = "release_real_deadlock.py"
    wait = _line(name, "wait", FIXTURES)
    for result in racecheck.verify(str(FIXTURES / name), ranks=[1, 2, 3]).results:
        assert result.verdict is Verdict.BUG
        (deadlock,) = result.findings
        assert (deadlock.kind, deadlock.locations[0].line) == (FindingKind.DEADLOCK, wait)
        assert set(deadlock.threads) == {"task receive_step"}


def test_split_aiv_in_a_per_device_function_s_own_code_is_refused(tmp_path: Path) -> None:
    """Example 224 with its split_aiv region out of the `pl.at` region: a per-device
    function's own code is no kernel whose sub-lanes racecheck can run again."""
    source = (EXAMPLES / "224_region_split_aiv_halves.py").read_text()
    region = '    with pl.at(level=pl.Level.CORE_GROUP, name_hint="push"):\n'
    assert region in source
    glue = tmp_path / "glue.py"
    glue.write_text(source.replace(region, "    if True:\n"))
    (result,) = racecheck.verify(str(glue), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN and not result.findings
    assert has_code(result.message, ReasonCode.SPLIT_AIV_IN_PLACE)
