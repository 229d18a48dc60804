"""`with pl.at(...)` regions written inline in the host function (docs/model.md).

PyPTO outlines each such region into a function of its level and role, called where
the region stood (its OutlineHierarchyScopes pass): its parameters are the names the
body uses from before it, its results the names it assigns that are used after it.
racecheck does the same with the body's source: it compiles the `with` body into a
function of those names, at the body's own lines, takes their values from the host
function at that point, and skips the body in place.

- A `pl.Level.CHIP` region is a CHIP orchestration the host calls without `device=`:
  it runs as a per-device function called that way (in a one-device program, the
  dispatch to device 0), its kernel calls and `pl.at(level=CORE_GROUP)` regions being
  its tasks.
- A `pl.Level.HOST` `pl.Role.Worker` region is a host sub-worker callback
  (`racecheck.dsl.program.run_sub_worker`): not run if it only reads what it is given,
  refused if it assigns a name used after it or stores into one of its values.

Other levels in the host function are refused. Anywhere else `pl.at` is
`racecheck.dsl.scopes.at`.

`with pl.spmd(n) as tid:` is outlined the same way (`InlineSpmd`): PyPTO outlines its
body into one kernel run on n blocks, so racecheck compiles the body into a function of
the names it uses and runs it once per block, each block a task of its own
(`racecheck.dsl.scopes.Spmd`); the names it assigns that are used after it take the
last block's values.

In a rank's code, a `with pl.at(...)` region, each block of a `with pl.spmd(...)` and
each block of a loop `for b in pl.spmd(n)` is outlined this way too (`_Outline`), its
caller skipping the body: in a run with tasks as threads (`racecheck.cosim.threads`)
it runs as a thread of its own, elsewhere in place. Outlined, it can run again, as each
of its AIV sub-lanes (`racecheck.dsl.lanes`). A region or block racecheck cannot
outline runs as written.
"""

from __future__ import annotations

import ast
import copy
import ctypes
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from racecheck.dsl import scopes
from racecheck.dsl.context import activated, current, host_context, is_rank_context
from racecheck.dsl.device_source import compiled_function
from racecheck.dsl.location import innermost_user_frame, parsed_file, unsupported, user_location
from racecheck.dsl.program import DslFunction, FunctionRole, run_sub_worker
from racecheck.dsl.scalars import DeviceIndex
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import Level, Role
from racecheck.report.reasons import ReasonCode, reason


class _SkipBody(Exception):
    """Raised at the first line of an outlined `with` body, and caught by its `at`."""


@contextmanager
def at(level: object = None, role: object = None, **options: Any) -> Iterator[object]:
    """`pl.at(level, role, ...)`: in the host function, an outlined region; elsewhere a
    task region (`racecheck.dsl.scopes.at`)."""
    context = current()
    if context is None or is_rank_context(context):
        tasks = scopes.task_context()
        outlined = _outlined_region(tasks, options) if tasks is not None else None
        if outlined is not None:
            outer, statement, index = outlined
            with _body_skipped(outer, statement):
                yield scopes.TaskId(index=index)
            return
        with scopes.at(level, role, **options) as task:
            yield task
        return
    frame = innermost_user_frame()
    region = _region_at(frame) if frame is not None else None
    if frame is None or region is None:
        raise unsupported(reason(ReasonCode.REGION_NO_SOURCE, level=format(level)))
    function, enclosing = region
    if len(function.items) > 1:
        raise unsupported(
            reason(ReasonCode.REGION_SHARED_WITH, line=function.lineno, level=format(level))
        )
    if level is Level.CHIP:
        _run_chip_region(frame, function, enclosing)
    elif level is Level.HOST and role is Role.Worker:
        run_sub_worker(
            reason(ReasonCode.REGION_HOST_WORKER, line=function.lineno),
            _written(function, enclosing),
        )
    else:
        raise unsupported(reason(ReasonCode.REGION_INLINE, level=format(level), role=format(role)))
    with _body_skipped(frame, function):
        yield scopes.TaskId(index=-1)


_outlined_bodies: dict[tuple[object, ...], Callable[..., Any]] = {}


class InlineSpmd(scopes.Spmd):
    """`pl.spmd(...)`: its blocks' code outlined. In a `with` statement (the dispatch
    form) the body runs once per block; in the loop form `for block in pl.spmd(n)`, in a
    run with tasks as threads, each block runs the loop's body as a thread of its own."""

    def __enter__(self) -> scopes.TaskId:
        context = self._context()
        frame = innermost_user_frame()
        region = _region_at(frame) if frame is not None else None
        if frame is None or region is None:
            raise unsupported(reason(ReasonCode.REGION_SPMD_NO_SOURCE), self.where)
        statement, enclosing = region
        outline = _Outline.of(frame, statement, enclosing, kind="spmd_body")
        indexes = [self._block(context, outline, block, ()) for block in range(self.count)]
        self._skipping = _body_skipped(frame, statement)
        self._skipping.__enter__()
        return scopes.TaskId(index=indexes[0], joins=tuple(indexes[1:]))

    def __exit__(self, kind: object, *exc: object) -> bool:
        skipped = kind is _SkipBody
        self._skipping.__exit__(None, None, None)
        return skipped

    def __iter__(self) -> Iterator[int]:
        context = self._context()
        frame = innermost_user_frame()
        loop = _loop_at(frame) if frame is not None else None
        if frame is None or loop is None or not isinstance(loop[0].target, ast.Name):
            return self._blocks(context)
        statement, enclosing = loop
        target = statement.target.id  # type: ignore[attr-defined]
        outline = _Outline.of(frame, statement, enclosing, kind="spmd_block", first=target)
        for block in range(self.count):
            self._block(context, outline, block, (DeviceIndex(block),))
        return iter(())  # each block ran, or runs as a thread: the loop's body is not run

    def _block(
        self,
        context: scopes.TaskContext,
        outline: _Outline,
        block: int,
        first: tuple[object, ...],
    ) -> int:
        """Block `block` running the outlined code: a thread of its own in a run with
        tasks as threads, else in place; its task index."""
        spec = self.spec(block)

        def apart() -> None:
            with scopes.in_block(block):
                outline.run_apart(first)

        def in_place() -> None:
            with scopes.in_block(block):  # the names it assigns take the last block's values
                outline.bind(outline.run(first))

        def rerun(lane: Callable[[Any], Any]) -> None:
            with scopes.in_block(block):
                outline.rerun(first, lane)

        index = context.spawn_task(spec, apart, rerun)
        if index is not None:
            outline.held()
            return index
        return context.run_task(spec, in_place, rerun)


def _outlined_region(
    tasks: scopes.TaskContext, options: dict[str, Any]
) -> tuple[FrameType, ast.With, int] | None:
    """A `pl.at` region of a rank's code outlined and run as a task: a thread of its own
    in a run with tasks as threads, else in place. The caller's frame and the region,
    whose body is skipped, and the task's index; None where racecheck cannot outline it
    (it then runs as written, between `begin_task` and `end_task`)."""
    frame = innermost_user_frame()
    region = _region_at(frame) if frame is not None else None
    if frame is None or region is None or len(region[0].items) > 1:
        return None
    statement, enclosing = region
    spec = scopes.region_spec(
        deps=options.get("deps"),
        no_dep_args=options.get("no_dep_args"),
        name_hint=options.get("name_hint", ""),
    )
    outline = _Outline.of(frame, statement, enclosing, kind="task_region")

    def rerun(lane: Callable[[Any], Any]) -> None:
        outline.rerun((), lane)

    index = tasks.spawn_task(spec, lambda: outline.run_apart(()), rerun)
    if index is not None:
        outline.held()
    else:
        index = tasks.run_task(spec, lambda: outline.bind(outline.run(())), rerun)
    return frame, statement, index


class _Outline:
    """A `with` or `for` body outlined as a function of the names it uses from before
    it, with the values they have where it stands; its results (the names it assigns
    that its function uses after it) are returned by name."""

    def __init__(
        self, frame: FrameType, function: Callable[..., Any], names: list[str], results: list[str]
    ) -> None:
        self.frame = frame
        self.function = function
        self.values = [frame.f_locals[name] for name in names]
        self.results = results
        self.before = {name: frame.f_locals.get(name) for name in results}
        self.line = frame.f_lineno

    @classmethod
    def of(
        cls,
        frame: FrameType,
        statement: ast.With | ast.For,
        enclosing: ast.AST,
        *,
        kind: str,
        first: str | None = None,
    ) -> _Outline:
        names = sorted((_loaded(statement.body) & set(frame.f_locals)) - {first})
        results = _results(statement, enclosing)
        parameters = [first, *names] if first is not None else names
        key = (frame.f_code, statement.lineno, kind, tuple(parameters), id(frame.f_globals))
        function = _outlined_bodies.get(key)
        if function is None:
            function = _compiled(frame, statement, parameters, results=results, kind=kind)
            _outlined_bodies[key] = function
        return cls(frame, function, names, results)

    def run(self, first: tuple[object, ...]) -> dict[str, Any] | None:
        """The body, run where it runs; its results by name."""
        returned: dict[str, Any] | None = self.function(*first, *self.values)
        return returned

    def rerun(self, first: tuple[object, ...], lane: Callable[[Any], Any]) -> None:
        """The body again, as the lane `lane` makes of the context (an AIV sub-lane,
        `racecheck.dsl.lanes`); what it assigns is its task's."""
        with activated(lane(current())):
            self.run(first)

    def run_apart(self, first: tuple[object, ...]) -> None:
        """The body as a thread of its own: a tensor it assigns must be the one `held`
        left its caller."""
        for name, value in (self.run(first) or {}).items():
            before = self.before.get(name)
            if isinstance(before, TensorView) and not scopes.stands_for(value, before):
                raise unsupported(
                    reason(ReasonCode.REGION_TASK_REASSIGNS, line=self.line, name=name)
                )

    def held(self) -> None:
        """The body runs apart from its caller: a name it assigns keeps the tensor it
        named before (a region's `y = pl.store(t, [0, 0], y)`), else is bound to a
        value whose use is refused."""
        _bind(
            self.frame,
            self.results,
            {
                name: before
                if isinstance(before, TensorView)
                else scopes.HeldBack(
                    name=name,
                    location=user_location(),
                    why=reason(ReasonCode.REGION_TASK_ASSIGNS, name=name, line=self.line),
                )
                for name, before in self.before.items()
            },
        )

    def bind(self, returned: dict[str, Any] | None) -> None:
        _bind(self.frame, self.results, returned or {})


def _run_chip_region(frame: FrameType, region: ast.With, enclosing: ast.AST) -> None:
    """Call the outlined CHIP orchestration; its results, like those of any per-device
    call the host makes, are not the host's to use: they are bound to None."""
    if host_context("pl.at(level=CHIP)").ranks != 1:
        raise unsupported(reason(ReasonCode.REGION_CHIP_WITHOUT_DEVICE, line=region.lineno))
    names = sorted(_loaded(region.body) & set(frame.f_locals))
    outlined = _compiled(frame, region, names)
    chip = DslFunction(outlined, FunctionRole.PER_DEVICE)
    chip(*(frame.f_locals[name] for name in names))
    _bind(frame, _results(region, enclosing))


def _bind(frame: FrameType, names: list[str], values: dict[str, Any] | None = None) -> None:
    """Set `names` to their `values` (else None) in the running `frame`."""
    variables = frame.f_locals
    for name in names:
        variables[name] = (values or {}).get(name)
    if sys.version_info < (3, 13):  # later, f_locals writes through (PEP 667)
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))


def _compiled(
    frame: FrameType,
    region: ast.With | ast.For,
    names: list[str],
    *,
    results: list[str] = (),  # type: ignore[assignment]
    kind: str = "chip_region",
) -> Callable[..., Any]:
    """The `with` body as a function of `names`, at its own lines of the user's file;
    with `results`, it returns those of them it assigned, by name."""
    name = f"{frame.f_code.co_name}_{kind}_{region.lineno}"
    body = copy.deepcopy(region.body)
    if results:
        body.append(_returned(results, region.end_lineno or region.lineno))
    arguments = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=argument) for argument in names],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    definition = ast.FunctionDef(
        name=name,
        args=arguments,
        body=body,
        decorator_list=[],
        returns=None,
        lineno=region.lineno,
        col_offset=0,
        end_lineno=region.end_lineno,
        end_col_offset=0,
    )
    code = frame.f_code
    return compiled_function(definition, code.co_filename, frame.f_globals, code.co_flags)


def _returned(names: list[str], line: int) -> ast.Return:
    """`return {name: name for name in names if assigned}`, at `line`."""
    source = (
        "return {_n: _v for _n, _v in ("
        + ", ".join(f"({name!r}, locals().get({name!r}))" for name in names)
        + ",)}"
    )
    statement = ast.parse(source).body[0]
    for node in ast.walk(statement):
        if hasattr(node, "lineno"):
            node.lineno = node.end_lineno = line  # type: ignore[attr-defined]
            node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]
    assert isinstance(statement, ast.Return)
    return statement


@contextmanager
def _body_skipped(frame: FrameType, statement: ast.With) -> Iterator[None]:
    """Skip the rest of the `with` block running in `frame`: a line trace on that frame
    raises `_SkipBody` at the body's first line, and it is swallowed here. A line of the
    header after the call (`as tid` on a continuation line) still runs: it binds the
    name the body and what follows use."""
    previous = sys.gettrace()
    previous_local = frame.f_trace
    body = statement.body[0].lineno

    def trace(traced: FrameType, event: str, argument: object) -> Any:
        if traced is frame and event == "line" and traced.f_lineno >= body:
            raise _SkipBody
        return trace

    sys.settrace(previous or _no_trace)
    frame.f_trace = trace
    try:
        yield
    except _SkipBody:
        pass
    finally:
        frame.f_trace = previous_local
        sys.settrace(previous)


def _no_trace(frame: FrameType, event: str, argument: object) -> None:
    return None


def _region_at(frame: FrameType) -> tuple[ast.With, ast.AST] | None:
    """The `with` statement whose header holds the frame's line, and the function that
    encloses it."""
    found = _statement_at(frame, ast.With)
    return (found[0], found[1]) if found and isinstance(found[0], ast.With) else None


def _statement_at(
    frame: FrameType, kind: type[ast.With] | type[ast.For]
) -> tuple[ast.With | ast.For, ast.AST] | None:
    tree = parsed_file(frame.f_code.co_filename)
    if tree is None:
        return None
    line = frame.f_lineno
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if function.name != frame.f_code.co_name:
            continue
        for node in ast.walk(function):
            if isinstance(node, kind) and node.lineno <= line < node.body[0].lineno:
                return node, function
    return None


def _loop_at(frame: FrameType) -> tuple[ast.For, ast.AST] | None:
    """The `for` statement whose header holds the frame's line, and its function."""
    found = _statement_at(frame, ast.For)
    return (found[0], found[1]) if found and isinstance(found[0], ast.For) else None


def _loaded(nodes: list[ast.stmt]) -> set[str]:
    return {
        node.id
        for statement in nodes
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


def _results(region: ast.With | ast.For, enclosing: ast.AST) -> list[str]:
    """The names a region assigns that its function uses after it: its results."""
    assigned = {
        node.id
        for statement in region.body
        for node in ast.walk(statement)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    }
    after = {
        node.id
        for node in ast.walk(enclosing)
        if isinstance(node, ast.Name)
        and isinstance(node.ctx, ast.Load)
        and node.lineno > (region.end_lineno or region.lineno)
    }
    return sorted(assigned & after)


def _written(region: ast.With, enclosing: ast.AST) -> list[str]:
    """What a region writes that the host can see: its results, and values it stores
    into (`x[i] = ...`, `x.attr = ...`, `x.numpy()[:] = ...`, `x.copy_(...)`,
    `torch.mul(y, 2, out=x)`, `np.copyto(x, ...)`)."""
    stored = set(_results(region, enclosing))
    for statement in region.body:
        for node in ast.walk(statement):
            stored.update(
                root.id for root in map(_root, _stored_into(node)) if isinstance(root, ast.Name)
            )
    return sorted(stored)


def _root(node: ast.expr) -> ast.expr:
    """The value an expression reaches into: `x` of `x.numpy()[0].data`."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        else:
            return node


_DESTINATION_FIRST = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal"})
"""numpy's functions that write into their first argument."""


def _stored_into(node: ast.AST) -> list[ast.expr]:
    """The values `node` writes into."""
    if isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
        return [node.value]
    if not isinstance(node, ast.Call):
        return []
    targets = [keyword.value for keyword in node.keywords if keyword.arg == "out"]
    function = node.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    in_place = (name.endswith("_") and not name.startswith("_")) or (  # torch's x.mul_()
        name in ("__setitem__", "__delitem__") or (name.startswith("__i") and name.endswith("__"))
    )
    if in_place and isinstance(function, ast.Attribute):
        targets.append(function.value)
    if (in_place or name in _DESTINATION_FIRST) and node.args:
        targets.append(node.args[0])  # torch.add_(x, ...), np.copyto(x, ...)
    return targets
