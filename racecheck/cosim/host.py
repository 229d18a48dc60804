"""The host entry's context: window allocation, row views of host tensors, dispatches."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from racecheck.dsl.groups import members
from racecheck.dsl.location import SourceLocation, assigned_name, unsupported, user_location
from racecheck.dsl.memory import MemoryState
from racecheck.dsl.tensors import TensorView, WindowBuffer
from racecheck.errors import ProgramRejected
from racecheck.events import (
    HOST_OWNER,
    OutOfBounds,
)
from racecheck.report.reasons import ReasonCode, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispatch:
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    group_of: TensorView | None = None  # runs only if the rank is in this window's group
    site: SourceLocation  # the host line that dispatches it


class HostCrash(Exception):
    """The host entry indexed a host tensor out of range: the run stops there."""

    def __init__(self, record: OutOfBounds) -> None:
        super().__init__(record.message)
        self.record = record


class HostContext:
    """The host entry's context: window allocation, row views, dispatches."""

    def __init__(self, ranks: int, memory: MemoryState, dims: Mapping[str, int]) -> None:
        self.ranks = ranks
        self.memory = memory
        self.dims = dims
        self.dispatches: list[list[Dispatch]] = [[] for _ in range(ranks)]
        self.row_sliced: dict[int, TensorView] = {}
        self.sliced_rows: dict[int, set[int]] = {}
        self.host_roots: set[int] = set()
        self.notes: list[str] = []
        self.unfollowed_at: list[str] = []  # where it left the model (`Execution.unfollowed`)
        self.calls: list[list[list[Dispatch]]] = []  # per run of the body (`cosim.rounds`)
        self.windows: list[WindowBuffer] = []  # in the order the first run allocated them
        self.handed: int | None = None  # windows handed out again in this run, after the first

    def next_call(self) -> None:
        """The body ran once more (a call of `--per-call`): its dispatches are that
        call's, and the windows it allocates next are the ones it has (persistent)."""
        self.end_call()
        self.handed = 0

    def end_call(self) -> None:
        self.settle_groups()
        self.calls.append(self.dispatches)
        self.dispatches = [[] for _ in range(self.ranks)]

    def alloc_window(self, nbytes: int, name: str = "") -> WindowBuffer:
        """A window named `name`, else after the variable the user's line assigns; on a
        later call, the window the first call allocated at this point."""
        if self.handed is not None:
            return self._handed_again(nbytes)
        if not name:
            name = assigned_name(f"window{len(self.memory.memories)}")
        name = self.memory.fresh_name(name)
        memory = self.memory.add_window(name, nbytes)
        self.windows.append(WindowBuffer(memory=memory.id, nbytes=nbytes, name=name))
        return self.windows[-1]

    def _handed_again(self, nbytes: int) -> WindowBuffer:
        assert self.handed is not None
        number, self.handed = self.handed, self.handed + 1
        if number >= len(self.windows) or self.windows[number].nbytes != nbytes:
            raise unsupported(
                f"a later call of the host entry allocates window {number + 1} of"
                f" {nbytes} bytes, which the first call did not: with --per-call the windows"
                " persist, so racecheck needs every call to allocate the same ones in the"
                " same order"
            )
        return self.windows[number]

    def row_view(self, view: TensorView, row: int) -> TensorView:
        """Row `row` of a host tensor. Out of range, it is an out-of-bounds bug, unless
        the tensor's fixed row count is not P (the program is written for that count)."""
        rows = view.shape[0] if view.shape else 0
        is_root = (
            view.memory in self.host_roots and view.base == 0 and view.nbytes == view.memory_nbytes
        )
        if not 0 <= row < rows:
            if is_root and rows != self.ranks:
                raise ProgramRejected(rows_message(view.name, rows))
            raise HostCrash(
                OutOfBounds(
                    rank=HOST_OWNER,
                    location=user_location(),
                    message=reason(
                        ReasonCode.HOST_ROW_OUTSIDE, row=row, view=repr(view), rows=rows
                    ),
                )
            )
        if is_root:
            self.row_sliced[view.memory] = view
            self.sliced_rows.setdefault(view.memory, set()).add(row)
        return view.row(row)

    def fail_bounds(self, message: str) -> None:
        raise HostCrash(OutOfBounds(rank=HOST_OWNER, location=user_location(), message=message))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def unfollowed(self, reason: str) -> None:
        if reason not in self.unfollowed_at:
            self.unfollowed_at.append(reason)

    def dispatch(
        self,
        rank: int,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        group_of: TensorView | None = None,
    ) -> None:
        if not 0 <= rank < self.ranks:
            raise ProgramRejected(
                reason(ReasonCode.DISPATCH_DEVICE_OUTSIDE, rank=rank, ranks=self.ranks)
            )
        dispatch = Dispatch(
            function=function, args=args, kwargs=kwargs, group_of=group_of, site=user_location()
        )
        self.dispatches[rank].append(dispatch)

    def settle_groups(self) -> None:
        """A host builtin is dispatched to its window's group, which every `device=` site
        of the host body adds to, later ones included (docs/model.md): so it is offered to
        every rank in program order, and kept, once the body has run, on the group's
        members only. Its operands join the group (a signal inherits its data window's)."""
        grouped = [
            (dispatch.group_of, dispatch.args)
            for queue in self.dispatches
            for dispatch in queue
            if dispatch.group_of is not None
        ]
        grew = True
        while grew:
            grew = False
            for window, operands in grouped:
                group = set(members(window, self.ranks))
                for operand in operands:
                    if operand.devices is not None and not group <= operand.devices:
                        operand.devices.update(group)
                        grew = True
        self.dispatches = [
            [
                dispatch
                for dispatch in queue
                if dispatch.group_of is None or rank in members(dispatch.group_of, self.ranks)
            ]
            for rank, queue in enumerate(self.dispatches)
        ]

    def check_row_counts(self) -> None:
        """A host tensor the host indexes by rank (rows 0..P-1, no other) whose row count
        is not P is written for another rank count; one indexed otherwise (by round,
        say) is not."""
        for memory, view in self.row_sliced.items():
            by_rank = self.sliced_rows[memory] == set(range(self.ranks))
            if by_rank and view.shape[0] != self.ranks:
                raise ProgramRejected(rows_message(view.name, view.shape[0]))


def rows_message(name: str, rows: int) -> str:
    return reason(ReasonCode.HOST_ROWS, name=name, rows=rows)
