"""User-supplied goldens: a model spec `path/to/file.py:function` or `package.module:function`.

The named function receives the inputs as a numpy array `[P, ...]` (row r is rank r's
input) and returns the expected outputs with leading dimension P. A `.py` path is
resolved against the current directory. The file may be the collective itself: its
`pypto` imports resolve to racecheck's DSL while it loads, as when it is verified.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from racecheck.dsl.modules import installed
from racecheck.errors import UsageError
from racecheck.model_names import check_model_name
from racecheck.report.reasons import ReasonCode, reason

UserGolden = Callable[[np.ndarray], np.ndarray]


def load_user_golden(spec: str) -> UserGolden:
    """The function a `where:function` spec names; UsageError if it cannot be found."""
    check_model_name(spec)
    where, _, function_name = spec.rpartition(":")
    module = _load_file(where, spec) if where.endswith(".py") else _load_module(where, spec)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise UsageError(
            reason(
                ReasonCode.GOLDEN_NO_FUNCTION,
                spec=repr(spec),
                where=where,
                function=repr(function_name),
            )
        )
    return _guarded(spec, function)


class ModelNotApplicable(ValueError):
    """The model has no golden for inputs of this shape or rank count (a built-in's, or
    a user's golden that raises it): the run stops with an error naming the P."""


def _guarded(spec: str, function: UserGolden) -> UserGolden:
    """The golden, whose own failures are reported as its error (exit 2), not as a
    wrong result of the collective."""

    def golden(inputs: np.ndarray) -> np.ndarray:
        try:
            with installed():
                return np.asarray(function(inputs))
        except ModelNotApplicable:
            raise  # worded with the P by the caller, as a built-in model's
        except Exception as error:  # the user's golden: any failure is theirs to fix
            raise UsageError(
                reason(
                    ReasonCode.GOLDEN_RAISED,
                    spec=repr(spec),
                    error=type(error).__name__,
                    message=str(error),
                )
            ) from error

    return golden


def _load_file(path_text: str, spec: str) -> ModuleType:
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(reason(ReasonCode.GOLDEN_NO_FILE, spec=repr(spec), path=path_text))
    module_spec = importlib.util.spec_from_file_location(f"racecheck_golden_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise UsageError(reason(ReasonCode.GOLDEN_CANNOT_IMPORT, spec=repr(spec), path=path_text))
    module = importlib.util.module_from_spec(module_spec)
    try:
        with installed():
            module_spec.loader.exec_module(module)
    except Exception as error:  # the user's file: any failure is theirs to fix
        raise UsageError(
            reason(
                ReasonCode.GOLDEN_IMPORT_FAILED, spec=repr(spec), source=path_text, why=str(error)
            )
        ) from error
    return module


def _load_module(name: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except Exception as error:
        raise UsageError(
            reason(ReasonCode.GOLDEN_IMPORT_FAILED, spec=repr(spec), source=name, why=str(error))
        ) from error
