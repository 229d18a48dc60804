"""The baton scheduler: one baton passed between rank threads at scheduling points."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

from racecheck.clock import Overtime, passed
from racecheck.cosim.host import Dispatch
from racecheck.cosim.policies import (
    ScheduleDivergence,
    SchedulePolicy,
)
from racecheck.cosim.rank import Abort, Crash, RankContext
from racecheck.cosim.rounds import CallRounds
from racecheck.cosim.threads import ThreadPlan
from racecheck.dsl.context import activated
from racecheck.dsl.context import current as current_context
from racecheck.dsl.declared import as_declared
from racecheck.dsl.groups import members
from racecheck.dsl.memory import MemoryState
from racecheck.dsl.scopes import tags_of
from racecheck.dsl.tensors import TensorView
from racecheck.errors import TracingError
from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Event,
    EventRef,
    OutOfBounds,
    RankEnd,
    Wait,
)
from racecheck.report.reasons import ReasonCode, reason


class BatonScheduler:
    """The scheduler: one baton, passed between rank threads at scheduling points."""

    def __init__(
        self,
        ranks: int,
        memory: MemoryState,
        policy: SchedulePolicy,
        force_waits: bool,
        max_events: int,
        dims: Mapping[str, int],
        plan: ThreadPlan | None = None,
        *,
        deadline: float = math.inf,
        stage: str = "co-simulating the ranks",
    ) -> None:
        self.ranks = ranks
        self.plan = plan
        self.deadline = deadline  # `--timeout`, read at every event
        self.stage = stage
        self.dims = dims
        self.memory = memory
        self.policy = policy
        self.force_waits = force_waits
        self.max_events = max_events
        self.sequences: dict[int, list[Event]] = {}  # each thread's events, by key
        # the memory of the tasks' completion cells, when tasks are threads
        self.tasks_memory = memory.add_window("tasks", 4 * plan.threads).id if plan else -1
        # the cells of the dispatch locks and cores its threads take (`ThreadPlan.units`)
        self.units = plan.units(len(memory.memories)) if plan else None
        if self.units is not None:
            memory.add_window("units", self.units.memory.nbytes)
        self.threads = plan.records() if plan else ()
        self.states = [RankContext(rank, self) for rank in range(ranks)]
        self.contexts: dict[int, RankContext] = {state.key: state for state in self.states}
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

    def checkpoint(self, state: RankContext, event: Event) -> None:
        # a budget that runs out ends the run with Abort, which the user's `except
        # Exception` cannot swallow (a trace cut short is never checked as a whole one)
        if len(self.schedule) >= self.max_events:
            self._fail(
                TracingError(
                    reason(
                        ReasonCode.EVENT_BUDGET,
                        rank=state.rank,
                        events=self.max_events,
                        where=str(event.location),
                        text=event.location.text,
                    ),
                    file=event.location.file,
                    line=event.location.line,
                )
            )
            raise Abort()
        if passed(self.deadline):
            stage = f"{self.stage} (rank {state.rank})"
            self._fail(Overtime(stage, event.location, events=len(self.schedule)))
            raise Abort()
        priming = self.unprimed_remove(state.key)
        self.pending[state.key] = event
        if event.wait is None or self._satisfied(event.wait):
            self.runnable.add(state.key)
        else:
            self.blocked.add(state.key)
        current = None if priming else state.key
        if self._pass_baton(current, holder=state.key) == state.key:
            # granted to itself: it holds its own baton already
            if state.abort:
                raise Abort()
        else:
            self._wait_for_baton(state)

    def executed(self, state: RankContext, event: Event) -> None:
        del self.pending[state.key]
        self.runnable.discard(state.key)
        if state.force_next:
            state.force_next = False
            state.forced = True
            self.forced.append(event.ref)
        state.events.append(event)
        self.schedule.append(event.ref)
        # a wait is on the waiter's own cell: only a write to the owner's bytes can enable
        # it, or disable it again (an Eq wait the second Add steps past, a Set, a reset)
        owner = event.access.owner if event.access is not None else HOST_OWNER
        if owner != HOST_OWNER and event.mode is not AccessMode.READ:
            if self.plan is None:
                if owner in self.pending:
                    self._recheck(owner)
            else:  # every thread of the owner's device (key % P) may wait on it
                for key in [key for key in self.pending if key % self.ranks == owner]:
                    self._recheck(key)

    def finished(self, state: RankContext) -> None:
        self.unprimed_remove(state.key)
        self._pass_baton(current=state.key)

    def rekeyed(self, old: int, new: int) -> None:
        """A thread records for key `new` from now on (a rank's orchestration entering
        its glue task): if it has not reached its first event yet, it primes as `new`."""
        if old in self.unprimed:
            self.unprimed[self.unprimed.index(old)] = new

    def spawn(self, child: RankContext, body: Callable[[], None]) -> None:
        """Start a task's thread: it runs `body` once granted the baton, first up to its
        first event (executing nothing), like every thread."""
        self.contexts[child.key] = child
        self.unprimed.append(child.key)
        child.thread = threading.Thread(
            target=self._thread_main,
            args=(child, body),
            name=f"racecheck-rank-{child.rank}-thread-{child.key}",
            daemon=True,
        )
        child.thread.start()

    def _thread_main(self, state: RankContext, body: Callable[[], None]) -> None:
        try:
            self._wait_for_baton(state)
            with activated(state):
                body()
            state.end = RankEnd.FORCED if state.forced else RankEnd.FINISHED
        except Abort:
            return
        except Crash as crash:
            self.out_of_bounds.append(crash.record)
            state.end = RankEnd.CRASHED
        except BaseException as error:  # noqa: BLE001 - reported to the caller of simulate()
            self._fail(error)
            return
        try:
            self.finished(state)
        except BaseException as error:  # noqa: BLE001 - a policy failing while handing over
            self._fail(error)

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
        if wait is None or self.contexts[rank].force_next:
            return
        if self._satisfied(wait):
            self.blocked.discard(rank)
            self.runnable.add(rank)
        else:
            self.runnable.discard(rank)
            self.blocked.add(rank)

    def _pass_baton(self, current: int | None, holder: int | None = None) -> int | None:
        """The rank granted the baton (`holder`, the rank calling, keeps its own), None
        once the run is over."""
        if self.unprimed:
            return self._grant(self.unprimed[0], holder)
        if self.runnable:
            return self._grant(self.policy.choose(self.runnable, current, self.pending), holder)
        if self.blocked and self.force_waits:
            rank = min(self.blocked)
            self.blocked.discard(rank)
            self.runnable.add(rank)
            self.contexts[rank].force_next = True
            return self._grant(rank, holder)
        self.stalled = tuple(self.pending[rank].ref for rank in sorted(self.blocked))
        self.running = None
        self.done.set()
        return None

    def _grant(self, rank: int, holder: int | None = None) -> int:
        """Pass the baton to `rank`; `holder`, the rank calling, keeps its own."""
        self.running = rank
        if rank not in self.runnable and rank not in self.unprimed:
            raise ScheduleDivergence(f"policy chose rank {rank}, which cannot run")
        if rank != holder:
            self.contexts[rank].baton.release()
        return rank

    def _wait_for_baton(self, state: RankContext) -> None:
        state.baton.acquire()
        if state.abort:
            raise Abort()

    # -- rank threads

    def start(self, rounds: CallRounds) -> None:
        for state in self.states:
            state.thread = threading.Thread(
                target=self._rank_main,
                args=(state, rounds),
                name=f"racecheck-rank-{state.rank}",
                daemon=True,
            )
            state.thread.start()
        if self.ranks == 0:
            self.done.set()
        else:
            self._grant(self.unprimed[0])

    def _rank_main(self, state: RankContext, rounds: CallRounds) -> None:
        def body() -> None:
            planned = rounds.planned(state.rank)
            for number, (call, dispatch) in enumerate(planned, start=1):
                rounds.advance(state, call)
                state.repeat = call
                self._run_dispatch(state, dispatch, number)
            rounds.finish(state)

        self._thread_main(state, body)

    def _run_dispatch(self, state: RankContext, dispatch: Dispatch, number: int) -> None:
        args, kwargs = as_declared(dispatch.function, dispatch.args, dispatch.kwargs)
        arguments = (*args, *kwargs.values())
        domains = frozenset(
            members(value, self.ranks)
            for value in arguments
            if isinstance(value, TensorView) and value.is_window
        )
        name = getattr(dispatch.function, "__name__", "dispatch")
        tags = tags_of(dispatch.function, args, kwargs)
        state.start_dispatch(number, dispatch.site, name, domains, tags)

        def rerun(lane: Callable[[Any], Any]) -> None:
            """The dispatch again, as the lane `lane` makes of the context."""
            with activated(lane(current_context())):
                dispatch.function(*args, **kwargs)

        state.dispatch(lambda: dispatch.function(*args, **kwargs), rerun)
        state.finish_dispatch()

    def _fail(self, error: BaseException) -> None:
        if self.failure is None:
            self.failure = error
        self.running = None
        self.done.set()

    def stop(self) -> None:
        """Unwind every parked rank thread (after the run ended or failed)."""
        for state in list(self.contexts.values()):
            state.abort = True
            if state.baton.locked():
                state.baton.release()
