"""Program structure: `@pl.program` classes, `@pl.function` roles, the `@pl.jit` family.

Decorators only mark functions with their role (kernel, per-device, host entry), and
recompile their bodies so that `%` and `//` divide like the device
(`racecheck.dsl.device_source`); nothing is traced at decoration time. A call with
`device=r` made from the host body records a dispatch for rank r (the keyword is not
passed on); any other call runs the function directly, so kernels call kernels as
plain Python. At one rank, a host call of a per-device function without `device=` is
the dispatch to device 0 (a single-device program, docs/model.md).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from enum import Enum
from types import CodeType, FrameType
from typing import Any

from racecheck.dsl.async_put import drained_by_the_end
from racecheck.dsl.context import current, host_context, is_rank_context
from racecheck.dsl.declared import as_declared
from racecheck.dsl.device_source import divides_as_python, on_device
from racecheck.dsl.groups import refuse_ungrouped, spans_world_by_loop
from racecheck.dsl.location import unsupported, user_location
from racecheck.dsl.scalars import as_index, device_scalar
from racecheck.dsl.scopes import (
    declared_results,
    dep_indexes,
    dispatch_result,
    kernel_call,
    note_inline,
    note_orchestration,
    note_own_scopes,
    spmd_blocks,
    submitted,
)
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import Direction, FunctionType, Level, Role, TensorType
from racecheck.errors import UnsupportedConstruct
from racecheck.report.reasons import ReasonCode, reason


class FunctionRole(Enum):
    KERNEL = "kernel"
    PER_DEVICE = "per-device"
    HOST = "host"
    SUB_WORKER = "sub-worker"  # a host callback (`pl.Role.SubWorker`): never traced
    INLINE = "inline"  # `pl.jit.inline`: spliced into its caller, whatever the caller is


class DslFunction:
    """A decorated function: callable as plain Python, or dispatched with `device=`."""

    def __init__(
        self, function: Callable[..., Any], role: FunctionRole, *, as_written: bool = False
    ) -> None:
        self.function = function
        self.role = role
        self.as_written = as_written  # not recompiled from its source: runs as Python
        if role is FunctionRole.PER_DEVICE:
            note_orchestration(function)
        elif role is FunctionRole.INLINE:
            note_inline(function)
        self.__name__ = getattr(function, "__name__", "function")
        self.__qualname__ = getattr(function, "__qualname__", self.__name__)
        self.__doc__ = getattr(function, "__doc__", None)
        self.__wrapped__ = function

    def __get__(self, instance: object, owner: type | None = None) -> DslFunction:
        if instance is None:
            return self
        bound = self.function.__get__(instance, owner)
        return type(self)(bound, self.role, as_written=self.as_written)

    def _param_names(self) -> list[str]:
        """PyPTO's JIT function's parameter names (pypto-lib's spec builders order their
        specs by them)."""
        return [name for name in inspect.signature(self.function).parameters if name != "self"]

    def _refuse_python_division(self) -> None:
        if divides_as_python(self.function):
            raise unsupported(reason(ReasonCode.DSL_NOT_RECOMPILED, name=self.__name__))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.role is FunctionRole.SUB_WORKER:
            return self._sub_worker_call()
        if self.as_written:
            self._refuse_python_division()
        if self.role is FunctionRole.INLINE:
            # PyPTO's InlineFunctions pass splices the body at each call site: it runs
            # in its caller's place (orchestration, kernel or host), as written there.
            return self.function(*args, **kwargs)
        if "device" in kwargs:
            index = kwargs.pop("device")
            refuse_ungrouped(index)
            device = as_index(index)
            host = host_context(f"{self.__name__}(..., device=...)")
            # the window's group (docs/model.md): every device for the index of a loop up
            # to pld.world_size(), whatever its start and step (`groups.WorldSize`)
            group = range(host.ranks) if spans_world_by_loop(index) else (device,)
            for value in (*args, *kwargs.values()):
                if isinstance(value, TensorView) and value.devices is not None:
                    value.devices.update(group)
            host.dispatch(
                device,
                self.function,
                tuple(device_scalar(value) for value in args),
                {name: device_scalar(value) for name, value in kwargs.items()},
            )
            # the host gets the tensors the dispatch writes, one per result it declares
            return dispatch_result(self.__name__, self.function, args, kwargs)
        context = current()
        on_host = context is not None and not is_rank_context(context)
        if on_host and self.role is FunctionRole.PER_DEVICE and host_context("").ranks == 1:
            return self(*args, **kwargs, device=0)  # a one-device program's only device
        if on_host and self.role is not FunctionRole.HOST:
            where = user_location()
            raise UnsupportedConstruct(
                reason(ReasonCode.DSL_NO_DEVICE, name=self.__name__),
                file=where.file,
                line=where.line,
            )
        if context is None and self.role is FunctionRole.HOST:
            raise _not_run(self.__name__)
        args, kwargs = as_declared(self.function, args, kwargs)
        if self.role is FunctionRole.KERNEL:
            with drained_by_the_end():
                return kernel_call(self.__name__, self.function, args, kwargs)
        return self.function(*args, **kwargs)

    def _sub_worker_call(self) -> None:
        """A host callback that writes a host tensor (`pl.Out`, `pl.InOut`, or a type
        racecheck cannot read) is not modelled; one that only reads them is not run."""
        parameters = inspect.signature(self.function).parameters.values()
        written = [
            parameter.name
            for parameter in parameters
            if isinstance(parameter.annotation, str)
            or (
                isinstance(parameter.annotation, TensorType)
                and parameter.annotation.direction is not Direction.IN
            )
        ]
        run_sub_worker(f"{self.__name__}()", written)

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_run(self.__name__)

    def __repr__(self) -> str:
        return f"<{self.role.value} function {self.__qualname__}>"


def run_sub_worker(name: str, written: list[str]) -> None:
    """A host sub-worker callback (a function or an inline region) runs on the host, on
    host tensors. One that only reads them cannot change what any device computes or
    when: it is not run. One that writes any of `written` is not modelled."""
    host = host_context(name)
    if written:
        where = user_location()
        raise UnsupportedConstruct(
            reason(ReasonCode.DSL_SUB_WORKER_WRITES, name=name, written=", ".join(written)),
            file=where.file,
            line=where.line,
        )
    host.note(reason(ReasonCode.DSL_SUB_WORKER_READS, name=name))


def submit(
    kernel: object,
    *args: Any,
    deps: object = None,
    dumps: object = None,
    allow_early_resolve: bool = False,
    timing_slot: object = None,
    predicate: object = None,
) -> tuple[Any, ...]:
    """`pl.submit(self.kernel, *args, deps=[...])`: the kernel call as a task ordered
    after `deps` too, returning the kernel's results and then its `TaskId`, flat."""
    del dumps, allow_early_resolve, timing_slot
    if not isinstance(kernel, DslFunction) or kernel.role is not FunctionRole.KERNEL:
        raise unsupported(reason(ReasonCode.DSL_SUBMIT_KERNEL, kernel=repr(kernel)))
    if predicate is not None:
        raise unsupported(reason(ReasonCode.DSL_SUBMIT_PREDICATE))
    with submitted(dep_indexes(deps)) as ids:
        result = kernel(*args)
    (task,) = ids
    if result is None:  # no results
        return (*[None] * declared_results(kernel.function), task)
    return (*result, task) if isinstance(result, tuple) else (result, task)


def spmd_submit(
    kernel: object, *args: Any, core_num: object, sync_start: bool = False, **options: Any
) -> tuple[Any, ...]:
    """`pl.spmd_submit(self.kernel, *args, core_num=N, ...)`: `pl.submit` of the kernel
    run on N concurrent blocks, one task."""
    del sync_start
    with spmd_blocks(core_num):
        return submit(kernel, *args, **options)


def _not_run(name: str) -> UnsupportedConstruct:
    where = user_location()
    return UnsupportedConstruct(
        reason(ReasonCode.DSL_NOT_RUN, name=name),
        file=where.file,
        line=where.line,
    )


def _encloses(code: CodeType, target: CodeType) -> bool:
    return any(
        constant is target or (isinstance(constant, CodeType) and _encloses(constant, target))
        for constant in code.co_consts
    )


def _enclosing_frames(target: CodeType) -> Iterator[FrameType]:
    """The running frames whose code lexically holds `target`, innermost first."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if _encloses(frame.f_code, target):
            yield frame
        frame = frame.f_back


def _resolve_annotations(fn: Callable[..., Any]) -> None:
    """Evaluate string annotations (`from __future__ import annotations`) now, while
    the scopes that define them run: a factory's local shape list that only an
    annotation names is no closure variable, and is gone once the factory returns
    (PyPTO's tests/st/distributed/l3_gemm.py)."""
    annotations = getattr(fn, "__annotations__", None)
    code = getattr(fn, "__code__", None)
    if not annotations or code is None:
        return
    pending = {name: text for name, text in annotations.items() if isinstance(text, str)}
    if not pending:
        return
    scope = dict(getattr(fn, "__globals__", {}))
    for frame in reversed(list(_enclosing_frames(code))):
        scope.update(frame.f_locals)
    for name, text in pending.items():
        try:
            annotations[name] = eval(text, scope)  # noqa: S307 - the user's own annotation
        except Exception:  # noqa: BLE001, S112 - left as text; load reports it when it is read
            continue


class _ProgramSelf:
    """`self` in a `@pl.jit` function that has no `self` parameter: PyPTO materialises
    the module's jit functions as methods of one program, so `self.kernel` (as in
    `pl.spmd_submit(self.kernel, ...)`) is the module's `kernel`."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self._scope = scope

    def __getattr__(self, name: str) -> Any:
        member = self._scope.get(name)
        if name.startswith("__") or not isinstance(member, DslFunction):
            raise unsupported(reason(ReasonCode.DSL_NO_JIT_FUNCTION, name=name))
        return member


def _names_read(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _names_read(constant)
    return names


def _bind_program_self(fn: Callable[..., Any]) -> None:
    scope = getattr(fn, "__globals__", None)
    code = getattr(fn, "__code__", None)
    if scope is None or code is None or "self" in scope or "self" in code.co_varnames:
        return
    if "self" in _names_read(code):
        scope["self"] = _ProgramSelf(scope)


def _declared(
    fn: Callable[..., Any], role: FunctionRole, options: Mapping[str, object]
) -> DslFunction:
    _resolve_annotations(fn)
    _bind_program_self(fn)
    device = None if role is FunctionRole.SUB_WORKER else on_device(fn)
    body = fn if device is None else device
    if options.get("auto_scope") is False:
        note_own_scopes(body)
    return DslFunction(
        body, role, as_written=device is None and role is not FunctionRole.SUB_WORKER
    )


def _role_of(type: object = None, level: object = None, role: object = None) -> FunctionRole:
    if role is Role.SubWorker or (level is Level.HOST and role is Role.Worker):
        return FunctionRole.SUB_WORKER
    if level is Level.HOST or role is Role.Orchestrator:
        return FunctionRole.HOST
    if type is FunctionType.Orchestration:
        return FunctionRole.PER_DEVICE
    return FunctionRole.KERNEL


def function(
    fn: Callable[..., Any] | None = None,
    *,
    type: object = None,
    level: object = None,
    role: object = None,
    **options: object,
) -> Any:
    """`@pl.function(type=..., level=..., role=...)`, also bare `@pl.function`."""
    function_role = _role_of(type, level, role)
    if fn is not None:
        return _declared(fn, function_role, options)
    return lambda wrapped: _declared(wrapped, function_role, options)


class Program:
    """`@pl.program` on a class: its methods are the kernel, per-device and host functions."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.__name__ = cls.__name__
        self.__qualname__ = cls.__qualname__
        self.__module__ = cls.__module__

    @property
    def defined_at_module_level(self) -> bool:
        return "<locals>" not in self.cls.__qualname__

    def host_entry(self) -> DslFunction | None:
        for name, member in vars(self.cls).items():
            if isinstance(member, DslFunction) and member.role is FunctionRole.HOST:
                return getattr(self.cls(), name)
        return None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise _not_run(self.__name__)

    def __repr__(self) -> str:
        return f"<pl.program {self.__qualname__}>"


def program(cls: type | None = None, **options: object) -> Any:
    """`@pl.program`, also `@pl.program(...)`."""
    if cls is not None:
        return Program(cls)
    return Program


class _JitDecorator:
    """`pl.jit` (per-device), `pl.jit.incore` (kernel), `pl.jit.host` (entry),
    `pl.jit.inline` (spliced into its caller; `auto_scope=False` lets it open scopes).

    Each works bare (`@pl.jit`) and called (`@pl.jit()`, `@pl.jit.host(...)`).
    """

    def __init__(self, role: FunctionRole, name: str) -> None:
        self.role = role
        self.name = name

    def __call__(self, fn: Callable[..., Any] | None = None, **options: object) -> Any:
        if fn is not None and callable(fn):
            return _declared(fn, self.role, options)
        return lambda wrapped: _declared(wrapped, self.role, options)

    def __repr__(self) -> str:
        return self.name


class _Jit(_JitDecorator):
    def __init__(self) -> None:
        super().__init__(FunctionRole.PER_DEVICE, "pl.jit")
        self.incore = _JitDecorator(FunctionRole.KERNEL, "pl.jit.incore")
        self.host = _JitDecorator(FunctionRole.HOST, "pl.jit.host")
        self.inline = _JitDecorator(FunctionRole.INLINE, "pl.jit.inline")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        where = user_location()
        raise UnsupportedConstruct(
            reason(ReasonCode.DSL_NOT_MODELLED, module="pl.jit", name=name),
            file=where.file,
            line=where.line,
        )


jit = _Jit()


def entry_parameters(entry: DslFunction) -> list[inspect.Parameter]:
    """The host entry's parameters (after `self` for a method)."""
    return list(inspect.signature(entry.function).parameters.values())
