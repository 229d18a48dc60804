"""The bounded oracle: exact answers without the engine behind it where it can prove them.

Random consume-heavy protocols (every rank waits on its own cells and resets them with a
Set, as examples/05 does) are held to the brute force through the conformance checks;
hand-written ones show that the bound's "no" and the runs' "yes" settle questions the
exact engine is then never asked.
"""

from __future__ import annotations

from bruteforce import BruteForce, cross_rank_pairs
from hypothesis import given
from hypothesis import strategies as st
from test_engine_explore import Protocol
from test_engines_conformance import CONFORMANCE, assert_conforms, assert_witness

from racecheck.engines.base import OrderOracle
from racecheck.engines.bounds import (
    BoundedEngine,
    BoundedOracle,
    concrete_run,
    lockstep_run,
    patient_run,
    upper_bound,
)
from racecheck.engines.explore import ExploreEngine
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.events import EventRef, NotifyOp, Trace, WaitCmp

OPS = ("notify", "consume", "take", "flag", "store", "load")


@st.composite
def consume_protocols(draw: st.DrawFn) -> Trace:
    """2-3 ranks; a rank waits on a row of its own cell and then Sets it (0 or 1) or
    adds minus at most what it waited for, adds to a row of a peer's cell, Sets a row
    of a peer's cell to 1 (a flag on a cell others add to), or touches data."""
    ranks = draw(st.integers(2, 3))
    protocol = Protocol(ranks)
    for rank in range(ranks):
        for _ in range(draw(st.integers(1, 5 if ranks == 2 else 4))):
            op = draw(st.sampled_from(OPS))
            row = draw(st.integers(0, 1))
            peer = draw(st.integers(0, ranks - 1))
            if op == "notify":
                protocol.notify(rank, peer, draw(st.integers(0, 2)), row=row)
            elif op == "consume":
                protocol.wait(rank, draw(st.integers(0, 2)), row=row)
                value = draw(st.integers(0, 1))
                protocol.notify(rank, rank, value, NotifyOp.SET, row=row)
            elif op == "take":
                expected = draw(st.integers(0, 2))
                protocol.wait(rank, expected, row=row)
                protocol.notify(rank, rank, -draw(st.integers(0, expected)), row=row)
            elif op == "flag":
                protocol.notify(rank, peer, 1, NotifyOp.SET, row=row)
            elif op == "store":
                protocol.store(rank, peer)
            else:
                protocol.load(rank, peer)
    return protocol.trace()


@CONFORMANCE
@given(trace=consume_protocols())
def test_bounded_explore_answers_like_the_brute_force(trace: Trace) -> None:
    assert_conforms(BoundedEngine(ExploreEngine()), trace)


@st.composite
def flag_rounds(draw: st.DrawFn) -> Trace:
    """Examples/132's shape with random amounts: 2-3 rounds in which rank 0 Sets a flag
    on rank 1's cell and adds credits, and rank 1 waits and takes (what it waited for
    or not); a third rank, if any, adds to or takes from the cell without waiting. The
    floors of repeated Sets (`racecheck.engines.bounds`) are held to the brute force."""
    ranks = draw(st.integers(2, 3))
    protocol = Protocol(ranks)
    for _ in range(draw(st.integers(2, 3))):
        protocol.notify(0, 1, draw(st.integers(0, 2)), NotifyOp.SET)
        for _ in range(draw(st.integers(0, 2))):
            protocol.notify(0, 1, draw(st.integers(1, 2)))
        for _ in range(draw(st.integers(0, 2))):
            protocol.wait(1, draw(st.integers(0, 3)))
        protocol.notify(1, 1, -draw(st.integers(0, 3)))
        if draw(st.booleans()):
            protocol.load(1, 0)
        if ranks == 3 and draw(st.booleans()):
            protocol.notify(2, 1, draw(st.sampled_from((-1, 1))))
    return protocol.trace()


@CONFORMANCE
@given(trace=flag_rounds())
def test_bounded_explore_answers_repeated_flags_like_the_brute_force(trace: Trace) -> None:
    assert_conforms(BoundedEngine(ExploreEngine()), trace)


class NeverAsked:
    """An exact oracle the test expects never to be consulted."""

    def can_precede(self, first: object, second: object) -> bool:
        raise AssertionError(f"asked can_precede({first}, {second})")

    def witness(self, first: object, second: object) -> tuple[()]:
        raise AssertionError("asked witness")

    def can_run(self, event: object) -> bool:
        raise AssertionError(f"asked can_run({event})")

    def stuck(self) -> None:
        raise AssertionError("asked stuck")


def _bounded(trace: Trace) -> BoundedOracle:
    def never() -> OrderOracle:
        return NeverAsked()  # type: ignore[return-value]

    return BoundedOracle(SyncSkeleton(trace), never)


def _assert_answered_alone(trace: Trace) -> None:
    """The bound and the runs answer every cross-rank question like the brute force,
    never asking the exact engine."""
    truth = BruteForce(trace)
    oracle = _bounded(trace)
    for first, second in cross_rank_pairs(trace):
        expected = truth.can_precede(first, second)
        assert oracle.can_precede(first, second) == expected, (first, second)
    for rank_events in trace.events:
        for event in rank_events:
            assert oracle.can_run(event.ref) == truth.can_run(event.ref), event.ref


def _two_rounds(reset: NotifyOp) -> Protocol:
    """Two ranks pass a flag back and forth twice, each resetting it after its wait."""
    protocol = Protocol(2)
    for _ in range(2):
        for rank in (0, 1):
            protocol.store(rank, rank)
            protocol.notify(rank, 1 - rank)
            protocol.wait(rank)
            value = 0 if reset is NotifyOp.SET else -1
            protocol.notify(rank, rank, value, reset)
            protocol.load(rank, 1 - rank)
    return protocol


def test_a_consumed_flag_orders_the_rounds_without_the_exact_engine() -> None:
    trace = _two_rounds(NotifyOp.SET).trace()
    truth = BruteForce(trace)
    oracle = _bounded(trace)
    assert upper_bound(SyncSkeleton(trace)) is not None
    for first, second in cross_rank_pairs(trace):
        expected = truth.can_precede(first, second)
        assert oracle.can_precede(first, second) == expected, (first, second)
        if expected:
            assert_witness(trace, oracle, first, second)
    assert truth.has_stuck_state()  # round 2's flag can land before round 1's reset
    assert oracle.stuck() is not None


def test_a_consuming_add_keeps_the_bound_exact_on_a_flagged_cell() -> None:
    """Examples/132's shape: rank 0 Sets a flag on rank 1's cell, then adds two
    credits; rank 1 takes two (an Add -2 after its wait for 2), then waits for 1 again,
    which holds only after rank 0's last add. The bound keeps the take, so it alone
    says that rank 1's load cannot precede that add (the exact engine is never asked)."""
    protocol = Protocol(2)
    protocol.notify(0, 1, 1, NotifyOp.SET)
    protocol.notify(0, 1)
    last_add = protocol.notify(0, 1)
    protocol.wait(1, 2)
    protocol.notify(1, 1, -2)
    protocol.wait(1, 1)
    load = protocol.load(1, 0)
    trace = protocol.trace()
    assert not BruteForce(trace).can_precede(load, last_add)
    _assert_answered_alone(trace)


def test_a_lost_credit_is_a_stuck_state_found_by_a_run() -> None:
    protocol = Protocol(3)
    protocol.notify(0, 2)
    protocol.notify(1, 2)
    protocol.wait(2)
    protocol.notify(2, 2, 0, NotifyOp.SET)
    wait = protocol.wait(2)
    stuck = _bounded(protocol.trace()).stuck()
    assert stuck is not None
    assert stuck.blocked == (wait,)


def test_an_eq_wait_has_no_bound() -> None:
    protocol = Protocol(2)
    protocol.notify(0, 1)
    protocol.wait(1, 1, WaitCmp.EQ)
    assert upper_bound(SyncSkeleton(protocol.trace())) is None


def _early_resets(ranks: int) -> tuple[Protocol, list[list[EventRef]]]:
    """Examples/63's shape, two calls: each rank adds 1 to its row of every peer's
    cells, then Sets its own rows to 0 (one event each), then waits for every peer's
    row. A reset can erase an add that landed before it. Returns, per rank, the first
    event of each call."""
    protocol = Protocol(ranks)
    starts: list[list[EventRef]] = [[] for _ in range(ranks)]
    for _ in range(2):
        for me in range(ranks):
            peers = [peer for peer in range(ranks) if peer != me]
            starts[me].append(protocol.notify(me, peers[0], row=me))
            for peer in peers[1:]:
                protocol.notify(me, peer, row=me)
            for peer in peers:
                protocol.notify(me, me, 0, NotifyOp.SET, row=peer)
            for peer in peers:
                protocol.wait(me, row=peer)
    return protocol, starts


def test_a_run_with_first_s_rank_ahead_passes_its_waits_before_resets_erase_them() -> None:
    """P=5: rank 1 gets into its second call's resets while rank 0 has added only to
    rank 1's cells: only if rank 1 resets before ranks 2..4 add to it. The generic runs
    (patient, rank order, shuffled) let lower ranks add first, so those adds are erased
    and rank 1 stops in its first call; the run with rank 1 ahead shows it, and the
    exact engine is never asked."""
    protocol, starts = _early_resets(5)
    trace = protocol.trace()
    first = EventRef(rank=1, index=starts[1][1].index + 7)  # call 2: its last reset
    second = EventRef(rank=0, index=1)  # rank 0's add to rank 2, in call 1
    assert trace.event(first).notify.op is NotifyOp.SET
    assert trace.event(second).notify.cell.owner == 2
    oracle = _bounded(trace)
    assert oracle.can_precede(first, second)
    assert_witness(trace, oracle, first, second)


def test_a_lockstep_run_lets_the_consumer_take_each_round_before_the_next_flag() -> None:
    """Examples/132 under --repeat: rank 0 Sets a flag on rank 1's cell and adds a
    credit, three times; rank 1 waits for both and takes them each time. A Set of the
    next round landing before the take erases the credit and rank 1 stops: the patient
    run (Sets before Adds) and the rank-order run do that; the lockstep run, which
    lets the rank furthest behind write first, completes every round."""
    protocol = Protocol(2)
    for _ in range(3):
        protocol.notify(0, 1, 1, NotifyOp.SET)
        protocol.notify(0, 1)
        protocol.wait(1, 2)
        protocol.notify(1, 1, -2)
    skeleton = SyncSkeleton(protocol.trace())
    full = [len(kinds) for kinds in skeleton.kind]
    assert patient_run(skeleton, full).positions == [6, 2]
    assert concrete_run(skeleton, full, lambda: [0, 1]).positions == [6, 2]
    assert lockstep_run(skeleton, full).positions == full


def test_a_flag_set_again_on_a_cell_that_still_holds_it_adds_nothing_to_the_bound() -> None:
    """Examples/132 under --repeat: rank 0 Sets a flag on rank 1's cell and adds two
    credits, twice; rank 1 takes two credits and waits for the flag each time. The
    second Set lands on a cell that holds at least 1 (the first Set and both credits,
    less the one take that can come before it), so it adds nothing to the bound, and
    the bound alone says rank 1's second take cannot precede rank 0's second credit."""
    protocol = Protocol(2)
    adds: list[EventRef] = []
    takes: list[EventRef] = []
    for _ in range(2):
        protocol.notify(0, 1, 1, NotifyOp.SET)
        adds.append(protocol.notify(0, 1))
        protocol.notify(0, 1)
        protocol.wait(1, 2)
        takes.append(protocol.notify(1, 1, -2))
        protocol.wait(1, 1)
    trace = protocol.trace()
    assert not BruteForce(trace).can_precede(takes[1], adds[1])
    _assert_answered_alone(trace)


def _flag_rounds(rounds: int) -> tuple[Trace, list[EventRef], list[EventRef]]:
    """Examples/132 under --repeat: per round, rank 0 Sets a flag on rank 1's cell and
    adds two credits; rank 1 waits for 1 and for 2, takes two, waits for 1 again and
    loads. Returns the trace, rank 0's last credits and rank 1's loads."""
    protocol = Protocol(2)
    credits: list[EventRef] = []
    loads: list[EventRef] = []
    for _ in range(rounds):
        protocol.notify(0, 1, 1, NotifyOp.SET)
        protocol.notify(0, 1)
        credits.append(protocol.notify(0, 1))
        protocol.wait(1, 1)
        protocol.wait(1, 2)
        protocol.notify(1, 1, -2)
        protocol.wait(1, 1)
        loads.append(protocol.load(1, 0))
    return protocol.trace(), credits, loads


def test_one_take_between_two_flags_keeps_the_third_flag_out_of_the_bound() -> None:
    """Round 1's take can land after round 2's Set, and round 2's take before round
    3's Set, but not both: after round 2's Set and round 1's take the cell holds at
    most 1 + 2 - 2 = 1, short of the 2 round 2's take waits for. So at most 2 is taken
    between those Sets and the cell holds at least 1 + 2 - 2 = 1 before round 3's Set,
    which adds nothing to the bound; the bound alone says round 3's load cannot precede
    round 3's last credit (the exact engine is never asked)."""
    trace, credits, loads = _flag_rounds(3)
    assert not BruteForce(trace).can_precede(loads[2], credits[2])
    _assert_answered_alone(trace)


def test_a_take_whose_wait_passed_before_the_previous_flag_still_counts() -> None:
    """Rank 0 Sets rank 1's cell to 2, to 0, then to 1, and stores; rank 1 waits for
    2, takes two, waits for 1 and loads. The take can land after the Set to 0 though
    nothing refills the cell to the 2 its wait asked for (the wait passed on the first
    Set): the cell then holds -2 and the last Set raises it by 3. The bound must not
    take that Set for a no-op, or rank 1's load could not run before rank 0's store,
    as it can."""
    protocol = Protocol(2)
    for value in (2, 0, 1):
        protocol.notify(0, 1, value, NotifyOp.SET)
    store = protocol.store(0, 0)
    protocol.wait(1, 2)
    protocol.notify(1, 1, -2)
    protocol.wait(1, 1)
    load = protocol.load(1, 0)
    trace = protocol.trace()
    assert BruteForce(trace).can_precede(load, store)
    assert_conforms(BoundedEngine(ExploreEngine()), trace)
