"""Builtin collectives called from the host function run PyPTO's host kernels
(docs/model.md): one dispatch per device, with the host kernels' own sequences, and
`all_to_all_v` in both places (§5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import racecheck
from racecheck.cosim import simulate
from racecheck.errors import UsageError
from racecheck.events import Event, EventKind, NotifyOp
from racecheck.load import discover, load_file

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "host_builtins.py"
SPECS = {spec.name: spec for spec in discover(load_file(str(FIXTURE)))}


def _line_of(path: Path, text: str) -> int:
    return next(
        number for number, line in enumerate(path.read_text().splitlines(), start=1) if text in line
    )


def _waits(events: tuple[Event, ...], label: str) -> list[int]:
    return [e.wait.expected for e in events if e.wait is not None and e.label == label]


def _notify_values(events: tuple[Event, ...], label: str) -> list[int]:
    return [e.notify.value for e in events if e.notify is not None and e.label == label]


@pytest.mark.parametrize(
    ("program", "model"),
    [
        ("build_broadcast", "broadcast-root1"),
        ("build_allgather", "allgather"),
        ("build_reduce_scatter", "reduce_scatter-sum"),
        ("build_all_to_all", "all_to_all"),
        ("build_signal_less_allreduce", "allreduce-sum"),
        ("build_barrier_then_kernel_allreduce", "allreduce-sum"),
    ],
)
def test_host_builtins_are_proved_and_compute_their_collective(program: str, model: str) -> None:
    report = racecheck.verify(str(FIXTURE), ranks="2..4", programs=[program])
    assert {(result.verdict, result.model) for result in report.results} == {
        (racecheck.Verdict.PROVED, model)
    }


def test_host_events_carry_the_host_call_line() -> None:
    trace = simulate(SPECS["build_all_to_all"].instantiate(2)).trace
    call = _line_of(FIXTURE, "target = pld.tensor.all_to_all(source, target, signal)")
    builtin = [e for e in trace.events[0] if e.label == "pld.tensor.all_to_all"]
    assert builtin and {e.location.line for e in builtin} == {call}


def test_host_broadcast_runs_one_generation_per_256_element_tile() -> None:
    trace = simulate(SPECS["build_broadcast"].instantiate(2)).trace  # 8 elements: one tile
    assert _waits(trace.events[0], "pld.tensor.broadcast") == [1]
    report = racecheck.verify(
        str(FIXTURE), ranks="3", programs=["build_broadcast"], args={"size": "600"}
    )
    assert [result.verdict for result in report.results] == [racecheck.Verdict.PROVED]
    spec = discover(load_file(str(FIXTURE)), args={"size": "600"})
    broadcast = next(s for s in spec if s.name == "build_broadcast")
    events = simulate(broadcast.instantiate(3)).trace.events
    for rank in range(3):
        assert _waits(events[rank], "pld.tensor.broadcast") == [1, 1, 2, 2, 3, 3]
        assert _notify_values(events[rank], "pld.tensor.broadcast")[-2:] == [-3, -3]
    root_stores = [
        e for e in events[1] if e.kind is EventKind.STORE and e.label == "pld.tensor.broadcast"
    ]
    assert len(root_stores) == 3  # the root re-stores every tile before its generation


def test_host_broadcast_reused_back_to_back_races_with_the_readers() -> None:
    report = racecheck.verify(str(FIXTURE), ranks="2", programs=["build_broadcast"], repeat=2)
    (result,) = report.results
    call = _line_of(FIXTURE, "data = pld.tensor.broadcast(data, signal, root=root)")
    assert result.verdict is racecheck.Verdict.BUG
    assert any(
        finding.detail == "write-after-read"
        and {location.line for location in finding.locations} == {call}
        for finding in result.findings
    )


def test_host_reduce_scatter_stores_its_row_before_the_second_barrier() -> None:
    events = simulate(SPECS["build_reduce_scatter"].instantiate(3)).trace.events[0]
    builtin = [e for e in events if e.label == "pld.tensor.reduce_scatter"]
    store = next(i for i, e in enumerate(builtin) if e.kind is EventKind.STORE)
    second = next(i for i, e in enumerate(builtin) if e.wait is not None and e.wait.expected == 2)
    assert store < second
    assert _notify_values(builtin, "pld.tensor.reduce_scatter")[-2:] == [-2, -2]


def test_a_signal_less_allreduce_gets_a_private_int32_signal_per_core() -> None:
    spec = discover(load_file(str(FIXTURE)), args={"core_num": "2"})
    allreduce = next(s for s in spec if s.name == "build_signal_less_allreduce")
    trace = simulate(allreduce.instantiate(2)).trace
    cells = {
        e.notify.cell.index for e in trace.events[0] if e.notify is not None and e.notify.value > 0
    }
    assert cells == {(0, 0), (0, 1)}  # lane 1 synchronises once although it has no tile
    memory = trace.memories[trace.events[0][2].access.memory]
    assert memory.nbytes == 2 * 2 * 4


def test_a_signal_less_allreduce_in_a_loop_is_rejected_at_its_line() -> None:
    report = racecheck.verify(
        str(FIXTURE), ranks="2", programs=["build_signal_less_allreduce"], args={"calls": "2"}
    )
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    line = _line_of(FIXTURE, "# @call")
    assert report.errors[0].startswith(f"{FIXTURE}:{line}: error: pld.tensor.allreduce")


@pytest.mark.parametrize("ranks", ["2..3", "all"])
def test_a_host_barrier_on_a_wider_signal_is_refused_at_its_line_as_pypto_does(ranks: str) -> None:
    """PyPTO's host barrier (broadcast, reduce_scatter, allgather, all_to_all) takes a
    `[W]` or `[W, 1]` signal, addressed flat: a `[P, 2]` signal whose column 1 a
    handshake uses does not compile, so it is never proved."""
    path = ROOT / "tests" / "fixtures" / "host_barrier_wide_signal.py"
    report = racecheck.verify(str(path), ranks=ranks)
    assert report.results and {r.verdict for r in report.results} == {racecheck.Verdict.UNKNOWN}
    assert report.exit_code == 2
    line = _line_of(path, "# @barrier")
    assert report.errors[0].startswith(
        f"{path}:{line}: error: pld.tensor.barrier in the host function takes a [W] or [W, 1]"
        " signal"
    )


def test_host_builtins_above_16_ranks_are_unsupported_never_proved() -> None:
    report = racecheck.verify(str(FIXTURE), ranks="17", programs=["build_all_to_all"])
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    line = _line_of(FIXTURE, "target = pld.tensor.all_to_all(source, target, signal)")
    assert report.errors[0].startswith(f"{FIXTURE}:{line}: error:")
    assert "16 ranks" in report.errors[0]


def test_host_ring_barriers_every_row_and_clears_all_of_them() -> None:
    spec = discover(load_file(str(ROOT / "examples" / "46_host_allreduce_ring.py")))[0]
    ranks = 3
    events = simulate(spec.instantiate(ranks)).trace.events[0]
    rows = 2 * (ranks - 1) + 1
    waits = [e for e in events if e.wait is not None]
    assert [e.wait.cell.index for e in waits] == [
        (row, peer) for row in range(rows) for peer in range(ranks) if peer != 0
    ]
    resets = [e for e in events if e.notify is not None and e.notify.value < 0]
    assert len(resets) == rows * (ranks - 1)
    assert {e.notify.value for e in resets} == {-1}


def test_all_to_all_v_publishes_the_clamped_count_with_set_before_its_data() -> None:
    path = ROOT / "examples" / "49_kernel_all_to_all_v_bug_negative_count.py"
    spec = discover(load_file(str(path)))[0]
    execution = simulate(spec.instantiate(2))
    counts = next(t for t in execution.tensors if t.name == "send_counts").initial
    for rank, events in enumerate(execution.trace.events):
        builtin = [e for e in events if e.label == "pld.tensor.all_to_all_v"]
        sets = [e for e in builtin if e.notify is not None and e.notify.op is NotifyOp.SET]
        assert [e.notify.value for e in sets] == [min(int(c), 2) for c in counts[rank, :, 0]]
        assert [e.notify.cell.owner for e in sets] == [0, 1]
        for set_event in sets:
            put = next(
                e
                for e in builtin
                if e.kind is EventKind.STORE
                and e.access.owner == set_event.notify.cell.owner
                and e.index > set_event.index
            )
            assert put.access.ranges[0][1] - put.access.ranges[0][0] == 2 * 16 * 4  # M rows


def test_kernel_all_to_all_v_moves_whole_blocks_and_follows_its_input_counts() -> None:
    report = racecheck.verify(
        str(FIXTURE), ranks="2..3", programs=["build_kernel_all_to_all_v"], expect="all_to_all"
    )
    # The counts are input data the builtin clamps (min(count, M): an exact choice, no
    # branch) and publishes into cells nothing waits on: data, not a steering value, so
    # no path splits at any P (before, the 2**9 clamp paths at P=3 ran past the budget).
    verdicts = [result.verdict for result in report.results]
    assert verdicts == [racecheck.Verdict.PROVED, racecheck.Verdict.PROVED]
    execution = simulate(SPECS["build_kernel_all_to_all_v"].instantiate(2))
    x = next(t for t in execution.tensors if t.name == "x").initial
    y = next(t for t in execution.tensors if t.name == "y").final
    np.testing.assert_array_equal(y[1, 0:2], x[0, 2:4])  # block 0 of rank 1 = block 1 of rank 0


def test_host_builtins_take_the_data_types_of_their_kernels_only() -> None:
    report = racecheck.verify(
        str(FIXTURE), ranks="2", programs=["build_broadcast"], args={"dtype": "pl.INT32"}
    )
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    line = _line_of(FIXTURE, "data = pld.tensor.broadcast(data, signal, root=root)")
    assert report.errors[0].startswith(f"{FIXTURE}:{line}: error:")
    assert "takes FP32 data only" in report.errors[0]


@pytest.mark.parametrize("on_host", [True, False])
def test_a_builtin_on_a_subgroup_runs_on_its_members_numbered_within_it(on_host: bool) -> None:
    spec = next(
        s
        for s in discover(load_file(str(FIXTURE)), args={"on_host": str(on_host)})
        if s.name == "build_subgroup_allreduce"
    )
    execution = simulate(spec.instantiate(4))
    x, y, me = execution.tensors
    assert execution.trace.events[0] == ()  # device 0 is not in the group
    for rank in (1, 2, 3):
        np.testing.assert_allclose(y.final[rank], x.initial[1:].sum(axis=0), rtol=1e-5)
    assert not y.final[0].any()
    if not on_host:
        assert [list(me.final[rank, 0]) for rank in (1, 2, 3)] == [[0, 3], [1, 3], [2, 3]]
    report = racecheck.verify(
        str(FIXTURE),
        ranks="3..4",
        programs=["build_subgroup_allreduce"],
        args={"on_host": str(on_host)},
    )
    assert {result.verdict for result in report.results} == {racecheck.Verdict.PROVED}


ERGONOMIC = ROOT / "tests" / "fixtures" / "ergonomic_collectives.py"


def test_ergonomic_collectives_call_their_builtin_on_a_fresh_signal() -> None:
    specs = {spec.name: spec for spec in discover(load_file(str(ERGONOMIC)))}
    execution = simulate(specs["build_auto[reuse_target=False]"].instantiate(3))
    x, total, first, second = execution.tensors
    np.testing.assert_allclose(
        total.final, np.broadcast_to(x.initial.sum(axis=0), (3, 1, 12)), rtol=1e-6
    )
    gathered = np.broadcast_to(x.initial[:, 0, :], (3, 3, 12))
    np.testing.assert_array_equal(first.final, gathered)
    np.testing.assert_array_equal(second.final, gathered)
    ring = [e for e in execution.trace.events[0] if e.label == "pld.tensor.allreduce"]
    gathers = [e for e in execution.trace.events[0] if e.label == "pld.tensor.allgather"]
    ring_signals = {e.notify.cell.memory for e in ring if e.notify is not None}
    gather_signals = {e.notify.cell.memory for e in gathers if e.notify is not None}
    assert len(ring_signals) == 1 and len(gather_signals) == 2
    assert not ring_signals & gather_signals
    # ring: 2(P-1) rounds and the return barrier, one notify per peer each, then the clears
    assert _waits(execution.trace.events[0], "pld.tensor.allreduce") == [1] * (2 * 2 + 1) * 2


def test_ergonomic_all_gather_into_a_window_still_being_read_races() -> None:
    report = racecheck.verify(str(ERGONOMIC), ranks="2", programs=["build_auto[reuse_target=True]"])
    (result,) = report.results
    assert result.verdict is racecheck.Verdict.BUG
    read = _line_of(ERGONOMIC, "return pl.store(pl.load(target, [0, 0], [n_ranks, W]), [0, 0], y)")
    again = _line_of(ERGONOMIC, "gathered = pld.all_gather(local, pld.window(again,")
    (race,) = [f for f in result.findings if f.detail == "write-after-read"]
    assert {location.line for location in race.locations} == {read, again}
    assert set(race.ranks) == {0, 1}


INT8 = ROOT / "tests" / "fixtures" / "host_all_to_all_v_int8_shape.py"


def test_host_all_to_all_v_moves_int8_rows_for_a_factory_given_a_shape_object() -> None:
    args = {"shape": "make_shape(2, 24)"}
    report = racecheck.verify(str(INT8), ranks="2", args=args)
    assert [(r.verdict, r.model) for r in report.results] == [
        (racecheck.Verdict.PROVED, "all_to_all")
    ]
    (spec,) = discover(load_file(str(INT8)), args=args)
    execution = simulate(spec.instantiate(2))
    staged = [
        sum(stop - start for start, stop in e.access.ranges)
        for e in execution.trace.events[0]
        if e.label == "pl.load" and e.location.line == _line_of(INT8, "pl.load(inp,")
    ]
    assert staged == [16, 8] * 4  # a [1, 16] tile reads only its valid [1, 8] at column 16


def test_host_all_to_all_v_with_core_num_is_refused_as_pyptos_error(tmp_path: Path) -> None:
    """PyPTO's all_to_all_v takes no core_num= (tensor_ops.py:986-992): exit 2 naming
    the call's line, never a proof."""
    path = tmp_path / "a2av_cores.py"
    text = INT8.read_text()
    path.write_text(text.replace("signal, counts, recv)", "signal, counts, recv, core_num=2)"))
    report = racecheck.verify(str(path), ranks="2", args={"shape": "make_shape(2, 24)"})
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    (error,) = report.errors
    line = _line_of(path, "core_num=2")
    assert error.startswith(f"{path}:{line}: error: pld.tensor.all_to_all_v takes no core_num=")
    assert "PyPTO refuses the call" in error


def test_an_arg_expression_that_calls_a_function_and_fails_is_an_error_not_a_string() -> None:
    for text, why in [
        ("make_shape(1, 24)", "raised ValueError: need at least 2 ranks, got 1"),
        ("make_shap(2, 24)", "raised NameError: name 'make_shap' is not defined"),
    ]:
        with pytest.raises(UsageError) as raised:
            discover(load_file(str(INT8)), args={"shape": text})
        assert raised.value.message == (
            f"--arg value {text!r} is evaluated over the file's names and {why}"
        )
