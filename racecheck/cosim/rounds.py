"""The calls of `--repeat N` as the ranks run them (`racecheck.rounds` says what they mean).

Each call's dispatches are the host entry's: run once when no value changes per call,
or once per call with `--per-call` values, its windows allocated on the first call and
handed out again, in the same order, on the others (persistent windows). With
`--rounds joined`, every rank ends call k with the host's join: it adds 1 to cell k of
every rank's join counter and waits until its own holds P, so every event of call k, on
every rank, happens before any event of call k + 1. The join is ordinary notify and
wait events on racecheck's own memory (`MemoryKind.ROUNDS`), which every engine reads:
on the rank's own sequence, or, when tasks are threads, on a thread of its own between
the rank's calls (`racecheck.cosim.threads`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from racecheck.cosim.host import Dispatch
from racecheck.dsl.dtypes import INT32
from racecheck.dsl.location import UNKNOWN_LOCATION, attributed
from racecheck.dsl.memory import MemoryState
from racecheck.dsl.tensors import TensorView
from racecheck.events import (
    HOST_JOIN,
    HOST_JOIN_WAIT,
    Memory,
    MemoryKind,
    NotifyOp,
    SourceLocation,
    WaitCmp,
)
from racecheck.load import ProgramInstance
from racecheck.rounds import Calls


def host_calls(
    instance: ProgramInstance, arguments: Sequence[Any], repeat: int
) -> Iterator[list[Any]]:
    """The host entry's arguments at each call it runs for: the first call alone when no
    value changes per call (its dispatches then repeat), else every call's."""
    calls = instance.calls
    if not calls.per_call:
        yield list(arguments)
        return
    position = {parameter.name: n for n, parameter in enumerate(instance.parameters)}
    for call in range(1, repeat + 1):
        values = list(arguments)
        for name, value in calls.values(call).items():
            values[position[name]] = value
        yield values


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRounds:
    """Every rank's dispatches of every call, and the host's join between calls."""

    ranks: int
    count: int  # the calls
    calls: tuple[tuple[tuple[Dispatch, ...], ...], ...]  # per call run of the host entry
    joined: bool
    join_memory: int  # -1 without joins

    def planned(self, rank: int) -> list[tuple[int, Dispatch]]:
        """The rank's dispatches over every call, with the call (from 0) of each."""
        return [
            (call, dispatch)
            for call in range(self.count)
            for dispatch in self.calls[min(call, len(self.calls) - 1)][rank]
        ]

    def advance(self, state: Any, call: int) -> None:
        """Move the rank (a `RankContext`) on to call `call`, through the host's join
        after each call it leaves when the rounds are joined."""
        while state.repeat < call:
            if self.joined:
                self._join(state, state.repeat)
            state.repeat += 1

    def finish(self, state: Any) -> None:
        """After the rank's last dispatch: the joins of the calls it has none in."""
        self.advance(state, self.count - 1)

    def _join(self, state: Any, finished: int) -> None:
        site = self._site(state.rank, finished)
        state.host_join(finished, site, functools.partial(self._join_events, finished, site))

    def _join_events(self, finished: int, site: SourceLocation, state: Any) -> None:
        """The join's events on `state`'s sequence: a notify of every rank's cell
        `finished`, then the wait until its own holds P."""
        view = TensorView(
            memory=self.join_memory,
            kind=MemoryKind.WINDOW,
            name="host join",
            base=0,
            shape=(self.count - 1,),
            dtype=INT32,
            memory_nbytes=4 * (self.count - 1),
        )
        with attributed(site):
            for peer in range(self.ranks):
                state.notify(view, peer, [finished], 1, NotifyOp.ATOMIC_ADD, HOST_JOIN)
            state.wait(view, [finished], self.ranks, WaitCmp.GE, HOST_JOIN_WAIT)

    def _site(self, rank: int, call: int) -> SourceLocation:
        """The host line of the rank's last dispatch in `call`, else of any dispatch."""
        own = [d for c, d in self.planned(rank) if c == call]
        every = [d for queue in self.calls[0] for d in queue]
        found = own[-1:] or every[:1]
        return found[0].site if found else UNKNOWN_LOCATION


def call_rounds(
    calls: Sequence[Sequence[Sequence[Dispatch]]],
    repeat: int,
    instance: ProgramInstance,
    memory: MemoryState,
) -> CallRounds:
    """The rounds of the run; the join counters allocated when the rounds are joined."""
    joined = instance.calls.joined and repeat > 1
    join_memory = memory.add_window("host join", 4 * (repeat - 1)).id if joined else -1
    return CallRounds(
        ranks=instance.ranks,
        count=repeat,
        calls=tuple(tuple(tuple(queue) for queue in call) for call in calls),
        joined=joined,
        join_memory=join_memory,
    )


def join_memory(memory: Memory) -> Memory:
    """The join counters' memory, marked as racecheck's own."""
    return Memory(id=memory.id, kind=MemoryKind.ROUNDS, name="host join", nbytes=memory.nbytes)


def joins(calls: Calls, repeat: int) -> int:
    """The host's joins in a run of `repeat` calls: one between two calls when joined."""
    return repeat - 1 if calls.joined and repeat > 1 else 0
