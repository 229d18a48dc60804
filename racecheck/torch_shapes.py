"""Running a file's torch code with its large tensors shape-only (torch's `meta` device).

Imported only when torch is installed (`racecheck.file_harness`). A factory call
(`torch.randn`, `torch.zeros`, `torch.empty`, ...) whose result would exceed the byte
bound makes a meta tensor instead; any operation with a shape-only tensor among its
arguments runs on meta copies of all of them, so what is computed from a large tensor
is shape-only too and costs neither memory nor time. An in-place write of such values
into a real tensor (`scale[i] = amax_of_weights`) makes that tensor shape-only from
then on. Reading a shape-only tensor's values (`.item()`, `.tolist()`) raises: the
code needed the values.

Every torch call of the file's code comes through the mode (a spec builder filling a
table element by element makes hundreds of thousands), so finding a shape-only
argument is a direct walk of the arguments' lists, tuples and dicts, not torch's
general tree flattening: most of a builder's time went there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map
from torch.utils.weak import WeakIdKeyDictionary

_FACTORIES = frozenset(
    {
        torch.randn,
        torch.rand,
        torch.randint,
        torch.zeros,
        torch.ones,
        torch.empty,
        torch.full,
        torch.randperm,
        torch.arange,
    }
)


class ShapeOnlyAbove(TorchFunctionMode):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self._written = WeakIdKeyDictionary()  # real tensors that took shape-only values
        self._any_written = False  # a plain flag: asking the dictionary's size costs more

    def shape_only(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor) and self._tensor_shape_only(value)

    def _tensor_shape_only(self, tensor: torch.Tensor) -> bool:
        return tensor.is_meta or (self._any_written and tensor in self._written)

    def _holds_shape_only(self, values: Iterable[Any]) -> bool:
        """Whether a shape-only tensor is among `values` or inside a list, tuple or dict
        of them (where torch's tree flattening would find it)."""
        for value in values:
            if isinstance(value, torch.Tensor):
                if self._tensor_shape_only(value):
                    return True
            elif isinstance(value, (list, tuple)):
                if self._holds_shape_only(value):
                    return True
            elif isinstance(value, dict) and self._holds_shape_only(value.values()):
                return True
        return False

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if self._holds_shape_only(args) or (kwargs and self._holds_shape_only(kwargs.values())):
            target = args[0] if _in_place(func) and args else None
            args, kwargs = tree_map(self._to_meta, (args, kwargs))
            result = func(*args, **kwargs)
            if isinstance(target, torch.Tensor) and not target.is_meta:
                self._written[target] = True
                self._any_written = True
                return None if result is None else target
            return result
        if func in _FACTORIES and "device" not in kwargs:
            shaped = func(*args, **{**kwargs, "device": "meta"})
            if _nbytes(shaped) > self.limit:
                return shaped
        return func(*args, **kwargs)

    def _to_meta(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and not value.is_meta:
            return (
                torch.empty_like(value, device="meta")
                if value in self._written
                else value.to("meta")
            )
        return value


def _in_place(func: Any) -> bool:
    name = getattr(func, "__name__", "")
    return name == "__setitem__" or (name.endswith("_") and not name.endswith("__"))


def _nbytes(value: Any) -> int:
    if not isinstance(value, torch.Tensor):
        return 0
    return math.prod(value.shape) * value.element_size()
