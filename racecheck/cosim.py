"""Co-simulation: run a program instance's ranks with real values and record its trace.

Decides nothing about correctness; it produces one execution. The host entry runs
once (allocations, the dispatch loop); each rank then runs its dispatched functions
in program order on its own thread. Exactly one thread runs at a time: every memory
or signal operation is a scheduling point, where the rank parks with its pending
event and a `SchedulePolicy` picks which enabled rank executes next (a WAIT whose
condition is false is not enabled). Values are real bytes, so control flow that
depends on memory follows this schedule; such loads are listed as control reads.
Every window must be dispatched to every rank: PyPTO makes a smaller communication
group (with its own rank numbering) of a window that reaches only some devices, and
that is refused as unsupported rather than checked with world ranks.

When no rank can move but some wait: with `force_waits` the lowest blocked wait is
forced past (tracing keeps going, so traces are complete), else the run stops and
the blocked waits are reported (replaying a deadlock witness).
"""

from __future__ import annotations

import ctypes
import math
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

import numpy as np

from racecheck.dsl.context import activated
from racecheck.dsl.dtypes import DType
from racecheck.dsl.location import (
    innermost_user_frame,
    location_of,
    traceback_location,
    user_location,
)
from racecheck.dsl.memory import MemoryState
from racecheck.dsl.modules import installed
from racecheck.dsl.tensors import TensorView, WindowBuffer, region_problem, region_runs
from racecheck.dsl.types import Direction, TensorType
from racecheck.errors import ProgramRejected, TracingError, UnsupportedConstruct, UserError
from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Event,
    EventKind,
    EventRef,
    Notify,
    NotifyOp,
    OutOfBounds,
    RankEnd,
    Region,
    Schedule,
    SignalCell,
    SourceLocation,
    Trace,
    Wait,
    WaitCmp,
)
from racecheck.load import ProgramInstance, rejection_message

# ---------------------------------------------------------------------------- policies


class SchedulePolicy(Protocol):
    """Picks the rank that executes its pending event next.

    `runnable` (ranks whose pending event is enabled, never empty) and `pending`
    (each parked rank's next event) are live views: read them during the call only.
    `current` is the rank that executed last (it may have finished or blocked).
    """

    def choose(
        self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]
    ) -> int: ...


class DefaultPolicy:
    """Keep running the current rank until it blocks or finishes, then the lowest one."""

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        return current if current in runnable else min(runnable)


class RoundRobinPolicy:
    """Switch rank after every event: the most interleaved run, where every rank has
    staged its data before anyone reads far ahead. Used to guess a racy program's
    intended result."""

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        later = [rank for rank in runnable if current is None or rank > current]
        return min(later) if later else min(runnable)


class RandomPolicy:
    """A uniformly random runnable rank at every step, from a generator of its own: one
    more schedule among all, reproducible from `seed`."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        return self.random.choice(sorted(runnable))


class ScheduleDivergence(RuntimeError):
    """A replayed schedule does not match what the program does (an internal error)."""


class ReplayPolicy:
    """Execute exactly `schedule`, in order, then continue with `then`."""

    def __init__(self, schedule: Schedule, then: SchedulePolicy | None = None) -> None:
        self.schedule = schedule
        self.then = then or DefaultPolicy()
        self.position = 0

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        if self.position >= len(self.schedule):
            return self.then.choose(runnable, current, pending)
        ref = self.schedule[self.position]
        next_event = pending.get(ref.rank)
        if next_event is None or next_event.index != ref.index or ref.rank not in runnable:
            found = "finished" if next_event is None else f"at event {next_event.index}"
            raise ScheduleDivergence(
                f"replay step {self.position}: expected rank {ref.rank} event {ref.index} to be "
                f"enabled, but rank {ref.rank} is {found}"
                + ("" if ref.rank in runnable else " and blocked")
            )
        self.position += 1
        return ref.rank


class HoldPolicy:
    """Never execute `held` while any other rank can run; otherwise follow `then`."""

    def __init__(self, held: EventRef, then: SchedulePolicy | None = None) -> None:
        self.held = held
        self.then = then or DefaultPolicy()

    def choose(self, runnable: Set[int], current: int | None, pending: Mapping[int, Event]) -> int:
        rank = self.held.rank
        holding = rank in runnable and pending[rank].index == self.held.index
        if holding and len(runnable) > 1:
            return self.then.choose(runnable - {rank}, current, pending)
        return self.then.choose(runnable, current, pending)


# ---------------------------------------------------------------------------- results


class TensorRole(Enum):
    INPUT = "input"
    OUTPUT = "output"
    INOUT = "inout"


_ROLES = {
    Direction.IN: TensorRole.INPUT,
    Direction.OUT: TensorRole.OUTPUT,
    Direction.INOUT: TensorRole.INOUT,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class HostTensorRecord:
    name: str
    role: TensorRole
    dtype: str
    initial: np.ndarray
    final: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    trace: Trace
    schedule: Schedule  # the order events executed in this run
    tensors: tuple[HostTensorRecord, ...]
    forced: tuple[EventRef, ...] = ()
    stalled: tuple[EventRef, ...] = ()


# ---------------------------------------------------------------------------- host


@dataclass(frozen=True, slots=True, kw_only=True)
class _Dispatch:
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


_ASSIGNED_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::[^=]*)?=[^=]")


class _Host:
    """The host entry's context: window allocation, row views, dispatches."""

    def __init__(self, ranks: int, memory: MemoryState, dims: Mapping[str, int]) -> None:
        self.ranks = ranks
        self.memory = memory
        self.dims = dims
        self.dispatches: list[list[_Dispatch]] = [[] for _ in range(ranks)]
        self.row_sliced: dict[int, TensorView] = {}
        self.host_roots: set[int] = set()
        self.window_ranks: dict[int, set[int]] = {}
        self.window_sites: dict[int, SourceLocation] = {}

    def alloc_window(self, nbytes: int) -> WindowBuffer:
        where = user_location()
        match = _ASSIGNED_NAME.match(where.text)
        taken = {memory.name for memory in self.memory.memories}
        name = match.group(1) if match else f"window{len(self.memory.memories)}"
        if name in taken:
            name = f"{name}#{len(self.memory.memories)}"
        memory = self.memory.add_window(name, nbytes)
        return WindowBuffer(memory=memory.id, nbytes=nbytes, name=name)

    def row_view(self, view: TensorView, row: int) -> TensorView:
        rows = view.shape[0] if view.shape else 0
        is_root = (
            view.memory in self.host_roots and view.base == 0 and view.nbytes == view.memory_nbytes
        )
        if is_root and not 0 <= row < rows:
            raise ProgramRejected(_rows_message(view.name, rows))
        if not 0 <= row < rows:
            raise IndexError(f"row {row} of {view!r}")
        if is_root:
            self.row_sliced[view.memory] = view
        return view.row(row)

    def dispatch(
        self, rank: int, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        if not 0 <= rank < self.ranks:
            raise ProgramRejected(
                f"the program dispatches to device {rank} but runs on {self.ranks} ranks"
            )
        self.dispatches[rank].append(_Dispatch(function=function, args=args, kwargs=kwargs))
        for value in (*args, *kwargs.values()):
            if isinstance(value, TensorView) and value.is_window:
                self.window_ranks.setdefault(value.memory, set()).add(rank)
                self.window_sites.setdefault(value.memory, user_location())

    def check_one_group(self) -> None:
        """PyPTO forms one communication group per set of devices a window is dispatched
        to, and ranks and peers inside a kernel are numbered within that group; racecheck
        numbers them in the world, so a window that reaches only some ranks is refused."""
        for memory, ranks in self.window_ranks.items():
            if len(ranks) != self.ranks:
                name = self.memory.memories[memory].name
                where = self.window_sites[memory]
                raise UnsupportedConstruct(
                    f"window {name} is dispatched to devices {sorted(ranks)} of {self.ranks}: "
                    "communication groups smaller than the world (group-relative ranks) are "
                    "not modelled",
                    file=where.file,
                    line=where.line,
                )

    def check_row_counts(self) -> None:
        for view in self.row_sliced.values():
            if view.shape[0] != self.ranks:
                raise ProgramRejected(_rows_message(view.name, view.shape[0]))


def _rows_message(name: str, rows: int) -> str:
    return f"host tensor {name} has {rows} rows; the program is written for {rows} ranks"


def _initial_values(
    dtype: DType, shape: tuple[int, ...], direction: Direction, rng: np.random.Generator, ranks: int
) -> np.ndarray:
    if direction is Direction.OUT:
        return np.zeros(shape, dtype=dtype.compute)
    if dtype.name == "BOOL":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.is_float:
        values = rng.standard_normal(shape)
    else:
        values = rng.integers(2, 10, size=shape).astype(np.float64)
    if len(shape) > 0 and shape[0] == ranks:
        _spread_extremes(values.reshape(ranks, -1))
    values = values.astype(dtype.compute)
    return dtype.decode(dtype.encode(values)) if dtype.is_float else values


def _spread_extremes(rows: np.ndarray) -> None:
    """Make column j's maximum rank j mod P and its minimum rank j+1 mod P, so no rank's
    row is the element-wise max or min of all rows by chance (a broadcast of it would
    then look like allreduce-max or -min to the golden models)."""
    ranks, width = rows.shape
    if ranks < 2 or width < 2:
        return
    columns = np.arange(width)
    high, low = rows.max(axis=0), rows.min(axis=0)
    rows[columns % ranks, columns] = high + 1
    rows[(columns + 1) % ranks, columns] = low - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class _HostTensor:
    name: str
    role: TensorRole
    view: TensorView
    initial: np.ndarray


def _create_host_arguments(
    instance: ProgramInstance, memory: MemoryState, host: _Host, seed: int
) -> tuple[list[Any], list[_HostTensor]]:
    rng = np.random.default_rng(seed)
    arguments: list[Any] = []
    tensors: list[_HostTensor] = []
    for parameter in instance.parameters:
        annotation = parameter.annotation
        if not isinstance(annotation, TensorType):
            arguments.append(parameter.value)
            continue
        shape = instance.shape_of(annotation)
        values = _initial_values(annotation.dtype, shape, annotation.direction, rng, instance.ranks)
        view = memory.add_host_tensor(parameter.name, values, annotation.dtype)
        host.host_roots.add(view.memory)
        arguments.append(view)
        tensors.append(
            _HostTensor(
                name=parameter.name,
                role=_ROLES[annotation.direction],
                view=view,
                initial=memory.snapshot(view),
            )
        )
    return arguments, tensors


# ---------------------------------------------------------------------------- ranks


class _Abort(BaseException):
    """Unwinds a parked rank thread when the run ends early; never seen by user code."""


class _Crash(BaseException):
    """An out-of-bounds access stops its rank (the access is not performed)."""

    def __init__(self, record: OutOfBounds) -> None:
        super().__init__(record.message)
        self.record = record


_INT32_CELL_LIMIT = 64


class _Rank:
    """One rank's context: turns DSL operations into scheduled, recorded events."""

    def __init__(self, rank: int, run: _Run) -> None:
        self.rank = rank
        self.ranks = run.ranks
        self.dims = run.dims
        self.run = run
        self.events: list[Event] = []
        self.repeat = 0
        self.forced = False
        self.end = RankEnd.FINISHED
        self.baton = threading.Lock()
        self.baton.acquire()
        self.abort = False
        self.force_next = False
        self.thread: threading.Thread | None = None

    # -- the RankContext protocol

    def load(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        extent: Sequence[int],
        label: str,
    ) -> tuple[np.ndarray, EventRef]:
        region = self._region(view, owner, offsets, extent)
        event = self._event(EventKind.LOAD, region, AccessMode.READ, label)
        self.run.checkpoint(self, event)
        values = self.run.memory.read(view, owner, offsets, extent)
        self.run.executed(self, event)
        return values, event.ref

    def store(
        self,
        view: TensorView,
        owner: int,
        offsets: Sequence[int],
        values: np.ndarray,
        label: str,
        *,
        accumulate: bool = False,
    ) -> None:
        values = _fit(np.asarray(values), len(offsets))
        region = self._region(view, owner, offsets, values.shape)
        kind, mode = (
            (EventKind.ATOMIC_ADD, AccessMode.ATOMIC)
            if accumulate
            else (EventKind.STORE, AccessMode.WRITE)
        )
        cells = () if accumulate else _cell_values(view, offsets, values)
        event = self._event(kind, region, mode, label, cell_values=cells)
        self.run.checkpoint(self, event)
        if accumulate:
            self.run.memory.accumulate(view, owner, offsets, values)
        else:
            self.run.memory.write(view, owner, offsets, values)
        self.run.executed(self, event)

    def notify(
        self,
        view: TensorView,
        peer: int,
        offsets: Sequence[int],
        value: int,
        op: NotifyOp,
        label: str,
    ) -> None:
        cell = self._cell(view, peer, offsets)
        event = self._event(
            EventKind.NOTIFY,
            _cell_region(cell),
            AccessMode.ATOMIC,
            label,
            notify=Notify(cell=cell, op=op, value=value),
        )
        self.run.checkpoint(self, event)
        memory = self.run.memory
        memory.set_cell(cell, value if op is NotifyOp.SET else memory.cell(cell) + value)
        self.run.executed(self, event)

    def wait(
        self, view: TensorView, offsets: Sequence[int], expected: int, cmp: WaitCmp, label: str
    ) -> None:
        cell = self._cell(view, self.rank, offsets)
        event = self._event(
            EventKind.WAIT,
            _cell_region(cell),
            AccessMode.ATOMIC,
            label,
            wait=Wait(cell=cell, cmp=cmp, expected=expected),
        )
        self.run.checkpoint(self, event)
        self.run.executed(self, event)

    def note_control(self, sources: frozenset[EventRef]) -> None:
        self.run.control_reads.update(sources)

    def fail_bounds(self, message: str) -> None:
        raise _Crash(OutOfBounds(rank=self.rank, location=user_location(), message=message))

    # -- helpers

    def _event(
        self, kind: EventKind, region: Region, mode: AccessMode, label: str, **sync: Any
    ) -> Event:
        return Event(
            rank=self.rank,
            index=len(self.events),
            kind=kind,
            access=region,
            mode=mode,
            location=user_location(),
            repeat=self.repeat,
            label=label,
            **sync,
        )

    def _region(
        self, view: TensorView, owner: int, offsets: Sequence[int], extent: Sequence[int]
    ) -> Region:
        if view.is_window and not 0 <= owner < self.ranks:
            self.fail_bounds(f"peer {owner} is outside [0, {self.ranks}) accessing {view!r}")
        problem = region_problem(view, offsets, extent)
        if problem is not None:
            self.fail_bounds(problem)
        return Region(memory=view.memory, owner=owner, ranges=region_runs(view, offsets, extent))

    def _cell(self, view: TensorView, owner: int, offsets: Sequence[int]) -> SignalCell:
        region = self._region(view, owner, offsets, [1] * len(offsets))
        if view.dtype.nbytes != 4 or view.dtype.is_float:
            self.fail_bounds(f"signal {view!r} must be INT32")
        start = region.ranges[0][0]
        return SignalCell(memory=view.memory, owner=owner, offset=start, index=tuple(offsets))


def _cell_region(cell: SignalCell) -> Region:
    return Region(memory=cell.memory, owner=cell.owner, ranges=((cell.offset, cell.offset + 4),))


def _fit(values: np.ndarray, ndim: int) -> np.ndarray:
    """A tile written into a view of another rank: drop or add leading unit dims."""
    shape = list(values.shape)
    while len(shape) > ndim and shape[0] == 1:
        shape.pop(0)
    while len(shape) < ndim:
        shape.insert(0, 1)
    return values.reshape(shape) if len(shape) == ndim else values


def _cell_values(
    view: TensorView, offsets: Sequence[int], values: np.ndarray
) -> tuple[tuple[int, int], ...]:
    if view.dtype.name != "INT32" or values.size > _INT32_CELL_LIMIT:
        return ()
    strides = [math.prod(view.shape[axis + 1 :]) for axis in range(view.ndim)]
    cells = []
    for index in np.ndindex(*values.shape):
        element = sum((offsets[axis] + index[axis]) * strides[axis] for axis in range(view.ndim))
        cells.append((view.base + element * 4, int(values[index])))
    return tuple(sorted(cells))


# ---------------------------------------------------------------------------- the run


class _Run:
    """The scheduler: one baton, passed between rank threads at scheduling points."""

    def __init__(
        self,
        ranks: int,
        memory: MemoryState,
        policy: SchedulePolicy,
        force_waits: bool,
        max_events: int,
        dims: Mapping[str, int],
    ) -> None:
        self.ranks = ranks
        self.dims = dims
        self.memory = memory
        self.policy = policy
        self.force_waits = force_waits
        self.max_events = max_events
        self.states = [_Rank(rank, self) for rank in range(ranks)]
        self.unprimed = list(range(ranks))
        self.pending: dict[int, Event] = {}
        self.runnable: set[int] = set()
        self.blocked: set[int] = set()
        self.schedule: list[EventRef] = []
        self.forced: list[EventRef] = []
        self.stalled: tuple[EventRef, ...] = ()
        self.control_reads: set[EventRef] = set()
        self.out_of_bounds: list[OutOfBounds] = []
        self.failure: BaseException | None = None
        self.running: int | None = None
        self.done = threading.Event()

    # -- called on rank threads while holding the baton

    def checkpoint(self, state: _Rank, event: Event) -> None:
        if len(self.schedule) >= self.max_events:
            raise TracingError(
                f"rank {state.rank} exceeded the budget of {self.max_events} events; last line "
                f"reached: {event.location} {event.location.text}",
                file=event.location.file,
                line=event.location.line,
            )
        priming = self.unprimed_remove(state.rank)
        self.pending[state.rank] = event
        if event.wait is None or self._satisfied(event.wait):
            self.runnable.add(state.rank)
        else:
            self.blocked.add(state.rank)
        self._pass_baton(current=None if priming else state.rank)
        self._wait_for_baton(state)

    def executed(self, state: _Rank, event: Event) -> None:
        del self.pending[state.rank]
        self.runnable.discard(state.rank)
        if state.force_next:
            state.force_next = False
            state.forced = True
            self.forced.append(event.ref)
        state.events.append(event)
        self.schedule.append(event.ref)
        # a wait is on the waiter's own cell: only the owner of the written bytes can unblock
        owner = event.access.owner if event.access is not None else HOST_OWNER
        if owner in self.blocked and (
            event.notify is not None or event.cell_values or event.kind is EventKind.ATOMIC_ADD
        ):
            self._recheck(owner)

    def finished(self, state: _Rank) -> None:
        self.unprimed_remove(state.rank)
        self._pass_baton(current=state.rank)

    # -- scheduling

    def unprimed_remove(self, rank: int) -> bool:
        """Ranks first run in rank order up to their first event, executing nothing."""
        if self.unprimed and self.unprimed[0] == rank:
            self.unprimed.pop(0)
            return True
        return False

    def _satisfied(self, wait: Wait) -> bool:
        return wait.cmp.holds(self.memory.cell(wait.cell), wait.expected)

    def _recheck(self, rank: int) -> None:
        wait = self.pending[rank].wait
        if wait is not None and self._satisfied(wait):
            self.blocked.discard(rank)
            self.runnable.add(rank)

    def _pass_baton(self, current: int | None) -> None:
        if self.unprimed:
            self._grant(self.unprimed[0])
        elif self.runnable:
            self._grant(self.policy.choose(self.runnable, current, self.pending))
        elif self.blocked and self.force_waits:
            rank = min(self.blocked)
            self.blocked.discard(rank)
            self.runnable.add(rank)
            self.states[rank].force_next = True
            self._grant(rank)
        else:
            self.stalled = tuple(self.pending[rank].ref for rank in sorted(self.blocked))
            self.running = None
            self.done.set()

    def _grant(self, rank: int) -> None:
        self.running = rank
        if rank in self.runnable or rank in self.unprimed:
            self.states[rank].baton.release()
            return
        raise ScheduleDivergence(f"policy chose rank {rank}, which cannot run")

    def _wait_for_baton(self, state: _Rank) -> None:
        state.baton.acquire()
        if state.abort:
            raise _Abort()

    # -- rank threads

    def start(self, dispatches: list[list[_Dispatch]], repeat: int) -> None:
        for state in self.states:
            state.thread = threading.Thread(
                target=self._rank_main,
                args=(state, dispatches[state.rank], repeat),
                name=f"racecheck-rank-{state.rank}",
                daemon=True,
            )
            state.thread.start()
        if self.ranks == 0:
            self.done.set()
        else:
            self._grant(self.unprimed[0])

    def _rank_main(self, state: _Rank, dispatches: list[_Dispatch], repeat: int) -> None:
        try:
            self._wait_for_baton(state)
            with activated(state):
                for round_number in range(repeat):
                    state.repeat = round_number
                    for dispatch in dispatches:
                        dispatch.function(*dispatch.args, **dispatch.kwargs)
            state.end = RankEnd.FORCED if state.forced else RankEnd.FINISHED
        except _Abort:
            return
        except _Crash as crash:
            self.out_of_bounds.append(crash.record)
            state.end = RankEnd.CRASHED
        except BaseException as error:  # noqa: BLE001 - reported to the caller of simulate()
            self._fail(error)
            return
        try:
            self.finished(state)
        except BaseException as error:  # noqa: BLE001 - a policy failing while handing over
            self._fail(error)

    def _fail(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
        self.running = None
        self.done.set()

    def stop(self) -> None:
        """Unwind every parked rank thread (after the run ended or failed)."""
        for state in self.states:
            state.abort = True
            if state.baton.locked():
                state.baton.release()


def _interrupt(thread: threading.Thread) -> None:
    """Raise _Abort inside a rank thread stuck in a Python loop without events."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(_Abort)
        )


def _last_user_location(thread: threading.Thread | None) -> SourceLocation | None:
    if thread is None or thread.ident is None:
        return None
    frame = sys._current_frames().get(thread.ident)
    user_frame = innermost_user_frame(frame) if frame is not None else None
    return location_of(user_frame) if user_frame is not None else None


# ---------------------------------------------------------------------------- simulate


def _run_host(
    instance: ProgramInstance, memory: MemoryState, seed: int
) -> tuple[_Host, list[_HostTensor]]:
    host = _Host(instance.ranks, memory, dict(instance.bindings))
    arguments, tensors = _create_host_arguments(instance, memory, host, seed)
    with activated(host):
        _call_user(lambda: instance.entry(*arguments), instance.name)
    host.check_row_counts()
    host.check_one_group()
    return host, tensors


def _call_user(call: Callable[[], Any], program: str) -> Any:
    try:
        return call()
    except UserError as error:
        raise _located(error) from None
    except ProgramRejected:
        raise
    except BaseException as error:  # noqa: BLE001 - classified below
        raise _classify(error, program) from error


def _located(error: UserError) -> UserError:
    """The error, pinned to the user's line it came from when it does not name one."""
    if error.file is None:
        where = traceback_location(error.__traceback__)
        if where is not None:
            error.file, error.line = where.file, where.line
    return error


def _classify(error: BaseException, program: str) -> Exception:
    """A user exception: a rejection of this P (raise/assert in the user's file) or a bug."""
    where = traceback_location(error.__traceback__)
    message = rejection_message(error)
    if message is not None and where is not None:
        return ProgramRejected(message)
    at = where or SourceLocation(file="<unknown>", line=0, text="")
    return TracingError(
        f"tracing {program} raised {type(error).__name__}: {error}",
        file=at.file if where else None,
        line=at.line if where else None,
    )


def _execute_ranks(run: _Run, host: _Host, repeat: int, timeout: float, program: str) -> None:
    run.start(host.dispatches, repeat)
    if not run.done.wait(timeout):
        running = run.running
        thread = run.states[running].thread if running is not None else None
        where = _last_user_location(thread)
        run.stop()
        if thread is not None:
            _interrupt(thread)
        line = f"; last line reached: {where} {where.text}" if where else ""
        who = f"rank {running}" if running is not None else "in the host program"
        raise TracingError(
            f"tracing {program} did not finish within {timeout:g} s ({who}{line})",
            file=where.file if where else None,
            line=where.line if where else None,
        )
    run.stop()
    if run.failure is not None:
        if isinstance(run.failure, UserError):
            raise _located(run.failure)
        if isinstance(run.failure, (ProgramRejected, ScheduleDivergence)):
            raise run.failure
        raise _classify(run.failure, program) from run.failure


def simulate(
    instance: ProgramInstance,
    *,
    policy: SchedulePolicy | None = None,
    repeat: int = 1,
    seed: int = 0,
    force_waits: bool = True,
    max_events: int = 2_000_000,
    timeout: float = 60.0,
) -> Execution:
    """Run `instance` once under `policy` and record what every rank did."""
    started = time.monotonic()
    memory = MemoryState(instance.ranks)
    with installed():
        host, tensors = _run_host(instance, memory, seed)
        run = _Run(
            instance.ranks,
            memory,
            policy or DefaultPolicy(),
            force_waits,
            max_events,
            dict(instance.bindings),
        )
        remaining = max(timeout - (time.monotonic() - started), 0.001)
        _execute_ranks(run, host, repeat, remaining, instance.name)
    trace = Trace(
        ranks=instance.ranks,
        events=tuple(tuple(state.events) for state in run.states),
        memories=tuple(memory.memories),
        ends=tuple(_end_of(state, run) for state in run.states),
        out_of_bounds=tuple(sorted(run.out_of_bounds, key=lambda record: record.rank)),
        control_reads=tuple(sorted(run.control_reads, key=lambda ref: (ref.rank, ref.index))),
        repeat=repeat,
    )
    records = tuple(
        HostTensorRecord(
            name=tensor.name,
            role=tensor.role,
            dtype=tensor.view.dtype.name,
            initial=tensor.initial,
            final=memory.snapshot(tensor.view),
        )
        for tensor in tensors
    )
    return Execution(
        trace=trace,
        schedule=tuple(run.schedule),
        tensors=records,
        forced=tuple(run.forced),
        stalled=run.stalled,
    )


def _end_of(state: _Rank, run: _Run) -> RankEnd:
    if any(ref.rank == state.rank for ref in run.stalled):
        return RankEnd.FORCED
    return state.end
