"""The names `--expect` accepts (the CLI contract), read before any model is built: the
configuration checks a name where it reads it, and `racecheck.models.catalog` builds the
model a name denotes."""

from __future__ import annotations

import re

from racecheck.errors import UsageError
from racecheck.report.reasons import ReasonCode, reason

REDUCTIONS = ("sum", "max", "min", "prod")
FIXED_NAMES = (
    *(f"allreduce-{op}" for op in REDUCTIONS),
    "allgather",
    "reduce_scatter-sum",
    "all_to_all",
    "barrier",
    "none",
)
BROADCAST = re.compile(r"broadcast-root(\d+)")
SHIFT = re.compile(r"shift([+-])(\d+)")
VALID_NAMES = (
    *FIXED_NAMES,
    "broadcast-root<R>",
    "shift+<K>",
    "shift-<K>",
    "file.py:function",
    "module:function",
)


def check_model_name(name: str) -> None:
    """UsageError (listing the valid names) unless `name` is spelled as a model is:
    a named model, or a user golden `where:function` (found and imported later)."""
    if name in FIXED_NAMES or BROADCAST.fullmatch(name) or SHIFT.fullmatch(name):
        return
    if ":" in name:
        where, _, function_name = name.rpartition(":")
        if where and function_name.isidentifier():
            return
        raise UsageError(reason(ReasonCode.GOLDEN_NOT_FUNCTION, name=name))
    raise UsageError(reason(ReasonCode.GOLDEN_UNKNOWN, name=name, names=", ".join(VALID_NAMES)))
