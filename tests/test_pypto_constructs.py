"""Constructs of PyPTO's current examples and system tests (docs/model.md): a window
seen in its parameter's declared shape, `allgather(defer=True)`, `put_async`."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.cosim import simulate
from racecheck.dsl.declared import as_declared, signature_of
from racecheck.dsl.dtypes import FP32
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import DistributedTensor, Tensor, TensorType
from racecheck.errors import UnsupportedConstruct
from racecheck.events import EventKind, MemoryKind, WaitCmp
from racecheck.findings import FindingKind, Verdict
from racecheck.load import discover, load_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _line(name: str, marker: str) -> int:
    lines = (EXAMPLES / name).read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if text.endswith(f"# @{marker}"))


def test_a_deferred_allgather_waits_unsigned_then_runs_its_epilogue() -> None:
    loaded = load_file(str(EXAMPLES / "55_deferred_allgather.py"))
    (spec,) = discover(loaded, programs=(), args={})
    trace = simulate(spec.instantiate(3)).trace
    gather = _line("55_deferred_allgather.py", "gather")
    for events in trace.events:
        collective = [event for event in events if event.location.line == gather]
        kinds = [event.kind for event in collective]
        waits = [event.wait for event in collective if event.wait is not None]
        assert len(waits) == 2 and all(wait.cmp is WaitCmp.GE_UNSIGNED for wait in waits)
        last_wait = max(n for n, kind in enumerate(kinds) if kind is EventKind.WAIT)
        epilogue = collective[last_wait + 1 :]
        assert [event.kind for event in epilogue] == [EventKind.NOTIFY, EventKind.NOTIFY]
        assert all(event.notify and event.notify.value == -1 for event in epilogue)


def test_a_copy_out_not_depending_on_the_deferred_allgather_is_never_proved(
    tmp_path: Path,
) -> None:
    name = "55_deferred_allgather.py"
    source = (EXAMPLES / name).read_text()
    assert ", deps=[gathered]" in source
    unordered = tmp_path / "no_deps.py"
    unordered.write_text(source.replace(", deps=[gathered]", ""))
    (result,) = racecheck.verify(str(unordered), ranks=[2]).results
    assert result.verdict is Verdict.BUG  # the tasks are threads: the early copy is shown
    (race,) = result.findings
    assert race.kind is FindingKind.RACE and race.detail == "read-after-write" and race.confirmed
    assert set(race.threads) == {"task copy_out", "task gather"}
    assert {location.line for location in race.locations} == {
        _line(name, "gather"),
        _line(name, "copy"),
    }


def test_defer_is_refused_in_the_host_function(tmp_path: Path) -> None:
    source = (EXAMPLES / "55_deferred_allgather.py").read_text()
    host_call = "    return y\n\n\ndef main"
    assert host_call in source
    on_host = source.replace(
        host_call,
        "    pld.tensor.allgather(x, rows, signal, defer=True)\n" + host_call,
    )
    path = tmp_path / "host_defer.py"
    path.write_text(on_host)
    (result,) = racecheck.verify(str(path), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN
    assert "defer=True" in result.message and "not in the host function" in result.message


PUT_ASYNC = "56_put_async_shift.py"


def _put_async_variant(tmp_path: Path, old: str, new: str) -> Path:
    source = (EXAMPLES / PUT_ASYNC).read_text()
    assert old in source
    path = tmp_path / "variant.py"
    path.write_text(source.replace(old, new))
    return path


def test_a_put_async_transfer_is_recorded_at_its_line_when_drained() -> None:
    loaded = load_file(str(EXAMPLES / PUT_ASYNC))
    (spec,) = discover(loaded, programs=(), args={})
    trace = simulate(spec.instantiate(2)).trace
    put, drain = _line(PUT_ASYNC, "put"), _line(PUT_ASYNC, "drain")
    for rank, events in enumerate(trace.events):
        lines = [event.location.line for event in events]
        transfer = [event for event in events if event.location.line == put]
        assert [event.kind for event in transfer] == [EventKind.LOAD, EventKind.STORE]
        assert transfer[1].access is not None and transfer[1].access.owner == 1 - rank
        notify = lines.index(_line(PUT_ASYNC, "notify"))
        assert events.index(transfer[1]) < notify
        assert drain not in lines  # the drain itself is no event


def test_a_wait_while_a_put_async_is_in_flight_is_refused(tmp_path: Path) -> None:
    drain = "    pld.system.wait_async_event(sent, session)  # @drain\n"
    wait = "    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)\n"
    path = _put_async_variant(tmp_path, drain, wait + drain)
    (result,) = racecheck.verify(str(path), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN
    assert "is in flight" in result.message


def test_writing_the_source_of_a_put_async_in_flight_is_refused(tmp_path: Path) -> None:
    drain = "    pld.system.wait_async_event(sent, session)  # @drain\n"
    store = "    outbox = pl.store(row, [0, 0], outbox)\n"
    path = _put_async_variant(tmp_path, drain, store + drain)
    (result,) = racecheck.verify(str(path), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN
    assert f"put_async at line {_line(PUT_ASYNC, 'put')}" in result.message


def test_a_put_async_never_drained_is_refused(tmp_path: Path) -> None:
    path = _put_async_variant(tmp_path, "    pld.system.wait_async_event(sent, session)", "")
    (result,) = racecheck.verify(str(path), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN
    assert "never drained" in result.message


def test_a_drain_through_another_session_is_refused(tmp_path: Path) -> None:
    path = _put_async_variant(
        tmp_path,
        "pld.system.wait_async_event(sent, session)",
        "pld.system.wait_async_event(sent, pld.system.async_session(sync_id=1))",
    )
    (result,) = racecheck.verify(str(path), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN
    assert "another session" in result.message


BLOCKS = Path(__file__).resolve().parent / "fixtures" / "all_to_all_v_blocks.py"


def test_all_to_all_v_without_counts_exchanges_whole_blocks() -> None:
    for ranks in (2, 3):
        (result,) = racecheck.verify(str(BLOCKS), ranks=[ranks]).results
        assert result.verdict is Verdict.PROVED
        assert result.model == "all_to_all"
    loaded = load_file(str(BLOCKS))
    (spec,) = discover(loaded, programs=(), args={})
    trace = simulate(spec.instantiate(2)).trace
    notifies = [event.notify for events in trace.events for event in events if event.notify]
    assert notifies and all(notify.op.value == "AtomicAdd" for notify in notifies)


def test_all_to_all_v_with_core_num_is_refused() -> None:
    (result,) = racecheck.verify(str(BLOCKS), ranks=[2], args={"cores": "2"}).results
    assert result.verdict is Verdict.UNKNOWN
    assert "all_to_all_v takes no core_num=" in result.message


def test_the_four_argument_all_to_all_stages_pulls_between_two_barriers() -> None:
    path = Path(__file__).resolve().parent / "fixtures" / "all_to_all_into.py"
    for ranks in (2, 3):
        (result,) = racecheck.verify(str(path), ranks=[ranks]).results
        assert result.verdict is Verdict.PROVED
        assert result.model == "all_to_all"
    loaded = load_file(str(path))
    (spec,) = discover(loaded, programs=(), args={})
    trace = simulate(spec.instantiate(3)).trace
    load, store, notify, wait = EventKind.LOAD, EventKind.STORE, EventKind.NOTIFY, EventKind.WAIT
    barrier1 = [notify, notify, wait, wait]
    pulls = [load, store] * 3
    barrier2 = [notify, notify, wait, wait]
    for rank, events in enumerate(trace.events):
        assert [event.kind for event in events] == [
            load,
            store,
            *barrier1,
            *pulls,
            *barrier2,
            notify,
            notify,
        ]
        pulled = [event.access for event in events[6:12:2] if event.access]
        assert [region.owner for region in pulled] == [0, 1, 2]  # every rank's staged
        assert {region.ranges for region in pulled} == {((rank * 64, rank * 64 + 64),)}
        waits = [event.wait.expected for event in events if event.wait]
        assert waits == [1, 1, 2, 2]
        assert [event.notify.value for event in events[-2:] if event.notify] == [-2, -2]


def _beside_the_gather(tmp_path: Path, body: str) -> Path:
    """Example 55 with one more task, unordered with the deferred gather, running `body`."""
    source = (EXAMPLES / "55_deferred_allgather.py").read_text()
    replacements = {
        "    y: pl.Out[pl.Tensor[[1, NR * SIZE], pl.FP32]],\n    rows:": (
            "    y: pl.Out[pl.Tensor[[1, NR * SIZE], pl.FP32]],\n"
            "    z: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],\n    rows:"
        ),
        '        with pl.at(level=pl.Level.CORE_GROUP, name_hint="copy_out"': (
            '        with pl.at(level=pl.Level.CORE_GROUP, name_hint="beside"):\n'
            f"            {body}\n"
            '        with pl.at(level=pl.Level.CORE_GROUP, name_hint="copy_out"'
        ),
        "    x: pl.Tensor[[NR, 1, SIZE], pl.FP32], "
        "y: pl.Out[pl.Tensor[[NR, 1, NR * SIZE], pl.FP32]]\n": (
            "    x: pl.Tensor[[NR, 1, SIZE], pl.FP32],\n"
            "    y: pl.Out[pl.Tensor[[NR, 1, NR * SIZE], pl.FP32]],\n"
            "    z: pl.Out[pl.Tensor[[NR, 1, SIZE], pl.FP32]],\n"
        ),
        "per_rank(x[r], y[r], rows, signal, device=r)": (
            "per_rank(x[r], y[r], z[r], rows, signal, device=r)"
        ),
    }
    for old, new in replacements.items():
        assert old in source, old
        source = source.replace(old, new)
    path = tmp_path / "beside.py"
    path.write_text(source)
    return path


def test_local_work_beside_a_deferred_gather_is_proved(tmp_path: Path) -> None:
    path = _beside_the_gather(
        tmp_path, "pl.store(pl.add(pl.load(x, [0, 0], [1, SIZE]), 1.0), [0, 0], z)"
    )
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.PROVED


def test_work_beside_a_deferred_gather_reading_what_peers_write_is_not(tmp_path: Path) -> None:
    path = _beside_the_gather(tmp_path, "pl.store(pl.load(rows, [0, 0], [1, SIZE]), [0, 0], z)")
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.BUG  # the tasks are threads: the early read is shown
    races = [finding for finding in result.findings if finding.kind is FindingKind.RACE]
    assert races and all(race.confirmed for race in races)
    assert {"task beside", "task gather"} <= {thread for race in races for thread in race.threads}


def _view(shape: tuple[int, ...], kind: MemoryKind = MemoryKind.WINDOW) -> TensorView:
    return TensorView(
        memory=0,
        kind=kind,
        name="buf",
        base=0,
        shape=shape,
        dtype=FP32,
        memory_nbytes=256,
        devices=set() if kind is MemoryKind.WINDOW else None,
    )


def _kernel(
    window: DistributedTensor[[1, 64], FP32],  # type: ignore[valid-type]
    plain: Tensor[[1, 64], FP32],  # type: ignore[valid-type]
) -> None:
    """A kernel signature: one window parameter, one plain tensor parameter."""


def test_a_window_is_seen_in_its_declared_shape_and_another_size_is_refused() -> None:
    flat, host = _view((64,)), _view((64,), MemoryKind.HOST)
    (window, plain), _ = as_declared(_kernel, (flat, host), {})
    assert window.shape == (1, 64) and window.memory == flat.memory and window.base == 0
    assert plain is host  # only windows are re-viewed
    short = _view((32,))
    with pytest.raises(UnsupportedConstruct, match="another size than its parameter"):
        as_declared(_kernel, (short, host), {})


def test_a_put_async_left_in_flight_inside_pl_parallel_is_refused(tmp_path: Path) -> None:
    put = "    sent = pld.tensor.put_async(inbox, right, outbox, session)  # @put\n"
    source = (EXAMPLES / PUT_ASYNC).read_text()
    assert put in source
    inside = source.replace(put, "    for _ in pl.parallel(1):\n    " + put)
    path = tmp_path / "parallel.py"
    path.write_text(inside.replace("    pld.system.wait_async_event(sent, session)", ""))
    (result,) = racecheck.verify(str(path), ranks=[2]).results
    assert result.verdict is Verdict.UNKNOWN
    assert "never drained" in result.message


def test_postponed_annotations_are_evaluated_with_the_factory_locals_the_body_uses() -> None:
    size = 8

    def kernel(x: DistributedTensor[[1, size], FP32]) -> int:  # type: ignore[valid-type]
        return size

    def opaque(x: DistributedTensor[[1, size], FP32]) -> None:  # type: ignore[valid-type]
        """Its body names no factory local: the annotation cannot be evaluated."""

    annotation = signature_of(kernel).parameters["x"].annotation
    assert isinstance(annotation, TensorType) and annotation.dims == (1, 8)
    assert isinstance(signature_of(opaque).parameters["x"].annotation, str)


INLINE = Path(__file__).resolve().parent / "fixtures" / "host_inline_regions.py"


def test_an_inline_chip_region_is_a_chip_orchestration_on_the_one_device() -> None:
    report = racecheck.verify(str(INLINE), ranks="1..3", programs=["NestedCoreGroup"])
    assert [(r.ranks, r.verdict) for r in report.results] == [(1, Verdict.PROVED)]
    (spec,) = discover(load_file(str(INLINE)), programs=("NestedCoreGroup",))
    events = simulate(spec.instantiate(1)).trace.events[0]
    lines = INLINE.read_text().splitlines()
    add = next(n for n, line in enumerate(lines, 1) if "out = pl.add(a, b)" in line)
    assemble = add + 1
    assert [(e.kind.value, e.location.line) for e in events] == [
        ("load", add),
        ("load", add),
        ("store", assemble),
    ]
    worker = next(n for n, line in enumerate(lines, 1) if "role=pl.Role.Worker" in line)
    assert any(
        f"region at line {worker} is a host sub-worker callback that only reads" in note
        for note in report.results[0].notes
    )


@pytest.mark.parametrize(
    ("program", "ranks", "region", "message"),
    [
        ("WorkerResultUsed", 1, "Role.Worker", "is a host sub-worker callback that writes scaled"),
        (
            "ChipRegionBesideDispatches",
            2,
            "level=pl.Level.CHIP",
            "racecheck models that in a one-device program only",
        ),
        ("WorkerStoresIntoInput", 1, "Role.Worker", "sub-worker callback that writes a, f"),
        ("WorkerWritesThroughOut", 1, "Role.Worker", "sub-worker callback that writes a"),
        ("WorkerCopiesIntoANumpyView", 1, "Role.Worker", "sub-worker callback that writes a"),
        ("WorkerStoresIntoANumpyView", 1, "Role.Worker", "sub-worker callback that writes a"),
        ("WorkerWritesThroughARow", 1, "Role.Worker", "sub-worker callback that writes a"),
        ("WorkerSetsItemOfANumpyView", 1, "Role.Worker", "sub-worker callback that writes a"),
        ("OneWithTwoRegions", 1, "), pl.at(", "write each region as its own, nested `with`"),
    ],
)
def test_inline_host_regions_racecheck_cannot_run_are_refused_naming_the_line(
    program: str, ranks: int, region: str, message: str
) -> None:
    report = racecheck.verify(str(INLINE), ranks=[ranks], programs=[program])
    (result,) = [r for r in report.results if r.ranks == ranks]
    assert result.verdict is Verdict.UNKNOWN
    assert message in result.message
    lines = INLINE.read_text().splitlines()
    start = next(n for n, line in enumerate(lines, 1) if f"class {program}" in line)
    line = next(n for n, text in enumerate(lines, 1) if n > start and region in text)
    assert f"at line {line}" in result.message


def test_a_window_of_another_size_than_its_parameter_is_unknown_naming_the_parameter() -> None:
    path = Path(__file__).resolve().parent / "fixtures" / "window_of_another_size.py"
    report = racecheck.verify(str(path), ranks="2")
    assert [result.verdict for result in report.results] == [Verdict.UNKNOWN]
    declared = "w: pld.DistributedTensor[[1, SIZE], pl.FP32]"
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if declared in text)
    (error,) = report.errors
    assert error == (
        f"{path}:{line}: error: step() declares w with shape [1, 8], FP32 (8 elements) but is"
        " passed buf with shape [16], FP32 (16 elements): racecheck does not model a window"
        " argument of another size than its parameter; pass a pld.window view of the declared"
        " shape"
    )
