"""Comparing outputs with a golden: dtype-aware tolerance, layouts, and identification.

Outputs are compared per rank in row-major order, whatever the host tensor's shape.
Floating results pass when every element is within `rtol * max(1, max|golden|)` plus
`rtol * |golden|` of the golden (the absolute part keeps sums that cancel to ~0 from
failing); integers must be exact. A golden row of M/P elements (reduce_scatter) also
accepts a full-length output row that holds it in place, as block r of row r; the other
blocks of such a row are not part of the result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from racecheck.report.reasons import ReasonCode, reason

from .catalog import Model, ModelNotApplicable, candidates

_FLOAT_TOLERANCE = {
    "FP64": 1e-12,
    "FP32": 1e-5,
    "FP16": 2e-2,
    "BF16": 2e-2,
}
_EXACT = {"INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "INDEX", "BOOL"}
_ALIASES = {"FLOAT64": "FP64", "FLOAT32": "FP32", "FLOAT16": "FP16", "BFLOAT16": "BF16"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    rank: int
    index: tuple[int, ...]  # in the output row's own shape
    got: tuple[float, ...]  # up to four output elements from there
    golden: tuple[float, ...]


def tolerance(dtype: str) -> float:
    """Relative tolerance for a DSL dtype name (`FP32`, `pl.FP16`, `float32`...); 0 = exact."""
    name = dtype.upper().removeprefix("PL.").removeprefix("DATATYPE.")
    name = _ALIASES.get(name, name)
    if name in _FLOAT_TOLERANCE:
        return _FLOAT_TOLERANCE[name]
    if name in _EXACT:
        return 0.0
    raise ValueError(
        reason(
            ReasonCode.GOLDEN_UNKNOWN_DTYPE,
            dtype=repr(dtype),
            known=str(sorted(_FLOAT_TOLERANCE) + sorted(_EXACT)),
        )
    )


def _aligned(golden: np.ndarray, outputs: np.ndarray) -> np.ndarray | None:
    """The output elements that correspond to `golden` [P, M], or None if none do."""
    ranks, width = golden.shape
    if len(outputs) != ranks:
        return None
    out = np.asarray(outputs).reshape(ranks, -1)
    if out.shape[1] == width:
        return out
    if out.shape[1] == width * ranks:
        return np.stack([out[rank, rank * width : (rank + 1) * width] for rank in range(ranks)])
    return None


def _offset(golden: np.ndarray, outputs: np.ndarray, rank: int) -> int:
    """Where row `rank` of `golden` starts in the flattened output row."""
    width = golden.shape[1]
    return 0 if np.asarray(outputs).reshape(len(outputs), -1).shape[1] == width else rank * width


def _mismatches(golden: np.ndarray, got: np.ndarray, dtype: str) -> np.ndarray:
    rtol = tolerance(dtype)
    if rtol == 0.0:
        return got != golden
    want = golden.astype(np.float64)
    have = got.astype(np.float64)
    scale = max(1.0, float(np.nanmax(np.abs(want), initial=0.0)))
    close = np.isclose(have, want, rtol=rtol, atol=rtol * scale, equal_nan=True)
    return ~close


def close_enough(golden: np.ndarray | None, outputs: np.ndarray, dtype: str) -> bool:
    """Do the outputs match the golden (None, the `none` model's golden, matches anything)?"""
    if golden is None:
        return True
    got = _aligned(golden, outputs)
    return got is not None and not _mismatches(golden, got, dtype).any()


def first_difference(
    golden: np.ndarray | None, outputs: np.ndarray, dtype: str
) -> Difference | None:
    """The first rank and element where the outputs leave the golden, or None if they match."""
    if golden is None:
        return None
    outputs = np.asarray(outputs)
    row_shape = outputs.shape[1:]
    flat = outputs.reshape(len(outputs), -1)
    got = _aligned(golden, outputs)
    if got is None:  # incomparable shapes: show both rows from their start
        return Difference(
            rank=0,
            index=tuple(0 for _ in row_shape),
            got=_head(flat[0], 0) if len(flat) else (),
            golden=_head(golden[0], 0) if len(golden) else (),
        )
    bad = _mismatches(golden, got, dtype)
    if not bad.any():
        return None
    rank, column = (int(i) for i in np.argwhere(bad)[0])
    start = _offset(golden, outputs, rank) + column
    index = tuple(int(i) for i in np.unravel_index(start, row_shape)) if row_shape else ()
    return Difference(
        rank=rank, index=index, got=_head(flat[rank], start), golden=_head(golden[rank], column)
    )


def _head(row: np.ndarray, start: int) -> tuple[float, ...]:
    return tuple(float(value) for value in row[start : start + 4])


def golden_repeated(model: Model, inputs: np.ndarray, times: int) -> np.ndarray | None:
    """The golden of an in-place (InOut) collective run `times` times back to back.

    Each run's outputs are the next run's inputs, so this is only meaningful when the
    program reads and writes the same host tensor; with distinct input and output
    tensors, every run recomputes the same outputs and the golden is `times=1`'s.
    """
    if times < 1:
        raise ValueError(reason(ReasonCode.GOLDEN_TIMES, times=times))
    current = np.asarray(inputs)
    golden = model.golden(current)
    for _ in range(times - 1):
        if golden is None:
            return None
        if golden.size != current.size:
            raise ModelNotApplicable(reason(ReasonCode.GOLDEN_CANNOT_REPEAT, model=model.name))
        current = golden.reshape(current.shape)
        golden = model.golden(current)
    return golden


def matches(
    model: Model, inputs: np.ndarray, outputs: np.ndarray, dtype: str, times: int = 1
) -> bool:
    """Do the outputs match the model's golden? A model that cannot apply does not match."""
    try:
        golden = golden_repeated(model, inputs, times)
    except ModelNotApplicable:
        return False
    return close_enough(golden, outputs, dtype)


def identify(inputs: np.ndarray, outputs: np.ndarray, dtype: str) -> str | None:
    """The first named model (most specific first, never `none`) the outputs match."""
    for model in candidates(len(inputs)):
        if matches(model, inputs, outputs, dtype):
            return model.name
    return None
