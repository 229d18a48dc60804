"""Loading a user file and discovering the programs in it (docs/guide.md).

`load_file` executes the file as a fresh module (never as `__main__`, so its
`main()` block does not run) with racecheck's `pypto` modules installed.
`discover` lists its programs: module-level `@pl.program` classes, module-level
`@pl.jit.host` entries, and factories (module-level functions whose body defines a
`@pl.program` class or `@pl.jit` functions and returns one, found from the AST),
each as a `ProgramSpec` that instantiates the program at a rank count P.

The rank count reaches a factory through one parameter, found by this rule: the
parameter `--rank-param NAME` names, else the first parameter whose lower-cased name is
one of `RANK_COUNT_NAMES` (nr, n, p, n_ranks, world_size, ...) and which is not
keyword-only with a default (`*, n=256` is a size). A factory without one is built
once per P with the same arguments. Factories the file imports from its own project
(`racecheck.project_imports`) count as the file's. `--arg` sets the other parameters (a bool
parameter accepts true/false, yes/no, on/off, 1/0); an `--arg` naming no parameter of a
selected program, or naming the rank-count parameter, is a usage error.

A `raise`/`assert` of the user's own code while building or running a program for a
P means the program rejects that P (`ProgramRejected`, the P is skipped); anything
else the user's code raises is a `TracingError` at its line.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import itertools
import os
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from racecheck.dsl.location import register_user_file, traceback_location
from racecheck.dsl.modules import installed
from racecheck.dsl.program import DslFunction, FunctionRole, Program, entry_parameters
from racecheck.dsl.types import DimExpr, DynVar, ScalarType, TensorType, resolve_dim
from racecheck.dsl.watchdog import Overrun, within
from racecheck.errors import LoadError, ProgramRejected, TracingError, UsageError, UserError
from racecheck.options import parse_bool
from racecheck.project_imports import project_imports, project_module_names

RANK_COUNT_NAMES = frozenset(
    {
        "nr",
        "n",
        "p",
        "n_ranks",
        "nranks",
        "num_ranks",
        "world_size",
        "world",
        "ranks",
        "n_devices",
        "num_devices",
        "nrank",
        "rank_count",
        "n_rank",
    }
)
USER_MODULE_PREFIX = "racecheck_user_"
REJECTING_EXCEPTIONS = (ValueError, AssertionError, NotImplementedError, RuntimeError)
_REJECTING_STATEMENTS = ("raise", "assert")


# ---------------------------------------------------------------------------- loading


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedFile:
    path: str  # as the user gave it; used in every message
    module: ModuleType
    source: str
    tree: ast.Module

    @property
    def namespace(self) -> dict[str, Any]:
        return vars(self.module)


def load_file(path: str, *, timeout: float = 60.0) -> LoadedFile:
    """Execute the user's file as a fresh module; any failure (or running past
    `timeout` seconds) is one `LoadError`."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            source = handle.read()
    except FileNotFoundError:
        raise LoadError("no such file", file=path) from None
    except (OSError, UnicodeDecodeError) as error:
        raise LoadError(f"cannot read the file: {error}", file=path) from None
    compiled_name = os.path.abspath(path)
    try:
        tree = ast.parse(source, filename=compiled_name)
        code = compile(tree, compiled_name, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise LoadError(f"syntax error: {error.msg}", file=path, line=error.lineno) from None
    register_user_file(compiled_name, path)
    module = _fresh_module(compiled_name)
    with installed(), project_imports(path):
        try:
            within(lambda: exec(code, module.__dict__), timeout)
        except Overrun as overrun:
            line = overrun.where.line if overrun.where else None
            raise LoadError(f"importing the file {overrun}", file=path, line=line) from None
        except UserError as error:
            if error.file is None:  # raised by racecheck's DSL: the user's line caused it
                where = traceback_location(error.__traceback__)
                error.file, error.line = path, where.line if where else None
            raise
        except BaseException as error:  # noqa: BLE001 - any import-time failure is a LoadError
            where = traceback_location(error.__traceback__)
            raise LoadError(
                f"importing the file {raised(error)}",
                file=path,
                line=where.line if where else None,
            ) from None
    return LoadedFile(path=path, module=module, source=source, tree=tree)


def _fresh_module(compiled_name: str) -> ModuleType:
    digest = hashlib.sha1(compiled_name.encode()).hexdigest()[:12]
    stem = os.path.splitext(os.path.basename(compiled_name))[0]
    name = f"{USER_MODULE_PREFIX}{stem}_{digest}".replace("-", "_").replace(".", "_")
    module = ModuleType(name)
    module.__file__ = compiled_name
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    return module


# ---------------------------------------------------------------------------- instances


@dataclass(frozen=True, slots=True, kw_only=True)
class HostParameter:
    name: str
    annotation: TensorType | ScalarType | None
    value: Any = None  # scalars: the value passed to the entry


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramInstance:
    """One program at one rank count, ready to simulate."""

    name: str
    ranks: int
    entry: DslFunction
    parameters: tuple[HostParameter, ...]
    bindings: tuple[tuple[str, int], ...] = ()  # values of pl.dynamic dims
    file: str = ""
    inputs: tuple[tuple[str, int, float], ...] = ()  # chosen elements: (tensor, index, value)
    # dispatches that run their tasks in another order the runtime allows (cosim.tasks)
    task_orders: tuple[tuple[int, int, tuple[int, ...]], ...] = ()
    # ranks that run their dispatches in another order the runtime allows (cosim.tasks)
    dispatch_orders: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # a `racecheck.cosim.threads.ThreadPlan`: its tasks run as threads, so planned
    thread_plan: object = None

    def shape_of(self, annotation: TensorType) -> tuple[int, ...]:
        return tuple(resolve_dim(dim, dict(self.bindings)) for dim in annotation.dims)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramOrigin:
    """Where a program comes from, for tracers that run it other than per P (allp)."""

    loaded: LoadedFile
    value: Any  # a @pl.program class, a @pl.jit.host entry, or a factory function
    keywords: tuple[tuple[str, Any], ...] = ()  # a factory's fixed arguments
    rank_parameter: str | None = None  # a factory's rank-count parameter
    args: tuple[tuple[str, str], ...] = ()  # --arg NAME=VALUE


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramSpec:
    name: str
    build: Callable[[int], ProgramInstance] = field(repr=False)
    parameters: tuple[str, ...] = ()  # the names `--arg` may set
    rank_param: str | None = None  # the factory parameter that receives P
    origin: ProgramOrigin | None = field(default=None, repr=False)
    single_device: bool = False  # runs on one device whatever --ranks asks (checked at P=1)

    def instantiate(self, ranks: int) -> ProgramInstance:
        """The program at `ranks`; raises ProgramRejected (skip this P) or UserError."""
        return self.build(ranks)


def rejection_message(error: BaseException) -> str | None:
    """The program's own message if `error` is a rejection raised by the user's code."""
    if not isinstance(error, REJECTING_EXCEPTIONS):
        return None
    if isinstance(error, RecursionError):
        return None
    frames = traceback.extract_tb(error.__traceback__)
    if not frames or not _is_registered(frames[-1].filename):
        return None
    if not (frames[-1].line or "").lstrip().startswith(_REJECTING_STATEMENTS):
        return None  # raised by an operation of the user's line, not by the program's rule
    text = str(error)
    if not text:
        last = frames[-1]
        text = f"{type(error).__name__} at line {last.lineno}: {(last.line or '').strip()}"
    return text


def raised(error: BaseException) -> str:
    """How user code failed, for a message: "raised ValueError: ..." or the exit it called."""
    if isinstance(error, SystemExit):
        return (
            f"called sys.exit/os._exit ({error.code}); racecheck cannot check a program"
            " that exits the process"
        )
    return f"raised {type(error).__name__}: {error}"


def _is_registered(filename: str) -> bool:
    from racecheck.dsl.location import is_user_file

    return is_user_file(filename)


def _user_call(loaded: LoadedFile, what: str, call: Callable[[], Any]) -> Any:
    with installed():
        try:
            return call()
        except (UserError, ProgramRejected):
            raise
        except BaseException as error:  # noqa: BLE001 - classified here
            message = rejection_message(error)
            if message is not None:
                raise ProgramRejected(message) from None
            where = traceback_location(error.__traceback__)
            raise TracingError(
                f"{what} {raised(error)}",
                file=loaded.path,
                line=where.line if where else None,
            ) from None


def _annotation(parameter: inspect.Parameter, function: Callable[..., Any]) -> Any:
    annotation = parameter.annotation
    if isinstance(annotation, str):
        scope = dict(getattr(function, "__globals__", {}))
        closure = inspect.getclosurevars(function)
        scope.update(closure.nonlocals)
        with installed():
            annotation = eval(annotation, scope)  # noqa: S307 - the user's own annotation
    return None if annotation is inspect.Parameter.empty else annotation


def _dynamic_symbols(annotations: list[Any]) -> tuple[set[str], set[str]]:
    """(all pl.dynamic symbols in host tensor dims, those that are a leading dim)."""
    symbols: set[str] = set()
    leading: set[str] = set()
    for annotation in annotations:
        if not isinstance(annotation, TensorType):
            continue
        for position, dim in enumerate(annotation.dims):
            if isinstance(dim, DimExpr):
                symbols |= dim.symbols()
                if position == 0 and isinstance(dim, DynVar):
                    leading.add(dim.name)
    return symbols, leading


def _instance(
    loaded: LoadedFile, name: str, entry: DslFunction, ranks: int, args: Mapping[str, str]
) -> ProgramInstance:
    parameters: list[HostParameter] = []
    annotations: list[Any] = []
    for parameter in entry_parameters(entry):
        annotation = _annotation(parameter, entry.function)
        annotations.append(annotation)
        if isinstance(annotation, TensorType):
            parameters.append(HostParameter(name=parameter.name, annotation=annotation))
            continue
        if parameter.name in args:
            value = parse_arg(args[parameter.name], loaded)
        elif parameter.default is not inspect.Parameter.empty:
            value = parameter.default
        else:
            raise UserError(
                f"{name}: host parameter {parameter.name!r} has no default; pass "
                f"--arg {parameter.name}=VALUE",
                file=loaded.path,
            )
        parameters.append(HostParameter(name=parameter.name, annotation=annotation, value=value))
    symbols, leading = _dynamic_symbols(annotations)
    bindings: dict[str, int] = {}
    for symbol in sorted(symbols):
        if symbol in args:
            bindings[symbol] = int(parse_arg(args[symbol], loaded))
        elif symbol in leading or symbol.lower() in RANK_COUNT_NAMES:
            bindings[symbol] = ranks
        else:
            raise UserError(
                f"{name}: dynamic dim {symbol} is not the rank count; pass --arg {symbol}=VALUE",
                file=loaded.path,
            )
    return ProgramInstance(
        name=name,
        ranks=ranks,
        entry=entry,
        parameters=tuple(parameters),
        bindings=tuple(bindings.items()),
        file=loaded.path,
    )


def _entry_of(value: Any, name: str, loaded: LoadedFile) -> DslFunction:
    if isinstance(value, Program):
        entry = _user_call(loaded, name, value.host_entry)
        if entry is None:
            raise UserError(
                f"program {name} has no host entry "
                "(@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator))",
                file=loaded.path,
            )
        return entry
    if isinstance(value, DslFunction) and value.role is FunctionRole.HOST:
        return value
    raise UserError(
        f"{name} returned {value!r}, not a @pl.program class or a @pl.jit.host entry",
        file=loaded.path,
    )


# ---------------------------------------------------------------------------- discovery


def parse_arg(text: str, loaded: LoadedFile) -> Any:
    """`--arg` VALUE: a Python literal, else an expression over the file, else a string.
    An expression that calls a function is meant to be evaluated: if that fails, the
    value is an error naming why, never a string. A bare name the file does not define
    is a string, even where Python has a builtin of that name (`--arg op=max`)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    if text.isidentifier() and text not in loaded.namespace:
        return text
    try:
        with installed():
            return eval(text, dict(loaded.namespace))  # noqa: S307 - the user's own expression
    except Exception as error:  # noqa: BLE001 - anything else is taken as a plain string
        if _calls(text):
            raise UsageError(
                f"--arg value {text!r} is evaluated over the file's names and {raised(error)}",
                file=loaded.path,
            ) from None
        return text


def _calls(text: str) -> bool:
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Call) for node in ast.walk(tree))


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _own_nodes(function: ast.FunctionDef) -> Iterator[ast.AST]:
    """Nodes of a function body, not descending into nested functions or classes."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


def _defines_program(function: ast.FunctionDef) -> bool:
    for node in ast.walk(function):
        if node is function:
            continue
        decorators = [
            _dotted(decorator).split(".") for decorator in getattr(node, "decorator_list", ())
        ]
        if isinstance(node, ast.ClassDef) and any(names[-1] == "program" for names in decorators):
            return True
        if isinstance(node, ast.FunctionDef) and any("jit" in names for names in decorators):
            return True
    return False


def _is_factory(function: ast.FunctionDef) -> bool:
    returns = any(
        isinstance(node, ast.Return) and node.value is not None for node in _own_nodes(function)
    )
    return returns and _defines_program(function)


def _factory_names(loaded: LoadedFile) -> list[str]:
    own = [
        node.name
        for node in loaded.tree.body
        if isinstance(node, ast.FunctionDef) and _is_factory(node)
    ]
    return own + _imported_factory_names(loaded)


def _imported_factory_names(loaded: LoadedFile) -> list[str]:
    """Factories the file imports from its own project (a PyPTO test whose program
    builder lives in a helper module next to it)."""
    served = project_module_names()
    return [
        name
        for name, value in loaded.namespace.items()
        if inspect.isfunction(value) and value.__module__ in served and _defined_as_factory(value)
    ]


def _defined_as_factory(function: Callable[..., Any]) -> bool:
    with open(inspect.getfile(function), encoding="utf-8-sig") as handle:
        tree = ast.parse(handle.read())
    return any(
        isinstance(node, ast.FunctionDef) and node.name == function.__name__ and _is_factory(node)
        for node in tree.body
    )


def _is_bool(parameter: inspect.Parameter) -> bool:
    return parameter.annotation in (bool, "bool") or isinstance(parameter.default, bool)


def _factory_parameters(factory: Callable[..., Any]) -> list[inspect.Parameter]:
    return [
        parameter
        for parameter in inspect.signature(factory).parameters.values()
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]


def rank_parameter_of(parameters: list[inspect.Parameter], rank_param: str | None) -> str | None:
    """The documented rule (module docstring): `--rank-param`, else the first known name
    that is not a keyword-only parameter with a default."""
    names = [parameter.name for parameter in parameters]
    if rank_param is not None:
        return rank_param if rank_param in names else None
    return next(
        (
            parameter.name
            for parameter in parameters
            if parameter.name.lower() in RANK_COUNT_NAMES and not _sized_by_default(parameter)
        ),
        None,
    )


def _sized_by_default(parameter: inspect.Parameter) -> bool:
    """`*, n: int = SIZE`: a keyword-only parameter with a default is a size the caller
    may override, not the rank count every caller must pass (PyPTO's
    `_build_allreduce_program(*, m0=1, n=SIZE)`)."""
    return parameter.kind is parameter.KEYWORD_ONLY and parameter.default is not parameter.empty


def _factory_arg(parameter: inspect.Parameter, text: str, loaded: LoadedFile) -> Any:
    if _is_bool(parameter):
        return parse_bool(f"--arg {parameter.name}={text}", text)
    return parse_arg(text, loaded)


def _factory_specs(
    loaded: LoadedFile, name: str, args: Mapping[str, str], rank_param: str | None = None
) -> list[ProgramSpec]:
    factory = loaded.namespace[name]
    parameters = _factory_parameters(factory)
    names = [parameter.name for parameter in parameters]
    rank_parameter = rank_parameter_of(parameters, rank_param)
    if rank_param is not None and rank_parameter is None:
        raise UsageError(
            f"--rank-param {rank_param}: {name}() has no parameter of that name "
            f"(parameters: {', '.join(names) or 'none'})",
            file=loaded.path,
        )
    if rank_parameter is not None and rank_parameter in args:
        raise UsageError(
            f"--arg {rank_parameter}: {name}() receives the rank count P through "
            f"{rank_parameter!r}; choose P with --ranks"
        )
    fixed: dict[str, Any] = {}
    both_ways: list[str] = []
    for parameter in parameters:
        if parameter.name == rank_parameter:
            continue
        if parameter.name in args:
            fixed[parameter.name] = _factory_arg(parameter, args[parameter.name], loaded)
        elif parameter.default is not inspect.Parameter.empty:
            continue
        elif _is_bool(parameter):
            both_ways.append(parameter.name)
        else:
            line = getattr(getattr(factory, "__code__", None), "co_firstlineno", None)
            raise UserError(
                f"factory {name}() has a parameter {parameter.name!r} without a default; "
                f"pass --arg {parameter.name}=VALUE (or --rank-param {parameter.name} "
                "if it is the rank count)",
                file=loaded.path,
                line=line,
            )
    specs = []
    for flags in itertools.product((True, False), repeat=len(both_ways)):
        chosen = dict(zip(both_ways, flags, strict=True))
        label = ",".join(f"{key}={value}" for key, value in chosen.items())
        spec_name = f"{name}[{label}]" if label else name
        specs.append(
            ProgramSpec(
                name=spec_name,
                build=_factory_builder(
                    loaded, spec_name, factory, {**fixed, **chosen}, rank_parameter, args
                ),
                parameters=(
                    *(n for n in names if n != rank_parameter),
                    *_module_dynamic_dims(loaded),
                ),
                rank_param=rank_parameter,
                origin=ProgramOrigin(
                    loaded=loaded,
                    value=factory,
                    keywords=tuple({**fixed, **chosen}.items()),
                    rank_parameter=rank_parameter,
                    args=tuple(args.items()),
                ),
            )
        )
    return specs


def _module_dynamic_dims(loaded: LoadedFile) -> tuple[str, ...]:
    """The module's pl.dynamic dims: a program a factory builds may size tensors by them."""
    return tuple(
        sorted({value.name for value in loaded.namespace.values() if isinstance(value, DynVar)})
    )


def _factory_builder(
    loaded: LoadedFile,
    spec_name: str,
    factory: Callable[..., Any],
    keywords: dict[str, Any],
    rank_parameter: str | None,
    args: Mapping[str, str],
) -> Callable[[int], ProgramInstance]:
    def build(ranks: int) -> ProgramInstance:
        call_keywords = dict(keywords)
        if rank_parameter is not None:
            call_keywords[rank_parameter] = ranks
        built = _user_call(loaded, f"{spec_name}", lambda: factory(**call_keywords))
        return _instance(loaded, spec_name, _entry_of(built, spec_name, loaded), ranks, args)

    return build


def _fixed_spec(loaded: LoadedFile, name: str, value: Any, args: Mapping[str, str]) -> ProgramSpec:
    return ProgramSpec(
        name=name,
        build=_fixed_builder(loaded, name, value, args),
        parameters=_entry_names(loaded, name, value),
        origin=ProgramOrigin(loaded=loaded, value=value, args=tuple(args.items())),
        single_device=_single_device_host(loaded, _entry_of(value, name, loaded)),
    )


def _single_device_host(loaded: LoadedFile, entry: DslFunction) -> bool:
    """A host that calls per-device functions and never passes `device=`: PyPTO runs
    those calls on its one device (its tests give it one device id)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(entry.function)))
    except (OSError, TypeError, SyntaxError):
        return False
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    if any(keyword.arg == "device" for call in calls for keyword in call.keywords):
        return False
    owner = getattr(entry.function, "__self__", None)
    scope = vars(type(owner)) if owner is not None else loaded.namespace
    return any(
        _is_chip_region(call)
        or isinstance(member := scope.get(_dotted(call.func).removeprefix("self.")), DslFunction)
        and member.role is FunctionRole.PER_DEVICE
        for call in calls
    )


def _is_chip_region(call: ast.Call) -> bool:
    """`pl.at(level=pl.Level.CHIP, ...)`: a region PyPTO outlines into a CHIP
    orchestration the host calls without `device=` (racecheck.dsl.host_regions)."""
    level = next((keyword.value for keyword in call.keywords if keyword.arg == "level"), None)
    if level is None and call.args:
        level = call.args[0]
    return (
        _dotted(call.func).endswith(".at")
        and level is not None
        and _dotted(level).endswith(".CHIP")
    )


def _chip_specs(
    loaded: LoadedFile, name: str, value: Program, args: Mapping[str, str]
) -> list[ProgramSpec]:
    """An L2-only program (orchestration functions, no host entry) has no ranks and no
    windows: PyPTO calls each orchestration on one device. Each is checked as a host
    that dispatches it to device 0, at P=1, so races between its tasks are still found."""
    specs = []
    for member, function in vars(value.cls).items():
        if isinstance(function, DslFunction) and function.role is FunctionRole.PER_DEVICE:
            spec_name = f"{name}.{member}"
            entry = _chip_entry(loaded, spec_name, value, member)
            specs.append(
                ProgramSpec(
                    name=spec_name,
                    build=_chip_builder(loaded, spec_name, entry, args),
                    parameters=_entry_names(loaded, spec_name, entry),
                    single_device=True,
                )
            )
    return specs


def _evaluated(parameter: inspect.Parameter, function: Callable[..., Any]) -> inspect.Parameter:
    annotation = _annotation(parameter, function)
    return parameter if annotation is None else parameter.replace(annotation=annotation)


def _chip_builder(
    loaded: LoadedFile, name: str, entry: DslFunction, args: Mapping[str, str]
) -> Callable[[int], ProgramInstance]:
    def build(ranks: int) -> ProgramInstance:
        for parameter in entry_parameters(entry):
            if parameter.annotation is inspect.Parameter.empty and parameter.name not in args:
                raise UserError(
                    f"{name}: parameter {parameter.name!r} has no type annotation; an L2-only"
                    " program is checked with host tensors of its orchestration's annotated"
                    " shapes",
                    file=loaded.path,
                )
        return _instance(loaded, name, entry, ranks, args)

    return build


def _chip_entry(loaded: LoadedFile, name: str, value: Program, member: str) -> DslFunction:
    orchestration = _user_call(loaded, name, lambda: getattr(value.cls(), member))
    parameters = [
        _evaluated(parameter, orchestration.function)
        for parameter in entry_parameters(orchestration)
    ]

    def host(*arguments: Any) -> Any:
        return orchestration(*arguments, device=0)

    host.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    host.__name__ = member
    return DslFunction(host, FunctionRole.HOST)


def _entry_names(loaded: LoadedFile, name: str, value: Any) -> tuple[str, ...]:
    """What `--arg` may set on a fixed program: the entry's scalar parameters and the
    pl.dynamic symbols of its tensor dims, except a leading one (that is the rank count)."""
    entry = _entry_of(value, name, loaded)
    parameters = entry_parameters(entry)
    annotations = [_annotation(parameter, entry.function) for parameter in parameters]
    symbols, leading = _dynamic_symbols(annotations)
    scalars = [
        parameter.name
        for parameter, annotation in zip(parameters, annotations, strict=True)
        if not isinstance(annotation, TensorType)
    ]
    return (*scalars, *sorted(symbols - leading))


def _fixed_builder(
    loaded: LoadedFile, name: str, value: Any, args: Mapping[str, str]
) -> Callable[[int], ProgramInstance]:
    def build(ranks: int) -> ProgramInstance:
        return _instance(loaded, name, _entry_of(value, name, loaded), ranks, args)

    return build


def _dispatches_nothing(value: Any) -> bool:
    """A program class with no host entry: a single-chip program, not a collective."""
    return not any(
        isinstance(member, DslFunction) and member.role is FunctionRole.HOST
        for member in vars(value.cls).values()
    )


def _single_chip_programs(loaded: LoadedFile) -> list[str]:
    return [
        name
        for name, value in loaded.namespace.items()
        if isinstance(value, Program)
        and value.defined_at_module_level
        and _dispatches_nothing(value)
    ]


def _module_level_programs(loaded: LoadedFile, args: Mapping[str, str]) -> list[ProgramSpec]:
    classes, entries = [], []
    for name, value in loaded.namespace.items():
        if isinstance(value, Program) and value.defined_at_module_level:
            if _dispatches_nothing(value):
                classes.extend(_chip_specs(loaded, name, value, args))
            else:
                classes.append(_fixed_spec(loaded, name, value, args))
        elif (
            isinstance(value, DslFunction)
            and value.role is FunctionRole.HOST
            and "<locals>" not in value.__qualname__
        ):
            entries.append(_fixed_spec(loaded, name, value, args))
    return classes + entries


def discover(
    loaded: LoadedFile,
    *,
    programs: tuple[str, ...] = (),
    args: Mapping[str, str] | None = None,
    rank_param: str | None = None,
) -> list[ProgramSpec]:
    """The programs of a loaded file, in the documented order, or those named in `programs`."""
    arguments = dict(args or {})
    if programs:
        specs = [spec for name in programs for spec in _named(loaded, name, arguments, rank_param)]
    else:
        specs = _all_programs(loaded, arguments, rank_param)
    _check_arg_names(specs, arguments, loaded)
    if rank_param is not None and all(spec.rank_param != rank_param for spec in specs):
        raise UsageError(
            f"--rank-param {rank_param}: no selected factory has a parameter of that name",
            file=loaded.path,
        )
    return specs


def _check_arg_names(specs: list[ProgramSpec], args: Mapping[str, str], loaded: LoadedFile) -> None:
    known = {name for spec in specs for name in spec.parameters}
    unknown = [name for name in args if name not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise UsageError(
            f"--arg {unknown[0]}: no selected program has a parameter of that name "
            f"(parameters: {listed})",
            file=loaded.path,
        )


def _all_programs(
    loaded: LoadedFile, arguments: Mapping[str, str], rank_param: str | None
) -> list[ProgramSpec]:
    specs = _module_level_programs(loaded, arguments)
    for name in _factory_names(loaded):
        specs.extend(_factory_specs(loaded, name, arguments, rank_param))
    if not specs:
        single_chip = _single_chip_programs(loaded)
        found = (
            (
                f" ({', '.join(single_chip)} has no host entry: nothing is dispatched to "
                "ranks, so there is no collective to check)"
            )
            if single_chip
            else ""
        )
        raise UserError(
            "no program found: expected a @pl.program class with a host entry, a "
            f"@pl.jit.host entry or a factory function that returns one{found}",
            file=loaded.path,
        )
    return specs


def _named(
    loaded: LoadedFile, name: str, args: Mapping[str, str], rank_param: str | None
) -> list[ProgramSpec]:
    base = name.split("[", 1)[0]
    value = loaded.namespace.get(base)
    owner = loaded.namespace.get(base.split(".", 1)[0])
    if isinstance(owner, Program) and _dispatches_nothing(owner):  # `Class` or `Class.orch`
        chip = _chip_specs(loaded, base.split(".", 1)[0], owner, args)
        chosen = [spec for spec in chip if base in (spec.name, spec.name.split(".", 1)[0])]
        if chosen:
            return chosen
    elif isinstance(value, (Program, DslFunction)):
        return [_fixed_spec(loaded, base, value, args)]
    if inspect.isfunction(value):
        specs = _factory_specs(loaded, base, args, rank_param)
        chosen = [spec for spec in specs if name in (spec.name, base)]
        if chosen:
            return chosen
    available = ", ".join(spec.name for spec in _all_programs(loaded, args, rank_param)) or "none"
    raise UserError(f"--program {name}: no such program (available: {available})", file=loaded.path)
