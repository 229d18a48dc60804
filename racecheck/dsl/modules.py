"""The `pypto` modules a user file imports, and installing them while it is loaded.

`installed()` puts racecheck's `pypto`, `pypto.language` (pl),
`pypto.language.distributed` (pld), `pypto.ir`, `pypto.ir.distributed_compiled_program`
and `pypto.runtime` into `sys.modules` (and torch and pytest stand-ins when they are not
importable) and restores the previous entries afterwards. Reading a name the DSL
does not define raises `UnsupportedConstruct` at the user's line. Driver-only names
(docs/model.md: `ir.compile`, `DistributedConfig`, `RunConfig`, `DeviceTensor`, ...)
are inert: they import, and classes construct outside a traced body, but running a
program on hardware is never modelled and using them inside a kernel or the host
function is unsupported. Other `pypto.*` modules outside `pypto.language`
(`pypto.runtime.device_runner`, ...) and PyPTO's `examples.runtime` helpers are
driver modules: they import, and their names are inert calls.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from racecheck.dsl import (
    async_put,
    builtins,
    collective_api,
    dist_ops,
    dtypes,
    hints,
    host_regions,
    lanes,
    local_ops,
    program,
    scopes,
    sort_ops,
    tile_math,
    tile_ops,
    types,
)
from racecheck.dsl.context import current
from racecheck.dsl.location import user_location
from racecheck.errors import UnsupportedConstruct
from racecheck.events import SourceLocation
from racecheck.report.reasons import ReasonCode, reason


class DslNamespace(ModuleType):
    """A module whose unknown attributes are unsupported DSL constructs."""

    def __init__(self, name: str, display: str, members: dict[str, Any]) -> None:
        super().__init__(name)
        self.__dict__["_display"] = display
        self.__dict__.update(members)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        where = user_location()
        raise UnsupportedConstruct(
            reason(ReasonCode.DSL_NOT_MODELLED, module=self._display, name=name),
            file=where.file,
            line=where.line,
        )


class _Inert:
    """A driver-only object (config, worker, device tensor): constructible while the file
    is imported or its main() would run, never inside a traced kernel or host body."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if current() is not None:
            where = user_location()
            raise UnsupportedConstruct(
                reason(ReasonCode.DSL_DRIVER_OBJECT, name=type(self).__name__),
                file=where.file,
                line=where.line,
            )
        self.args, self.kwargs = args, kwargs

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


def _inert_class(name: str) -> type[_Inert]:
    return type(name, (_Inert,), {"__module__": "pypto.runtime"})


DistributedConfig = _inert_class("DistributedConfig")
DistributedCompiledProgram = _inert_class("DistributedCompiledProgram")
RunConfig = _inert_class("RunConfig")
RUNTIME_CLASSES = {
    name: _inert_class(name)
    for name in (
        "DistributedWorker",
        "StackedDeviceTensor",
        "DeviceTensor",
        "ChipWorker",
        "Worker",
        "RunResult",
        "TensorSpec",
        "ScalarSpec",
        "RegistrationHandle",
    )
}


def _inert_call(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        where = user_location()
        raise UnsupportedConstruct(
            reason(ReasonCode.DSL_DRIVER_CALL, name=name),
            file=where.file,
            line=where.line,
        )

    call.__name__ = name
    return call


class _DriverModule(ModuleType):
    """A `pypto` driver module racecheck does not know (`pypto.runtime.device_runner`,
    ...): it imports, and each name in it is an inert call that is never run."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert_call(f"{self.__name__}.{name}")


DRIVER_PACKAGES = ("pypto", "examples.runtime")  # PyPTO's own driver helpers (docs/model.md)


def _is_driver_module(fullname: str) -> bool:
    if fullname.startswith("pypto.language"):
        return False
    if fullname == "examples":  # PyPTO's examples package, unless the user has one
        return importlib.machinery.PathFinder.find_spec(fullname) is None
    return any(fullname.startswith(f"{package}.") for package in DRIVER_PACKAGES) or (
        fullname == "examples.runtime"
    )


class _DriverModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves unknown `pypto.*` modules outside `pypto.language`, and PyPTO's
    `examples.runtime` helpers, as driver modules."""

    def find_spec(
        self, fullname: str, path: object, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not _is_driver_module(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = _DriverModule(spec.name)
        module.__path__ = []  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: ModuleType) -> None:
        return None


_DRIVER_FINDER = _DriverModuleFinder()


def _dtype_members() -> dict[str, Any]:
    return {dtype.name: dtype for dtype in dtypes.ALL_DTYPES}


TYPE_NAMES = frozenset(
    {
        *("Tensor", "Out", "InOut", "Scalar", "Tile", "DistributedTensor", "dynamic"),
        *("FP32", "FP16", "BF16", "INT32", "INDEX"),
        *("FunctionType", "Level", "Role", "NotifyOp", "WaitCmp", "AtomicType", "ReduceOp"),
        *("CommCtx", "CommCtxType"),
    }
)
"""The `pl`/`pld` names that are types, dtypes and enums rather than operations: every
interpreter of a program (the co-simulation, the every-P shadow) takes them from here."""

LOCAL_OPS: dict[str, Any] = {
    "load": local_ops.load,
    "store": local_ops.store,
    "read": local_ops.read,
    "write": local_ops.write,
    "add": local_ops.add,
    "sub": local_ops.sub,
    "mul": local_ops.mul,
    "div": local_ops.div,
    "maximum": local_ops.maximum,
    "minimum": local_ops.minimum,
    "max": local_ops.maximum,
    "min": local_ops.minimum,
    "neg": local_ops.neg,
    "abs": local_ops.absolute,
    "exp": local_ops.exp,
    "cast": local_ops.cast,
}


def _language(distributed: ModuleType) -> DslNamespace:
    members: dict[str, Any] = {
        **_dtype_members(),
        **LOCAL_OPS,
        "Tensor": types.Tensor,
        "Array": types.Array,
        **tile_math.OPS,
        **sort_ops.OPS,
        "PadValue": tile_math.PadValue,
        "AtomicType": types.AtomicType,  # `pl.assemble(..., atomic=pl.AtomicType.Add)`
        "reshape": tile_ops.reshape_tensor,
        "Out": types.Out,
        "InOut": types.InOut,
        "Scalar": types.Scalar,
        "Tile": types.Tile,
        "DynVar": types.DynVar,
        "dynamic": types.DynVar,
        "FunctionType": types.FunctionType,
        "Level": types.Level,
        "Role": types.Role,
        "program": program.program,
        "function": program.function,
        "jit": program.jit,
        "MemorySpace": types.MemorySpace,
        "SplitMode": types.SplitMode,
        "split_aiv": lanes.split_aiv,
        "split": hints.split,
        "cross_core_slot": hints.cross_core_slot,
        "auto_chunk": hints.AUTO_CHUNK,
        "get_block_idx": scopes.block_index,
        "prefetch": DslNamespace(
            "pypto.language.prefetch",
            "pl.prefetch",
            {
                "make_context": hints.make_context,
                "async_prefetch": hints.async_prefetch,
                "session": hints.session,
                "wait": hints.wait,
            },
        ),
        "aiv_shard": lanes.shard,
        "aic_gather": lanes.crossing,
        "Mem": types.MemorySpace,
        "range": local_ops.range_,
        "parallel": local_ops.parallel,
        "unroll": local_ops.unroll,
        "pipeline": local_ops.pipeline,
        "at": host_regions.at,
        "manual_scope": scopes.manual_scope,
        "scope": scopes.scope,
        "ScopeMode": scopes.ScopeMode,
        "no_dep": scopes.no_dep,
        "TASK_ID": scopes.TaskIdType.TASK_ID,
        "system": DslNamespace(
            "pypto.language.system",
            "pl.system",
            {"task_invalid": scopes.task_invalid, "task_dummy": scopes.task_dummy},
        ),
        "submit": program.submit,
        "spmd_submit": program.spmd_submit,
        "spmd": host_regions.InlineSpmd,
        "yield_": local_ops.yield_,
        "const": tile_ops.const,
        "slice": tile_ops.slice_,
        "assemble": tile_ops.assemble,
        "full": tile_ops.full,
        "create_tensor": tile_ops.create_tensor,
        "move": tile_ops.move,
        "matmul": tile_ops.matmul,
        "array": DslNamespace(
            "pypto.language.array", "pl.array", {"create": tile_ops.array_create}
        ),
        "tile": DslNamespace(
            "pypto.language.tile",
            "pl.tile",
            {
                **LOCAL_OPS,
                **tile_math.OPS,
                **sort_ops.OPS,
                "MaskPattern": sort_ops.MaskPattern,
                "full": tile_ops.tile_full,
                "get_block_idx": scopes.block_index,
                "create": tile_ops.tile_create,
                "row_sum": tile_ops.row_sum,
                "reshape": tile_ops.reshape,
                "move": tile_ops.move,
                "matmul": tile_ops.matmul,
                "slice": tile_ops.slice_,
                "assemble": tile_ops.assemble,
            },
        ),
        "tensor": DslNamespace(
            "pypto.language.tensor",
            "pl.tensor",
            {
                **LOCAL_OPS,
                "slice": local_ops.tensor_slice,
                "reshape": tile_ops.reshape_tensor,
                "dim": tile_ops.tensor_dim,
                **sort_ops.OPS,
                "gather": tile_math.gather,
                "scatter": sort_ops.scatter,
                "arange": tile_math.arange,
                "set_validshape": tile_math.set_validshape,
                "assemble": tile_ops.assemble,
                "full": tile_ops.full,
                "create": tile_ops.create_tensor,
                "matmul": tile_ops.matmul,
            },
        ),
        "distributed": distributed,
    }
    return DslNamespace("pypto.language", "pl", members)


def _distributed() -> DslNamespace:
    context_ops = {
        "rank": dist_ops.rank,
        "nranks": dist_ops.nranks,
        "get_comm_ctx": dist_ops.get_comm_ctx,
        "world_size": dist_ops.world_size,
    }
    system = DslNamespace(
        "pypto.language.distributed.system",
        "pld.system",
        {
            **context_ops,
            "notify": dist_ops.notify,
            "wait": dist_ops.wait,
            "defer_wait": dist_ops.defer_wait,
            "async_session": async_put.async_session,
            "wait_async_event": async_put.wait_async_event,
        },
    )
    tile = DslNamespace(
        "pypto.language.distributed.tile",
        "pld.tile",
        {
            "remote_load": dist_ops.remote_load,
            "remote_store": dist_ops.remote_store,
            "put": dist_ops.tile_put,
            "get": dist_ops.tile_get,
        },
    )
    tensor = DslNamespace(
        "pypto.language.distributed.tensor",
        "pld.tensor",
        {
            "put": dist_ops.put,
            "put_async": async_put.put_async,
            "get": dist_ops.get,
            "remote_load": dist_ops.remote_load,
            "remote_store": dist_ops.remote_store,
            "barrier": builtins.barrier,
            "allreduce": builtins.allreduce,
            "broadcast": builtins.broadcast,
            "allgather": builtins.allgather,
            "reduce_scatter": builtins.reduce_scatter,
            "all_to_all": builtins.all_to_all,
            "all_to_all_v": builtins.all_to_all_v,
            "alloc_window_buffer": dist_ops.alloc_window_buffer,
            "window": dist_ops.window,
        },
    )
    return DslNamespace(
        "pypto.language.distributed",
        "pld",
        {
            **context_ops,
            "system": system,
            "tile": tile,
            "tensor": tensor,
            "alloc_window_buffer": dist_ops.alloc_window_buffer,
            "window": dist_ops.window,
            "remote_load": dist_ops.remote_load,
            "remote_store": dist_ops.remote_store,
            "all_reduce": collective_api.all_reduce,
            "all_gather": collective_api.all_gather,
            "reduce_scatter": collective_api.reduce_scatter,
            "broadcast": collective_api.broadcast,
            "barrier": collective_api.barrier,
            "all_to_all": collective_api.all_to_all,
            "all_to_all_v": collective_api.all_to_all_v,
            "DistributedTensor": types.DistributedTensor,
            "CommCtx": dist_ops.CommCtx,
            "CommCtxType": dist_ops.CommCtx,
            "NotifyOp": types.NotifyOp,
            "WaitCmp": types.WaitCmp,
            "AtomicType": types.AtomicType,
            "ReduceOp": types.ReduceOp,
        },
    )


class _TorchPlaceholder:
    """A torch attribute read at import time without torch installed: harmless, and so
    is calling it (a module-level golden tensor, `torch.full(...)`); only using what a
    call returned needs torch."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _TorchPlaceholder(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _TorchResult(f"{self._name}(...)", user_location())

    def __repr__(self) -> str:
        return self._name


class _TorchResult:
    """What a torch call returned without torch: any use of it is unsupported."""

    def __init__(self, name: str, made: SourceLocation) -> None:
        self._name = name
        self._made = made

    def _unsupported(self) -> UnsupportedConstruct:
        where = user_location()
        return UnsupportedConstruct(
            reason(ReasonCode.DSL_NEEDS_TORCH, name=self._name, line=self._made.line),
            file=where.file,
            line=where.line,
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._unsupported()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self._unsupported()

    def __bool__(self) -> bool:
        raise self._unsupported()

    def __iter__(self) -> Any:
        raise self._unsupported()

    def __repr__(self) -> str:
        return self._name


class _TorchStandIn(ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _TorchPlaceholder(f"torch.{name}")


def _passthrough(*args: Any, **kwargs: Any) -> Any:
    """A decorator used bare (`@pytest.fixture`) or called (`@pytest.mark.x(...)`)."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda function: function


class _PytestMark:
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _passthrough


class _PytestStandIn(ModuleType):
    """pytest for a test file loaded without pytest installed: its decorators (fixtures
    such as `test_config`, `mark.parametrize`) leave the test functions alone, which
    racecheck never runs; anything else is an inert call."""

    def __init__(self) -> None:
        super().__init__("pytest")
        self.mark = _PytestMark()
        self.fixture = _passthrough
        self.param = lambda *values, **options: values

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _inert_call(f"pytest.{name}")


def _build_modules() -> dict[str, ModuleType]:
    distributed = _distributed()
    language = _language(distributed)
    compiled_names = {
        "DistributedConfig": DistributedConfig,
        "DistributedCompiledProgram": DistributedCompiledProgram,
    }
    compiled_program = DslNamespace(
        "pypto.ir.distributed_compiled_program",
        "pypto.ir.distributed_compiled_program",
        compiled_names,
    )
    ir = DslNamespace(
        "pypto.ir",
        "pypto.ir",
        {
            "compile": _inert_call("ir.compile"),
            "distributed_compiled_program": compiled_program,
            **compiled_names,
        },
    )
    runtime = _DriverModule("pypto.runtime")
    runtime.__dict__.update(
        {"RunConfig": RunConfig, "DistributedConfig": DistributedConfig, **RUNTIME_CLASSES}
    )
    package = DslNamespace("pypto", "pypto", {"language": language, "ir": ir, "runtime": runtime})
    modules: dict[str, ModuleType] = {
        "pypto": package,
        "pypto.language": language,
        "pypto.language.distributed": distributed,
        "pypto.ir": ir,
        "pypto.ir.distributed_compiled_program": compiled_program,
        "pypto.runtime": runtime,
    }
    for module in modules.values():
        module.__path__ = []  # type: ignore[attr-defined]  # importable as packages
    return modules


MODULES = _build_modules()
_lock = threading.Lock()
_depth = 0
_saved: dict[str, ModuleType | None] = {}


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


_saved_exit: list[object] = []


def _exit_as_exception(code: int) -> None:
    """`os._exit` in the user's code ends that code, not racecheck."""
    raise SystemExit(code)


@contextmanager
def installed() -> Iterator[None]:
    """Make `import pypto...` (and a missing torch) resolve to racecheck's modules, and
    `os._exit` raise SystemExit (reported as the program's error)."""
    global _depth
    with _lock:
        if _depth == 0:
            replacements: dict[str, ModuleType] = dict(MODULES)
            if "torch" not in sys.modules and not _importable("torch"):
                replacements["torch"] = _TorchStandIn("torch")
            if "pytest" not in sys.modules and not _importable("pytest"):
                replacements["pytest"] = _PytestStandIn()
            for name, module in replacements.items():
                _saved[name] = sys.modules.get(name)
                sys.modules[name] = module
            sys.meta_path.insert(0, _DRIVER_FINDER)
            _saved_exit.append(os._exit)
            os._exit = _exit_as_exception  # type: ignore[assignment]
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                sys.meta_path.remove(_DRIVER_FINDER)
                os._exit = _saved_exit.pop()  # type: ignore[assignment]
                for name in [
                    name
                    for name, module in sys.modules.items()
                    if isinstance(module, _DriverModule)
                ]:
                    del sys.modules[name]
                for name, previous in _saved.items():
                    if previous is None:
                        sys.modules.pop(name, None)
                    else:
                        sys.modules[name] = previous
                _saved.clear()
