"""A rank's dispatches in every order PyPTO's runtime allows (docs/model.md): they never
overlap, and run in any order that keeps the program order of the dispatches of one
communication domain and the tag edges. The co-simulation runs them as threads that
take the rank's dispatch lock, and every engine decides every order the lock allows;
a witness replays the order its engine chose."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import racecheck
from racecheck.cosim import simulate
from racecheck.events import DISPATCH_TAKE, MemoryKind
from racecheck.findings import Finding, FindingKind, RaceDetail, Verdict
from racecheck.load import discover, load_file

ROOT = Path(__file__).resolve().parent.parent
SWAP = ROOT / "examples" / "51_two_groups_swap.py"
CYCLE = ROOT / "examples" / "176_three_groups_swap_bug_cross_domain_cycle.py"
FIXTURES = ROOT / "tests" / "fixtures"


def _line(path: Path, marker: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if text.endswith(f"# @{marker}"))


def _first_locks(finding: Finding) -> dict[int, str]:
    """Per rank, the thread whose taking of the dispatch lock the witness shows first."""
    first: dict[int, str] = {}
    for step in finding.witness:
        if "the dispatch lock of rank" in step.call:
            first.setdefault(step.rank, step.task)
    return first


@pytest.mark.parametrize("engine", ["auto", "explore", "smt"])
def test_a_deadlock_in_an_order_the_runtime_allows_is_a_bug_whose_witness_runs_it(
    engine: str,
) -> None:
    (result,) = racecheck.verify(str(CYCLE), ranks=[3], engine=engine).results
    assert result.verdict is Verdict.BUG
    (deadlock,) = result.findings
    assert deadlock.kind is FindingKind.DEADLOCK and deadlock.confirmed
    assert deadlock.ranks == (0, 1, 2)
    assert [location.line for location in deadlock.locations] == [_line(CYCLE, "wait")]
    # the cycle needs some rank to run its second dispatch first: the replayed witness
    # shows it taking the lock for that one
    assert any("(dispatch 2, line" in task for task in _first_locks(deadlock).values())


def test_orders_of_several_ranks_are_combined() -> None:
    """Device 1's dispatches are chained by a tag edge, but devices 0 and 2 running
    their second dispatch first still closes the cycle."""
    path = FIXTURES / "three_groups_one_chained.py"
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    (deadlock,) = result.findings
    assert deadlock.kind is FindingKind.DEADLOCK and deadlock.ranks == (0, 1, 2)
    first = _first_locks(deadlock)
    assert "(dispatch 2, line" in first[0] and "(dispatch 2, line" in first[2]


def test_a_proof_covers_every_order() -> None:
    (swap,) = racecheck.verify(str(SWAP), ranks=[3]).results
    assert swap.verdict is Verdict.PROVED
    relay_path = ROOT / "examples" / "177_three_groups_relay.py"
    (relay,) = racecheck.verify(str(relay_path), ranks=[3]).results
    assert relay.verdict is Verdict.PROVED  # tag edges leave each rank one order
    (hub,) = racecheck.verify(str(FIXTURES / "three_domain_hub.py"), ranks=[4]).results
    assert hub.verdict is Verdict.PROVED  # three domains on one device: six orders


def test_only_dispatches_left_unordered_take_the_lock() -> None:
    """Rank 1 of the two-group swap runs one dispatch of each group: they take its
    lock; the other ranks run one dispatch each and take none."""
    (spec,) = discover(load_file(str(SWAP)), programs=(), args={})
    trace = simulate(spec.instantiate(3)).trace
    taking = {
        trace.threads[ref].rank
        for ref, events in enumerate(trace.events)
        for event in events
        if event.label == DISPATCH_TAKE
    }
    assert taking == {1}
    assert any(memory.kind is MemoryKind.UNITS for memory in trace.memories)
    locked = {t.dispatch for t in trace.threads if t.rank == 1 and t.dispatch >= 0}
    assert len(locked) == 2


def test_a_ring_of_pairwise_groups_is_decided_at_every_rank_count() -> None:
    """At 5 ranks the ring's dispatches run in 32 combined orders: decided, as at 3."""
    path = FIXTURES / "ring_of_pairs.py"
    results = {r.ranks: r for r in racecheck.verify(str(path), ranks=[2, 3, 5]).results}
    assert results[2].verdict is Verdict.PROVED  # both pairs are one group: one domain
    for count in (3, 5):
        # (rank 0 is the low member of two groups and writes outputs_a[0] in both: a
        # write-after-write race of its two dispatches too)
        kinds = [f.kind for f in results[count].findings]
        deadlock = results[count].findings[kinds.index(FindingKind.DEADLOCK)]
        assert deadlock.confirmed
        assert deadlock.ranks == tuple(range(count))
        assert [loc.line for loc in deadlock.locations] == [_line(path, "wait")]


def test_dispatches_that_touch_the_same_bytes_in_either_order_race() -> None:
    """The second `bump` declares `x` Out, which looks up no producer: the two
    dispatches are unordered, so the load of one and the store of the other race, in
    both directions, with replayed witnesses. Declared InOut, they are chained."""
    path = FIXTURES / "dispatch_declared_tags.py"
    results = {r.program: r for r in racecheck.verify(str(path), ranks=[2]).results}
    assert results["build[second_out=False]"].verdict is Verdict.PROVED
    out = results["build[second_out=True]"]
    assert out.verdict is Verdict.BUG
    details = {f.detail for f in out.findings if f.kind is FindingKind.RACE}
    assert {RaceDetail.READ_AFTER_WRITE.value, RaceDetail.WRITE_AFTER_WRITE.value} <= details
    assert all(f.confirmed for f in out.findings)
    first, second = _line(path, "first"), _line(path, "second")
    names = {name for f in out.findings for name in f.threads}
    assert f"task bump (dispatch 1, line {first})" in names
    assert f"task bump (dispatch 2, line {second})" in names


def test_dispatched_kernels_are_threads_that_take_the_lock() -> None:
    """Four dispatched kernels writing one row: a write-after-write race (24 orders, all
    decided); four writing four tensors: proved."""
    path = FIXTURES / "many_dispatch_orders.py"
    results = {r.program: r for r in racecheck.verify(str(path), ranks=[1]).results}
    assert results["fill_apart"].verdict is Verdict.PROVED
    refill = results["refill"]
    assert refill.verdict is Verdict.BUG
    assert {(f.kind, f.detail, f.confirmed) for f in refill.findings} == {
        (FindingKind.RACE, RaceDetail.WRITE_AFTER_WRITE.value, True)
    }


def test_a_dispatch_storing_into_a_signal_cell_is_reordered_like_one_that_notifies() -> None:
    path = FIXTURES / "dispatch_signal_store.py"
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    found = {(f.kind, tuple(loc.line for loc in f.locations)) for f in result.findings}
    assert found == {(FindingKind.RACE, (_line(path, "load"), _line(path, "push")))}
    (race,) = result.findings
    assert race.confirmed
    assert "task signal_step" in _first_locks(race).get(1, "")


def test_a_run_with_threads_replays_the_dispatch_order_of_its_plan() -> None:
    """The plan made from the run in program order is reused by a replay: the same
    threads, the same dispatch numbers."""
    (spec,) = discover(load_file(str(SWAP)), programs=(), args={})
    first = simulate(spec.instantiate(3))
    assert first.plan is not None
    again = simulate(dataclasses.replace(spec.instantiate(3), thread_plan=first.plan))
    assert again.trace.threads == first.trace.threads
