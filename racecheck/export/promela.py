"""A trace as a Promela model, so that SPIN decides its properties independently.

The model follows the execution semantics of `racecheck.engines.base` literally:

* One `active proctype` per thread (`thread_<n>`, its rank and name in a comment; in
  a trace whose every rank is one thread, `rank_<n>`) runs its events in program
  order; each event is one atomic step. Start edges and units are the waits and notifies that
  `racecheck.events.lower_start_edges` made; a wait that takes a unit adds to its cell
  in the step its guard passes. Signal cells (cells some NOTIFY or WAIT targets; identity
  (memory, owner, byte offset)) are global `int`s, initially 0. A WAIT is its
  condition as a blocking guard (Ge `>=`, Eq `==`, unsigned Ge on the uint32 reading);
  a NOTIFY adds (AtomicAdd) or assigns (Set); a STORE or ATOMIC_ADD that covers a
  signal cell assigns it the int32 of the bytes it wrote, or adds its int32 element
  there (this module decodes the recorded bytes with its own code). A write that
  covers part of a cell, or adds non-int32 elements to it, cannot be exported.
* Deadlock is SPIN's invalid end state: a state with no executable statement in which
  some rank has not reached the end of its proctype. Finished ranks have terminated,
  which SPIN counts as a valid end state; a rank blocked at a WAIT is not in one.
* Each ordering question ("can `first` run while `second` has not?", or without
  `second` "can `first` run?", see `racecheck.export.properties`) is a *marker*: a
  statement labelled `q_<n>` on a line of its own, inside the atomic step of `first`,
  guarded by "`second` has not run" (by `true` without `second`). It is reachable iff
  the answer is yes. Whether `second` has run is read from its rank's
  `done_<rank>` counter, which the atomic steps of question targets (only those) set
  to their position + 1.
* Data events that no question mentions and that change no signal cell are left out:
  they are always enabled and change nothing any guard reads.

Run by hand: `spin -a -o3 model.pml && gcc -DSAFETY -DNOREDUCE -o pan pan.c &&
./pan -c0`; the markers SPIN lists as "unreached" are the questions answered no.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from racecheck.errors import UsageError
from racecheck.events import (
    Event,
    EventKind,
    EventRef,
    NotifyOp,
    SignalCell,
    Trace,
    WaitCmp,
    WriteOp,
)
from racecheck.export.properties import Question, questions
from racecheck.report.reasons import ReasonCode, reason

CellKey = tuple[int, int, int]  # (memory, owner, byte offset)
INDENT = "    "


@dataclass(frozen=True, slots=True, kw_only=True)
class PromelaModel:
    text: str
    markers: Mapping[int, Question]  # line number (1-based) of each question's marker
    steps: tuple[int, ...]  # atomic steps of each rank's proctype


def to_promela(trace: Trace) -> str:
    """The model of `trace` with a marker for every race and stale-read question."""
    return write_model(trace, questions(trace)).text


def write_model(trace: Trace, asked: tuple[Question, ...]) -> PromelaModel:
    """The model of `trace` with one marker per question of `asked` (ordering questions
    of different ranks only), and the line of each marker."""
    cells = _signal_cells(trace)
    asked_after: dict[tuple[int, int], list[Question]] = defaultdict(list)
    for question in asked:
        asked_after[(question.first.rank, question.first.index)].append(question)
    targets = {(q.second.rank, q.second.index) for q in asked if q.second is not None}
    writer = _Writer()
    _header(writer, trace, len(asked))
    _declarations(writer, trace, cells, targets)
    markers: dict[int, Question] = {}
    steps_per_rank = []
    for rank, rank_events in enumerate(trace.events):
        writer.line(_proctype(trace, rank))
        steps = 0
        for event in rank_events:
            spot = (event.rank, event.index)
            effects = _effects(event, cells)
            if effects is None and spot not in targets and spot not in asked_after:
                continue
            _step(writer, trace, event, effects or [], spot in targets, asked_after[spot], markers)
            steps += 1
        if steps == 0:
            writer.line(f"{INDENT}skip")
        writer.line("}")
        writer.line("")
        steps_per_rank.append(steps)
    return PromelaModel(text=writer.text(), markers=markers, steps=tuple(steps_per_rank))


def _proctype(trace: Trace, number: int) -> str:
    """`active proctype rank_1() {` in a trace whose every rank is one thread, else
    `active proctype thread_4() { /* rank 1, task read_step */` (a rank's own thread,
    of no task: `/* rank 1 */`)."""
    thread = trace.threads[number]
    if len(trace.threads) == trace.devices:
        return f"active proctype rank_{number}() {{"
    return f"active proctype thread_{number}() {{ {_comment(thread.describe())}"


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def line(self, text: str) -> int:
        self.lines.append(text)
        return len(self.lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _signal_cells(trace: Trace) -> dict[CellKey, tuple[int, SignalCell]]:
    """Each signal cell with its number in the model, in first-seen order."""
    cells: dict[CellKey, tuple[int, SignalCell]] = {}
    for rank_events in trace.events:
        for event in rank_events:
            sync = event.notify or event.wait
            if sync is not None:
                key = (sync.cell.memory, sync.cell.owner, sync.cell.offset)
                cells.setdefault(key, (len(cells), sync.cell))
    return cells


def _comment(text: str) -> str:
    """A one-line comment: source text may span lines, and marker lines are counted."""
    return "/* " + " ".join(text.split()).replace("*/", "* /") + " */"


def _header(writer: _Writer, trace: Trace, asked: int) -> None:
    writer.line(_comment(reason(ReasonCode.PROMELA_MODEL, ranks=trace.ranks, events=trace.size)))
    writer.line(_comment(reason(ReasonCode.PROMELA_QUESTIONS, asked=asked)))
    writer.line(_comment(reason(ReasonCode.PROMELA_DEADLOCK)))
    writer.line("")


def _declarations(
    writer: _Writer,
    trace: Trace,
    cells: dict[CellKey, tuple[int, SignalCell]],
    targets: set[tuple[int, int]],
) -> None:
    for number, cell in cells.values():
        memory = trace.memory(cell.memory)
        index = ", ".join(str(i) for i in cell.index)
        where = reason(
            ReasonCode.PROMELA_CELL,
            memory=memory.name,
            owner=cell.owner,
            index=index,
            offset=cell.offset,
        )
        writer.line(f"int cell_{number} = 0; {_comment(where)}")
    for rank in sorted({rank for rank, _ in targets}):
        writer.line(f"{_counter_type(len(trace.events[rank]))} done_{rank} = 0;")
    writer.line("")


def _counter_type(limit: int) -> str:
    if limit <= 255:
        return "byte"
    return "short" if limit <= 32767 else "int"


def _effects(event: Event, cells: dict[CellKey, tuple[int, SignalCell]]) -> list[str] | None:
    """The statements that give `event` its semantics; None for an event that has none."""
    if event.wait is not None:
        wait = event.wait
        number, _ = cells[(wait.cell.memory, wait.cell.owner, wait.cell.offset)]
        guard = _guard(f"cell_{number}", wait.cmp, wait.expected)
        if not wait.take:
            return [guard]
        return [guard, f"cell_{number} = cell_{number} + {wait.take}"]  # a unit taken
    if event.notify is not None:
        notify = event.notify
        number, _ = cells[(notify.cell.memory, notify.cell.owner, notify.cell.offset)]
        if notify.op is NotifyOp.ATOMIC_ADD:
            return [f"cell_{number} = cell_{number} + {notify.value}"]
        return [f"cell_{number} = {notify.value}"]
    if event.kind in (EventKind.STORE, EventKind.ATOMIC_ADD) and event.access is not None:
        assigned = [
            statement
            for key, (number, _) in cells.items()
            if (statement := _write_statement(event, key, f"cell_{number}")) is not None
        ]
        return assigned or None
    return None


def _guard(cell: str, cmp: WaitCmp, expected: int) -> str:
    if cmp is WaitCmp.GE:
        return f"{cell} >= {expected}"
    if cmp is WaitCmp.EQ:
        return f"{cell} == {expected}"
    threshold = expected % 2**32  # uint32: negative int32 cells read as 2^31 and above
    if threshold < 2**31:
        return f"({cell} < 0 || {cell} >= {threshold})"
    return f"({cell} < 0 && {cell} >= {threshold - 2**32})"


def _write_statement(event: Event, key: CellKey, cell: str) -> str | None:
    """The statement a STORE or ATOMIC_ADD makes on `cell`, from its recorded bytes."""
    region, written = event.access, event.written
    assert region is not None
    memory, owner, offset = key
    if (region.memory, region.owner) != (memory, owner):
        return None
    before = 0
    for start, end in region.ranges:
        if start < offset + 4 and offset < end:
            exact = written is not None and written.op is not WriteOp.INEXACT
            if not exact or not (start <= offset and offset + 4 <= end):
                raise UsageError(
                    reason(ReasonCode.PROMELA_INEXPRESSIBLE, where=str(event.location)),
                    file=event.location.file,
                    line=event.location.line,
                )
            assert written is not None
            at = before + offset - start
            value = int.from_bytes(written.data[at : at + 4], sys.byteorder, signed=True)
            return (
                f"{cell} = {cell} + {value}" if written.op is WriteOp.ADD else f"{cell} = {value}"
            )
        before += end - start
    return None


def _step(
    writer: _Writer,
    trace: Trace,
    event: Event,
    effects: list[str],
    is_target: bool,
    asked: list[Question],
    markers: dict[int, Question],
) -> None:
    location = event.location
    writer.line(
        INDENT + _comment(f"e{event.index}: {event.kind.value} {location}: {location.text}")
    )
    statements = list(effects)
    if is_target:
        statements.append(f"done_{event.rank} = {event.index + 1}")
    writer.line(f"{INDENT}atomic {{")
    body = INDENT * 2
    for n, statement in enumerate(statements):
        last = n == len(statements) - 1 and not asked
        writer.line(f"{body}{statement}{'' if last else ';'}")
    for n, question in enumerate(asked):
        second = question.second
        guard = "true" if second is None else f"done_{second.rank} <= {second.index}"
        writer.line(f"{body}if")
        writer.line(f"{body}:: {guard} ->")
        number = len(markers)
        line = writer.line(
            f'q_{number}: {body}printf("q_{number}\\n") ' + _comment(_question(event, second))
        )
        markers[line] = question
        writer.line(f"{body}:: else -> skip")
        writer.line(f"{body}fi{'' if n == len(asked) - 1 else ';'}")
    writer.line(f"{INDENT}}};")


def _question(event: Event, second: EventRef | None) -> str:
    """A marker's question, in the model's own comment."""
    if second is None:
        return reason(ReasonCode.PROMELA_CAN_RUN, event=event.index)
    return reason(
        ReasonCode.PROMELA_CAN_RUN_BEFORE, event=event.index, rank=second.rank, other=second.index
    )
