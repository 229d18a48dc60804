"""One rank's context: DSL operations become scheduled, recorded events."""

from __future__ import annotations

import copy
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from racecheck.assumptions import narrowed
from racecheck.cells import after_write
from racecheck.cosim.execution import CellUses, FlowRecorder, Pin
from racecheck.cosim.tasks import TaskLog, cube_lane_spec, sub_lane_spec
from racecheck.dsl.dtypes import DType
from racecheck.dsl.lanes import AicLane, LaneDone, SubLane, in_vector_region
from racecheck.dsl.local_ops import local_owner
from racecheck.dsl.location import assigned_name, unsupported, user_location
from racecheck.dsl.scalars import Tainted
from racecheck.dsl.scopes import TaskSpec, TaskTag, stands_for
from racecheck.dsl.summary_state import covering, note_widened_load
from racecheck.dsl.symbolic import INT32_LIMITS, Decision, Forms, InputBlock, decision
from racecheck.dsl.tensors import TensorView, cell_start, region_problem, region_runs
from racecheck.errors import UnsupportedConstruct
from racecheck.events import (
    AccessMode,
    Event,
    EventKind,
    EventRef,
    Notify,
    NotifyOp,
    OutOfBounds,
    RankEnd,
    Region,
    SignalCell,
    SourceLocation,
    Wait,
    WaitCmp,
    WriteOp,
    Written,
    completion_cell,
    end_notify,
    start_wait,
)
from racecheck.report.reasons import ReasonCode, reason

if TYPE_CHECKING:
    from racecheck.cosim.turns import Turns
    from racecheck.dsl.memory import MemoryState


class Abort(BaseException):
    """Unwinds a parked rank thread when the run ends early; never seen by user code."""


class Crash(BaseException):
    """An out-of-bounds access stops its rank (the access is not performed)."""

    def __init__(self, record: OutOfBounds) -> None:
        super().__init__(record.message)
        self.record = record


class RankContext:
    """One rank's context: turns DSL operations into scheduled, recorded events."""

    def __init__(self, rank: int, run: Turns[RankContext]) -> None:
        self.rank = rank  # the device rank
        self.key = rank  # the thread it records for (`racecheck.cosim.threads`)
        self.ranks = run.ranks
        self.dims = run.dims
        self.run = run
        self.events: list[Event] = run.sequences.setdefault(rank, [])
        self.glue: int | None = None  # the task index of the glue thread it runs now
        self.inside: list[tuple[int, int, SourceLocation]] = []  # (key left, index, where)
        self.repeat = 0
        self.forced = False
        self.end = RankEnd.FINISHED
        self.baton = threading.Lock()
        self.baton.acquire()
        self.abort = False
        self.force_next = False
        self.thread: threading.Thread | None = None
        self.flow = FlowRecorder()
        self.tasks = TaskLog()
        self.running: list[int] = []  # the tasks it runs now, innermost last
        self.mixed = False
        # the body of a task that can run again as its AIV sub-lanes runs now (a kernel
        # call, an outlined region or block, a dispatched kernel; not a lane of it)
        self.kernel = False
        self.split = (0, 0)  # its `pl.split_aiv` regions' AIV sub-lanes, and how many it entered
        self.unsplit: list[Event] = []  # its events outside them so far
        self.outside_split: list[Event] = []  # those of its tasks with AIV sub-lanes
        self.glue_split: SourceLocation | None = None  # a region the dispatch's glue entered
        self.deferred_at: SourceLocation | None = None  # a defer_wait ended this task's accesses
        self.inexact: list[str] = []  # why this trace cannot prove (`Execution.inexact`)
        self.unfollowed_at: list[str] = []  # where it left the model (`Execution.unfollowed`)
        self.notes: list[str] = []

    # -- tasks (racecheck.dsl.scopes, racecheck.cosim.tasks)

    def call_task(
        self,
        spec: TaskSpec,
        body: Callable[[], Any],
        rerun: Callable[[Callable[[Any], Any]], Any],
        held: Callable[[], Any] = lambda: None,
    ) -> tuple[Any, int]:
        """Run a kernel call as a task: in place, or as a thread of its own in a run
        with tasks as threads (its caller then goes on with `held()`, which the task
        must return when it runs). The index after its own is kept for its cube lane,
        and those after it for its AIV sub-lanes after the first (`racecheck.dsl.lanes`):
        each of them `rerun` as a task of its own."""
        if self.run.plan is not None and self.task_depth == 0:
            return self._thread_task(spec, body, rerun, held)
        index = self.tasks.open(self.events)
        self.tasks.reserve()
        result = self._run_task(index, spec, lambda: self._task_body(body))
        if self.mixed:
            self._run_task(index + 1, cube_lane_spec(spec, index), lambda: rerun(AicLane))
        self._sub_lanes_in_order(spec, index, rerun)
        return result, index

    def run_task(
        self,
        spec: TaskSpec,
        body: Callable[[], Any],
        rerun: Callable[[Callable[[Any], Any]], Any],
    ) -> int:
        """In a run in program order, an outlined `pl.at` region or `pl.spmd` block
        (`racecheck.dsl.host_regions`) run in place as a task, then its AIV sub-lanes
        after the first, each `rerun` as a task of its own; its index."""
        index = self.tasks.open(self.events)
        first = len(self.events)
        self.tasks.regions.append((index, spec, first))  # no cube lane in a region
        self.running.append(index)
        self._new_task_state()
        try:
            self._task_body(body)
        finally:
            self.tasks.regions.pop()
            self.running.pop()
            self._new_task_state()
            self.tasks.record(index, spec, first, self.events)
        self._sub_lanes_in_order(spec, index, rerun)
        return index

    def _sub_lanes_in_order(
        self, spec: TaskSpec, index: int, rerun: Callable[[Callable[[Any], Any]], Any]
    ) -> None:
        """In a run in program order: task `index`'s AIV sub-lanes after the first, each
        run again as `SubLane` as a task of its own, whose index comes next."""
        lanes, regions = self.split
        for aiv_id in range(1, lanes):
            self.tasks.reserve()
            lane = sub_lane_spec(spec, index, aiv_id, regions)
            run = self._sub_lane(rerun, aiv_id, regions, spec.location)
            self._run_task(self.tasks.next_index - 1, lane, run)

    def _task_body(self, body: Callable[[], Any]) -> Any:
        """The body of a task whose AIV sub-lanes are lanes of their own: it runs as
        sub-lane 0, counting the sub-lanes and regions it enters (`sub_lanes`)."""
        self.mixed = False
        self._open_lanes()
        try:
            return body()
        finally:
            self._close_lanes()

    def _open_lanes(self) -> None:
        self.kernel, self.split, self.unsplit = True, (0, 0), []

    def _close_lanes(self) -> None:
        self.kernel = False
        if self.split[0] > 1:  # sub-lane 0 ran these; whether the others do is open
            self.outside_split.extend(self.unsplit)
        self.unsplit = []

    def _sub_lane(
        self,
        rerun: Callable[[Callable[[Any], Any]], Any],
        aiv_id: int,
        regions: int,
        where: SourceLocation,
    ) -> Callable[[], None]:
        """A kernel's AIV sub-lane `aiv_id`, run again as `SubLane` to the end of the
        last of the `regions` regions its kernel entered."""

        def run() -> None:
            try:
                rerun(lambda inner: SubLane(inner, aiv_id, regions))
            except LaneDone:
                return
            self._unplanned(where)  # it entered fewer regions than the kernel did

        return run

    def sub_lanes(self, count: int) -> Sequence[int]:
        """The AIV sub-lanes of a `pl.split_aiv(count)` region this context runs:
        sub-lane 0, the others being lanes of their own (`SubLane`), in a task that can
        run again as them (`kernel`). Refused in a task that runs in place (a region or
        block whose source racecheck cannot outline) and in a per-device function's
        own code."""
        where = user_location()
        if not self.kernel:
            raise unsupported(reason(ReasonCode.SPLIT_AIV_IN_PLACE), where)
        if not self.running:
            self.glue_split = self.glue_split or where  # a dispatched kernel's, or refused
        lanes, regions = self.split
        self.split = (max(lanes, count), regions + 1)
        return (0,)

    def create_tensor(
        self, shape: tuple[int, ...], dtype: DType, *, manual_dep: bool, fill: float = 0
    ) -> TensorView:
        """`pl.create_tensor` in a per-device function: a zeroed tensor of this rank's
        device memory, which the function's tasks share and are tagged with like any
        argument; with `manual_dep`, no task gets an edge on it (docs/model.md)."""
        memory = self.run.memory
        name = memory.fresh_name(f"{assigned_name('tensor')}@{self.rank}")
        values = np.full(shape, fill, dtype=dtype.compute)  # init_value= (PyPTO #823)
        return memory.add_host_tensor(name, values, dtype, manual_dep=manual_dep)

    @property
    def task_depth(self) -> int:
        return len(self.running)

    def running_task(self) -> int | None:
        """The innermost task this context runs now (its index); None outside any."""
        return self.running[-1] if self.running else None

    def mark_mixed(self) -> bool:
        """A kernel task mixes cube ops with communication: it gets a cube lane."""
        if self.task_depth == 0 or self.tasks.regions:
            return False
        self.mixed = True
        return True

    def peek(
        self, view: TensorView, owner: int, offsets: Sequence[int], extent: Sequence[int]
    ) -> np.ndarray:
        """Read memory without an event (what a cube lane's vector loads would see)."""
        self._region(view, owner, offsets, extent)
        return self.run.memory.read(view, owner, offsets, extent)

    def begin_task(self, spec: TaskSpec) -> int:
        if self.run.plan is not None:
            index = self._new_thread_index()
            self._enter(index, spec.location)
            self.running.append(index)
            return index
        index = self.tasks.open(self.events)
        self.tasks.regions.append((index, spec, len(self.events)))
        self.running.append(index)
        return index

    def spawn_task(
        self,
        spec: TaskSpec,
        body: Callable[[], Any],
        rerun: Callable[[Callable[[Any], Any]], Any],
    ) -> int | None:
        """In a run with tasks as threads, a `pl.at` region or `pl.spmd` block whose
        body is outlined (`racecheck.dsl.host_regions`): a thread of its own running
        `body`, and one per AIV sub-lane after the first (`rerun`), its index returned,
        while its caller goes on. None in another run: the caller runs it with
        `run_task`."""
        plan = self.run.plan
        if plan is None or self.task_depth != 0:
            return None
        index = self._new_thread_index()
        split = self._spawn_sub_lanes(index, index + 1, rerun, spec.location)
        child = self.child(plan.key(self.rank, index))

        def run() -> None:
            child._starts(index, spec.location)
            child.running.append(index)
            child.tasks.regions.append((index, spec, 0))  # no cube lane in a region
            try:
                child._planned_body(body, split, spec.location)
            finally:
                child.running.pop()
                child._new_task_state()
            child._end(index, spec.location)

        self.run.spawn(child, run)
        return index

    def _spawn_sub_lanes(
        self,
        index: int,
        first: int,
        rerun: Callable[[Callable[[Any], Any]], Any],
        where: SourceLocation,
    ) -> tuple[int, int]:
        """In a run with tasks as threads: task `index`'s AIV sub-lanes after the first
        (`ThreadPlan.sub_lanes`), each a thread of its own from the start, their indexes
        `first` on (reserved); the sub-lanes and regions the task must enter."""
        plan = self.run.plan
        assert plan is not None
        split = plan.sub_lanes.get((self.rank, index), (1, 0))
        for aiv_id in range(1, split[0]):
            self.tasks.reserve()
            lane = self._sub_lane(rerun, aiv_id, split[1], where)
            self._spawn_lane(first + aiv_id - 1, where, lane)
        return split

    def _planned_body(
        self, body: Callable[[], Any], split: tuple[int, int], where: SourceLocation
    ) -> Any:
        """A task's body (`_task_body`), which must enter the AIV sub-lanes and regions
        its run in program order did (`split`), its other sub-lanes running already."""
        result = self._task_body(body)
        if _split_lanes(self.split) != _split_lanes(split):
            self._unplanned(where)
        return result

    def end_task(self) -> None:
        if self.run.plan is not None:
            self._new_task_state()
            self.running.pop()
            self._leave()
            return
        self._new_task_state()
        index, spec, first = self.tasks.regions.pop()
        self.running.pop()
        self.tasks.record(index, spec, first, self.events)

    def start_dispatch(
        self,
        number: int,
        site: SourceLocation,
        name: str,
        domains: frozenset[tuple[int, ...]],
        tags: tuple[TaskTag, ...],
    ) -> None:
        self.tasks.dispatch = number
        self.tasks.site = site
        self._new_task_state()
        self.tasks.dispatch_name = name
        self.tasks.dispatch_tags = tags
        self.tasks.domains = domains
        self.tasks.repeat = self.repeat
        self.tasks.glue_from = len(self.events)

    def dispatch(
        self, body: Callable[[], Any], rerun: Callable[[Callable[[Any], Any]], Any]
    ) -> None:
        """Run a dispatch's function: a thread of its own in a run with tasks as threads
        that makes a dispatched kernel one (`dispatch_thread`); else in place, where a
        dispatched kernel that enters `pl.split_aiv` regions is a task (its glue) whose
        AIV sub-lanes after the first are tasks of their own, each `rerun`."""
        if self.dispatch_thread(body, rerun):
            return
        if self.run.plan is not None:  # no dispatched kernel: its tasks are threads
            body()
            return
        self._open_lanes()
        self.glue_split = None
        try:
            body()
        finally:
            split = self.split
            self._close_lanes()
        if self.glue_split is None:
            return
        dispatch = [
            record for record in self.tasks.records if record.dispatch == self.tasks.dispatch
        ]
        if dispatch or split[0] <= 1:  # it ran tasks: the region was in a per-device function
            raise unsupported(reason(ReasonCode.SPLIT_AIV_IN_PLACE), self.glue_split)
        self.tasks.close_glue(self.events, always=True)
        glue = self.tasks.records[-1]
        self.split = split
        self._sub_lanes_in_order(glue.spec, glue.index, rerun)

    def finish_dispatch(self) -> None:
        self._new_task_state()
        if self.run.plan is not None:
            self._close_glue()
            return
        self.tasks.close_glue(self.events)

    def _run_task(self, index: int, spec: TaskSpec, body: Callable[[], Any]) -> Any:
        first = len(self.events)
        self.running.append(index)
        self._new_task_state()
        try:
            return body()
        finally:
            self.running.pop()
            self._new_task_state()
            self.tasks.record(index, spec, first, self.events)

    def _new_task_state(self) -> None:
        self.deferred_at = None

    # -- tasks as threads (racecheck.cosim.threads): a run with a ThreadPlan

    def _new_thread_index(self) -> int:
        self._close_glue()
        return self.tasks.open([])  # the index only: no glue is recorded in such a run

    def _thread_task(
        self,
        spec: TaskSpec,
        body: Callable[[], Any],
        rerun: Callable[[Callable[[Any], Any]], Any],
        held: Callable[[], Any],
    ) -> tuple[Any, int]:
        """A kernel call as a thread of its own, its caller going on with `held()`
        (which refuses a call whose results racecheck cannot give before it runs: run
        in its caller's place, its start edges would not be the runtime's)."""
        index = self._new_thread_index()
        plan = self.run.plan
        assert plan is not None
        self.tasks.reserve()  # its cube lane's index
        result = held()
        child = self.child(plan.key(self.rank, index))
        laned = plan.starts(self.rank, index + 1) is not None
        if laned:  # its cube lane, a thread of its own from the start
            self._spawn_lane(index + 1, spec.location, lambda: rerun(AicLane))
        split = self._spawn_sub_lanes(index, index + 2, rerun, spec.location)  # so are these
        cube_lane = None if laned else lambda: rerun(AicLane)

        def run() -> None:
            child._starts(index, spec.location)
            outcome = child._kernel(index, spec, body, cube_lane, split)
            child._end(index, spec.location)
            if not stands_for(outcome, result):
                raise unsupported(
                    f"task {spec.name} runs as a thread of its own and gave its caller "
                    f"{result!r} in place of its result, but it returned {outcome!r}",
                    spec.location,
                )

        self.run.spawn(child, run)
        return result, index

    def dispatch_thread(
        self, body: Callable[[], Any], rerun: Callable[[Callable[[Any], Any]], Any]
    ) -> bool:
        """Run a dispatched kernel as a thread of its own (`ThreadPlan.kernels`), and
        each of its AIV sub-lanes after the first (`rerun`), its rank going on to its
        next dispatch; False (nothing run) for any other dispatch."""
        plan = self.run.plan
        index = self.tasks.next_index
        if plan is None or (self.rank, index) not in plan.kernels:
            return False
        self.tasks.open([])
        where = self.tasks.site
        split = self._spawn_sub_lanes(index, index + 1, rerun, where)
        child = self.child(plan.key(self.rank, index))

        def run() -> None:
            child._starts(index, where)
            child._planned_body(body, split, where)
            child._end(index, where)

        self.run.spawn(child, run)
        return True

    def host_join(
        self, call: int, where: SourceLocation, body: Callable[[RankContext], None]
    ) -> None:
        """The host's join after call `call` (`racecheck.cosim.rounds`), its events run
        by `body` on the context given: this rank's own sequence, or in a run with tasks
        as threads a thread of its own (`ThreadPlan.join_index`) while the rank goes on
        to issue its next call's tasks, which start after it."""
        plan = self.run.plan
        if plan is None:
            body(self)
            return
        index = plan.join_index(call)
        join = self.child(plan.key(self.rank, index))

        def run() -> None:
            join._starts(index, where)
            body(join)
            join._end(index, where)

        self.run.spawn(join, run)

    def _spawn_lane(self, index: int, where: SourceLocation, cube_lane: Callable[[], Any]) -> None:
        plan = self.run.plan
        assert plan is not None
        lane = self.child(plan.key(self.rank, index))

        def run() -> None:
            lane._starts(index, where)
            lane.running.append(index)
            cube_lane()
            lane.running.pop()
            lane._end(index, where)

        self.run.spawn(lane, run)

    def _kernel(
        self,
        index: int,
        spec: TaskSpec,
        body: Callable[[], Any],
        cube_lane: Callable[[], Any] | None,
        split: tuple[int, int],
    ) -> Any:
        """A kernel task's body, then its cube lane (a thread of its own) if it mixes
        and the lane is not running already (`cube_lane` None); `split`: the AIV
        sub-lanes running already and the regions they run, as the body must have."""
        self.running.append(index)
        self._new_task_state()
        try:
            result = self._planned_body(body, split, spec.location)
        finally:
            self.running.pop()
            self._new_task_state()
        if self.mixed and cube_lane is not None:
            self._enter(index + 1, spec.location)
            self.running.append(index + 1)
            try:
                cube_lane()
            finally:
                self.running.pop()
                self._new_task_state()
            self._leave()
        return result

    def child(self, key: int) -> RankContext:
        """The context of a new thread of this rank: its own events and baton, the
        rank's memory, flow and notes."""
        other = copy.copy(self)
        other.key = key
        other.events = self.run.sequences.setdefault(key, [])
        other.baton = threading.Lock()
        other.baton.acquire()
        other.abort = other.force_next = other.forced = False
        other.end = RankEnd.FINISHED
        other.thread = None
        other.tasks = TaskLog()
        other.running = []
        other.mixed = other.kernel = False
        other.split, other.unsplit = (0, 0), []  # (its outside_split is the rank's)
        other.glue_split = None
        other.glue = None
        other.inside = []
        other._new_task_state()
        return other

    def _switch(self, key: int) -> None:
        self.run.rekeyed(self.key, key)
        self.key = key
        self.events = self.run.sequences.setdefault(key, [])
        self.run.contexts[key] = self

    def _enter(self, index: int, where: SourceLocation) -> None:
        """Record for task `index`'s thread from now on, once it may start."""
        plan = self.run.plan
        assert plan is not None
        self.inside.append((self.key, index, where))
        self._switch(plan.key(self.rank, index))
        self._starts(index, where)

    def _leave(self) -> None:
        left, index, where = self.inside.pop()
        self._end(index, where)
        self._switch(left)

    def _open_glue(self) -> None:
        """Events of the dispatch outside any task: a thread of their own."""
        self.glue = self.tasks.open([])
        self._enter(self.glue, user_location())

    def _close_glue(self) -> None:
        if self.glue is not None:
            self.glue = None
            self._leave()

    def _starts(self, index: int, where: SourceLocation) -> None:
        """Wait until every task this one starts after has finished."""
        plan = self.run.plan
        assert plan is not None
        after = plan.starts(self.rank, index)
        if after is None:
            self._unplanned(where)
            after = ()
        for task in after:
            cell = completion_cell(self.run.tasks_memory, plan.key(self.rank, task), self.rank)
            event = start_wait(self.key, len(self.events), cell, 1, where)
            self.run.checkpoint(self, event)
            self.run.executed(self, event)
        units = self.run.units
        if units is not None:  # the dispatch lock and a core (`ThreadPlan.units`)
            thread = self.run.threads[self.key]
            for event in units.start_events(self.key, thread, len(self.events), where):
                self._synthetic(event)

    def _end(self, index: int, where: SourceLocation) -> None:
        """Finish task `index`: its units given back, then one more finished thread on
        its completion cell."""
        plan = self.run.plan
        assert plan is not None
        units = self.run.units
        if units is not None:
            thread = self.run.threads[self.key]
            for event in units.end_events(self.key, thread, len(self.events), where):
                self._synthetic(event)
        if (self.rank, index) not in plan.awaited:
            return
        cell = completion_cell(self.run.tasks_memory, plan.key(self.rank, index), self.rank)
        self._synthetic(end_notify(self.key, len(self.events), cell, where))

    def _synthetic(self, event: Event) -> None:
        """Run one of racecheck's own events: a wait that takes a unit adds its take to
        the cell in the same step, a notify its value."""
        self.run.checkpoint(self, event)
        sync = event.notify or event.wait
        assert sync is not None
        added = event.notify.value if event.notify else event.wait.take if event.wait else 0
        if added:
            self.run.memory.set_cell(sync.cell, self.run.memory.cell(sync.cell) + added)
        self.run.executed(self, event)

    def _unplanned(self, where: SourceLocation) -> None:
        self._inexact(
            f"rank {self.rank} ran a task at line {where.line} that its run in program "
            "order did not have"
        )

    def _inexact(self, reason: str) -> None:
        if reason not in self.inexact:
            self.inexact.append(reason)

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
        note_widened_load(offsets, event.ref)
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
        sources: frozenset[EventRef] | None = None,
        forms: Forms | None = None,
    ) -> None:
        values = _fit(np.asarray(values), len(offsets))
        region = self._region(view, owner, offsets, values.shape)
        kind, mode = (
            (EventKind.ATOMIC_ADD, AccessMode.ATOMIC)
            if accumulate
            else (EventKind.STORE, AccessMode.WRITE)
        )
        event = self._event(kind, region, mode, label)
        self.flow.stored(event.ref, sources, inexact=accumulate and view.dtype.is_float)
        self.run.checkpoint(self, event)
        memory = self.run.memory
        if accumulate:
            memory.accumulate(view, owner, offsets, values)
        else:
            kept = None if forms is None else forms.reshape(values.shape)
            memory.write(view, owner, offsets, values, kept)
        if view.is_window:
            event = replace(event, written=_written(view, region, values, memory, accumulate))
        self.run.executed(self, event)

    def notify(
        self,
        view: TensorView,
        peer: int,
        offsets: Sequence[int],
        value: int | Tainted,
        op: NotifyOp,
        label: str,
    ) -> None:
        """A notify; a value read from memory (a `Tainted` integer) is data the Set
        leaves in the cell, and steers only if the engines use it (`Pin`)."""
        amount = int(value.value) if isinstance(value, Tainted) else value
        cell = self._cell(view, peer, offsets)
        event = self._event(
            EventKind.NOTIFY,
            _cell_region(cell),
            AccessMode.ATOMIC,
            label,
            notify=Notify(cell=cell, op=op, value=amount),
        )
        form = None
        if isinstance(value, Tainted):
            form = value.symbolic if op is NotifyOp.SET else None
            self._pin(event, value, amount)
        self.run.checkpoint(self, event)
        memory = self.run.memory
        memory.set_cell(
            cell, after_write(memory.cell(cell), amount, op is NotifyOp.ATOMIC_ADD), form
        )
        self.run.executed(self, event)

    def _pin(self, event: Event, value: Tainted, amount: int) -> None:
        sources = frozenset(ref for ref in value.sources if ref.index >= 0)
        made = None if value.symbolic is None else decision(value.symbolic, amount, as_bool=False)
        self.flow.stored(event.ref, sources, inexact=False)
        self.flow.pins.append(
            Pin(
                notify=event,
                sources=sources,
                decision=made,
                at=(len(self.run.schedule), self.key),
            )
        )

    def settle_pins(self, uses: CellUses) -> None:
        """Once every rank has run: the notify values the engines use steer."""
        self.run.control_reads.update(self.flow.settle(uses))

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
        if cmp is WaitCmp.GE_UNSIGNED and label == "pld.system.defer_wait":
            # A builtin's deferred wait (`defer=True`) is a phase task of its own,
            # followed by the builtin's epilogue phase; only the user's retires its task.
            self.deferred_at = event.location

    def note_control(self, sources: frozenset[EventRef], decision: Decision | None) -> None:
        self.run.control_reads.update(sources)
        if not sources <= self.flow.steered.keys():
            self.flow.steered_by(sources, user_location())
        self.flow.decided(sources, decision, (len(self.run.schedule), self.key))

    def input_symbols(
        self, view: TensorView, offsets: Sequence[int], extent: Sequence[int]
    ) -> Forms | None:
        memory = self.run.memory
        name = memory.inputs.get(view.memory)
        if name is None or view.memory in memory.written:
            return memory.forms_at(view, local_owner(view, self.rank), offsets, extent)
        if view.dtype.name == "BOOL":
            return None
        size = view.dtype.nbytes
        runs = region_runs(view, offsets, extent)
        elements = np.concatenate(
            [np.arange(start // size, end // size, dtype=np.int64) for start, end in runs]
            or [np.empty(0, dtype=np.int64)]
        )
        if len(elements) != math.prod(extent):
            return None
        limits = narrowed(view.dtype.limits or INT32_LIMITS, memory.assumed, name)
        return InputBlock(name, elements.reshape(tuple(extent)), view.dtype.is_float, limits)

    def fail_bounds(self, message: str) -> None:
        raise Crash(OutOfBounds(rank=self.key, location=user_location(), message=message))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def unfollowed(self, reason: str) -> None:
        if reason not in self.unfollowed_at:
            self.unfollowed_at.append(reason)

    # -- helpers

    def _event(
        self, kind: EventKind, region: Region, mode: AccessMode, label: str, **sync: Any
    ) -> Event:
        if self.deferred_at is not None:
            where = user_location()
            raise UnsupportedConstruct(
                reason(ReasonCode.DEFER_WAIT_THEN_ACCESS, label=label, line=self.deferred_at.line),
                file=where.file,
                line=where.line,
            )
        if self.run.plan is not None and self.key == self.rank and self.glue is None:
            self._open_glue()
        event = Event(
            rank=self.key,
            index=len(self.events),
            kind=kind,
            access=region,
            mode=mode,
            location=user_location(),
            repeat=self.repeat,
            label=label,
            **sync,
        )
        if self.kernel and not in_vector_region():
            self.unsplit.append(event)
        return event

    def _region(
        self, view: TensorView, owner: int, offsets: Sequence[int], extent: Sequence[int]
    ) -> Region:
        self._check_owner(view, owner)
        box = covering(offsets, list(extent))  # a summary run's slot-counted offsets
        if box is not None:
            offsets, extent = box
        problem = region_problem(view, offsets, extent)
        if problem is not None:
            self.fail_bounds(problem)
        return Region(memory=view.memory, owner=owner, ranges=region_runs(view, offsets, extent))

    def _check_owner(self, view: TensorView, owner: int) -> None:
        if view.is_window and not 0 <= owner < self.ranks:
            self.fail_bounds(
                reason(ReasonCode.PEER_OUTSIDE, owner=owner, ranks=self.ranks, view=repr(view))
            )

    def _cell(self, view: TensorView, owner: int, offsets: Sequence[int]) -> SignalCell:
        self._check_owner(view, owner)
        start = cell_start(view, offsets)
        if start is None:  # out of bounds: the general path fails, saying why
            start = self._region(view, owner, offsets, [1] * len(offsets)).ranges[0][0]
        if view.dtype.nbytes != 4 or view.dtype.is_float:
            self.fail_bounds(reason(ReasonCode.SIGNAL_NOT_INT32, view=repr(view)))
        return SignalCell(memory=view.memory, owner=owner, offset=start, index=tuple(offsets))


def _split_lanes(split: tuple[int, int]) -> tuple[int, int]:
    """A kernel's AIV sub-lanes and regions, (1, 0) for one that has no other lane."""
    return split if split[0] > 1 else (1, 0)


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


def _written(
    view: TensorView, region: Region, values: np.ndarray, memory: MemoryState, accumulate: bool
) -> Written:
    """What a window write did to its region's bytes (see `Written`)."""
    if not accumulate:
        raw = memory.instances[(region.memory, region.owner)]
        return Written(
            op=WriteOp.ASSIGN,
            data=b"".join(raw[start:end].tobytes() for start, end in region.ranges),
        )
    if view.dtype.is_float or view.dtype.nbytes != 4:
        return Written(op=WriteOp.INEXACT)
    return Written(op=WriteOp.ADD, data=np.ascontiguousarray(view.dtype.encode(values)).tobytes())
