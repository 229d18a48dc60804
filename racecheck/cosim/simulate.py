"""`simulate`: run a program instance once under a policy and record what every rank did."""

from __future__ import annotations

import functools
import gc
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from racecheck import clock
from racecheck.cosim.classify import call_user, classify, located
from racecheck.cosim.execution import CellUses, Execution, HostTensorRecord, merged_flow
from racecheck.cosim.host import HostContext, HostCrash
from racecheck.cosim.inputs import HostTensor, create_host_arguments
from racecheck.cosim.policies import (
    DefaultPolicy,
    ScheduleDivergence,
    SchedulePolicy,
)
from racecheck.cosim.rank import Abort, RankContext
from racecheck.cosim.rounds import CallRounds, call_rounds, host_calls, join_memory, joins
from racecheck.cosim.scheduler import BatonScheduler
from racecheck.cosim.tasks import TaskRecord, unsplit_inexact, waited_cells
from racecheck.cosim.threads import ThreadPlan, plan_threads
from racecheck.dsl.context import activated
from racecheck.dsl.memory import MemoryState
from racecheck.dsl.modules import installed
from racecheck.dsl.types import Direction
from racecheck.dsl.watchdog import GRACE, POLL, Overrun, interrupt, thread_location, within
from racecheck.errors import ProgramRejected, TracingError, UserError
from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Event,
    Memory,
    MemoryKind,
    OutOfBounds,
    RankEnd,
    Region,
    SourceLocation,
    Trace,
    tasks_memory,
)
from racecheck.load import ProgramInstance
from racecheck.options import RuntimeOrder
from racecheck.report.reasons import ReasonCode, reason


def _run_host(
    instance: ProgramInstance,
    memory: MemoryState,
    seed: int,
    deadline: float,
    stage: str,
    repeat: int,
) -> tuple[HostContext, list[HostTensor]]:
    clock.check(deadline, reason(ReasonCode.STAGE_HOST_ENTRY, stage=stage, program=instance.name))
    host = HostContext(instance.ranks, memory, dict(instance.bindings))
    arguments, tensors = create_host_arguments(instance, memory, host, seed)

    def run() -> None:
        with activated(host):
            for call, values in enumerate(host_calls(instance, arguments, repeat)):
                if call:
                    host.next_call()
                call_user(functools.partial(instance.entry, *values), instance.name)

    try:
        within(run, clock.left(deadline))
    except Overrun as overrun:
        where = overrun.where
        raise TracingError(
            reason(ReasonCode.HOST_ENTRY_OVERRUN, program=instance.name, overrun=str(overrun)),
            file=where.file if where else None,
            line=where.line if where else None,
        ) from None
    host.check_row_counts()
    host.end_call()
    return host, tensors


def _execute_ranks(run: BatonScheduler, rounds: CallRounds, deadline: float, program: str) -> None:
    """The ranks' run. The scheduler reads the clock at every event (`Overtime`); a rank
    that runs the user's code past the deadline with no event for `GRACE` more seconds
    is stuck in it (a TracingError naming its line)."""
    run.start(rounds)
    if not _finishes(run, deadline):
        running = run.running
        thread = run.contexts[running].thread if running is not None else None
        where = thread_location(thread)
        run.stop()
        if thread is not None:
            interrupt(thread, Abort)
        who = f"rank {running}" if running is not None else "in the host program"
        said = (
            reason(ReasonCode.TRACING_OVERTIME, program=program, who=who)
            if where is None
            else reason(
                ReasonCode.TRACING_OVERTIME_AT,
                program=program,
                who=who,
                where=str(where),
                text=where.text,
            )
        )
        raise TracingError(
            said,
            file=where.file if where else None,
            line=where.line if where else None,
        )
    run.stop()
    if run.failure is not None:
        if isinstance(run.failure, clock.Overtime):  # raised again here, in the unit
            cut = run.failure
            raise clock.Overtime(cut.stage, cut.where, events=cut.events) from None
        if isinstance(run.failure, UserError):
            raise located(run.failure)
        if isinstance(run.failure, (ProgramRejected, ScheduleDivergence)):
            raise run.failure
        raise classify(run.failure, program, in_kernel=True) from run.failure


def _finishes(run: BatonScheduler, deadline: float) -> bool:
    """Whether the run ends before a rank is found stuck in the user's code: past the
    deadline (on racecheck's clock) with no event for `GRACE` seconds."""
    seen, moved = -1, clock.now()
    while not run.done.wait(POLL):
        if len(run.schedule) != seen:
            seen, moved = len(run.schedule), clock.now()
        elif clock.passed(deadline) and clock.now() - moved > GRACE:
            return False
    return True


MAX_EVENTS = 2_000_000
"""Events one run of the ranks may record before it stops with an error naming the line
(a kernel that never ends would otherwise fill memory)."""

FREEZE_FROM_EVENTS = 20_000  # below this the collector has little to walk


@contextmanager
def collector_paused() -> Iterator[None]:
    """Most of what tracing allocates lives as long as the trace, so collections during
    tracing would walk it again and again for little: the collector is off meanwhile
    (and left as it was found)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _settle(trace: Trace) -> None:
    """A large trace lives as long as its check and holds no reference cycles: keep the
    collector off every object alive now (`gc.freeze`), so the checks' collections no
    longer walk the trace again and again. Called while the collector is paused: a
    collection now, of the young objects or of all, would walk the whole trace once
    more to free next to nothing. Frozen objects are still freed by reference counting
    when the trace is dropped."""
    if sum(len(events) for events in trace.events) >= FREEZE_FROM_EVENTS:
        gc.freeze()


def simulate(
    instance: ProgramInstance,
    *,
    policy: SchedulePolicy | None = None,
    repeat: int = 1,
    seed: int = 0,
    force_waits: bool = True,
    max_events: int = MAX_EVENTS,
    timeout: float = 60.0,
    stage: str = "co-simulating the ranks",
    rules: RuntimeOrder = RuntimeOrder.CURRENT,
) -> Execution:
    """Run `instance` once under `policy` and record what every rank did, within the
    `--timeout` in force (`racecheck.clock.unit`), else `timeout` seconds; past it,
    `Overtime` naming `stage`. When some rank has two tasks the runtime leaves
    unordered, every task is a thread of its own: the program runs first in program
    order, for its tasks' start edges (`racecheck.cosim.threads`), then with them as
    threads (the run returned), the host's joins between `--rounds joined` calls
    threads too."""
    deadline = clock.deadline(timeout)
    run = functools.partial(_simulate, instance, repeat, seed, max_events, deadline, stage)
    planned = instance.thread_plan
    if isinstance(planned, ThreadPlan):
        return run(policy, force_waits, planned, None)
    first = run(policy, force_waits, None, None)
    memories = first.trace.memories
    joined = joins(instance.calls, repeat)
    plan = plan_threads(first.tasks, first.trace.events, rules, memories, instance.cores, joined)
    if plan is None:
        return first
    return run(policy, force_waits, plan, first)


def _simulate(
    instance: ProgramInstance,
    repeat: int,
    seed: int,
    max_events: int,
    deadline: float,
    stage: str,
    policy: SchedulePolicy | None,
    force_waits: bool,
    plan: ThreadPlan | None,
    program_order: Execution | None,
) -> Execution:
    memory = MemoryState(instance.ranks)
    with collector_paused():
        with installed():
            try:
                host, tensors = _run_host(instance, memory, seed, deadline, stage, repeat)
            except HostCrash as crash:
                return _host_crash(instance, memory, crash.record, repeat)
            run = BatonScheduler(
                instance.ranks,
                memory,
                policy or DefaultPolicy(),
                force_waits,
                max_events,
                dict(instance.bindings),
                plan,
                deadline=deadline,
                stage=stage,
            )
            rounds = call_rounds(host.calls, repeat, instance, memory)
            _execute_ranks(run, rounds, deadline, instance.name)
        count = plan.threads if plan is not None else instance.ranks
        events = tuple(tuple(run.sequences.get(key, ())) for key in range(count))
        waited = waited_cells(events)
        if any(state.flow.pins for state in run.states):
            uses = CellUses(events, waited)
            for state in run.states:
                state.settle_pins(uses)
        trace = Trace(
            ranks=count,
            events=events,
            memories=_memories(memory, run, rounds.join_memory),
            ends=_ends(run, count),
            out_of_bounds=tuple(sorted(run.out_of_bounds, key=lambda record: record.rank)),
            control_reads=tuple(sorted(run.control_reads, key=lambda ref: (ref.rank, ref.index))),
            repeat=repeat,
            threads=plan.records() if plan is not None else (),
            capacities=plan.capacities if plan is not None else (),
        )
        records = tuple(
            HostTensorRecord(
                name=tensor.name,
                role=tensor.role,
                memory=tensor.view.memory,
                dtype=tensor.view.dtype.name,
                initial=tensor.initial,
                final=memory.snapshot(tensor.view),
            )
            for tensor in tensors
        )
        _settle(trace)
    tasks = tuple(tuple(state.tasks.records) for state in run.states)
    in_order = program_order.trace if program_order is not None else trace
    if program_order is not None:
        tasks = program_order.tasks
    execution = Execution(
        trace=trace,
        schedule=tuple(run.schedule),
        tensors=records,
        forced=tuple(run.forced),
        stalled=run.stalled,
        flow=merged_flow(state.flow for state in run.states),
        tasks=tasks,
        plan=plan,
        rank_events=in_order.events if program_order is not None else None,
        rank_memories=in_order.memories if program_order is not None else None,
        notes=tuple(
            dict.fromkeys([*host.notes, *(note for state in run.states for note in state.notes)])
        ),
        inexact=tuple(dict.fromkeys([*_rank_reasons(run.states), *_host_flow(in_order, tasks)])),
        unfollowed=tuple(
            dict.fromkeys(
                [
                    *host.unfollowed_at,
                    *(at for state in run.states for at in state.unfollowed_at),
                    *_unsplit(run.states, trace),
                ]
            )
        ),
    )
    # The ranks' contexts and the scheduler refer to each other, and the contexts to
    # every event: parted, the trace is freed as soon as it is dropped, not by the
    # collector after walking it again.
    run.states.clear()
    run.contexts.clear()
    return execution


def _memories(memory: MemoryState, run: BatonScheduler, joins: int) -> tuple[Memory, ...]:
    """The run's memories, the tasks' completion cells, the units' cells and the host's
    join counters marked as racecheck's own."""
    memories = list(memory.memories)
    if run.tasks_memory >= 0:
        cells = memories[run.tasks_memory]
        memories[cells.id] = tasks_memory(cells.id, cells.nbytes // 4)
    if joins >= 0:
        memories[joins] = join_memory(memories[joins])
    if run.units is not None:
        memories[run.units.memory.id] = run.units.memory
    return tuple(memories)


def _ends(run: BatonScheduler, count: int) -> tuple[RankEnd, ...]:
    if run.plan is None:
        return tuple(_end_of(state, run) for state in run.states)
    crashed = {record.rank for record in run.out_of_bounds}
    forced = {ref.rank for ref in (*run.stalled, *run.forced)}
    return tuple(
        RankEnd.CRASHED if key in crashed else RankEnd.FORCED if key in forced else RankEnd.FINISHED
        for key in range(count)
    )


def _rank_reasons(states: Sequence[RankContext]) -> list[str]:
    """Why a rank's run may hide executions."""
    return [reason for state in states for reason in state.inexact]


def _unsplit(states: Sequence[RankContext], trace: Trace) -> tuple[str, ...]:
    """Why the run may compute what the device does not: code outside a kernel's
    `pl.split_aiv` regions that its other AIV sub-lanes may repeat (`unsplit_inexact`)."""
    outside = [event for state in states for event in state.outside_split]
    found = unsplit_inexact(outside, trace.events) if outside else None
    return () if found is None else (found,)


@dataclass(frozen=True, slots=True, kw_only=True)
class _CopyBack:
    """A dispatch's copy of an `Out` or `InOut` host argument back to the host after it
    ran: it writes every byte of the argument, whichever the dispatch stored."""

    rank: int
    location: SourceLocation


Access = tuple[Event | _CopyBack, Region]
Accesses = dict[tuple[int, int], list[Access]]  # (memory, call) -> accesses


def _host_flow(trace: Trace, tasks: Sequence[Sequence[TaskRecord]]) -> tuple[str, ...]:
    """Why the run proves nothing when one rank reads or writes host tensor bytes another
    rank wrote in the same call: a dispatch's host tensors are copied to the device before
    it runs and back after it, so what the read sees, or which write the tensor keeps,
    depends on when the two dispatches start and end, which racecheck does not model
    (docs/model.md). A copy-back writes the whole argument (`_copy_backs`): it can undo
    another rank's write of bytes the dispatch never stored."""
    reads: Accesses = defaultdict(list)
    writes: Accesses = defaultdict(list)
    for rank_events in trace.events:
        for event in rank_events:
            access = event.access
            if access is None or trace.memory(access.memory).kind is not MemoryKind.HOST:
                continue
            accesses = reads if event.mode is AccessMode.READ else writes
            accesses[(access.memory, event.repeat)].append((event, access))
    copied = defaultdict(list, {key: list(accesses) for key, accesses in writes.items()})
    for key, copy_back in _copy_backs(trace, tasks):
        copied[key].append(copy_back)
    for others, writers, verb, outcome in (
        (reads, writes, "reads", reason(ReasonCode.CROSSING_READ)),
        (writes, copied, "writes", reason(ReasonCode.CROSSING_WRITE)),
    ):
        crossing = _crossing(others, writers, trace)
        if crossing is not None:
            memory, other, write = crossing
            return (
                reason(
                    ReasonCode.HOST_TENSOR_CROSSING,
                    rank=other.rank,
                    verb=verb,
                    tensor=trace.memory(memory).name,
                    line=other.location.line,
                    writer=write.rank,
                    writes=_verb(write),
                    write_line=write.location.line,
                    outcome=outcome,
                ),
            )
    return ()


def _verb(write: Event | _CopyBack) -> str:
    return "copies back" if isinstance(write, _CopyBack) else "writes"


def _copy_backs(
    trace: Trace, tasks: Sequence[Sequence[TaskRecord]]
) -> Iterator[tuple[tuple[int, int], Access]]:
    """Each dispatch's `Out` and `InOut` host arguments, keyed as `_host_flow`'s accesses:
    the copy-back writes bytes the dispatch never stored too (docs/model.md)."""
    for rank, rank_tasks in enumerate(tasks):
        dispatches = {task.dispatch: task for task in rank_tasks}  # numbered over rounds
        for task in dispatches.values():
            for tag in task.dispatch_tags:
                if tag.direction is Direction.IN:
                    continue
                if trace.memory(tag.memory).kind is not MemoryKind.HOST:
                    continue
                region = Region(memory=tag.memory, owner=HOST_OWNER, ranges=(tag.span,))
                copy_back = _CopyBack(rank=rank, location=task.site)
                yield (tag.memory, task.repeat), (copy_back, region)


def _crossing(
    others: Accesses, writes: Accesses, trace: Trace
) -> tuple[int, Event | _CopyBack, Event | _CopyBack] | None:
    """The first access of `others` to bytes another rank writes in the same call: its
    memory, the access and the write. Linear in the bytes accessed (`_Writers`)."""
    for key in sorted(others.keys() & writes.keys()):
        writers = _Writers(writes[key], trace.memory(key[0]).nbytes)
        for other, touched in others[key]:
            write = writers.other_than(other.rank, touched)
            if write is not None:
                return key[0], other, write
    return None


class _Writers:
    """Per byte of one host tensor in one call: the first write of it, and the first
    write of it by another rank than that one (indexes into `writes`; -1: none)."""

    def __init__(self, writes: list[Access], nbytes: int) -> None:
        self.events = [event for event, _ in writes]
        self.ranks = np.array([event.rank for event in self.events])
        self.first = np.full(nbytes, -1)
        self.second = np.full(nbytes, -1)
        for n, (event, region) in enumerate(writes):
            for start, end in region.ranges:
                first = self.first[start:end]
                second = self.second[start:end]
                first[first == -1] = n
                second[(second == -1) & (self.ranks[first] != event.rank)] = n

    def other_than(self, rank: int, region: Region) -> Event | _CopyBack | None:
        """A write of bytes of `region` by another rank than `rank`."""
        for start, end in region.ranges:
            first, second = self.first[start:end], self.second[start:end]
            found = first[(first != -1) & (self.ranks[first] != rank)]
            if not found.size:
                found = second[second != -1]
            if found.size:
                return self.events[int(found[0])]
        return None


def _host_crash(
    instance: ProgramInstance, memory: MemoryState, record: OutOfBounds, repeat: int
) -> Execution:
    """The host entry stopped at an out-of-range row: no rank ran."""
    trace = Trace(
        ranks=instance.ranks,
        events=((),) * instance.ranks,
        memories=tuple(memory.memories),
        ends=(RankEnd.CRASHED,) * instance.ranks,
        out_of_bounds=(record,),
        repeat=repeat,
    )
    return Execution(trace=trace, schedule=(), tensors=())


def _end_of(state: RankContext, run: BatonScheduler) -> RankEnd:
    if any(ref.rank == state.rank for ref in run.stalled):
        return RankEnd.FORCED
    return state.end
