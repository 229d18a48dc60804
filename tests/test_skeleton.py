"""One definition of a write to a signal cell, and the engines that share it.

`cell_effect` on real byte records (plain stores of any dtype, atomic int32 and float
adds, partial writes), the skeleton's refusal of what no engine models, 32-bit
wrap-around and unsigned waits in every engine of the registry.
"""

from __future__ import annotations

import struct
import time
from dataclasses import replace

import pytest
from bruteforce import BruteForce, cross_rank_pairs
from strategies import DATA, MEMORIES, SIGNAL

from racecheck.engines import ENGINES, prepare
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.errors import EngineUnknown
from racecheck.events import (
    AccessMode,
    CellEffect,
    CellOp,
    Event,
    EventKind,
    EventRef,
    Notify,
    NotifyOp,
    RankEnd,
    Region,
    SignalCell,
    SourceLocation,
    Trace,
    Wait,
    WaitCmp,
    WriteOp,
    Written,
    cell_effect,
)
from racecheck.options import EngineChoice

CELL = (SIGNAL.id, 0, 4)
BIG = 1_500_000_000


def _write(kind: EventKind, start: int, end: int, written: Written | None, rank: int = 1) -> Event:
    mode = AccessMode.ATOMIC if kind is EventKind.ATOMIC_ADD else AccessMode.WRITE
    return Event(
        rank=rank,
        index=0,
        kind=kind,
        access=Region(memory=SIGNAL.id, owner=0, ranges=((start, end),)),
        mode=mode,
        location=SourceLocation(file="t.py", line=7, text="store"),
        written=written,
    )


def test_a_plain_store_of_any_dtype_sets_the_int32_of_its_bytes() -> None:
    fp32_one = Written(op=WriteOp.ASSIGN, data=struct.pack("=ff", 2.0, 1.0))
    assert cell_effect(_write(EventKind.STORE, 0, 8, fp32_one), CELL) == CellEffect(
        op=CellOp.SET, value=0x3F800000
    )
    wide = Written.int32s(WriteOp.ASSIGN, [0] * 100)
    assert cell_effect(_write(EventKind.STORE, 0, 400, wide), CELL) == CellEffect(
        op=CellOp.SET, value=0
    )
    assert cell_effect(_write(EventKind.STORE, 8, 400, wide), CELL) is None


def test_an_atomic_int32_store_adds_and_anything_inexact_is_opaque() -> None:
    adds = Written.int32s(WriteOp.ADD, [5, -3])
    assert cell_effect(_write(EventKind.ATOMIC_ADD, 0, 8, adds), CELL) == CellEffect(
        op=CellOp.ADD, value=-3
    )
    opaque = CellEffect(op=CellOp.OPAQUE)
    inexact = Written(op=WriteOp.INEXACT)
    assert cell_effect(_write(EventKind.ATOMIC_ADD, 0, 8, inexact), CELL) == opaque
    half = Written(op=WriteOp.ASSIGN, data=b"\x01\x00")
    assert cell_effect(_write(EventKind.STORE, 6, 8, half), CELL) == opaque
    assert cell_effect(_write(EventKind.STORE, 0, 8, None), CELL) == opaque


def _cell(owner: int, offset: int = 0) -> SignalCell:
    return SignalCell(memory=SIGNAL.id, owner=owner, offset=offset, index=(offset // 4, 0))


def _trace(*ranks: list[Event]) -> Trace:
    events = tuple(
        tuple(
            replace(
                event,
                rank=rank,
                index=index,
                location=SourceLocation(file="t.py", line=10 * rank + index, text=""),
            )
            for index, event in enumerate(rank_events)
        )
        for rank, rank_events in enumerate(ranks)
    )
    return Trace(
        ranks=len(ranks), events=events, memories=MEMORIES, ends=(RankEnd.FINISHED,) * len(ranks)
    )


def _notify(owner: int, value: int, op: NotifyOp = NotifyOp.ATOMIC_ADD) -> Event:
    cell = _cell(owner)
    return Event(
        rank=0,
        index=0,
        kind=EventKind.NOTIFY,
        access=Region(memory=SIGNAL.id, owner=owner, ranges=((0, 4),)),
        mode=AccessMode.ATOMIC,
        location=SourceLocation(file="t.py", line=1, text=""),
        notify=Notify(cell=cell, op=op, value=value),
    )


def _wait(owner: int, expected: int, cmp: WaitCmp = WaitCmp.GE) -> Event:
    cell = _cell(owner)
    return Event(
        rank=0,
        index=0,
        kind=EventKind.WAIT,
        access=Region(memory=SIGNAL.id, owner=owner, ranges=((0, 4),)),
        mode=AccessMode.ATOMIC,
        location=SourceLocation(file="t.py", line=1, text=""),
        wait=Wait(cell=cell, cmp=cmp, expected=expected),
    )


def _float_add_onto(owner: int) -> Event:
    return Event(
        rank=0,
        index=0,
        kind=EventKind.ATOMIC_ADD,
        access=Region(memory=SIGNAL.id, owner=owner, ranges=((0, 4),)),
        mode=AccessMode.ATOMIC,
        location=SourceLocation(file="t.py", line=1, text="remote_store"),
        written=Written(op=WriteOp.INEXACT),
    )


def test_a_write_no_engine_models_makes_every_engine_refuse_naming_its_line() -> None:
    trace = _trace([_wait(0, 1)], [_float_add_onto(0)])
    skeleton = SyncSkeleton(trace)
    for make in ENGINES.values():
        reason = make().unsupported(skeleton)
        assert reason is not None and "t.py:10" in reason
    for choice in EngineChoice:
        with pytest.raises(EngineUnknown, match="t.py:10"):
            prepare(choice, trace, deadline=time.monotonic() + 30)


def _stuck_in_every_engine(trace: Trace) -> dict[str, bool]:
    answers = {}
    skeleton = SyncSkeleton(trace)
    for name, make in ENGINES.items():
        engine = make()
        if engine.unsupported(skeleton) is None:
            answers[name] = (
                engine.order(skeleton, deadline=time.monotonic() + 30).stuck() is not None
            )
    return answers


def test_two_big_adds_wrap_the_cell_negative_and_the_wait_can_hang() -> None:
    # P=3: ranks 1 and 2 each add 1.5e9 to rank 0's cell; rank 0 waits Ge 1.
    trace = _trace([_wait(0, 1)], [_notify(0, BIG)], [_notify(0, BIG)])
    assert BruteForce(trace).has_stuck_state()
    assert _stuck_in_every_engine(trace) == {"explore": True, "smt": True}
    assert "wrap" in (ENGINES["monotone"]().unsupported(SyncSkeleton(trace)) or "")
    fits = _trace([_wait(0, 1)], [_notify(0, BIG)])
    assert _stuck_in_every_engine(fits) == {"monotone": False, "explore": False, "smt": False}


def test_an_unsigned_wait_passes_on_a_negative_cell() -> None:
    # Rank 0 takes 1 off its own cell, then waits Ge 1: signed it needs rank 1's +2 first,
    # unsigned (defer_wait) the -1 already passes, so rank 0 can finish before rank 1 runs.
    def trace(cmp: WaitCmp) -> Trace:
        return _trace([_notify(0, -1), _wait(0, 1, cmp)], [_notify(0, 2)])

    first, second = EventRef(rank=0, index=1), EventRef(rank=1, index=0)
    for cmp, expected in ((WaitCmp.GE, False), (WaitCmp.GE_UNSIGNED, True)):
        skeleton = SyncSkeleton(trace(cmp))
        assert BruteForce(trace(cmp)).can_precede(first, second) is expected
        for make in ENGINES.values():
            engine = make()
            if engine.unsupported(skeleton) is None:
                oracle = engine.order(skeleton, deadline=time.monotonic() + 30)
                assert oracle.can_precede(first, second) is expected, engine.name
    assert ENGINES["monotone"]().unsupported(SyncSkeleton(trace(WaitCmp.GE_UNSIGNED)))


def test_an_unsigned_wait_on_a_cell_its_owner_only_consumes_stays_monotone() -> None:
    # defer_wait's self-clearing epilogue, twice: rank 0 waits (unsigned) for 1 on its
    # cell and takes `taken` back; rank 1 adds 1 twice. Taking back what the wait saw
    # keeps the cell >= 0, so the monotone engine decides it (rank 0 cannot finish
    # before rank 1's second add); taking 2 lets the cell reach -1, which the second
    # unsigned wait passes.
    def trace(taken: int) -> Trace:
        unsigned = WaitCmp.GE_UNSIGNED
        consumer = [_wait(0, 1, unsigned), _notify(0, -taken)] * 2
        return _trace(consumer, [_notify(0, 1), _notify(0, 1)])

    finished, second_add = EventRef(rank=0, index=3), EventRef(rank=1, index=1)
    assert BruteForce(trace(2)).can_precede(finished, second_add)
    assert "can go negative" in (ENGINES["monotone"]().unsupported(SyncSkeleton(trace(2))) or "")
    consume = trace(1)
    truth = BruteForce(consume)
    skeleton = SyncSkeleton(consume)
    assert ENGINES["monotone"]().unsupported(skeleton) is None
    oracle = ENGINES["monotone"]().order(skeleton, deadline=time.monotonic() + 30)
    assert not oracle.can_precede(finished, second_add)
    for first, second in cross_rank_pairs(consume):
        assert oracle.can_precede(first, second) == truth.can_precede(first, second)
    assert oracle.stuck() is None and not truth.has_stuck_state()


def test_data_windows_are_not_signal_cells() -> None:
    store = _write(EventKind.STORE, 0, 8, Written.int32s(WriteOp.ASSIGN, [1, 1]))
    on_data = replace(store, access=Region(memory=DATA.id, owner=0, ranges=((0, 8),)))
    skeleton = SyncSkeleton(_trace([_wait(0, 1)], [on_data]))
    assert skeleton.index == [[0], []] and not skeleton.opaque
