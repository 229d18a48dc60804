"""Happens-before of one run: vector clocks agree with graph reachability, and every
order the monotone engine says all executions force is an edge path of the run."""

from __future__ import annotations

import itertools
import time

import networkx as nx
import pytest
from tracebuild import mesh_allreduce

from racecheck.engines.monotone import MonotoneEngine
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.hb import happens_before_graph, vector_clocks


def _default_run(trace):
    oracle = MonotoneEngine().order(SyncSkeleton(trace), deadline=time.monotonic() + 30)
    return oracle, oracle.maximal_schedule()


@pytest.mark.parametrize("ranks", [2, 3])
def test_vector_clocks_match_graph_reachability(ranks: int) -> None:
    trace = mesh_allreduce(ranks)
    _, schedule = _default_run(trace)
    clocks = vector_clocks(trace, schedule)
    graph = happens_before_graph(trace, schedule)
    for a, b in itertools.permutations(schedule, 2):
        assert clocks.ordered(a, b) == nx.has_path(graph, a, b), (a, b)


@pytest.mark.parametrize("ranks", [2, 4])
def test_forced_orders_are_happens_before_in_the_run(ranks: int) -> None:
    trace = mesh_allreduce(ranks)
    oracle, schedule = _default_run(trace)
    clocks = vector_clocks(trace, schedule)
    forced = 0
    for a, b in itertools.permutations(schedule, 2):
        if a.rank != b.rank and not oracle.can_precede(b, a):
            forced += 1
            assert clocks.ordered(a, b), (a, b)
    assert forced > 0
