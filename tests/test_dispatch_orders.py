"""A rank's dispatches in every order PyPTO's runtime allows (docs/model.md): they never
overlap, and run in any order that keeps the program order of the dispatches of one
communication domain and the tag edges."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import racecheck
from racecheck.cosim import simulate
from racecheck.cosim.tasks import DispatchGraph
from racecheck.findings import FindingKind, Verdict
from racecheck.load import discover, load_file

ROOT = Path(__file__).resolve().parent.parent
SWAP = ROOT / "examples" / "51_two_groups_swap.py"
CYCLE = ROOT / "examples" / "176_three_groups_swap_bug_cross_domain_cycle.py"
FIXTURES = ROOT / "tests" / "fixtures"


def _line(path: Path, marker: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if text.endswith(f"# @{marker}"))


def test_a_deadlock_in_an_order_the_runtime_allows_is_a_bug_naming_the_order() -> None:
    (result,) = racecheck.verify(str(CYCLE), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    (deadlock,) = result.findings
    assert deadlock.kind is FindingKind.DEADLOCK and deadlock.confirmed
    assert deadlock.ranks == (0, 1, 2)
    assert [location.line for location in deadlock.locations] == [_line(CYCLE, "wait")]
    a, b = _line(CYCLE, "group_a"), _line(CYCLE, "group_b")
    assert (
        f"rank 1 runs dispatch 2 (swap_step, line {b}) before dispatch 1 (swap_step, line {a}),"
        " as PyPTO's runtime may: the bug shows in that order"
    ) in result.notes


def test_orders_of_several_ranks_are_combined() -> None:
    """Device 1's dispatches are chained by a tag edge, but devices 0 and 2 running
    their second dispatch first still closes the cycle."""
    path = FIXTURES / "three_groups_one_chained.py"
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    (deadlock,) = result.findings
    assert deadlock.kind is FindingKind.DEADLOCK and deadlock.ranks == (0, 1, 2)
    a, c, c_2, b = (_line(path, marker) for marker in ("a", "c", "c_2", "b_2"))
    assert (
        f"rank 0 runs dispatch 2 (swap_step, line {c}) before dispatch 1 (swap_step, line {a});"
        f" rank 2 runs dispatch 2 (swap_step, line {b}) before dispatch 1 (swap_step, line {c_2}),"
        " as PyPTO's runtime may: the bug shows in that order"
    ) in result.notes


def test_a_proof_names_how_many_orders_it_covers() -> None:
    (swap,) = racecheck.verify(str(SWAP), ranks=[3]).results
    assert swap.verdict is Verdict.PROVED
    assert (
        "checked in all 2 orders of the dispatches of rank 1 that PyPTO's runtime allows"
        " and that can matter"
    ) in swap.notes
    relay_path = ROOT / "examples" / "177_three_groups_relay.py"
    (relay,) = racecheck.verify(str(relay_path), ranks=[3]).results
    assert relay.verdict is Verdict.PROVED  # tag edges leave each rank one order
    assert not any("orders of the dispatches" in note for note in relay.notes)


def test_three_domains_on_one_device_give_six_orders() -> None:
    (result,) = racecheck.verify(str(FIXTURES / "three_domain_hub.py"), ranks=[4]).results
    assert result.verdict is Verdict.PROVED
    assert (
        "checked in all 6 orders of the dispatches of rank 0 that PyPTO's runtime allows"
        " and that can matter"
    ) in result.notes


def test_too_many_orders_are_unknown_naming_the_rank_and_its_dispatches() -> None:
    path = FIXTURES / "many_dispatch_orders.py"
    results = {r.program: r for r in racecheck.verify(str(path), ranks=[1]).results}
    apart = results["fill_apart"]  # unordered, but no order of them can matter
    assert apart.verdict is Verdict.PROVED
    assert not any("orders of the dispatches" in note for note in apart.notes)
    result = results["refill"]
    assert result.verdict is Verdict.UNKNOWN
    line = _line(path, "fill")
    listed = ", ".join(f"dispatch {n} (fill, line {line})" for n in range(1, 5))
    assert result.message == (
        f"the dispatches of rank 0 ({listed}) run in more than 16 orders that PyPTO's"
        " runtime allows and that can matter; racecheck checks at most 16"
    )


def _graph(count: int, edges: set[tuple[int, int]], independent: set[tuple[int, int]]):
    return DispatchGraph(
        rank=0,
        first_tasks=(None,) * count,
        edges=frozenset(edges),
        independent=frozenset(independent),
    )


def test_orders_keep_the_edges_and_one_order_of_pairs_that_cannot_matter() -> None:
    rounds = _graph(4, {(1, 3), (1, 4), (2, 3), (2, 4)}, set())  # two rounds of two
    assert rounds.orders(16) == [(1, 2, 3, 4), (1, 2, 4, 3), (2, 1, 3, 4), (2, 1, 4, 3)]
    free = {(a, b) for b in range(1, 7) for a in range(1, b)}
    assert _graph(6, set(), free).orders(16) == [(1, 2, 3, 4, 5, 6)]
    # 3 commutes with 1 and 2, whose order matters: the order of 1 and 2 is all there is
    mixed = _graph(3, set(), {(1, 3), (2, 3)})
    assert [order.index(2) < order.index(1) for order in mixed.orders(16)] == [False, True]
    assert _graph(4, set(), set()).orders(16) is None  # 24 orders
    assert len(_graph(4, set(), set()).orders(24) or ()) == 24


def test_a_dispatch_order_counts_every_round_and_runs_as_given() -> None:
    (spec,) = discover(load_file(str(SWAP)), programs=(), args={})
    instance = dataclasses.replace(spec.instantiate(3), dispatch_orders=((1, (2, 1, 4, 3)),))
    execution = simulate(instance, repeat=2)
    ran = [(task.dispatch, task.repeat) for task in execution.tasks[1]]
    assert list(dict.fromkeys(ran)) == [(2, 0), (1, 0), (4, 1), (3, 1)]
    assert [task.dispatch for task in execution.tasks[0]] == [1, 2]


def test_dispatches_are_ordered_by_the_directions_the_dispatched_function_declares() -> None:
    """The kernel both orchestrations call takes `x` as InOut; only the orchestration's
    own declaration counts (it was proved from the kernel's)."""
    path = FIXTURES / "dispatch_declared_tags.py"
    results = {r.program: r for r in racecheck.verify(str(path), ranks=[2]).results}
    assert results["build[second_out=False]"].verdict is Verdict.PROVED
    out = results["build[second_out=True]"]
    assert out.verdict is Verdict.UNKNOWN
    first, second = _line(path, "first"), _line(path, "second")
    assert out.message.startswith(
        f"rank 0: PyPTO's runtime does not order dispatch 1 (bump, line {first}) and"
        f" dispatch 2 (bump, line {second}), which access the same bytes, one writing"
    )


def test_combined_orders_beyond_the_cap_are_unknown_naming_every_rank() -> None:
    path = FIXTURES / "ring_of_pairs.py"
    results = {r.ranks: r for r in racecheck.verify(str(path), ranks=[2, 3, 5]).results}
    assert results[2].verdict is Verdict.PROVED  # both pairs are one group: one domain
    (deadlock,) = results[3].findings
    assert deadlock.kind is FindingKind.DEADLOCK and deadlock.ranks == (0, 1, 2)
    beyond = results[5]
    assert beyond.verdict is Verdict.UNKNOWN
    assert beyond.message.startswith("the dispatches of rank 0 (dispatch 1 (swap_step, line")
    assert all(f" and rank {rank} (dispatch 1" in beyond.message for rank in range(1, 5))
    assert beyond.message.endswith(
        "run in 32 orders that PyPTO's runtime allows and that can matter; racecheck checks"
        " at most 16"
    )


def test_a_dispatch_storing_into_a_signal_cell_is_reordered_like_one_that_notifies() -> None:
    path = FIXTURES / "dispatch_signal_store.py"
    (result,) = racecheck.verify(str(path), ranks=[3]).results
    assert result.verdict is Verdict.BUG
    found = {(f.kind, tuple(loc.line for loc in f.locations)) for f in result.findings}
    assert found == {(FindingKind.RACE, (_line(path, "load"), _line(path, "push")))}
    assert any("rank 1 runs dispatch 2 (signal_step" in note for note in result.notes)
