"""Units a rank's threads hold (docs/model.md §1): with `--cores N` each thread holds
one of its rank's N cores from its first event to its last, a spinning wait keeping
it, and any ready thread may get a free one; a rank's L3 dispatches hold its dispatch
lock one at a time, in any order. Starvation is a deadlock naming the held units."""

from __future__ import annotations

import time

import pytest
from test_threads import findings
from tracebuild import TraceBuilder

from racecheck.engines import ENGINES, prepare
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.errors import EngineUnknown
from racecheck.events import Capacity, Thread, Trace, core_capacities
from racecheck.findings import FindingKind
from racecheck.options import EngineChoice
from racecheck.report.phrases import describe_finding

WAIT, NOTIFY, STORE, LOAD = 10, 20, 30, 40


def waiter_and_notifier(*, cores: int, ordered: bool = False) -> Trace:
    """Rank 0: `wait_step` spins on its own cell, `notify_step` sets it; unordered
    unless `ordered` (wait_step starts after notify_step). Both hold a core."""
    threads = (
        Thread(
            rank=0,
            name="task wait_step",
            task=0,
            task_name="wait_step",
            resource="core",
            after=(1,) if ordered else (),
        ),
        Thread(rank=0, name="task notify_step", task=1, task_name="notify_step", resource="core"),
    )
    build = TraceBuilder(2, threads, (Capacity(rank=0, resource="core", units=cores),))
    signal = build.window("signal", 4)
    build.wait(0, signal, 0, WAIT)
    build.notify(1, signal, 0, 0, NOTIFY)
    return build.build()


def explored(trace: Trace) -> list:
    return findings(trace, "explore")


def test_a_waiter_holding_the_only_core_starves_its_notifier() -> None:
    (deadlock,) = explored(waiter_and_notifier(cores=1))
    assert deadlock.kind is FindingKind.DEADLOCK
    text = describe_finding(deadlock)
    held = "waits forever on a free core of rank 0 (it has 1), held by rank 0, task wait_step"
    assert held in text
    assert "task wait_step waits forever on wait rank 0's signal[0, 0] >= 1" in text


@pytest.mark.parametrize("fix", ["two cores", "ordered"])
def test_a_second_core_or_a_start_edge_lets_the_notifier_run(fix: str) -> None:
    trace = (
        waiter_and_notifier(cores=2)
        if fix == "two cores"
        else waiter_and_notifier(cores=1, ordered=True)
    )
    assert explored(trace) == []


def test_a_capacity_no_rank_exceeds_costs_nothing() -> None:
    trace = waiter_and_notifier(cores=2)
    assert not SyncSkeleton(trace).takes
    for engine in sorted(ENGINES):
        assert findings(trace, engine) == []


def test_monotone_defers_on_units_and_auto_routes_past_it() -> None:
    trace = waiter_and_notifier(cores=1)
    skeleton = SyncSkeleton(trace)
    reason = "only the explore and smt engines"
    assert reason in (ENGINES["monotone"]().unsupported(skeleton) or "")
    with pytest.raises(EngineUnknown, match=reason):
        prepare(EngineChoice.MONOTONE, trace, deadline=time.monotonic() + 30)
    assert ENGINES["smt"]().unsupported(skeleton) is None
    name, _ = prepare(EngineChoice.AUTO, trace, deadline=time.monotonic() + 30)
    assert name == "explore"


def two_dispatches(*, wait_in_first: bool) -> Trace:
    """Rank 0 runs dispatch 0 (`spin`, which waits for its own cell if `wait_in_first`)
    and dispatch 1 (`post`: notifies the cell, then `copy`: store; `tail`: load)."""
    threads = (
        Thread(rank=0, name="task spin", task=0, task_name="spin", dispatch=0),
        Thread(rank=0, name="task post", task=1, task_name="post", dispatch=1),
        Thread(rank=0, name="task tail", task=2, task_name="tail", dispatch=1),
    )
    build = TraceBuilder(3, threads)
    signal = build.window("signal", 4)
    data = build.window("data", 16)
    if wait_in_first:
        build.wait(0, signal, 0, WAIT)
    build.store(0, data, 0, 0, 16, STORE)
    build.notify(1, signal, 0, 0, NOTIFY)
    build.load(2, data, 0, 0, 16, LOAD)
    return build.build()


def test_a_dispatch_that_spins_first_holds_the_lock_its_notifier_needs() -> None:
    kinds = {finding.kind for finding in explored(two_dispatches(wait_in_first=True))}
    assert FindingKind.DEADLOCK in kinds
    (deadlock,) = [
        f for f in explored(two_dispatches(wait_in_first=True)) if f.kind is FindingKind.DEADLOCK
    ]
    assert "the dispatch lock of rank 0, held by rank 0, task spin" in describe_finding(deadlock)


def test_dispatches_run_whole_but_in_either_order() -> None:
    """spin's store and tail's load never overlap a dispatch, yet either runs first: a
    race (the order is the runtime's choice), and no deadlock."""
    found = explored(two_dispatches(wait_in_first=False))
    assert [f.kind for f in found] == [FindingKind.RACE]


def test_cores_of_threads_that_never_wait_are_not_counted() -> None:
    """Two writers of one rank, one core: neither can hold the other back for good, so
    no unit is lowered, and their race (an order a rank with two cores runs) stays."""
    threads = tuple(
        Thread(rank=0, name=f"task w{n}", task=n, task_name=f"w{n}", resource="core")
        for n in range(2)
    )
    build = TraceBuilder(2, threads, (Capacity(rank=0, resource="core", units=1),))
    data = build.window("data", 16)
    build.store(0, data, 0, 0, 16, STORE)
    build.store(1, data, 0, 0, 16, STORE + 1)
    trace = build.build()
    assert not SyncSkeleton(trace).takes
    assert [f.kind for f in explored(trace)] == [FindingKind.RACE]


def test_core_capacities_give_each_rank_its_cores() -> None:
    assert core_capacities(2, 16) == (
        Capacity(rank=0, resource="core", units=16),
        Capacity(rank=1, resource="core", units=16),
    )


# Probes: traces meant to make an engine prove a starvation away.


def crossed_waiters(*, cores: int) -> Trace:
    """Each of two ranks runs a waiter for the other rank's notifier and that notifier:
    with one core each, both waiters may take their rank's core first."""
    threads = tuple(
        Thread(rank=rank, name=f"task {role}", task=2 * rank + n, task_name=role)
        for rank in range(2)
        for n, role in enumerate(("wait_step", "notify_step"))
    )
    capacities = tuple(Capacity(rank=rank, resource="core", units=cores) for rank in range(2))
    build = TraceBuilder(4, threads, capacities)
    signal = build.window("signal", 4)
    for rank in range(2):
        build.wait(2 * rank, signal, 0, WAIT)
        build.notify(2 * rank + 1, signal, 1 - rank, 0, NOTIFY)
    return build.build()


def test_probe_waiters_of_both_ranks_starve_each_others_notifiers() -> None:
    (deadlock,) = explored(crossed_waiters(cores=1))
    assert deadlock.kind is FindingKind.DEADLOCK
    text = describe_finding(deadlock)
    for rank in range(2):
        assert f"a free core of rank {rank} (it has 1), held by rank {rank}, task wait_step" in text
    name, oracle = prepare(
        EngineChoice.AUTO, crossed_waiters(cores=1), deadline=time.monotonic() + 30
    )
    assert name == "explore" and oracle.stuck() is not None
    assert explored(crossed_waiters(cores=2)) == []


def test_probe_two_waiters_fill_two_cores_before_their_notifier() -> None:
    threads = (
        *(
            Thread(rank=0, name=f"task wait_{n}", task=n, task_name=f"wait_{n}", resource="core")
            for n in range(2)
        ),
        Thread(rank=0, name="task notify_step", task=2, task_name="notify_step"),
    )
    build = TraceBuilder(3, threads, (Capacity(rank=0, resource="core", units=2),))
    signal = build.window("signal", 4)
    build.wait(0, signal, 0, WAIT)
    build.wait(1, signal, 0, WAIT)
    build.notify(2, signal, 0, 0, NOTIFY)
    (deadlock,) = explored(build.build())
    assert deadlock.kind is FindingKind.DEADLOCK
    assert "held by rank 0, task wait_0 and rank 0, task wait_1" in describe_finding(deadlock)
