"""The file's own test, run up to its harness call: the inputs and golden it hands to
`run_jit`/`run` (pypto-lib's `golden.run_jit(fn=ENTRY, specs=build_tensor_specs(...),
golden_fn=golden_x)`, PyPTO's test harness).

A model library states the scalars, dynamic dims and input tensors a host entry runs
with in its spec builders, driven by the `__main__` block's own command line
(`args.num_tokens`, `for local_t in (...)`). racecheck runs that block in the loaded
module with the file's `--argv`, its harness calls redirected: the first call whose
`fn=` is the checked entry stops the block and hands over its `specs` and
`golden_fn`; any other harness call returns a passing result without running. The
spec builders are the file's code and usually compute with torch: without torch the
capture stops at the first torch use and says so in one line.

Tensor values are made on first need (`FileInputs.values`), so a spec whose
`init_value` is a callable costs nothing unless the run reads it. With torch, the
builders run with every tensor larger than `SHAPE_ONLY_BYTES` made on torch's `meta`
device (shape and dtype, no storage; what is computed from it is shape-only too): a
model's weights, built and quantised eagerly by its builders, cost neither memory nor
time, and take the co-simulation's rule for large host tensors (zeros, never
materialised). A builder that reads such a tensor's values is not captured.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from racecheck.dsl.watchdog import Overrun

HARNESS_CALLS = ("run_jit", "run")
SHAPE_ONLY_BYTES = 64 << 20
_HOOK = "__racecheck_harness__"
_STATED = ("fn", "specs", "golden_fn")


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorInput:
    name: str
    shape: tuple[int, ...]
    is_output: bool
    dtype: Any = None  # the spec's own (a torch dtype in pypto-lib's)
    make: Callable[[], Any] = field(repr=False)  # the spec's own tensor, on first need


@dataclass(slots=True, kw_only=True)
class FileInputs:
    """What the file's harness call states for one host entry."""

    line: int  # the harness call's line
    scalars: dict[str, Any]
    tensors: dict[str, TensorInput]
    golden: Callable[[dict[str, Any]], Any] | None = None
    tensors_made: _Tensors | None = None
    rtol: float = 1e-5
    atol: float = 1e-5
    _made: dict[str, np.ndarray] = field(default_factory=dict)

    def values(self, name: str, shape: tuple[int, ...]) -> np.ndarray | None:
        """The spec's values for tensor `name` as numpy (made once), or None when the
        spec states none of that shape, or its values need torch and it is not
        installed (the inputs are then drawn by --seed, as the file's note says)."""
        spec = self.tensors.get(name)
        if spec is None or spec.shape != shape:
            return None
        if name not in self._made:
            made = self.tensors_made or _Tensors()
            try:
                with made.running():
                    self._made[name] = made.as_numpy(spec.make()).reshape(shape)
            except Exception:
                if made.mode is not None:
                    raise  # with torch, the file's own code failed: not hidden
                return None  # its maker computes with torch (pypto-lib's create_tensor)
        return self._made[name]


class Captured(Exception):  # noqa: N818 - a control-flow signal, not an error
    def __init__(self, call: Mapping[str, Any], line: int) -> None:
        super().__init__("harness call captured")
        self.call, self.line = dict(call), line


@dataclass(frozen=True, slots=True)
class NotCaptured:
    """Why the harness call could not be run to: one line in the user's terms."""

    reason: str


def harness_lines(tree: ast.Module) -> list[int]:
    """The lines of the harness calls the `__main__` block makes, itself or in a module
    function it calls by name (`main()`); none: nothing to run."""
    blocks = [*_called_functions(tree), *_main_blocks(tree)]
    return [call.lineno for block in blocks for call in _harness_calls(block)]


def _called_functions(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module functions the `__main__` block calls by name: redefined with their
    harness calls redirected before the block runs."""
    called = {
        node.func.id
        for block in _main_blocks(tree)
        for node in ast.walk(block)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    return [
        statement
        for statement in tree.body
        if isinstance(statement, ast.FunctionDef) and statement.name in called
    ]


def capture(
    tree: ast.Module, path: str, namespace: dict[str, Any], is_entry: Callable[[Any], bool]
) -> FileInputs | NotCaptured | None:
    """Run the file's `__main__` block in `namespace` up to its first harness call for
    the entry (`is_entry(fn)`); None when the block has no harness call for it."""
    blocks: list[ast.stmt] = [*_called_functions(tree), *_main_blocks(tree)]
    if not any(_harness_calls(block) for block in blocks):
        return None
    body = ast.Module(body=[_Redirect().visit(block) for block in blocks], type_ignores=[])
    ast.fix_missing_locations(body)
    scope = dict(namespace)
    scope[_HOOK] = _hook(is_entry)
    tensors = _Tensors()
    try:
        with tensors.running():
            exec(compile(body, path, "exec"), scope)  # noqa: S102 - the file's own test code
    except Captured as captured:
        return _inputs(captured, tensors)
    except SystemExit as exit_:
        if exit_.code in (None, 0):
            return None  # the block ended before a harness call for this entry
        return NotCaptured(f"its test code exited with {exit_.code!r} before its harness call")
    except Overrun:
        raise
    except BaseException as error:  # noqa: BLE001 - any failure of the file's test code
        return NotCaptured(_failed(error))
    return None


class _Tensors:
    """The mode the file's torch code runs in: large tensors shape-only, with torch."""

    def __init__(self) -> None:
        self.mode: Any = None
        if torch_installed():
            from racecheck.torch_shapes import ShapeOnlyAbove

            self.mode = ShapeOnlyAbove(SHAPE_ONLY_BYTES)

    @contextmanager
    def running(self) -> Iterator[None]:
        if self.mode is None:
            yield  # without torch the code stops at its first use (racecheck's stand-in)
            return
        with self.mode:
            yield

    def as_numpy(self, value: Any) -> np.ndarray:
        """A torch tensor (bfloat16 included) or array-like as numpy; a shape-only one
        takes the large-tensor rule: zeros."""
        if self.mode is not None and self.mode.shape_only(value):
            return np.zeros(tuple(value.shape))
        return as_numpy(value)


def torch_installed() -> bool:
    """Whether torch itself can be imported (racecheck's shape-only stand-in does not count)."""
    module = sys.modules.get("torch")
    if module is not None:  # imported: torch itself has a file, racecheck's stand-in none
        return isinstance(getattr(module, "__file__", None), str)
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def _failed(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    if (
        "install torch" in text
        or isinstance(error, ModuleNotFoundError)
        and "torch" in text
        or _failed_on_torch(error)
    ):
        return "its spec builders compute with torch, which is not installed (install torch)"
    return f"its test code raised {type(error).__name__}: {text}" if text else type(error).__name__


def _failed_on_torch(error: BaseException) -> bool:
    """Whether the line that raised uses torch while torch is not installed (racecheck's
    stand-in: `isinstance(value, torch.Tensor)` raises TypeError, pypto-lib's spec
    classes do it)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and "torch." in (frames[-1].line or "") and not torch_installed()


def _main_blocks(tree: ast.Module) -> list[ast.If]:
    return [
        statement
        for statement in tree.body
        if isinstance(statement, ast.If)
        and isinstance(statement.test, ast.Compare)
        and isinstance(statement.test.left, ast.Name)
        and statement.test.left.id == "__name__"
        and any(
            isinstance(c, ast.Constant) and c.value == "__main__"
            for c in statement.test.comparators
        )
    ]


def _is_harness(node: ast.Call) -> bool:
    callee = node.func
    name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
    return name in HARNESS_CALLS and any(k.arg in _STATED for k in node.keywords)


def _harness_calls(block: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(block) if isinstance(node, ast.Call) and _is_harness(node)]


class _Redirect(ast.NodeTransformer):
    """A harness call becomes a call of the hook with the same arguments and its line;
    the block's test (`__name__ == "__main__"`) becomes true."""

    def visit_If(self, node: ast.If) -> ast.AST:
        self.generic_visit(node)
        if _main_blocks(ast.Module(body=[node], type_ignores=[])):
            node.test = ast.copy_location(ast.Constant(True), node.test)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not _is_harness(node):
            return node
        line = ast.keyword(arg="_racecheck_line", value=ast.Constant(node.lineno))
        hook = ast.Name(id=_HOOK, ctx=ast.Load())
        return ast.copy_location(ast.Call(hook, node.args, [*node.keywords, line]), node)


def _hook(is_entry: Callable[[Any], bool]) -> Callable[..., Any]:
    def harness(*args: Any, _racecheck_line: int, **call: Any) -> Any:
        if args:  # run_jit(fn, specs, golden_fn, ...) by position
            call = {**dict(zip(_STATED, args, strict=False)), **call}
        if is_entry(call.get("fn")):
            raise Captured(call, _racecheck_line)
        return SimpleNamespace(passed=True, error=None)  # another entry's run: not run

    return harness


def _inputs(captured: Captured, made: _Tensors) -> FileInputs | NotCaptured:
    call = captured.call
    scalars: dict[str, Any] = {}
    tensors: dict[str, TensorInput] = {}
    for spec in call.get("specs") or ():
        name = getattr(spec, "name", None)
        if not isinstance(name, str):
            continue
        if hasattr(spec, "shape"):
            shape = tuple(int(dim) for dim in spec.shape)
            tensors[name] = TensorInput(
                name=name,
                shape=shape,
                is_output=bool(getattr(spec, "is_output", False)),
                dtype=getattr(spec, "dtype", None),
                make=_maker(spec, shape),
            )
        elif hasattr(spec, "value"):
            scalars[name] = _scalar(spec.value)
    golden = call.get("golden_fn")
    return FileInputs(
        line=captured.line,
        scalars=scalars,
        tensors=tensors,
        golden=golden if callable(golden) else None,
        tensors_made=made,
        rtol=float(call.get("rtol", 1e-5)),
        atol=float(call.get("atol", 1e-5)),
    )


def _maker(spec: Any, shape: tuple[int, ...]) -> Callable[[], Any]:
    create = getattr(spec, "create_tensor", None)
    if callable(create):
        return create
    init = getattr(spec, "init_value", None)
    if init is None:
        return lambda: np.zeros(shape)
    if isinstance(init, (int, float)):
        return lambda: np.full(shape, init)
    if callable(init):
        return init
    return lambda: init


def _scalar(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    return value


def as_numpy(value: Any) -> np.ndarray:
    """A torch tensor (any dtype, bfloat16 included) or array-like as a numpy array."""
    if hasattr(value, "detach"):
        tensor = value.detach().cpu()
        if tensor.is_floating_point() and tensor.dtype.itemsize < 4:
            tensor = tensor.float()  # numpy has no bfloat16
        return np.asarray(tensor.numpy())
    return np.asarray(value)
