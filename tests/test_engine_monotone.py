"""The monotone engine against its definition, on traces too big for the brute force:
`first` can precede `second` iff the maximal run with `second`'s rank held just before
it runs `first` (racecheck.engines.monotone), here one plain simulation per hold. Both
ways the engine computes that are checked: need vectors (no budget limit) and one sweep
per held rank (no budget at all), and its own choice."""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from functools import cache
from pathlib import Path

import pytest
from bruteforce import BruteForce, cross_rank_pairs
from hypothesis import given
from hypothesis import strategies as st
from strategies import monotone_traces
from test_engines_conformance import CONFORMANCE
from tracebuild import TraceBuilder

from racecheck.cosim import simulate
from racecheck.engines.monotone import MonotoneEngine, MonotoneOracle
from racecheck.engines.skeleton import ADD, SET, SyncSkeleton, wait_holds
from racecheck.events import EventRef, Trace
from racecheck.load import discover, load_file

EXAMPLES = Path(__file__).parent.parent / "examples"


def held_runs(skeleton: SyncSkeleton):
    """Per (held rank, hold): how many steps each rank takes in the maximal run where the
    held rank takes at most `hold` steps."""

    @cache
    def run(held: int, hold: int) -> tuple[int, ...]:
        positions = [0] * skeleton.ranks
        values = [0] * len(skeleton.cells)
        moved = True
        while moved:
            moved = False
            for rank in range(skeleton.ranks):
                limit = hold if rank == held else len(skeleton.kind[rank])
                position = positions[rank]
                if position >= limit:
                    continue
                kind = skeleton.kind[rank][position]
                cell, amount = skeleton.cell[rank][position], skeleton.amount[rank][position]
                if kind < ADD and not wait_holds(kind, values[cell], amount):
                    continue
                if kind >= ADD:
                    values[cell] = amount if kind == SET else values[cell] + amount
                positions[rank] = position + 1
                moved = True
        return tuple(positions)

    return run


BUDGETS = [None, 0.0, math.inf]


def assert_defined_answers(trace: Trace, budget: float | None) -> int:
    """Every cross-rank question answered as the held run says; how many were asked."""
    skeleton = SyncSkeleton(trace)
    assert MonotoneEngine().unsupported(skeleton) is None
    oracle = MonotoneOracle(skeleton, deadline=time.monotonic() + 60, budget=budget)
    run = held_runs(skeleton)
    asked = 0
    for second in (event.ref for events in trace.events for event in events):
        taken = run(second.rank, skeleton.steps_before(second.rank, second.index))
        for rank, events in enumerate(trace.events):
            if rank == second.rank:
                continue
            for event in events:
                needed = bisect_right(skeleton.index[rank], event.index)
                expected = taken[rank] >= needed
                assert oracle.can_precede(event.ref, second) == expected, (event.ref, second)
                asked += 1
    return asked


def example_trace(name: str, ranks: int, repeat: int) -> Trace:
    spec = discover(load_file(str(EXAMPLES / name)))[0]
    return simulate(spec.instantiate(ranks), repeat=repeat).trace


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize(
    ("name", "ranks", "repeat"),
    [
        ("04_shift_counter_barrier.py", 5, 3),  # counters: four writers per cell
        ("14_allreduce_ring.py", 6, 1),
        ("40_host_allreduce_multicore.py", 3, 2),
        ("08_allreduce_mesh.py", 7, 2),
    ],
)
def test_every_answer_is_the_held_runs(
    name: str, ranks: int, repeat: int, budget: float | None
) -> None:
    assert assert_defined_answers(example_trace(name, ranks, repeat), budget) > 1000


@CONFORMANCE
@given(trace=monotone_traces(), budget=st.sampled_from(BUDGETS))
def test_both_ways_agree_with_brute_force_on_monotone_protocols(
    trace: Trace, budget: float | None
) -> None:
    truth = BruteForce(trace)
    oracle = MonotoneOracle(SyncSkeleton(trace), deadline=time.monotonic() + 60, budget=budget)
    for first, second in cross_rank_pairs(trace):
        assert oracle.can_precede(first, second) == truth.can_precede(first, second)


def test_many_rounds_through_one_counter_take_the_sweeps() -> None:
    """67 rounds of a counter barrier: every wait of a cell reads every write of it, so
    the need vectors would cost far more than a sweep per rank; the budget stops them."""
    trace = example_trace("04_shift_counter_barrier.py", 4, 67)
    started = time.process_time()
    oracle = MonotoneEngine().order(SyncSkeleton(trace), deadline=time.monotonic() + 60)
    assert time.process_time() - started < 2.0
    assert oracle.can_precede(EventRef(rank=0, index=0), EventRef(rank=1, index=0))


@pytest.mark.parametrize("budget", BUDGETS)
def test_a_write_after_the_wait_in_the_maximal_run_can_release_it_under_a_hold(
    budget: float | None,
) -> None:
    """Any two of three writers release rank 4, and each writer first waits for rank 0:
    holding one writer back, the other two still release it, so rank 4's load can
    precede each writer's notify and rank 0's last, but not rank 0's second (before it
    only one writer is released)."""
    builder = TraceBuilder(5)
    sig = builder.window("sig", 16)
    buf = builder.window("buf", 64)
    for writer in (1, 2, 3):
        builder.notify(0, sig, writer, 0, line=1)
    for writer in (1, 2, 3):
        builder.wait(writer, sig, 0, line=2)
        builder.notify(writer, sig, 4, 4, line=3)
    builder.wait(4, sig, 4, line=4, expected=2)
    builder.load(4, buf, 4, 0, 64, line=5)
    trace = builder.build()
    assert_defined_answers(trace, budget)
    oracle = MonotoneOracle(SyncSkeleton(trace), deadline=time.monotonic() + 60, budget=budget)
    load = EventRef(rank=4, index=1)
    for writer in (1, 2, 3):
        assert oracle.can_precede(load, EventRef(rank=writer, index=1))
    assert oracle.can_precede(load, EventRef(rank=0, index=2))
    assert not oracle.can_precede(load, EventRef(rank=0, index=1))
