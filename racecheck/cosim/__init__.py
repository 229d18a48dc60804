"""Co-simulation: run a program instance's ranks with real values and record its trace.

Decides nothing about correctness; it produces one execution. The host entry runs
once (allocations, the dispatch loop); each rank then runs its dispatched functions
one after another on its own thread, in program order (with tasks as threads, each
dispatch's tasks take the rank's dispatch lock: `racecheck.cosim.threads`). Exactly
one thread runs at a time: every memory or signal operation is a scheduling point,
where the rank parks with its pending event and a `SchedulePolicy` picks which
enabled rank executes next (a WAIT whose condition is false is not enabled). Values
are real bytes, so control flow that depends on memory follows this schedule; such
loads are listed as control reads.
A window dispatched to only some devices forms a smaller communication group, whose
rank numbering the DSL maps to world ranks (`racecheck.dsl.groups`).

When no rank can move but some wait: with `force_waits` the lowest blocked wait is
forced past (tracing keeps going, so traces are complete), else the run stops and
the blocked waits are reported (replaying a deadlock witness).

Modules: `policies` (who runs next), `host` (the host entry's context), `inputs`
(the host tensors a run starts from), `rank` (a rank's context), `scheduler` (the
baton passed between rank threads), `classify` (what user code raised), `execution`
(the result), `simulate` (one run), `simulator` (the way in: a run under the
user's options).
"""

from racecheck.cosim.execution import Execution, HostTensorRecord, TensorRole
from racecheck.cosim.policies import (
    DefaultPolicy,
    HoldPolicy,
    RandomPolicy,
    ReplayPolicy,
    RoundRobinPolicy,
    ScheduleDivergence,
    SchedulePolicy,
)
from racecheck.cosim.simulate import simulate
from racecheck.cosim.simulator import Simulator, unchecked_run

__all__ = [
    "DefaultPolicy",
    "Execution",
    "HoldPolicy",
    "HostTensorRecord",
    "RandomPolicy",
    "ReplayPolicy",
    "RoundRobinPolicy",
    "ScheduleDivergence",
    "SchedulePolicy",
    "Simulator",
    "TensorRole",
    "simulate",
    "unchecked_run",
]
