"""The reference executor's judgement: do a run's host outputs match a golden model?

The co-simulation already executed the program on numpy data under some schedule;
this module reads that run's host tensors and compares them with `racecheck.models`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from racecheck import models
from racecheck.cosim import Execution, HostTensorRecord, TensorRole
from racecheck.events import AccessMode, SourceLocation
from racecheck.findings import OutputDiff


@dataclass(frozen=True, slots=True, kw_only=True)
class HostIO:
    """The collective's per-rank input and output rows, as the models see them."""

    name: str  # the output tensor's name
    dtype: str
    inputs: np.ndarray  # [P, ...]
    outputs: np.ndarray  # [P, ...]
    in_place: bool  # the output is also the input: N repeats compose the collective N times
    stores: tuple[SourceLocation | None, ...] = ()  # per rank: its last store into the output


def host_io(execution: Execution) -> HostIO | None:
    """The collective's data input and its output, if it has both.

    The output is the first output-carrying host tensor (Out or InOut). The data input
    is the input-carrying tensor (In or InOut) that best fits it: first one with the
    output's dtype and per-rank row shape, else the first with its dtype, else the first
    input. So an INT32 length or count passed before the data is not taken for the data.
    """
    inputs = [t for t in execution.tensors if t.role in (TensorRole.INPUT, TensorRole.INOUT)]
    sink = next(
        (t for t in execution.tensors if t.role in (TensorRole.OUTPUT, TensorRole.INOUT)), None
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
