"""The golden models by name: what each collective must leave in every rank's output row.

A model maps the inputs `[P, ...]` (row r is rank r's input, compared flattened in
row-major order) to the expected outputs, one flattened row per rank. Block k of a row
is its k-th of P equal parts. Names are part of the CLI contract (`--expect`):

* `allreduce-sum|max|min|prod`: every row is the element-wise reduction of all rows;
* `broadcast-root<R>`: every row is row R;
* `allgather`: every row is the rank-ordered concatenation of all rows (P times longer);
* `reduce_scatter-sum`: row r is the sum over ranks of block r (one block long; the
  comparison also accepts a full-length output row holding that block in place, see
  `racecheck.models.compare`);
* `all_to_all`: block s of row r is block r of row s;
* `shift+<K>` / `shift-<K>`: row r is row (r ± K) mod P;
* `barrier`: no data effect, the output is the input unchanged (an InOut tensor keeps
  its initial value);
* `none`: no functional claim; it has no golden and everything matches it;
* `file.py:function` or `module:function`: a user's function `(inputs) -> outputs`.

A model that cannot apply to the given inputs (P not dividing the row, a root outside
[0, P)) raises `ModelNotApplicable`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from racecheck.model_names import (
    BROADCAST,
    FIXED_NAMES,
    REDUCTIONS,
    SHIFT,
    check_model_name,
)
from racecheck.report.reasons import ReasonCode, reason

from .custom import ModelNotApplicable, load_user_golden

Golden = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    name: str
    compute: Golden | None  # None only for `none`, which claims nothing

    def golden(self, inputs: np.ndarray) -> np.ndarray | None:
        """Expected outputs, one flattened row per rank; None for the `none` model."""
        if self.compute is None:
            return None
        ranks = len(inputs)
        result = np.asarray(self.compute(np.asarray(inputs)))
        if result.ndim == 0 or len(result) != ranks:
            raise ModelNotApplicable(
                reason(
                    ReasonCode.GOLDEN_LEADING_DIM,
                    model=self.name,
                    dim=str(result.shape[:1]),
                    ranks=ranks,
                )
            )
        return result.reshape(ranks, -1)


def rows(inputs: np.ndarray) -> np.ndarray:
    """Rank r's input flattened to row r; floats widened so the golden itself is exact."""
    flat = np.asarray(inputs).reshape(len(inputs), -1)
    return flat.astype(np.float64) if np.issubdtype(flat.dtype, np.floating) else flat


def blocks(inputs: np.ndarray) -> np.ndarray:
    """The rows cut into P equal blocks: shape [P, P, M/P]."""
    flat = rows(inputs)
    ranks, width = flat.shape
    if width % ranks != 0:
        raise ModelNotApplicable(reason(ReasonCode.GOLDEN_ROW_BLOCKS, width=width, ranks=ranks))
    return flat.reshape(ranks, ranks, width // ranks)


_REDUCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sum": lambda data: data.sum(axis=0),
    "max": lambda data: data.max(axis=0),
    "min": lambda data: data.min(axis=0),
    "prod": lambda data: data.prod(axis=0),
}


def _allreduce(op: str) -> Golden:
    def golden(inputs: np.ndarray) -> np.ndarray:
        flat = rows(inputs)
        return np.broadcast_to(_REDUCTIONS[op](flat), flat.shape).copy()

    return golden


def _broadcast(root: int) -> Golden:
    def golden(inputs: np.ndarray) -> np.ndarray:
        flat = rows(inputs)
        if root >= len(flat):
            raise ModelNotApplicable(
                reason(ReasonCode.GOLDEN_ROOT_OUTSIDE, root=root, ranks=len(flat))
            )
        return np.broadcast_to(flat[root], flat.shape).copy()

    return golden


def _allgather(inputs: np.ndarray) -> np.ndarray:
    flat = rows(inputs)
    return np.tile(flat.reshape(1, -1), (len(flat), 1))


def _reduce_scatter_sum(inputs: np.ndarray) -> np.ndarray:
    parts = blocks(inputs)
    ranks = len(parts)
    return np.stack([parts[:, rank, :].sum(axis=0) for rank in range(ranks)])


def _all_to_all(inputs: np.ndarray) -> np.ndarray:
    parts = blocks(inputs)  # parts[s, r] = block r of rank s
    return parts.transpose(1, 0, 2).reshape(len(parts), -1)


def _shift(step: int) -> Golden:
    def golden(inputs: np.ndarray) -> np.ndarray:
        flat = rows(inputs)
        ranks = len(flat)
        return flat[[(rank + step) % ranks for rank in range(ranks)]]

    return golden


def _barrier(inputs: np.ndarray) -> np.ndarray:
    return rows(inputs).copy()


_FIXED: dict[str, Golden | None] = {
    **{f"allreduce-{op}": _allreduce(op) for op in _REDUCTIONS},
    "allgather": _allgather,
    "reduce_scatter-sum": _reduce_scatter_sum,
    "all_to_all": _all_to_all,
    "barrier": _barrier,
    "none": None,
}
assert tuple(_FIXED) == FIXED_NAMES and tuple(_REDUCTIONS) == REDUCTIONS


def parse_model(name: str) -> Model:
    """The model called `name`; UsageError (listing the valid names) if there is none."""
    if name in _FIXED:
        return Model(name=name, compute=_FIXED[name])
    if match := BROADCAST.fullmatch(name):
        return Model(name=name, compute=_broadcast(int(match.group(1))))
    if match := SHIFT.fullmatch(name):
        sign = 1 if match.group(1) == "+" else -1
        return Model(name=name, compute=_shift(sign * int(match.group(2))))
    check_model_name(name)
    return Model(name=name, compute=load_user_golden(name))


def candidates(ranks: int) -> tuple[Model, ...]:
    """Every named model worth trying at `ranks`, most specific first, `none` excluded.

    Shifts go by growing distance, + before -, so the name reported for a shift is the
    shortest one (`shift+1` rather than its alias `shift-<P-1>`).
    """
    names = [f"allreduce-{op}" for op in _REDUCTIONS]
    names += [f"broadcast-root{root}" for root in range(ranks)]
    names += ["allgather", "reduce_scatter-sum", "all_to_all"]
    for distance in range(1, ranks):
        names += [f"shift+{distance}", f"shift-{distance}"]
    names.append("barrier")
    return tuple(parse_model(name) for name in names)
