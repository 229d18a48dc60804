"""The golden the file hands to its own harness (`run_jit(..., golden_fn=golden_x)`),
run on the inputs the co-simulated run started from (`racecheck.file_harness`), its
outputs compared with the run's at the harness call's `rtol`/`atol`.

Its answer is a note, not a verdict: racecheck's tile math approximates the hardware's
(bfloat16 and quantised paths round differently), so a difference says where to look
rather than that the collective is wrong.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from racecheck.cosim import Execution, TensorRole
from racecheck.file_harness import FileInputs, as_numpy, torch_installed
from racecheck.load import ProgramInstance
from racecheck.report.reasons import ReasonCode, reason

GOLDEN_BYTES = 2 << 30
"""The most input bytes the file's golden is run on: it takes every tensor materialised
(a whole forward's weights are tens of GiB, which the run itself never builds)."""


def file_golden_notes(instance: ProgramInstance, execution: Execution) -> tuple[str, ...]:
    """Whether the run started from the file's own inputs, and what its golden says."""
    given = instance.given
    if instance.harness_stopped:
        why = instance.harness_stopped
        return (reason(ReasonCode.FILE_INPUTS_NOT_REACHED, entry=instance.name, why=why),)
    if given is None:
        return ()
    where = f"{instance.file}:{given.line}"
    used = reason(ReasonCode.FILE_INPUTS_USED, where=where)
    if not torch_installed():
        used = reason(ReasonCode.FILE_INPUTS_USED_WITHOUT_TORCH, where=where)
    if given.golden is None or instance.inputs:
        return (used,)  # a path with chosen input elements runs inputs the file never states
    return (used, *_golden_notes(given, execution))


def _golden_notes(given: FileInputs, execution: Execution) -> tuple[str, ...]:
    assert given.golden is not None
    name = getattr(given.golden, "__name__", "golden_fn")
    records = {record.name: record for record in execution.tensors}
    needed = sum(
        records[s.name].initial.nbytes for s in given.tensors.values() if s.name in records
    )
    if needed > GOLDEN_BYTES:
        gib, limit = f"{needed / (1 << 30):.1f}", GOLDEN_BYTES >> 30
        return (reason(ReasonCode.FILE_GOLDEN_TOO_LARGE, name=name, gib=gib, limit=limit),)
    scratch: dict[str, Any] = dict(given.scalars)
    for spec in given.tensors.values():
        record = records.get(spec.name)
        if record is None:
            return (reason(ReasonCode.FILE_GOLDEN_NO_PARAMETER, name=name, tensor=spec.name),)
        if tuple(record.initial.shape) != spec.shape:
            shape = str(list(record.initial.shape))
            stated = str(list(spec.shape))
            why = reason(
                ReasonCode.FILE_GOLDEN_SHAPE,
                name=name,
                tensor=spec.name,
                stated=stated,
                shape=shape,
            )
            return (why,)
        values = record.initial if record.role is not TensorRole.OUTPUT else np.zeros(spec.shape)
        scratch[spec.name] = _as_spec_type(np.array(values), spec.dtype)
    try:
        given.golden(scratch)
    except Exception as error:  # noqa: BLE001 - the file's own golden: its failure is a note
        if not torch_installed():  # a torch golden handed numpy arrays fails anywhere
            return (reason(ReasonCode.FILE_GOLDEN_NEEDS_TORCH, name=name),)
        raised = type(error).__name__
        return (reason(ReasonCode.FILE_GOLDEN_RAISED, name=name, error=raised, message=str(error)),)
    return tuple(_compared(name, given.rtol, given.atol, scratch, records, given.tensors))


def _as_spec_type(values: np.ndarray, dtype: Any) -> Any:
    """The values as the golden expects them: a torch tensor of the spec's torch dtype,
    else the numpy array (a file whose specs state numpy dtypes)."""
    if type(dtype).__module__ != "torch" or not torch_installed():
        return values
    import torch

    return torch.from_numpy(values).to(dtype)


def _compared(
    name: str,
    rtol: float,
    atol: float,
    scratch: dict[str, Any],
    records: dict[str, Any],
    specs: dict[str, Any],
) -> list[str]:
    notes: list[str] = []
    for spec in specs.values():
        if not spec.is_output:
            continue
        expected = as_numpy(scratch[spec.name]).astype(np.float64)
        got = np.asarray(records[spec.name].final, dtype=np.float64)
        if expected.shape != got.shape:
            notes.append(reason(ReasonCode.FILE_GOLDEN_OTHER_SHAPE, name=name, tensor=spec.name))
            continue
        close = np.isclose(got, expected, rtol=rtol, atol=atol, equal_nan=True)
        if close.all():
            notes.append(
                reason(
                    ReasonCode.FILE_GOLDEN_MATCHES,
                    tensor=spec.name,
                    name=name,
                    rtol=str(rtol),
                    atol=str(atol),
                )
            )
            continue
        index = tuple(int(i) for i in np.argwhere(~close)[0])
        notes.append(
            reason(
                ReasonCode.FILE_GOLDEN_DIFFERS,
                tensor=spec.name,
                name=name,
                index=str(list(index)),
                got=f"{got[index]:.6g}",
                golden=f"{expected[index]:.6g}",
                outside=int((~close).sum()),
                size=int(close.size),
                rtol=str(rtol),
                atol=str(atol),
            )
        )
    return notes
