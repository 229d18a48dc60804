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
import dataclasses
import hashlib
import inspect
import itertools
import math
import os
import sys
import textwrap
import traceback
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from racecheck.assumptions import Assumption
from racecheck.dsl.location import register_user_file, traceback_location
from racecheck.dsl.modules import installed
from racecheck.dsl.program import DslFunction, FunctionRole, Program, entry_parameters
from racecheck.dsl.types import DimExpr, DynVar, ScalarType, TensorType, resolve_dim
from racecheck.dsl.watchdog import Overrun, within
from racecheck.errors import (
    LoadError,
    NoProgram,
    ProgramRejected,
    TracingError,
    UsageError,
    UserError,
)
from racecheck.file_harness import FileInputs, NotCaptured, capture
from racecheck.options import DEFAULT_CORES, Options, parse_bool
from racecheck.project_imports import (
    ImportConfig,
    forget_project_modules,
    project_imports,
    project_module_names,
)
from racecheck.report.reasons import ReasonCode, reason
from racecheck.rounds import NO_CALLS, Calls

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
    config: ImportConfig = ImportConfig()  # what the import saw, `{P}` replaced

    @property
    def namespace(self) -> dict[str, Any]:
        return vars(self.module)


def load_file(
    path: str,
    *,
    timeout: float = math.inf,
    config: ImportConfig | None = None,
    rejecting: bool = False,
) -> LoadedFile:
    """Execute the user's file as a fresh module with `config`'s command line and
    environment; any failure (or running past `timeout` seconds) is one `LoadError` — or,
    with `rejecting`, a `raise`/`assert` of the file's own code is `ProgramRejected` (the
    file refuses the P its configuration names)."""
    config = config or ImportConfig()
    try:
        with open(path, encoding="utf-8-sig") as handle:
            source = handle.read()
    except FileNotFoundError:
        raise LoadError(reason(ReasonCode.NO_SUCH_FILE), file=path) from None
    except (OSError, UnicodeDecodeError) as error:
        raise LoadError(reason(ReasonCode.UNREADABLE, why=str(error)), file=path) from None
    compiled_name = os.path.abspath(path)
    try:
        tree = ast.parse(source, filename=compiled_name)
        code = compile(tree, compiled_name, "exec", dont_inherit=True)
    except SyntaxError as error:
        raise LoadError(
            reason(ReasonCode.SYNTAX, why=error.msg), file=path, line=error.lineno
        ) from None
    register_user_file(compiled_name, path)
    module = _fresh_module(compiled_name)
    with installed(), project_imports(path, config):
        try:
            within(lambda: exec(code, module.__dict__), timeout)
        except Overrun as overrun:
            line = overrun.where.line if overrun.where else None
            raise LoadError(
                reason(ReasonCode.IMPORT_FAILED, how=str(overrun)), file=path, line=line
            ) from None
        except UserError as error:
            if error.file is None:  # raised by racecheck's DSL: the user's line caused it
                where = traceback_location(error.__traceback__)
                error.file, error.line = path, where.line if where else None
            raise
        except BaseException as error:  # noqa: BLE001 - any import-time failure is a LoadError
            refusal = rejection_message(error) if rejecting else None
            if refusal is not None:
                raise ProgramRejected(f"importing the file: {refusal}") from None
            where = traceback_location(error.__traceback__)
            raise LoadError(
                reason(ReasonCode.IMPORT_FAILED, how=raised(error)),
                file=path,
                line=where.line if where else None,
            ) from None
    return LoadedFile(path=path, module=module, source=source, tree=tree, config=config)


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
    assumed: tuple[Assumption, ...] = ()  # --assume: the input elements' declared ranges
    # dispatches that run their tasks in another order the runtime allows (cosim.tasks)
    # a `racecheck.cosim.threads.ThreadPlan`: its tasks run as threads, so planned
    thread_plan: object = None
    cores: int = DEFAULT_CORES  # --cores: the cores of each rank its threads hold
    calls: Calls = NO_CALLS  # --rounds and --per-call (racecheck.rounds)
    # what the file's own harness call states (`racecheck.file_harness`): its input values
    given: FileInputs | None = None
    harness_stopped: str = ""  # why the file's test stopped before that call ("": it did not)

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
        text = reason(
            ReasonCode.REJECTED_SILENTLY,
            error=type(error).__name__,
            line=str(last.lineno),
            text=(last.line or "").strip(),
        )
    return text


def raised(error: BaseException) -> str:
    """How user code failed, for a message: "raised ValueError: ..." or the exit it called."""
    if isinstance(error, SystemExit):
        return reason(ReasonCode.EXITED, status=str(error.code))
    return reason(ReasonCode.RAISED, error=type(error).__name__, why=str(error))


def classify_raised(
    error: BaseException, what: str, *, in_kernel: bool = False, file: str | None = None
) -> ProgramRejected | TracingError:
    """The one classifier of what user code raised: a `raise` or `assert` statement of
    the user's file, outside kernels, is the program rejecting this P (docs/model.md §3;
    a kernel does not reject a P); anything else is an error of the program, at the
    user's line it came from (`file` when no line of theirs is on the traceback)."""
    if isinstance(error, ProgramRejected):
        return error
    where = traceback_location(error.__traceback__)
    message = None if in_kernel else rejection_message(error)
    if message is not None and where is not None:
        return ProgramRejected(message)
    return TracingError(
        f"{what} {raised(error)}",
        file=where.file if where else file,
        line=where.line if where else None,
    )


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
            raise classify_raised(error, what, file=loaded.path) from None


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


@dataclass(frozen=True, slots=True, kw_only=True)
class HostBinding:
    """A host entry's parameters bound by the one rule the co-simulation and the every-P
    tracer share: a tensor takes its annotation; a scalar its `--arg`, else its default;
    a `pl.dynamic` dim its `--arg`, else P if it is a leading host-tensor dim or named
    like a rank count (`RANK_COUNT_NAMES`)."""

    parameters: tuple[HostParameter, ...]
    dims: tuple[tuple[str, int | None], ...]  # sorted by name; None: the rank count
    given: FileInputs | None = None  # the file's own harness call, when it ran to one
    harness_stopped: str = ""  # why the file's test stopped before its harness call

    @property
    def rank_dims(self) -> frozenset[str]:
        return frozenset(symbol for symbol, value in self.dims if value is None)

    def dim_values(self, ranks: int) -> tuple[tuple[str, int], ...]:
        return tuple((symbol, ranks if value is None else value) for symbol, value in self.dims)


def bind_host(
    loaded: LoadedFile,
    name: str,
    function: Callable[..., Any],
    signature: Sequence[inspect.Parameter],
    args: Mapping[str, str],
) -> HostBinding:
    """Bind the host entry `function`'s parameters `signature`; a UserError names what
    has no value. A value the file's own harness call states (`file_harness`) comes
    after `--arg` and before a parameter's default."""
    given = harness_inputs(loaded, name, function)
    stated_scalars = given.scalars if isinstance(given, FileInputs) else {}
    parameters: list[HostParameter] = []
    specified: dict[str, Any] = {}  # the file's own ScalarSpec values, read on first need
    for parameter in signature:
        annotation = _annotation(parameter, function)
        if isinstance(annotation, TensorType):
            parameters.append(HostParameter(name=parameter.name, annotation=annotation))
            continue
        if parameter.name in args:
            value = parse_arg(args[parameter.name], loaded)
        elif parameter.name in stated_scalars:
            value = stated_scalars[parameter.name]
        elif parameter.default is not inspect.Parameter.empty:
            value = parameter.default
        elif parameter.name in (specified := specified or file_scalars(loaded)):
            value = specified[parameter.name]
        else:
            raise UserError(
                _unbound(
                    reason(ReasonCode.HOST_PARAMETER_UNBOUND, name=name, parameter=parameter.name),
                    given,
                ),
                file=loaded.path,
            )
        parameters.append(HostParameter(name=parameter.name, annotation=annotation, value=value))
    symbols, leading = _dynamic_symbols([parameter.annotation for parameter in parameters])
    dims: list[tuple[str, int | None]] = []
    stated = _stated_dims(loaded, parameters)
    if isinstance(given, FileInputs):
        stated = {**stated, **_harness_dims(given, parameters)}
    for symbol in sorted(symbols):
        if symbol in args:
            dims.append((symbol, int(parse_arg(args[symbol], loaded))))
        elif symbol in leading or symbol.lower() in RANK_COUNT_NAMES:
            dims.append((symbol, None))
        elif symbol in stated:
            dims.append((symbol, stated[symbol]))
        else:
            raise UserError(
                _unbound(reason(ReasonCode.DIM_UNBOUND, name=name, dim=symbol), given),
                file=loaded.path,
            )
    return HostBinding(
        parameters=tuple(parameters),
        dims=tuple(dims),
        given=given if isinstance(given, FileInputs) else None,
        harness_stopped=given.reason if isinstance(given, NotCaptured) else "",
    )


def _unbound(message: str, given: FileInputs | NotCaptured | None) -> str:
    """The unbound-value message, with why the file's own test did not supply it."""
    if isinstance(given, NotCaptured):
        return f"{message} (the file's own test states it, but {given.reason})"
    return message


_harness_cache: weakref.WeakKeyDictionary[ModuleType, dict[str, FileInputs | NotCaptured | None]]
_harness_cache = weakref.WeakKeyDictionary()


def harness_inputs(
    loaded: LoadedFile, name: str, function: Callable[..., Any]
) -> FileInputs | NotCaptured | None:
    """What the file's `__main__` harness call for the entry states, run once per import."""
    cached = _harness_cache.setdefault(loaded.module, {})
    if name not in cached:

        def is_entry(value: Any) -> bool:
            return value is function or getattr(value, "function", None) is function

        with installed(), project_imports(loaded.path, loaded.config):
            cached[name] = capture(loaded.tree, loaded.path, loaded.namespace, is_entry)
    return cached[name]


def _harness_dims(given: FileInputs, parameters: list[HostParameter]) -> dict[str, int]:
    """pl.dynamic dims a host tensor's spec shape fixes (a plain symbol at that axis)."""
    found: dict[str, int] = {}
    for parameter in parameters:
        annotation, spec = parameter.annotation, given.tensors.get(parameter.name)
        if not isinstance(annotation, TensorType) or spec is None:
            continue
        if len(spec.shape) != len(annotation.dims):
            continue
        for dim, value in zip(annotation.dims, spec.shape, strict=True):
            if isinstance(dim, DynVar):
                found.setdefault(dim.name, value)
    return found


def _instance(
    loaded: LoadedFile, name: str, entry: DslFunction, ranks: int, args: Mapping[str, str]
) -> ProgramInstance:
    binding = bind_host(loaded, name, entry.function, entry_parameters(entry), args)
    return ProgramInstance(
        name=name,
        ranks=ranks,
        entry=entry,
        parameters=binding.parameters,
        bindings=binding.dim_values(ranks),
        file=loaded.path,
        given=binding.given,
        harness_stopped=binding.harness_stopped,
    )


def file_scalars(loaded: LoadedFile) -> dict[str, Any]:
    """The scalar inputs the file states itself: `ScalarSpec("name", dtype, value)` in
    its test specs (pypto-lib's `build_tensor_specs()`), where `value` is a literal, a
    module name, or a number the enclosing function knows before it (its parameters'
    defaults, its plain assignments: the value the file's own test runs with). The
    first statement of a name wins; the file's test code is read, never run."""
    found: dict[str, Any] = {}
    for name, value, known in _spec_calls(loaded, _SCALAR_SPEC, 3):
        resolved = _spec_value(value, known, loaded)
        if resolved is not _UNRESOLVED:
            found.setdefault(name, resolved)
    return found


_SCALAR_SPEC = "ScalarSpec"
_TENSOR_SPEC = "TensorSpec"
_UNRESOLVED = object()


def _spec_calls(
    loaded: LoadedFile, constructor: str, arguments: int
) -> Iterator[tuple[str, ast.expr, dict[str, Any]]]:
    """Each `constructor("name", ...)` call with at least `arguments` positional
    arguments in the file's functions: its name, the argument after the name's last
    one that matters (`arguments - 1`), and the numbers its function knows there."""
    for function in ast.walk(loaded.tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        known: dict[str, Any] | None = None
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and _dotted(node.func).endswith(constructor)):
                continue
            if len(node.args) < arguments or not isinstance(node.args[0], ast.Constant):
                continue
            if isinstance(node.args[0].value, str):
                known = _function_values(function, loaded) if known is None else known
                yield node.args[0].value, node.args[arguments - 1], known


def _stated_dims(loaded: LoadedFile, parameters: list[HostParameter]) -> dict[str, int]:
    """pl.dynamic dims the file's own test fixes: `TensorSpec("name", [d0, d1, ...], ...)`
    for a host tensor parameter whose annotation has a dynamic dim at that axis."""
    shapes: dict[str, list[Any]] = {}
    for name, shape, known in _spec_calls(loaded, _TENSOR_SPEC, 2):
        if isinstance(shape, ast.List):
            shapes.setdefault(name, [_spec_value(dim, known, loaded) for dim in shape.elts])
    found: dict[str, int] = {}
    for parameter in parameters:
        annotation, stated = parameter.annotation, shapes.get(parameter.name)
        if not isinstance(annotation, TensorType) or stated is None:
            continue
        if len(stated) != len(annotation.dims):
            continue
        for dim, value in zip(annotation.dims, stated, strict=True):
            if isinstance(dim, DynVar) and isinstance(value, int) and dim.name not in found:
                found[dim.name] = value
    return found


def _parameter_defaults(function: ast.FunctionDef) -> dict[str, ast.expr]:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    with_defaults = positional[len(positional) - len(arguments.defaults) :]
    pairs = list(zip(with_defaults, arguments.defaults, strict=True))
    pairs += [
        (argument, default)
        for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if default is not None
    ]
    return {argument.arg: default for argument, default in pairs}


def _function_values(function: ast.FunctionDef, loaded: LoadedFile) -> dict[str, Any]:
    """The numbers a spec-building function knows before its specs: its parameters'
    defaults, then its top-level `name = expression` statements, in order."""
    known: dict[str, Any] = {}
    for name, default in _parameter_defaults(function).items():
        value = _spec_value(default, known, loaded)
        if value is not _UNRESOLVED:
            known[name] = value
    for statement in function.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                value = _spec_value(statement.value, known, loaded)
                if value is not _UNRESOLVED:
                    known[target.id] = value
    return known


def _spec_value(node: ast.expr, known: Mapping[str, Any], loaded: LoadedFile) -> Any:
    """A number the expression evaluates to over the module and `known`, else _UNRESOLVED."""
    if not isinstance(node, (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp)):
        return _UNRESOLVED
    if any(isinstance(inner, ast.Call) for inner in ast.walk(node)):
        return _UNRESOLVED  # the file's test code is read, never run
    try:
        with installed():
            code = compile(ast.Expression(node), loaded.path, "eval")
            value = eval(code, {**loaded.namespace, **known})  # noqa: S307 - the file's own
    except Exception:  # noqa: BLE001 - not a value the file's module defines
        return _UNRESOLVED
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _UNRESOLVED
    return value


def _entry_of(value: Any, name: str, loaded: LoadedFile) -> DslFunction:
    if isinstance(value, Program):
        entry = _user_call(loaded, name, value.host_entry)
        if entry is None:
            raise UserError(reason(ReasonCode.NO_HOST_ENTRY, name=name), file=loaded.path)
        return entry
    if isinstance(value, DslFunction) and value.role is FunctionRole.HOST:
        return value
    raise UserError(
        reason(ReasonCode.NOT_A_PROGRAM, name=name, value=repr(value)),
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
                reason(ReasonCode.ARG_FAILED, text=text, how=raised(error)),
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
        if isinstance(node, ast.FunctionDef) and any(
            "jit" in names and names[-1] not in _HELPER_JIT for names in decorators
        ):
            return True
    return False


_HELPER_JIT = ("inline", "incore")  # a function binding one of these returns a helper


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
            reason(
                ReasonCode.RANK_PARAM_UNKNOWN,
                param=rank_param,
                name=name,
                parameters=", ".join(names) or "none",
            ),
            file=loaded.path,
        )
    if rank_parameter is not None and rank_parameter in args:
        raise UsageError(reason(ReasonCode.ARG_IS_RANK_COUNT, param=rank_parameter, name=name))
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
                reason(ReasonCode.FACTORY_PARAMETER_UNBOUND, name=name, parameter=parameter.name),
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
                    reason(ReasonCode.L2_UNANNOTATED, name=name, parameter=parameter.name),
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
            reason(ReasonCode.RANK_PARAM_UNUSED, param=rank_param),
            file=loaded.path,
        )
    return specs


def _check_arg_names(specs: list[ProgramSpec], args: Mapping[str, str], loaded: LoadedFile) -> None:
    known = {name for spec in specs for name in spec.parameters}
    unknown = [name for name in args if name not in known]
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise UsageError(
            reason(ReasonCode.ARG_UNKNOWN, arg=unknown[0], parameters=listed),
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
            reason(ReasonCode.ONLY_SINGLE_CHIP, programs=", ".join(single_chip))
            if single_chip
            else ""
        )
        raise NoProgram(reason(ReasonCode.NO_PROGRAM, found=found), file=loaded.path)
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
    raise UserError(
        reason(ReasonCode.NO_SUCH_PROGRAM, name=name, available=available), file=loaded.path
    )


# ---------------------------------------------------------------------------- per-P imports


def load_programs(path: str, options: Options) -> list[ProgramSpec]:
    """The file's programs. A file whose import depends on P (`{P}` in `--argv`/`--env`)
    is imported afresh, with its project modules, for each P it is built at: a model
    library fixes P in its shapes and in shared config modules when it is imported."""
    config = options.import_config
    if not config.per_p:
        return _discovered(load_file(path, timeout=options.timeout, config=config), options)
    imports = _PerP(path, options)
    specs = imports.first()
    return [
        dataclasses.replace(spec, build=imports.builder(index), origin=None)
        for index, spec in enumerate(specs)
    ]


def _discovered(loaded: LoadedFile, options: Options) -> list[ProgramSpec]:
    return discover(
        loaded, programs=options.programs, args=dict(options.args), rank_param=options.rank_param
    )


class _PerP:
    """The file imported at each P, discovered once per import."""

    def __init__(self, path: str, options: Options) -> None:
        self._path, self._options = path, options
        self._specs: dict[int, list[ProgramSpec]] = {}
        self._names: tuple[str, ...] = ()

    def first(self) -> list[ProgramSpec]:
        """The programs at the first P the file accepts at import (the names every P has)."""
        options = self._options
        candidates = (options.every_p.low,) if options.every_p is not None else ()
        refusals = []
        for ranks in dict.fromkeys((*candidates, *options.ranks)):
            try:
                specs = self._at(ranks)
            except ProgramRejected as refusal:
                refusals.append(f"P={ranks}: {refusal}")
                continue
            self._names = tuple(spec.name for spec in specs)
            return specs
        raise LoadError(
            f"the file refuses every P it was imported at ({'; '.join(refusals)})", file=self._path
        )

    def _at(self, ranks: int) -> list[ProgramSpec]:
        if ranks not in self._specs:
            forget_project_modules(
                between_imports=True
            )  # the file's sibling modules are imported afresh too
            config = self._options.import_config.at(ranks)
            loaded = load_file(
                self._path, timeout=self._options.timeout, config=config, rejecting=True
            )
            self._specs[ranks] = _discovered(loaded, self._options)
        return self._specs[ranks]

    def builder(self, index: int) -> Callable[[int], ProgramInstance]:
        def build(ranks: int) -> ProgramInstance:
            specs = self._at(ranks)
            name = self._names[index]
            chosen = next((spec for spec in specs if spec.name == name), None)
            if chosen is None:
                raise ProgramRejected(f"imported at P={ranks}, the file has no program {name}")
            return chosen.build(ranks)

        return build
