"""The reference executor's judgement: do a run's host outputs match a golden model?

The co-simulation already executed the program on numpy data under some schedule;
this module reads that run's host tensors and compares them with `racecheck.models`.
It also re-enters the co-simulation for the reference's two runs: a finding's witness
replayed (`replay_witness`), and the fully interleaved run a racy program's golden is
identified from (`Golden`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from racecheck import models
from racecheck.analysis import Hazard
from racecheck.cosim import (
    DefaultPolicy,
    Execution,
    HoldPolicy,
    HostTensorRecord,
    ReplayPolicy,
    RoundRobinPolicy,
    ScheduleDivergence,
    SchedulePolicy,
    Simulator,
    TensorRole,
)
from racecheck.events import AccessMode, Schedule, SourceLocation
from racecheck.findings import OutputDiff
from racecheck.report.reasons import ReasonCode, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class HostIO:
    """The collective's per-rank input and output rows, as the models see them."""

    name: str  # the output tensor's name
    dtype: str
    inputs: np.ndarray  # [P, ...]
    outputs: np.ndarray  # [P, ...]
    in_place: bool  # the output is also the input: N repeats compose the collective N times
    stores: tuple[SourceLocation | None, ...] = ()  # per rank: its last store into the output


def host_io(execution: Execution, output: str | None = None) -> HostIO | None:
    """The collective's data input and its output, if it has both.

    The output is the output-carrying host tensor (Out or InOut) named `output`, by
    default the first. The data input is the input-carrying tensor (In or InOut) that
    best fits it: first one with the output's dtype and per-rank row shape, else the
    first with its dtype, else the first input. So an INT32 length or count passed
    before the data is not taken for the data.
    """
    inputs = [t for t in execution.tensors if t.role in (TensorRole.INPUT, TensorRole.INOUT)]
    sink = next(
        (t for t in _outputs(execution) if output is None or t.name == output),
        None,
    )
    if not inputs or sink is None:
        return None
    source = min(inputs, key=lambda tensor: _misfit(tensor, sink))
    return HostIO(
        name=sink.name,
        dtype=sink.dtype,
        inputs=source.initial,
        outputs=sink.final,
        in_place=source is sink,
        stores=_last_stores(execution, sink.memory),
    )


def _outputs(execution: Execution) -> list[HostTensorRecord]:
    return [t for t in execution.tensors if t.role in (TensorRole.OUTPUT, TensorRole.INOUT)]


def changed_output(replay: Execution, run: Execution) -> str | None:
    """The first output tensor whose final values differ between a witness's `replay` and
    the path's `run`: the one the race makes wrong, whichever the program declares
    first (a shift that then decays its input in place: the shifted output differs, not
    the decayed input). None when none differs."""
    finals = {tensor.name: tensor.final for tensor in _outputs(run)}
    for tensor in _outputs(replay):
        before = finals.get(tensor.name)
        if before is not None and not np.array_equal(before, tensor.final, equal_nan=True):
            return tensor.name
    return None


def _last_stores(execution: Execution, memory: int) -> tuple[SourceLocation | None, ...]:
    """Each rank's last write into the output tensor: where a wrong row was stored."""
    return tuple(
        next(
            (
                event.location
                for event in reversed(events)
                if event.access is not None
                and event.access.memory == memory
                and event.mode is not AccessMode.READ
            ),
            None,
        )
        for events in execution.trace.events
    )


def _misfit(candidate: HostTensorRecord, output: HostTensorRecord) -> int:
    """0: same dtype and row shape as the output; 1: same dtype; 2: neither."""
    if candidate.dtype != output.dtype:
        return 2
    return 0 if candidate.initial.shape[1:] == output.final.shape[1:] else 1


def identify(io: HostIO, *, repeat: int) -> str | None:
    """The model the outputs match; a repeated in-place run matches nothing by name."""
    if repeat != 1 and io.in_place:
        return None
    return models.identify(io.inputs, io.outputs, io.dtype)


def difference(model_name: str, io: HostIO, *, repeat: int) -> OutputDiff | None:
    """Where `io`'s outputs first differ from the golden (None if they match).

    Raises `ModelNotApplicable` when the model has no golden at this P (e.g. P does not
    divide the row, or a user's golden returns the wrong shape)."""
    model = models.parse_model(model_name)
    golden = models.golden_repeated(model, io.inputs, repeat if io.in_place else 1)
    if models.close_enough(golden, io.outputs, io.dtype):
        return None
    where = models.first_difference(golden, io.outputs, io.dtype)
    if where is None:
        return None
    return OutputDiff(
        tensor=io.name,
        rank=where.rank,
        index=where.index,
        got=tuple(float(v) for v in where.got),
        golden=tuple(float(v) for v in where.golden),
        model=model_name,
        store=io.stores[where.rank] if where.rank < len(io.stores) else None,
    )


@dataclass(slots=True)
class Golden:
    """The model one path's outputs are compared with: `--expect`, else the model the
    path's run matches, else the one a fully interleaved run matches (a racy program's
    run may match none). Found when a replay first needs it, once per path."""

    simulator: Simulator
    execution: Execution  # the path's run
    _found: dict[str | None, str | None] = field(default_factory=dict)
    _interleaved: list[Execution] = field(default_factory=list)

    def model(self, output: str | None = None) -> str | None:
        """The model of output tensor `output` (None: the first); `--expect` names the
        first's."""
        if output not in self._found:
            expected = self.simulator.options.expect if output is None else None
            self._found[output] = expected or self._identified(output)
        return self._found[output]

    def _identified(self, output: str | None) -> str | None:
        repeat = self.simulator.options.repeat
        io = host_io(self.execution, output)
        model = identify(io, repeat=repeat) if io is not None else None
        if model is None:
            interleaved = host_io(self._interleaved_run(), output)
            if interleaved is not None:
                model = identify(interleaved, repeat=repeat)
        return model

    def _interleaved_run(self) -> Execution:
        if not self._interleaved:
            stage = reason(ReasonCode.STAGE_INTERLEAVED)
            self._interleaved.append(self.simulator.run(RoundRobinPolicy(), stage=stage))
        return self._interleaved[0]


def replay_witness(simulator: Simulator, hazard: Hazard, schedule: Schedule) -> Execution | None:
    """Run the witness, then keep the event it must precede back as long as possible
    (None: the run left the witness's schedule)."""
    then: SchedulePolicy = DefaultPolicy()
    if hazard.bad_second is not None:
        then = HoldPolicy(hazard.bad_second, then)
    stage = reason(ReasonCode.STAGE_WITNESS_REPLAY, kind=hazard.kind.value)
    try:
        return simulator.run(ReplayPolicy(schedule, then), stage=stage, force_waits=False)
    except ScheduleDivergence:
        return None
