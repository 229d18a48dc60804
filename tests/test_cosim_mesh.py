"""The flagship mesh all-reduce, end to end: exact event structure and numpy results."""

from pathlib import Path

import numpy as np
import pytest

from racecheck.cosim import TensorRole, simulate
from racecheck.events import HOST_OWNER, AccessMode, EventKind, NotifyOp, RankEnd, WaitCmp
from racecheck.load import discover, load_file

FIXTURES = Path(__file__).parent / "fixtures"


def _spec(name: str):
    return discover(load_file(str(FIXTURES / name)))[0]


@pytest.mark.parametrize("fixture", ["mesh_class.py", "mesh_factory.py"])
@pytest.mark.parametrize("ranks", range(1, 9))
def test_mesh_outputs_equal_numpy_sum(fixture: str, ranks: int) -> None:
    execution = simulate(_spec(fixture).instantiate(ranks))
    x, y = execution.tensors
    assert (x.name, x.role, y.name, y.role) == ("x", TensorRole.INPUT, "y", TensorRole.OUTPUT)
    expected = np.broadcast_to(x.initial.sum(axis=0), x.initial.shape)
    np.testing.assert_allclose(y.final, expected, rtol=1e-5, atol=1e-5)
    assert execution.trace.ends == (RankEnd.FINISHED,) * ranks
    assert execution.forced == () and execution.stalled == ()


def test_mesh_event_structure_at_four_ranks() -> None:
    execution = simulate(_spec("mesh_class.py").instantiate(4))
    trace = execution.trace
    names = [memory.name for memory in trace.memories]
    assert names == ["x", "y", "data_buf", "signal_buf"]
    x_id, y_id, data_id, signal_id = range(4)
    for rank, events in enumerate(trace.events):
        peers = [peer for peer in range(4) if peer != rank]
        kinds = [event.kind for event in events]
        assert kinds == (
            [EventKind.LOAD, EventKind.STORE]
            + [EventKind.NOTIFY] * 3
            + [EventKind.WAIT] * 3
            + [EventKind.LOAD] * 4
            + [EventKind.STORE]
        )
        stage_in, stage_store = events[0], events[1]
        assert (stage_in.access.memory, stage_in.access.owner) == (x_id, HOST_OWNER)
        assert stage_in.access.ranges == ((rank * 256, rank * 256 + 256),)
        assert (stage_store.access.memory, stage_store.access.owner) == (data_id, rank)
        assert stage_store.mode is AccessMode.WRITE
        for event, peer in zip(events[2:5], peers, strict=True):
            assert event.notify.cell.owner == peer and event.notify.cell.index == (rank, 0)
            assert event.notify.cell.memory == signal_id and event.notify.cell.offset == rank * 4
            assert (event.notify.op, event.notify.value) == (NotifyOp.ATOMIC_ADD, 1)
            assert event.mode is AccessMode.ATOMIC and event.location.line == 30
        for event, source in zip(events[5:8], peers, strict=True):
            assert event.wait.cell.owner == rank and event.wait.cell.index == (source, 0)
            assert (event.wait.cmp, event.wait.expected) == (WaitCmp.GE, 1)
            assert event.location.line == 35
        assert (events[8].access.owner, events[8].location.line) == (rank, 36)
        for event, peer in zip(events[9:12], peers, strict=True):
            assert (event.access.memory, event.access.owner) == (data_id, peer)
            assert event.label == "pld.tile.remote_load" and event.location.line == 39
        final = events[12]
        assert (final.access.memory, final.access.owner, final.location.line) == (
            y_id,
            HOST_OWNER,
            41,
        )
        assert final.location.text == "return pl.store(acc, [0, 0], y)"
        assert [event.index for event in events] == list(range(13))
    assert len(execution.schedule) == trace.size == 52


def test_mesh_at_128_ranks_traces_quickly() -> None:
    execution = simulate(_spec("mesh_class.py").instantiate(128), timeout=30)
    assert execution.trace.size == 128 * (4 + 3 * 127)
