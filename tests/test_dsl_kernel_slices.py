"""Kernel-side slices of real PyPTO system tests: strided slices read as loads, slice
assignments stored as writes, tensor-level math on views, and windows that reach only
some ranks (a smaller communication group)."""

from pathlib import Path

import numpy as np

from racecheck.cosim import simulate
from racecheck.events import EventKind
from racecheck.findings import FindingKind, Verdict
from racecheck.load import discover, load_file
from racecheck.options import Options
from racecheck.pipeline import check_program

FIXTURE = Path(__file__).parent / "fixtures" / "kernel_slices.py"
SPECS = {spec.name: spec for spec in discover(load_file(str(FIXTURE)), args={})}


def test_strided_column_of_a_window_is_loaded_and_assigned() -> None:
    execution = simulate(SPECS["ColumnOfWindow"].instantiate(2))
    x, y = execution.tensors
    for rank in range(2):
        np.testing.assert_array_equal(y.final[rank], x.initial[rank][:, 1:2])
    loads = [
        event
        for event in execution.trace.events[0]
        if event.kind is EventKind.LOAD and event.label == "tensor.slice"
    ]
    assert len(loads) == 1 and len(loads[0].access.ranges) == 4  # one run per row


def test_slice_assignment_is_a_store_that_a_barrier_orders() -> None:
    safe = simulate(SPECS["build_staged_shift[barrier=True]"].instantiate(3))
    x, y = safe.tensors
    for rank in range(3):
        np.testing.assert_array_equal(y.final[rank], x.initial[(rank + 1) % 3])
    stores = [event for event in safe.trace.events[0] if event.label == "tensor.assemble"]
    assert len(stores) == 1


def test_slice_assignment_without_a_barrier_races_with_the_neighbours_read() -> None:
    spec = SPECS["build_staged_shift[barrier=False]"]
    result = check_program(spec, 2, Options(ranks=(2,)))
    assert result.verdict is Verdict.BUG
    assert any(
        finding.kind in (FindingKind.RACE, FindingKind.STALE_READ) for finding in result.findings
    )


def test_tensor_slice_cast_and_add_work_on_views() -> None:
    execution = simulate(SPECS["SliceCastAdd"].instantiate(2))
    a, b, y = execution.tensors
    for rank in range(2):
        expected = a.initial[rank] + b.initial[rank].astype(np.float32)
        np.testing.assert_allclose(y.final[rank], expected, rtol=1e-6)


def test_window_dispatched_to_some_ranks_is_a_group_with_its_own_numbering() -> None:
    execution = simulate(SPECS["build_pair_group"].instantiate(3))
    x, y = execution.tensors
    np.testing.assert_array_equal(y.final[0], x.initial[1])
    np.testing.assert_array_equal(y.final[1], x.initial[0])
    assert not y.final[2].any() and execution.trace.events[2] == ()
    result = check_program(SPECS["build_pair_group"], 3, Options(ranks=(3,)))
    assert result.verdict is Verdict.PROVED


def test_window_dispatched_to_every_rank_is_one_group() -> None:
    execution = simulate(SPECS["build_pair_group"].instantiate(2))
    x, y = execution.tensors
    np.testing.assert_array_equal(y.final[0], x.initial[1])


def test_a_kernel_slice_past_its_tensor_is_an_out_of_bounds_bug_at_its_line() -> None:
    """A slice taken in a kernel is a view whose accesses reach past the tensor: an
    out-of-bounds finding at the slice, not an error of racecheck's tracing."""
    line = next(
        n
        for n, text in enumerate(FIXTURE.read_text().splitlines(), start=1)
        if text.endswith("# @tile")
    )
    whole = check_program(SPECS["build_row_tiles[extra=False]"], 2, Options(ranks=(2,)))
    assert whole.verdict is Verdict.PROVED
    past = check_program(SPECS["build_row_tiles[extra=True]"], 2, Options(ranks=(2,)))
    assert past.verdict is Verdict.BUG
    kinds = {(f.kind, tuple(loc.line for loc in f.locations)) for f in past.findings}
    assert kinds == {(FindingKind.OUT_OF_BOUNDS, (line,))}
