"""The contract every engine keeps: ordering questions over all executions of a trace.

Execution semantics (docs/model.md §1), shared by every engine and by the conformance suite:

* State: each rank's position (how many of its events it has executed) and the value
  of every *signal cell* (a cell that some NOTIFY or WAIT of the trace targets),
  initially 0.
* The next event of a rank is *enabled* unless it is a WAIT whose condition
  (`cmp.holds(value(cell), expected)`; Ge(uint32) compares as uint32) is false.
  Executing an enabled event moves the rank one step and applies its effect on every
  signal cell whose bytes it writes (`racecheck.events.cell_effect`): Set assigns, Add
  adds; cells are int32 and wrap. Nothing else changes cell values. An event with an
  opaque effect on a cell has no exact model: every engine refuses such a trace.
* An *execution* is any sequence of enabled steps from the initial state; a prefix of
  an execution is an execution.

The questions:

* `can_precede(first, second)`: does some execution contain `first` but not (yet)
  `second`? Asked for events of different ranks only.
* `witness(first, second)`: such an execution, ending with `first`.
* `can_run(event)`: does some execution contain `event`?
* `stuck()`: an execution after which no rank can move again while some rank has not
  finished (every unfinished rank sits at a disabled WAIT that nothing can enable).

A race, a stale read and a deadlock are all defined from these answers (see
`racecheck.analysis`), so two engines that answer alike report alike.
"""

from __future__ import annotations

from typing import Protocol

from racecheck.engines.skeleton import SyncSkeleton
from racecheck.events import EventRef, Schedule, Stuck


class OrderOracle(Protocol):
    def can_precede(self, first: EventRef, second: EventRef) -> bool:
        """True iff some execution has executed `first` while `second` has not executed."""
        ...

    def witness(self, first: EventRef, second: EventRef) -> Schedule:
        """An execution ending with `first` that does not contain `second`.

        Only called when `can_precede(first, second)` is true.
        """
        ...

    def can_run(self, event: EventRef) -> bool:
        """True iff some execution has executed `event`."""
        ...

    def stuck(self) -> Stuck | None:
        """A reachable state where some rank waits forever, or None if there is none."""
        ...


class Engine(Protocol):
    @property
    def name(self) -> str: ...

    def unsupported(self, skeleton: SyncSkeleton) -> str | None:
        """None if this engine decides the trace exactly, else why it cannot."""
        ...

    def order(self, skeleton: SyncSkeleton, *, deadline: float) -> OrderOracle:
        """Prepare the oracle. Raises EngineUnknown (`Overtime`) past `deadline`, a
        `racecheck.clock.now()` value: `--timeout`."""
        ...
