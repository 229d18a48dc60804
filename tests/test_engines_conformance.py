"""Every engine answers the ordering questions exactly like the brute force.

On random protocols (tests/strategies.py), of one thread per rank or of several threads
per rank with start edges: `can_precede` for every pair of threads,
`can_run` for every event,
every witness replays as an execution ending with `first` and without `second`,
`stuck()` is None iff the brute force reaches no stuck state, and every Stuck replays to
a state where no rank can move and exactly the reported waits are blocked. Every
engine of the registry (`racecheck.engines.ENGINES`) is tested, so a new engine is
tested here without editing this file.
"""

from __future__ import annotations

import time

import pytest
from bruteforce import (
    BruteForce,
    cell_value,
    cross_rank_pairs,
    is_enabled,
    is_stuck,
    next_event,
    replay,
)
from hypothesis import HealthCheck, given, settings
from strategies import monotone_traces, threaded_traces, traces, unit_traces

from racecheck.engines import AUTO_ROUTE, ENGINES
from racecheck.engines.base import Engine, OrderOracle
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.events import EventKind, EventRef, Trace

CONFORMANCE = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assert_conforms(engine: Engine, trace: Trace) -> None:
    skeleton = SyncSkeleton(trace)
    assert engine.unsupported(skeleton) is None
    oracle = engine.order(skeleton, deadline=time.monotonic() + 60)
    truth = BruteForce(trace)
    for first, second in cross_rank_pairs(trace):
        expected = truth.can_precede(first, second)
        assert oracle.can_precede(first, second) == expected, (first, second)
        if expected:
            assert_witness(trace, oracle, first, second)
    for rank_events in trace.events:
        for event in rank_events:
            assert oracle.can_run(event.ref) == truth.can_run(event.ref), event.ref
    assert_stuck(trace, oracle, truth)


def assert_witness(trace: Trace, oracle: OrderOracle, first: EventRef, second: EventRef) -> None:
    schedule = oracle.witness(first, second)
    replay(trace, schedule)
    assert schedule and schedule[-1] == first
    assert second not in schedule


def assert_stuck(trace: Trace, oracle: OrderOracle, truth: BruteForce) -> None:
    stuck = oracle.stuck()
    assert (stuck is not None) == truth.has_stuck_state()
    if stuck is None:
        return
    state = replay(trace, stuck.schedule)
    assert is_stuck(trace, state)
    waiting = {
        event.ref
        for rank in range(trace.ranks)
        if (event := next_event(trace, state, rank)) is not None
    }
    assert set(stuck.blocked) == waiting
    for ref in stuck.blocked:
        assert trace.event(ref).kind is EventKind.WAIT
        assert not is_enabled(trace, state, ref.rank)
    for cell, value in stuck.cell_values:
        assert cell_value(trace, state, (cell.memory, cell.owner, cell.offset)) == value


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@CONFORMANCE
@given(trace=traces())
def test_engine_is_exact_wherever_it_accepts_a_trace(engine_name: str, trace: Trace) -> None:
    """Each engine's own boundary (`unsupported`) is where it stays exact."""
    engine = ENGINES[engine_name]()
    if engine.unsupported(SyncSkeleton(trace)) is None:
        assert_conforms(engine, trace)


@CONFORMANCE
@given(trace=traces())
def test_every_engine_of_the_auto_route_but_the_fast_path_accepts_every_protocol(
    trace: Trace,
) -> None:
    """Past the monotone fast path, the route's engines have no boundary of their own."""
    skeleton = SyncSkeleton(trace)
    assert all(make().unsupported(skeleton) is None for make in AUTO_ROUTE[1:])


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@CONFORMANCE
@given(trace=monotone_traces())
def test_engine_agrees_with_brute_force_on_monotone_protocols(
    engine_name: str, trace: Trace
) -> None:
    assert_conforms(ENGINES[engine_name](), trace)


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@CONFORMANCE
@given(trace=threaded_traces())
def test_engine_is_exact_over_threads_with_start_edges(engine_name: str, trace: Trace) -> None:
    """Several threads per rank, started after other tasks: every engine decides over
    threads through the lowered start edges, the brute force from `trace.threads`."""
    engine = ENGINES[engine_name]()
    if engine.unsupported(SyncSkeleton(trace)) is None:
        assert_conforms(engine, trace)


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@CONFORMANCE
@given(trace=threaded_traces(monotone=True))
def test_engine_is_exact_over_monotone_threads(engine_name: str, trace: Trace) -> None:
    engine = ENGINES[engine_name]()
    if engine.unsupported(SyncSkeleton(trace)) is None:
        assert_conforms(engine, trace)


@CONFORMANCE
@given(trace=threaded_traces())
def test_the_auto_route_past_the_fast_path_accepts_every_threaded_protocol(trace: Trace) -> None:
    skeleton = SyncSkeleton(trace)
    assert all(make().unsupported(skeleton) is None for make in AUTO_ROUTE[1:])


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@CONFORMANCE
@given(trace=unit_traces())
def test_engine_is_exact_over_threads_holding_units(engine_name: str, trace: Trace) -> None:
    """Threads that hold a core of their rank and dispatches that hold its lock: every
    engine that accepts the trace agrees with the brute force, which models the units
    from `trace.threads` and `trace.capacities`, not from their cells."""
    engine = ENGINES[engine_name]()
    if engine.unsupported(SyncSkeleton(trace)) is None:
        assert_conforms(engine, trace)


@CONFORMANCE
@given(trace=unit_traces())
def test_explore_and_smt_decide_every_protocol_with_units_and_monotone_defers(
    trace: Trace,
) -> None:
    """Explore and smt model a wait that takes a unit; monotone refuses, never answers."""
    skeleton = SyncSkeleton(trace)
    assert ENGINES["explore"]().unsupported(skeleton) is None
    assert ENGINES["smt"]().unsupported(skeleton) is None
    if skeleton.takes:
        reason = ENGINES["monotone"]().unsupported(skeleton)
        assert reason and "only the explore and smt engines" in reason
