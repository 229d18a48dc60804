"""Co-simulation of single DSL features: regions, carried loops, policies, forcing, repeat."""

import threading
from pathlib import Path

import numpy as np
import pytest

import racecheck
from racecheck.cosim import HoldPolicy, ReplayPolicy, ScheduleDivergence, simulate
from racecheck.errors import ProgramRejected, TracingError
from racecheck.events import EventKind, EventRef, NotifyOp, RankEnd, WaitCmp, WriteOp, Written
from racecheck.findings import FindingKind, Verdict
from racecheck.load import discover, load_file

FIXTURES = Path(__file__).parent / "fixtures"


def _specs(name: str) -> dict:
    return {spec.name: spec for spec in discover(load_file(str(FIXTURES / name)))}


FEATURES = _specs("features.py")


def test_init_values_and_yield_carry_tiles_and_scalars() -> None:
    x, y, z = simulate(FEATURES["carry"].instantiate(2)).tensors
    np.testing.assert_allclose(y.final, 4 * x.initial)
    assert list(z.final[:, 0, 0]) == [224.0, 224.0]


def test_valid_shape_regions_aliasing_views_and_set_eq() -> None:
    execution = simulate(FEATURES["regions"].instantiate(2))
    load, store, alias_load, notify, wait, out = execution.trace.events[0]
    assert load.access.ranges == ((0, 12), (32, 44))  # 2x3 valid of a 4x8 tile
    assert store.access.ranges == ((40, 52), (72, 84))  # rows 1-2, cols 2-4
    assert alias_load.access.memory == store.access.memory  # two views, one buffer
    assert alias_load.access.ranges == ((0, 64),) and alias_load.access.overlaps(store.access)
    assert (notify.notify.op, notify.notify.value, notify.notify.cell.offset) == (
        NotifyOp.SET,
        5,
        4,
    )
    assert (wait.wait.cmp, wait.wait.expected) == (WaitCmp.EQ, 5)
    assert out.access.ranges == ((0, 16), (32, 48), (64, 80), (96, 112))
    x, y = execution.tensors
    assert y.final[0, 2, 2] == x.initial[0, 0, 0]  # the aliased bytes moved


def test_values_read_into_control_flow_are_control_reads() -> None:
    execution = simulate(FEATURES["counted"].instantiate(2))
    assert execution.trace.control_reads == (EventRef(rank=1, index=1),)
    assert list(execution.tensors[0].final[1, 0]) == [0, 1, 2, 0]
    write = execution.trace.events[0][0]
    assert write.label == "pl.write" and write.written == Written.int32s(WriteOp.ASSIGN, [3])


def test_forced_waits_complete_the_trace() -> None:
    execution = simulate(FEATURES["stuck"].instantiate(3))
    assert execution.forced == tuple(EventRef(rank=rank, index=1) for rank in range(3))
    assert execution.trace.ends == (RankEnd.FORCED,) * 3
    assert all(len(events) == 3 for events in execution.trace.events)


def test_without_forcing_the_blocked_waits_are_reported() -> None:
    execution = simulate(FEATURES["stuck"].instantiate(3), force_waits=False)
    assert execution.stalled == tuple(EventRef(rank=rank, index=1) for rank in range(3))
    assert execution.trace.size == 3 and execution.forced == ()


def test_view_larger_than_its_buffer_is_out_of_bounds() -> None:
    trace = simulate(FEATURES["oversize"].instantiate(2)).trace
    assert trace.ends == (RankEnd.CRASHED,) * 2 and trace.size == 0
    assert "buffer has 4 bytes" in trace.out_of_bounds[0].message
    assert trace.out_of_bounds[0].location.line == 136


def test_kernel_that_never_reaches_an_event_times_out() -> None:
    with pytest.raises(TracingError, match="did not finish") as caught:
        simulate(FEATURES["spin"].instantiate(2), timeout=0.5)
    assert caught.value.line == 118
    for thread in threading.enumerate():
        if thread.name.startswith("racecheck-rank"):
            thread.join(timeout=30)
    assert not [t for t in threading.enumerate() if t.name.startswith("racecheck-rank")]


def test_event_budget_is_a_tracing_error() -> None:
    with pytest.raises(TracingError, match="budget of 10 events"):
        simulate(_specs("mesh_class.py")["MeshAllreduce"].instantiate(4), max_events=10)


def test_truncating_modulo_gives_peer_minus_one_out_of_bounds() -> None:
    spec = _specs("ring_left.py")["build_left"]
    trace = simulate(spec.instantiate(3)).trace
    assert trace.ends == (RankEnd.CRASHED, RankEnd.FINISHED, RankEnd.FINISHED)
    (record,) = trace.out_of_bounds
    assert record.rank == 0 and record.location.line == 17
    assert record.message.startswith("peer -1 is outside [0, 3)")


@pytest.mark.parametrize(
    "form", ["xor", "lshift", "rshift", "and", "or", "power", "invert", "remainder"]
)
def test_truncating_modulo_survives_other_integer_operators(form: str) -> None:
    # probe: `((me ^ 0) - 1) % n` took Python's floor and was proved a shift by -1
    report = racecheck.verify(
        str(FIXTURES / "ring_left_bitwise.py"), ranks=[1, 3], args={"form": form}, jobs=1
    )
    one, three = report.results
    assert one.verdict is Verdict.PROVED
    assert three.verdict is Verdict.BUG
    (finding,) = three.findings
    assert finding.kind is FindingKind.OUT_OF_BOUNDS and finding.ranks == (0,)
    assert [location.line for location in finding.locations] == [32]


def test_a_host_integer_passed_to_a_device_divides_like_the_device() -> None:
    # probe: `for r in range(nr)` passed r as a plain int and `(me - 1) % nr` floored
    spec = _specs("host_scalar_rank.py")["build_left"]
    trace = simulate(spec.instantiate(3)).trace
    (record,) = trace.out_of_bounds
    assert record.rank == 0 and record.location.line == 25
    assert record.message.startswith("peer -1 is outside [0, 3)")


@pytest.mark.parametrize(("form", "line"), [("const", 17), ("carried", 20)])
def test_a_const_or_carried_integer_divides_like_the_device(form: str, line: int) -> None:
    # probe: `k = pl.const(0, pl.INT32)` (or carried from init_values=(0,)) was a Python
    # int, and `(k - 1) % n` floored to n - 1
    report = racecheck.verify(
        str(FIXTURES / "device_scalar_sources.py"), ranks=[3], args={"form": form}, jobs=1
    )
    (result,) = report.results
    assert result.verdict is Verdict.BUG
    assert {finding.kind for finding in result.findings} == {FindingKind.OUT_OF_BOUNDS}
    assert {location.line for f in result.findings for location in f.locations} == {line}


@pytest.mark.parametrize(("form", "line"), [("loop", 40), ("index", 40), ("aiv", 27)])
def test_a_block_or_sublane_number_divides_like_the_device(form: str, line: int) -> None:
    # probe: `(block - 1) % 2` of a pl.spmd block floored to 1 and loaded a valid half
    report = racecheck.verify(
        str(FIXTURES / "spmd_block_modulo.py"), ranks=[2], args={"form": form}, jobs=1
    )
    (result,) = report.results
    assert result.verdict is Verdict.BUG
    (finding,) = result.findings
    assert finding.kind is FindingKind.OUT_OF_BOUNDS and finding.ranks == (0,)
    assert [location.line for location in finding.locations] == [line]


@pytest.mark.parametrize(
    ("expected", "verdict"), [(2**32 + 1, Verdict.PROVED), (2**32, Verdict.BUG)]
)
def test_a_wait_threshold_beyond_int32_is_cast_to_the_cell(expected: int, verdict: Verdict) -> None:
    # probe: expected=2**32 + 1 was a deadlock, although the device waits for 1
    report = racecheck.verify(
        str(FIXTURES / "wait_threshold_cast.py"),
        ranks=[3],
        args={"expected": str(expected)},
        jobs=1,
    )
    (result,) = report.results
    assert result.verdict is verdict
    if verdict is Verdict.BUG:
        (finding,) = result.findings
        assert finding.kind is FindingKind.RACE and finding.detail == "read-after-write"
        assert [location.line for location in finding.locations] == [19, 16]
    else:
        assert result.model == "shift+1"


def test_builtin_barrier_lowering() -> None:
    spec = _specs("shift_factory.py")["build_shift[use_builtin=True]"]
    execution = simulate(spec.instantiate(3))
    events = execution.trace.events[1]
    barrier = [event for event in events if event.label == "pld.tensor.barrier"]
    assert [event.kind for event in barrier] == [EventKind.NOTIFY] * 2 + [EventKind.WAIT] * 2 + [
        EventKind.NOTIFY
    ] * 2
    assert [(e.notify.cell.owner, e.notify.cell.index) for e in barrier[:2]] == [
        (0, (1, 0)),
        (2, (1, 0)),
    ]
    assert [(e.wait.cell.index, e.wait.expected) for e in barrier[2:4]] == [
        ((0, 0), 1),
        ((2, 0), 1),
    ]
    assert [(e.notify.cell.owner, e.notify.cell.index, e.notify.value) for e in barrier[4:]] == [
        (1, (0, 0), -1),
        (1, (2, 0), -1),
    ]
    assert {event.location.line for event in barrier} == {20}
    x, y = execution.tensors
    np.testing.assert_array_equal(y.final, np.roll(x.initial, -1, axis=0))


def test_repeat_runs_the_dispatches_again_on_the_same_windows() -> None:
    spec = _specs("shift_factory.py")["build_shift[use_builtin=False]"]
    execution = simulate(spec.instantiate(2), repeat=3)
    events = execution.trace.events[0]
    assert len(events) == 3 * 6 and [event.repeat for event in events[::6]] == [0, 1, 2]
    assert execution.trace.repeat == 3


def test_replay_and_hold_policies() -> None:
    spec = _specs("shift_factory.py")["build_shift[use_builtin=False]"]
    instance = spec.instantiate(2)
    default = simulate(instance)
    assert default.schedule[0].rank == 0
    held = EventRef(rank=0, index=0)
    holding = simulate(instance, policy=HoldPolicy(held))
    assert holding.schedule.index(held) > holding.schedule.index(EventRef(rank=1, index=0))
    replayed = simulate(instance, policy=ReplayPolicy(holding.schedule))
    assert replayed.schedule == holding.schedule
    with pytest.raises(ScheduleDivergence):
        simulate(instance, policy=ReplayPolicy((EventRef(rank=1, index=3),)))


def test_factory_rejection_skips_the_rank_count() -> None:
    spec = _specs("shift_factory.py")["build_shift[use_builtin=True]"]
    with pytest.raises(ProgramRejected) as caught:
        spec.instantiate(5)
    assert caught.value.message == "SIZE=12 must be divisible by the rank count, got 5"


def test_fixed_host_rows_reject_other_rank_counts() -> None:
    specs = _specs("jit_put_get.py")
    assert list(specs) == ["ring_put", "ring_get"]
    for name in specs:
        x, y = simulate(specs[name].instantiate(2)).tensors
        np.testing.assert_array_equal(y.final, x.initial[::-1])
        with pytest.raises(
            ProgramRejected, match="host tensor x has 2 rows; the program is written for 2 ranks"
        ):
            simulate(specs[name].instantiate(4))


def test_a_program_sized_by_p_is_not_skipped_for_a_leading_round_dim() -> None:
    specs = _specs("rounds_factory.py")
    for name in ("build_rounds[one_slot=False]", "DynamicRounds"):
        for ranks in (2, 4):
            x, y = simulate(specs[name].instantiate(ranks)).tensors
            assert x.initial.shape[:2] == (3, ranks)
            np.testing.assert_array_equal(y.final, np.roll(x.initial, 1, axis=1))
    report = racecheck.verify(
        str(FIXTURES / "rounds_factory.py"), ranks=[2], programs=["build_rounds[one_slot=True]"]
    )
    (result,) = report.results
    assert result.verdict is Verdict.BUG
    (race,) = [finding for finding in result.findings if finding.kind is FindingKind.RACE]
    assert race.detail == "write-after-read"
    source = (FIXTURES / "rounds_factory.py").read_text().splitlines()
    store = next(n for n, text in enumerate(source, 1) if "[row, 0], stage)" in text)
    fetch = next(n for n, text in enumerate(source, 1) if "offsets=[row, 0]" in text)
    assert {location.line for location in race.locations} == {store, fetch}
    assert set(race.ranks) == {0, 1}


def test_a_factory_sized_by_a_module_dynamic_dim_takes_it_as_an_arg_and_as_a_number() -> None:
    path = str(FIXTURES / "runtime_width.py")
    specs = {spec.name: spec for spec in discover(load_file(path), args={"W": "10"})}
    correct = specs["build_width[overshoot=False]"]
    assert "W" in correct.parameters
    x, y = simulate(correct.instantiate(3)).tensors
    assert x.initial.shape == (3, 1, 10)
    np.testing.assert_array_equal(y.final, np.roll(x.initial, 1, axis=0))
    report = racecheck.verify(
        path, ranks=[2], args={"W": 10}, programs=["build_width[overshoot=True]"]
    )
    (result,) = report.results
    assert result.verdict is Verdict.BUG
    (finding,) = result.findings
    load = next(
        n for n, text in enumerate(Path(path).read_text().splitlines(), 1) if "pl.load(x," in text
    )
    assert finding.kind is FindingKind.OUT_OF_BOUNDS
    assert [location.line for location in finding.locations] == [load]
    assert "exceeds" in finding.reason and "in dim 1" in finding.reason


EQ_WAIT = FIXTURES / "eq_wait_two_adds.py"


def test_a_wait_a_later_write_falsifies_is_disabled_again() -> None:
    """Rank 0's `== 1` wait is enabled by rank 1's Add and disabled by rank 2's: it
    stalls, as on the device, where it may never read the 1."""
    specs = {spec.name: spec for spec in discover(load_file(str(EQ_WAIT)))}
    instance = specs["build[eq_first=True]"].instantiate(3)
    put_then_add = [EventRef(rank=1, index=index) for index in range(3)]
    adds = (*put_then_add, EventRef(rank=2, index=0))
    execution = simulate(instance, policy=ReplayPolicy(adds), force_waits=False)
    assert execution.stalled == (EventRef(rank=0, index=0),)
    assert execution.trace.size == 4


@pytest.mark.parametrize("engine", ["explore", "smt"])
def test_an_eq_wait_stepped_past_is_a_replayed_deadlock(engine: str) -> None:
    report = racecheck.verify(str(EQ_WAIT), ranks=[2, 3, 4], engine=engine)
    verdicts = {(r.program, r.ranks): r.verdict for r in report.results}
    assert verdicts == {
        ("build[eq_first=True]", 2): Verdict.PROVED,
        ("build[eq_first=True]", 3): Verdict.BUG,
        ("build[eq_first=True]", 4): Verdict.BUG,
        ("build[eq_first=False]", 2): Verdict.PROVED,
        ("build[eq_first=False]", 3): Verdict.PROVED,
        ("build[eq_first=False]", 4): Verdict.PROVED,
    }
    first = next(
        n for n, text in enumerate(EQ_WAIT.read_text().splitlines(), 1) if "# @first" in text
    )
    for result in report.results:
        if result.verdict is Verdict.BUG:
            (deadlock,) = result.findings
            assert deadlock.kind is FindingKind.DEADLOCK and deadlock.confirmed
            assert [location.line for location in deadlock.locations] == [first]
            assert deadlock.ranks == (0,)


STALE_BEHIND_EQ = FIXTURES / "stale_behind_eq_wait.py"


@pytest.mark.parametrize("engine", ["explore", "smt", "auto"])
def test_a_read_some_execution_runs_past_an_eq_wait_is_stale_beside_the_deadlock(
    engine: str,
) -> None:
    report = racecheck.verify(str(STALE_BEHIND_EQ), ranks=[2, 3, 4], engine=engine)
    lines = STALE_BEHIND_EQ.read_text().splitlines()
    wait, read = (
        next(n for n, text in enumerate(lines, 1) if tag in text) for tag in ("# @wait", "# @read")
    )
    found = {
        result.ranks: {
            (finding.kind, tuple(location.line for location in finding.locations), finding.ranks)
            for finding in result.findings
        }
        for result in report.results
    }
    stale = (FindingKind.STALE_READ, (read,), (0,))
    deadlock = (FindingKind.DEADLOCK, (wait,), (0,))
    assert found == {2: {stale}, 3: {deadlock, stale}, 4: {deadlock, stale}}
