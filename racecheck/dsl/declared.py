"""Window arguments seen through the shapes their callee declares (docs/model.md).

A function's `pld.DistributedTensor[[dims], dtype]` parameter is the type its body is
compiled against: the host may pass a view of the same window bytes in another shape
(a `[SIZE]` window into a `[1, SIZE]` parameter), and the body indexes it with the
declared dims. So a window argument with as many elements of the declared dtype as
the declared shape is re-viewed in that shape; any other argument is passed as is.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from racecheck.dsl.context import dim_bindings
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import TensorKind, TensorType, resolve_dim
from racecheck.errors import UnsupportedConstruct
from racecheck.report.reasons import ReasonCode, reason


def signature_of(function: Callable[..., Any]) -> inspect.Signature:
    """`function`'s signature with its annotations evaluated, also in a file that
    postpones them (`from __future__ import annotations`), over its globals and the
    factory locals its body uses; an annotation naming anything else stays a string."""
    try:
        closure = inspect.getclosurevars(function).nonlocals
    except TypeError:  # not a plain function or method (a partial)
        closure = {}
    try:
        return inspect.signature(function, locals=closure, eval_str=True)
    except (NameError, AttributeError, TypeError, SyntaxError):
        return inspect.signature(function)


def as_declared(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`args` and `kwargs` with each window view in the shape `function` declares for it."""
    try:
        signature = signature_of(function)
        bound = signature.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    bindings = dim_bindings() or {}
    changed = False
    for name, value in bound.arguments.items():
        annotation = signature.parameters[name].annotation
        reviewed = _reviewed(value, annotation, bindings)
        if reviewed is _OTHER_SIZE:
            raise _other_size(function, name, annotation, value)
        if reviewed is not value:
            bound.arguments[name] = reviewed
            changed = True
    return (tuple(bound.args), dict(bound.kwargs)) if changed else (args, kwargs)


_OTHER_SIZE = object()  # `_reviewed`: a window of another size than declared


def _reviewed(value: object, annotation: object, bindings: Mapping[str, int]) -> object:
    """`value` in the declared shape; `_OTHER_SIZE` for a window of another size."""
    if not isinstance(value, TensorView) or not value.is_window:
        return value
    if not isinstance(annotation, TensorType) or annotation.kind is not TensorKind.DISTRIBUTED:
        return value
    try:
        shape = tuple(resolve_dim(dim, bindings) for dim in annotation.dims)
    except (KeyError, TypeError):
        return value  # a dim the running program does not bind
    if shape == value.shape or annotation.dtype != value.dtype:
        return value
    if math.prod(shape) != math.prod(value.shape):
        return _OTHER_SIZE
    return replace(value, shape=shape)


def _other_size(
    function: Callable[..., Any], name: str, annotation: TensorType, value: TensorView
) -> UnsupportedConstruct:
    """PyPTO compiles the function against its declared type; whether it accepts a window
    of another size, or how its body then addresses it, is not documented
    (docs/model.md): neither a bug nor a proof, but this answer, at the parameter."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    declared = [resolve_dim(dim, dim_bindings() or {}) for dim in annotation.dims]
    return UnsupportedConstruct(
        reason(
            ReasonCode.DSL_WINDOW_ARGUMENT_SIZE,
            function=function.__name__,
            name=name,
            declared=str(declared),
            dtype=annotation.dtype.name,
            count=math.prod(declared),
            argument=value.name,
            shape=str(list(value.shape)),
            argument_dtype=value.dtype.name,
            argument_count=math.prod(value.shape),
        ),
        file=None if code is None else code.co_filename,
        line=_parameter_line(function, name),
    )


def _parameter_line(function: Callable[..., Any], name: str) -> int | None:
    """The line that declares `function`'s parameter `name`."""
    try:
        lines, first = inspect.getsourcelines(inspect.unwrap(function))
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    return next(
        (
            first + node.lineno - 1
            for node in ast.walk(tree)
            if isinstance(node, ast.arg) and node.arg == name
        ),
        None,
    )
