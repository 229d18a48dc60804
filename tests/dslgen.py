"""Random straight-line DSL collectives, as source text, for end-to-end property tests.

A `Protocol` is an abstract program for a fixed rank count P: per rank, a short list of
operations on one data window (`CHUNKS` chunks of `CHUNK` FP32 elements per rank), one
INT32 signal window `[P, SIGNAL_COLS]` and a running tile `acc` (the rank's input row
to begin with), ending with a store into the rank's output row `y[r]`. `render` writes
it as a factory `build(nr)` defining a `@pl.program`, each rank's operations under
`if my_rank == k:`, one operation per source line, each line tagged `# @TAG`. Tags
name operations independently of line numbers and rank labels, so findings of two
related programs (relabelled ranks, an inserted sync edge) can be compared by tag.

Columns `0..SIGNAL_COLS - 2` of the signal window belong to generated notifies and
waits; the last column is kept free for `with_edge`, so an inserted edge's cell is
fresh. Signal rows are rank numbers, so a relabelling maps them with the ranks.

`protocols(ranks, monotone=...)` draws two families half and half. Phased protocols
are disciplined exchanges (stage, notify, push, wait, read, output: pulls and pushes
each guarded by a notify/wait pair on a single-writer cell), correct unless one
mutation drops an operation or swaps two neighbours. Scrambled protocols are random
data operations with notify/wait pairs (mostly the conventional "notify a peer's cell
[me, c], wait on own cell") at random positions, a stray notify or unmatched wait now
and then: bugs of every kind. Monotone protocols use AtomicAdd notifies and Ge waits
only (and AtomicAdd -1 resets of the rank's own cells); the others also use Set
notifies and Eq waits.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from enum import Enum

from hypothesis import strategies as st

CHUNK = 4  # FP32 elements per chunk
CHUNKS = 2  # chunks per rank's data window
SIGNAL_COLS = 3
EDGE_COL = SIGNAL_COLS - 1  # reserved for `with_edge`
MAX_OPS = 7  # per rank, before the output store


class OpKind(Enum):
    STORE = "store"  # own data chunk = acc
    LOAD = "load"  # acc += own data chunk
    REMOTE_LOAD = "remote-load"  # acc += data[peer] chunk
    REMOTE_STORE = "remote-store"  # data[peer] chunk = acc (or += with atomic)
    NOTIFY = "notify"
    WAIT = "wait"
    OUTPUT_ACC = "output-acc"  # y[r] = acc
    OUTPUT_CHUNK = "output-chunk"  # y[r] = own data chunk


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    kind: OpKind
    tag: str
    peer: int = 0
    chunk: int = 0
    atomic: bool = False
    cell: tuple[int, int] = (0, 0)  # signal [row, col]; row is a rank number
    value: int = 1
    set_op: bool = False
    expected: int = 1
    eq: bool = False

    def relabelled(self, perm: tuple[int, ...]) -> Op:
        row, col = self.cell
        return dataclasses.replace(self, peer=perm[self.peer], cell=(perm[row], col))


@dataclass(frozen=True, slots=True, kw_only=True)
class Protocol:
    ranks: int
    bodies: tuple[tuple[Op, ...], ...]  # per rank; the last op is the output store

    @property
    def monotone(self) -> bool:
        return not any(
            op.set_op or op.eq or (op.kind is OpKind.NOTIFY and op.value < 0 and op.peer != rank)
            for rank, body in enumerate(self.bodies)
            for op in body
        )

    def relabelled(self, perm: tuple[int, ...]) -> Protocol:
        """Rank r's operations run on rank perm[r]; peers and signal rows follow."""
        bodies: list[tuple[Op, ...]] = [()] * self.ranks
        for rank, body in enumerate(self.bodies):
            bodies[perm[rank]] = tuple(op.relabelled(perm) for op in body)
        return Protocol(ranks=self.ranks, bodies=tuple(bodies))

    def position(self, tag: str) -> tuple[int, int]:
        """(rank, index) of the operation tagged `tag`."""
        return next(
            (rank, index)
            for rank, body in enumerate(self.bodies)
            for index, op in enumerate(body)
            if op.tag == tag
        )

    def with_edge(self, *, notifier: int, after: int, waiter: int, before: int) -> Protocol:
        """Add a sync edge on a fresh cell: `notifier` notifies after its first `after`
        operations, `waiter` waits for it before its operation number `before`."""
        cell = (notifier, EDGE_COL)
        notify = Op(kind=OpKind.NOTIFY, tag="edge-notify", peer=waiter, cell=cell)
        wait = Op(kind=OpKind.WAIT, tag="edge-wait", cell=cell)
        bodies = [list(body) for body in self.bodies]
        bodies[notifier].insert(after, notify)
        bodies[waiter].insert(before, wait)
        return Protocol(ranks=self.ranks, bodies=tuple(tuple(body) for body in bodies))


# ---------------------------------------------------------------------------- rendering

_HEADER = """\
import pypto.language as pl
import pypto.language.distributed as pld

CHUNK = {chunk}
WIDTH = {width}


def build(nr):
    @pl.program
    class RandomProtocol:
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(
            self,
            x: pl.Tensor[[1, CHUNK], pl.FP32],
            y: pl.Out[pl.Tensor[[1, CHUNK], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, WIDTH], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, {cols}], pl.INT32]],
        ) -> pl.Tensor[[1, CHUNK], pl.FP32]:
            ctx = pld.get_comm_ctx(data)
            my_rank = pld.rank(ctx)
            acc = pl.load(x, [0, 0], [1, CHUNK])
"""

_FOOTER = """\
            return y

        @pl.function(type=pl.FunctionType.Orchestration)
        def per_rank(
            self,
            x: pl.Tensor[[1, CHUNK], pl.FP32],
            y: pl.Out[pl.Tensor[[1, CHUNK], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, WIDTH], pl.FP32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, {cols}], pl.INT32]],
        ) -> pl.Tensor[[1, CHUNK], pl.FP32]:
            return self.kernel(x, y, data, signal)

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def entry(
            self,
            x: pl.Tensor[[nr, 1, CHUNK], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, CHUNK], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, CHUNK], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, WIDTH], dtype=pl.FP32)
            signal_buf = pld.alloc_window_buffer([nr, {cols}], dtype=pl.INT32)
            for r in pl.range(nr):
                data = pld.window(data_buf, [1, WIDTH], dtype=pl.FP32)
                signal = pld.window(signal_buf, [nr, {cols}], dtype=pl.INT32)
                self.per_rank(x[r], y[r], data, signal, device=r)
            return y

    return RandomProtocol
"""


def render(protocol: Protocol) -> str:
    lines = [_HEADER.format(chunk=CHUNK, width=CHUNKS * CHUNK, cols=SIGNAL_COLS)]
    for rank, body in enumerate(protocol.bodies):
        lines.append(f"            if my_rank == {rank}:\n")
        lines.extend(f"                {_statement(op)}  # @{op.tag}\n" for op in body)
    lines.append(_FOOTER.format(cols=SIGNAL_COLS))
    return "".join(lines)


def _statement(op: Op) -> str:
    offsets = f"[0, {op.chunk * CHUNK}]"
    row, col = op.cell
    match op.kind:
        case OpKind.STORE:
            return f"data = pl.store(acc, {offsets}, data)"
        case OpKind.LOAD:
            return f"acc = pl.add(acc, pl.load(data, {offsets}, [1, CHUNK]))"
        case OpKind.REMOTE_LOAD:
            return (
                "acc = pl.add(acc, pld.tile.remote_load("
                f"data, peer={op.peer}, offsets={offsets}, shape=[1, CHUNK]))"
            )
        case OpKind.REMOTE_STORE:
            atomic = "Add" if op.atomic else "None_"
            return (
                f"pld.tile.remote_store(acc, data, peer={op.peer}, offsets={offsets}, "
                f"atomic=pld.AtomicType.{atomic})"
            )
        case OpKind.NOTIFY:
            notify_op = "Set" if op.set_op else "AtomicAdd"
            return (
                f"pld.system.notify(signal, peer={op.peer}, offsets=[{row}, {col}], "
                f"value={op.value}, op=pld.NotifyOp.{notify_op})"
            )
        case OpKind.WAIT:
            cmp = "Eq" if op.eq else "Ge"
            return (
                f"pld.system.wait(signal, offsets=[{row}, {col}], expected={op.expected}, "
                f"cmp=pld.WaitCmp.{cmp})"
            )
        case OpKind.OUTPUT_ACC:
            return "y = pl.store(acc, [0, 0], y)"
        case OpKind.OUTPUT_CHUNK:
            return f"y = pl.store(pl.load(data, {offsets}, [1, CHUNK]), [0, 0], y)"
    raise AssertionError(op.kind)


_TAG = re.compile(r"#\s*@(\S+)\s*$")


def tags_by_line(source: str) -> dict[int, str]:
    """1-based line number → operation tag, for the rendered text."""
    return {
        number: match.group(1)
        for number, line in enumerate(source.splitlines(), start=1)
        if (match := _TAG.search(line))
    }


# ---------------------------------------------------------------------------- strategies


@st.composite
def _data_op(draw: st.DrawFn, ranks: int, tag: str) -> Op:
    kind = draw(
        st.sampled_from([OpKind.STORE, OpKind.LOAD, OpKind.REMOTE_LOAD, OpKind.REMOTE_STORE])
    )
    return Op(
        kind=kind,
        tag=tag,
        peer=draw(st.integers(0, ranks - 1)),
        chunk=draw(st.integers(0, CHUNKS - 1)),
        atomic=kind is OpKind.REMOTE_STORE and draw(st.integers(0, 3)) == 0,
    )


def _staging(draw: st.DrawFn, rank: int) -> list[Op]:
    """Most ranks first store their input into most of their chunks, so that most reads
    have a write that can precede them."""
    return [
        Op(kind=OpKind.STORE, tag=f"r{rank}stage{chunk}", chunk=chunk)
        for chunk in range(CHUNKS)
        if draw(st.integers(0, 3))
    ]


@st.composite
def _output_op(draw: st.DrawFn, tag: str) -> Op:
    if draw(st.booleans()):
        return Op(kind=OpKind.OUTPUT_ACC, tag=tag)
    return Op(kind=OpKind.OUTPUT_CHUNK, tag=tag, chunk=draw(st.integers(0, CHUNKS - 1)))


@dataclass(frozen=True, slots=True, kw_only=True)
class _SyncDraw:
    """How notifies and waits are drawn: monotone or not; `loose` also draws Set values
    other than 1 and thresholds of 2 (credits that may never add up)."""

    monotone: bool
    loose: bool

    def notify(self, draw: st.DrawFn, *, tag: str, peer: int, cell: tuple[int, int]) -> Op:
        set_op = not self.monotone and draw(st.booleans())
        value = draw(st.sampled_from([0, 1, 2])) if set_op and self.loose else 1
        return Op(kind=OpKind.NOTIFY, tag=tag, peer=peer, cell=cell, value=value, set_op=set_op)

    def wait(self, draw: st.DrawFn, *, tag: str, cell: tuple[int, int]) -> Op:
        eq = not self.monotone and draw(st.booleans())
        expected = 2 if self.loose and draw(st.integers(0, 3)) == 0 else 1
        return Op(kind=OpKind.WAIT, tag=tag, cell=cell, expected=expected, eq=eq)


def protocols(ranks: int, *, monotone: bool) -> st.SearchStrategy[Protocol]:
    """Half disciplined exchanges (often correct, sometimes mutated into a classic bug),
    half scrambled ones (mostly buggy, in every way)."""
    return st.one_of(
        _phased_protocols(ranks, monotone=monotone),
        _scrambled_protocols(ranks, monotone=monotone),
    )


PULL_COL, PUSH_COL = 0, 1
STAGED_CHUNK, PUSHED_CHUNK = 0, CHUNKS - 1


@st.composite
def _phased_protocols(draw: st.DrawFn, ranks: int, *, monotone: bool) -> Protocol:
    """Each rank stages chunk 0, then takes part in pulls (the reader waits for the
    owner's notify, then remote_loads its chunk 0) and pushes (the writer remote_stores
    into the peer's chunk 1 and notifies; the peer waits, then loads it), in the order
    stage → notifies → pushes → waits → reads → output; then maybe one mutation."""
    sync = _SyncDraw(monotone=monotone, loose=False)
    phases: dict[str, list[list[Op]]] = {
        name: [[] for _ in range(ranks)] for name in ("notify", "push", "wait", "read")
    }
    for r in range(ranks):
        action = draw(st.sampled_from(["pull", "push", "none"]))
        if action == "none":
            continue
        peer = draw(st.sampled_from([p for p in range(ranks) if p != r]))
        if action == "pull":
            cell = (peer, PULL_COL)
            phases["notify"][peer].append(sync.notify(draw, tag=f"pull{r}n", peer=r, cell=cell))
            phases["wait"][r].append(sync.wait(draw, tag=f"pull{r}w", cell=cell))
            phases["read"][r].append(
                Op(kind=OpKind.REMOTE_LOAD, tag=f"pull{r}l", peer=peer, chunk=STAGED_CHUNK)
            )
        else:
            cell = (r, PUSH_COL)
            phases["push"][r].append(
                Op(
                    kind=OpKind.REMOTE_STORE,
                    tag=f"push{r}s",
                    peer=peer,
                    chunk=PUSHED_CHUNK,
                    atomic=draw(st.booleans()),
                )
            )
            phases["push"][r].append(sync.notify(draw, tag=f"push{r}n", peer=peer, cell=cell))
            phases["wait"][peer].append(sync.wait(draw, tag=f"push{r}w", cell=cell))
            phases["read"][peer].append(Op(kind=OpKind.LOAD, tag=f"push{r}l", chunk=PUSHED_CHUNK))
    bodies = [
        [
            Op(kind=OpKind.STORE, tag=f"r{r}stage", chunk=STAGED_CHUNK),
            *(op for phase in phases.values() for op in phase[r]),
            draw(_output_op(f"r{r}out")),
        ]
        for r in range(ranks)
    ]
    if draw(st.booleans()):
        _mutate(draw, bodies)
    return Protocol(ranks=ranks, bodies=tuple(tuple(body) for body in bodies))


def _mutate(draw: st.DrawFn, bodies: list[list[Op]]) -> None:
    """Drop one operation, or swap two neighbours (a notify before its data, a read
    before its wait)."""
    rank = draw(st.integers(0, len(bodies) - 1))
    body = bodies[rank]
    index = draw(st.integers(0, len(body) - 2)) if len(body) > 1 else None
    if index is None:
        return
    if draw(st.booleans()):
        del body[index]
    else:
        body[index], body[index + 1] = body[index + 1], body[index]


@st.composite
def _scrambled_protocols(draw: st.DrawFn, ranks: int, *, monotone: bool) -> Protocol:
    """Random data operations, random notify/wait pairs at random positions."""
    sync = _SyncDraw(monotone=monotone, loose=True)
    rank = st.integers(0, ranks - 1)
    col = st.integers(0, EDGE_COL - 1)
    bodies: list[list[Op]] = [
        [
            *_staging(draw, r),
            *(draw(_data_op(ranks, f"r{r}d{i}")) for i in range(draw(st.integers(0, 3)))),
        ]
        for r in range(ranks)
    ]

    def insert(r: int, op: Op) -> None:
        if len(bodies[r]) < MAX_OPS:
            bodies[r].insert(draw(st.integers(0, len(bodies[r]))), op)

    for n in range(draw(st.integers(0, 3))):
        notifier, waiter = draw(rank), draw(rank)
        row = notifier if draw(st.integers(0, 3)) else draw(rank)
        cell = (row, draw(col))
        insert(notifier, sync.notify(draw, tag=f"p{n}n", peer=waiter, cell=cell))
        insert(waiter, sync.wait(draw, tag=f"p{n}w", cell=cell))
        waited = _position_of(bodies[waiter], f"p{n}w")
        if monotone and waited is not None and draw(st.integers(0, 3)) == 0:
            # consume the credit, as resetting barriers do: AtomicAdd -1 on the own cell
            reset = Op(kind=OpKind.NOTIFY, tag=f"p{n}r", peer=waiter, cell=cell, value=-1)
            bodies[waiter].insert(waited + 1, reset)
    for n in range(int(draw(st.integers(0, 3)) == 0)):
        r = draw(rank)
        cell = (draw(rank), draw(col))
        if draw(st.booleans()):
            insert(r, sync.notify(draw, tag=f"s{n}n", peer=draw(rank), cell=cell))
        else:
            insert(r, sync.wait(draw, tag=f"s{n}w", cell=cell))
    for r in range(ranks):
        bodies[r].append(draw(_output_op(f"r{r}out")))
    return Protocol(ranks=ranks, bodies=tuple(tuple(body) for body in bodies))


def _position_of(body: list[Op], tag: str) -> int | None:
    """Index of the op tagged `tag`; None if MAX_OPS dropped it."""
    return next((i for i, op in enumerate(body) if op.tag == tag), None)
