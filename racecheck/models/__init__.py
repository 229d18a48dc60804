"""Golden models of the collectives (docs/guide.md, "Which host tensors
the golden compares").

    model = parse_model("allreduce-sum")
    matches(model, inputs, outputs, "FP32")          # inputs, outputs: [P, ...]
    identify(inputs, outputs, "FP32")                # -> "allreduce-sum" or None

`catalog` names the models and computes goldens; `compare` holds the tolerance, the
accepted output layouts and identification; `custom` loads user-written goldens.
"""

from __future__ import annotations

from racecheck.model_names import VALID_NAMES

from .catalog import Model, ModelNotApplicable, candidates, parse_model
from .compare import (
    Difference,
    close_enough,
    first_difference,
    golden_repeated,
    identify,
    matches,
    tolerance,
)

__all__ = [
    "VALID_NAMES",
    "Difference",
    "Model",
    "ModelNotApplicable",
    "candidates",
    "close_enough",
    "first_difference",
    "golden_repeated",
    "identify",
    "matches",
    "parse_model",
    "tolerance",
]
