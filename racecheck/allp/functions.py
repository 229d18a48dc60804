"""DSL functions and programs under symbolic tracing: `device=` dispatches to the tracer,
any other call runs the body (`Runner` is the surface that does both)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

from racecheck.allp.expr import OutsideFragment
from racecheck.dsl.program import DslFunction, FunctionRole
from racecheck.report.reasons import ReasonCode, reason


class Runner(Protocol):
    def dispatch(
        self,
        device: object,
        function: Callable[..., Any],
        args: tuple,
        kwargs: dict,
        role: FunctionRole,
    ) -> None: ...

    def call(
        self, role: FunctionRole, function: Callable[..., Any], args: tuple, kwargs: dict
    ) -> Any: ...


class ShadowFunction:
    """A DSL function under symbolic tracing: `device=` dispatches, anything else runs."""

    def __init__(self, function: Callable[..., Any], role: FunctionRole, surface: Runner) -> None:
        self.function = function
        self.role = role
        self.surface = surface

    def __get__(self, instance: object, owner: type | None = None) -> ShadowFunction:
        if instance is None:
            return self
        return ShadowFunction(self.function.__get__(instance, owner), self.role, self.surface)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "device" in kwargs:
            device = kwargs.pop("device")
            return self.surface.dispatch(device, self.function, args, kwargs, self.role)
        return self.surface.call(self.role, self.function, args, kwargs)


class ShadowProgram:
    def __init__(self, cls: type) -> None:
        self.cls = cls


class ShadowSelf:
    """`self` of a program class: its DSL methods come back as shadow functions."""

    def __init__(self, cls: type, surface: Runner) -> None:
        self._cls = cls
        self._surface = surface
        self._instance = cls()

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._cls, name, None)
        if isinstance(member, DslFunction):
            return ShadowFunction(member.function, member.role, self._surface).__get__(self)
        if isinstance(member, ShadowFunction):
            return ShadowFunction(member.function, member.role, self._surface).__get__(self)
        return getattr(self._instance, name)


class Jit:
    def __init__(self, surface: Runner) -> None:
        self.surface = surface
        self.incore = _JitRole(surface, FunctionRole.KERNEL)
        self.host = _JitRole(surface, FunctionRole.HOST)
        self._per_device = _JitRole(surface, FunctionRole.PER_DEVICE)

    def __call__(self, fn: Callable[..., Any] | None = None, **options: object) -> Any:
        return self._per_device(fn, **options)


class _JitRole:
    def __init__(self, surface: Runner, role: FunctionRole) -> None:
        self.surface = surface
        self.role = role

    def __call__(self, fn: Callable[..., Any] | None = None, **options: object) -> Any:
        if fn is not None and callable(fn):
            return ShadowFunction(fn, self.role, self.surface)
        return lambda wrapped: ShadowFunction(wrapped, self.role, self.surface)


def host_entry(value: object, surface: Runner) -> tuple[Callable[..., Any], list[str]]:
    """The host entry of a program class or jit entry, and its parameter names."""
    if isinstance(value, ShadowProgram) or hasattr(value, "cls"):
        cls = value.cls  # type: ignore[union-attr]
        for member in vars(cls).values():
            if (
                isinstance(member, (DslFunction, ShadowFunction))
                and member.role is FunctionRole.HOST
            ):
                self_proxy = ShadowSelf(cls, surface)
                function = member.function.__get__(self_proxy, cls)
                return function, list(inspect.signature(function).parameters)
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_NO_HOST_ENTRY))
    if isinstance(value, (DslFunction, ShadowFunction)) and value.role is FunctionRole.HOST:
        return value.function, list(inspect.signature(value.function).parameters)
    raise OutsideFragment(reason(ReasonCode.OUTSIDE_NOT_PROGRAM, value=repr(value)))
