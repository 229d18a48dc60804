"""Hand-built traces for engine and analysis tests: a tiny builder and a few protocols."""

from __future__ import annotations

from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Capacity,
    Event,
    EventKind,
    Memory,
    MemoryKind,
    Notify,
    NotifyOp,
    RankEnd,
    Region,
    SignalCell,
    SourceLocation,
    Thread,
    Trace,
    Wait,
    WaitCmp,
    lower_start_edges,
)


class TraceBuilder:
    """`ranks` event sequences; with `threads`, sequence i is thread i of device
    `threads[i].rank` (its waits read that device's cells) and `build` lowers the
    threads' start edges."""

    def __init__(
        self, ranks: int, threads: tuple[Thread, ...] = (), capacities: tuple[Capacity, ...] = ()
    ) -> None:
        self.ranks = ranks
        self.threads = threads
        self.capacities = capacities
        self.memories: list[Memory] = []
        self.events: list[list[Event]] = [[] for _ in range(ranks)]

    def window(self, name: str, nbytes: int) -> int:
        return self._memory(name, nbytes, MemoryKind.WINDOW)

    def host(self, name: str, nbytes: int) -> int:
        return self._memory(name, nbytes, MemoryKind.HOST)

    def _memory(self, name: str, nbytes: int, kind: MemoryKind) -> int:
        self.memories.append(Memory(id=len(self.memories), kind=kind, name=name, nbytes=nbytes))
        return len(self.memories) - 1

    def _add(self, rank: int, line: int, **fields) -> None:
        location = SourceLocation(file="proto.py", line=line, text=f"line {line}")
        index = len(self.events[rank])
        self.events[rank].append(Event(rank=rank, index=index, location=location, **fields))

    def _region(self, memory: int, owner: int, start: int, end: int) -> Region:
        return Region(memory=memory, owner=owner, ranges=((start, end),))

    def store(self, rank: int, memory: int, owner: int, start: int, end: int, line: int) -> None:
        self._add(
            rank,
            line,
            kind=EventKind.STORE,
            access=self._region(memory, owner, start, end),
            mode=AccessMode.WRITE,
        )

    def load(self, rank: int, memory: int, owner: int, start: int, end: int, line: int) -> None:
        self._add(
            rank,
            line,
            kind=EventKind.LOAD,
            access=self._region(memory, owner, start, end),
            mode=AccessMode.READ,
        )

    def _cell(self, memory: int, owner: int, offset: int) -> SignalCell:
        return SignalCell(memory=memory, owner=owner, offset=offset, index=(offset // 4, 0))

    def notify(
        self,
        rank: int,
        memory: int,
        peer: int,
        offset: int,
        line: int,
        *,
        value: int = 1,
        op: NotifyOp = NotifyOp.ATOMIC_ADD,
    ) -> None:
        cell = self._cell(memory, peer, offset)
        self._add(
            rank,
            line,
            kind=EventKind.NOTIFY,
            access=self._region(memory, peer, offset, offset + 4),
            mode=AccessMode.ATOMIC,
            notify=Notify(cell=cell, op=op, value=value),
        )

    def wait(
        self,
        rank: int,
        memory: int,
        offset: int,
        line: int,
        *,
        expected: int = 1,
        cmp: WaitCmp = WaitCmp.GE,
    ) -> None:
        device = self.threads[rank].rank if self.threads else rank
        cell = self._cell(memory, device, offset)
        self._add(
            rank,
            line,
            kind=EventKind.WAIT,
            access=self._region(memory, device, offset, offset + 4),
            mode=AccessMode.ATOMIC,
            wait=Wait(cell=cell, cmp=cmp, expected=expected),
        )

    def build(self) -> Trace:
        at = SourceLocation(file="proto.py", line=1, text="tasks")
        events, memories = lower_start_edges(
            self.threads, self.events, tuple(self.memories), at, self.capacities
        )
        return Trace(
            ranks=self.ranks,
            events=events if self.threads else tuple(tuple(seq) for seq in self.events),
            memories=memories if self.threads else tuple(self.memories),
            ends=tuple(RankEnd.FINISHED for _ in range(self.ranks)),
            threads=self.threads,
            capacities=self.capacities,
        )


LINE_STORE, LINE_NOTIFY, LINE_WAIT, LINE_LOCAL, LINE_REMOTE, LINE_OUT = 10, 20, 30, 40, 50, 60


def mesh_allreduce(ranks: int, *, barrier: bool = True, size: int = 256) -> Trace:
    """The tutorial's mesh all-reduce: stage, barrier, read every peer, stage out."""
    builder = TraceBuilder(ranks)
    data = builder.window("data_buf", size)
    signal = builder.window("signal_buf", 4 * ranks)
    out = builder.host("y", size * ranks)
    for me in range(ranks):
        builder.store(me, data, me, 0, size, LINE_STORE)
        if barrier:
            for peer in range(ranks):
                if peer != me:
                    builder.notify(me, signal, peer, 4 * me, LINE_NOTIFY)
            for src in range(ranks):
                if src != me:
                    builder.wait(me, signal, 4 * src, LINE_WAIT)
        builder.load(me, data, me, 0, size, LINE_LOCAL)
        for peer in range(ranks):
            if peer != me:
                builder.load(me, data, peer, 0, size, LINE_REMOTE)
        builder.store(me, out, HOST_OWNER, me * size, (me + 1) * size, LINE_OUT)
    return builder.build()
