"""The `pypto` modules a user file imports, and installing them while it is loaded.

`installed()` puts racecheck's `pypto`, `pypto.language` (pl),
`pypto.language.distributed` (pld), `pypto.ir`, `pypto.ir.distributed_compiled_program`
and `pypto.runtime` into `sys.modules` (and a torch stand-in when torch is not
importable) and restores the previous entries afterwards. Reading a name the DSL
does not define raises `UnsupportedConstruct` at the user's line. Driver-only names
(`ir.compile`, `DistributedConfig`, `RunConfig`) are inert: they import and
construct, but running a program on hardware is never modelled. Other `pypto.*`
modules outside `pypto.language` (`pypto.runtime.device_runner`, ...) are driver
modules: they import, and their names are inert calls.
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

from racecheck.dsl import builtins, dist_ops, dtypes, local_ops, program, types
from racecheck.dsl.location import user_location
from racecheck.errors import UnsupportedConstruct


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
            f"{self._display}.{name} is not part of the DSL racecheck models",
            file=where.file,
            line=where.line,
        )


class _Inert:
    """A driver-only object (config, compile): constructible, never run."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class DistributedConfig(_Inert):
    pass


class RunConfig(_Inert):
    pass


def _inert_call(name: str) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        where = user_location()
        raise UnsupportedConstruct(
            f"{name} runs the program on hardware; racecheck never runs main() or the driver",
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


class _DriverModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves unknown `pypto.*` modules outside `pypto.language` as driver modules."""

    def find_spec(
        self, fullname: str, path: object, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("pypto.") or fullname.startswith("pypto.language"):
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
        "range": local_ops.range_,
        "parallel": local_ops.range_,
        "yield_": local_ops.yield_,
        "tile": DslNamespace("pypto.language.tile", "pl.tile", dict(LOCAL_OPS)),
        "tensor": DslNamespace(
            "pypto.language.tensor", "pl.tensor", {**LOCAL_OPS, "slice": local_ops.tensor_slice}
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
        },
    )
    tile = DslNamespace(
        "pypto.language.distributed.tile",
        "pld.tile",
        {
            "remote_load": dist_ops.remote_load,
            "remote_store": dist_ops.remote_store,
        },
    )
    tensor = DslNamespace(
        "pypto.language.distributed.tensor",
        "pld.tensor",
        {
            "put": dist_ops.put,
            "get": dist_ops.get,
            "remote_load": dist_ops.remote_load,
            "remote_store": dist_ops.remote_store,
            "barrier": builtins.barrier,
            "allreduce": builtins.allreduce,
            "broadcast": builtins.broadcast,
            "allgather": builtins.allgather,
            "reduce_scatter": builtins.reduce_scatter,
            "all_to_all": builtins.all_to_all,
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
            "DistributedTensor": types.DistributedTensor,
            "CommCtx": dist_ops.CommCtx,
            "NotifyOp": types.NotifyOp,
            "WaitCmp": types.WaitCmp,
            "AtomicType": types.AtomicType,
            "ReduceOp": types.ReduceOp,
        },
    )


class _TorchPlaceholder:
    """A torch attribute read at import time without torch installed: harmless until called."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _TorchPlaceholder(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        where = user_location()
        raise UnsupportedConstruct(
            f"this file uses torch at import time ({self._name}(...)); install torch",
            file=where.file,
            line=where.line,
        )

    def __repr__(self) -> str:
        return self._name


class _TorchStandIn(ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _TorchPlaceholder(f"torch.{name}")


def _build_modules() -> dict[str, ModuleType]:
    distributed = _distributed()
    language = _language(distributed)
    compiled_program = DslNamespace(
        "pypto.ir.distributed_compiled_program",
        "pypto.ir.distributed_compiled_program",
        {"DistributedConfig": DistributedConfig},
    )
    ir = DslNamespace(
        "pypto.ir",
        "pypto.ir",
        {
            "compile": _inert_call("ir.compile"),
            "distributed_compiled_program": compiled_program,
            "DistributedConfig": DistributedConfig,
        },
    )
    runtime = DslNamespace(
        "pypto.runtime",
        "pypto.runtime",
        {
            "RunConfig": RunConfig,
            "DistributedConfig": DistributedConfig,
        },
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


def _torch_importable() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
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
            if "torch" not in sys.modules and not _torch_importable():
                replacements["torch"] = _TorchStandIn("torch")
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
