"""The happens-before graph of one execution, and its vector clocks.

Edges: program order within a rank, and release→acquire from every notify to the wait
on the same cell that comes after it in the schedule. The graph explains a run (the
space-time diagram draws its sync edges); the engines decide over *all* runs, so an
ordering that every execution forces is, in particular, an edge path of every run's
graph — the test suite holds the engines to that.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np

from racecheck.events import CellKey, EventRef, Schedule, Trace


@dataclass(frozen=True, slots=True)
class VectorClocks:
    """clock[ref][r] = how many events of rank r happen before or at `ref` (inclusive)."""

    positions: dict[EventRef, int]
    clocks: np.ndarray  # [len(schedule), ranks]

    def ordered(self, earlier: EventRef, later: EventRef) -> bool:
        """True iff `earlier` happens before `later` in this execution."""
        if earlier == later:
            return False
        row = self.clocks[self.positions[later]]
        return earlier.index < int(row[earlier.rank])


def vector_clocks(trace: Trace, schedule: Schedule) -> VectorClocks:
    ranks = trace.ranks
    rank_clock = np.zeros((ranks, ranks), dtype=np.int64)
    cell_clock: dict[CellKey, np.ndarray] = {}
    clocks = np.zeros((len(schedule), ranks), dtype=np.int64)
    positions: dict[EventRef, int] = {}
    for step, ref in enumerate(schedule):
        event = trace.event(ref)
        own = rank_clock[ref.rank]
        if event.wait is not None:
            released = cell_clock.get(event.wait.cell.key)
            if released is not None:
                np.maximum(own, released, out=own)
        own[ref.rank] = ref.index + 1
        if event.notify is not None:
            key = event.notify.cell.key
            previous = cell_clock.get(key)
            cell_clock[key] = own.copy() if previous is None else np.maximum(previous, own)
        clocks[step] = own
        positions[ref] = step
    return VectorClocks(positions=positions, clocks=clocks)


def happens_before_graph(trace: Trace, schedule: Schedule) -> nx.DiGraph:
    """Nodes are EventRefs; edges carry `kind` = "program" or "sync"."""
    graph = nx.DiGraph()
    last_of_rank: dict[int, EventRef] = {}
    notifies: dict[CellKey, list[EventRef]] = {}
    for ref in schedule:
        event = trace.event(ref)
        graph.add_node(ref)
        if ref.rank in last_of_rank:
            graph.add_edge(last_of_rank[ref.rank], ref, kind="program")
        last_of_rank[ref.rank] = ref
        if event.wait is not None:
            for source in notifies.get(event.wait.cell.key, []):
                graph.add_edge(source, ref, kind="sync")
        if event.notify is not None:
            notifies.setdefault(event.notify.cell.key, []).append(ref)
    return graph
