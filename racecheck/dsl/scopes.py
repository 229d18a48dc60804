"""Tasks within one rank: kernel calls and `pl.at` regions, and the tensors they are tagged with.

PyPTO runs the kernel calls and `pl.at(...)` regions of a per-device function as tasks
ordered only by the dependencies its runtime tracks (docs/model.md): edges between
the tensors a task is tagged with, explicit `deps=`, none inside `pl.manual_scope()`.
This module describes each task as the DSL sees it when the task starts (`TaskSpec`);
the co-simulation runs it (`racecheck.cosim.tasks`) and decides which tasks the
runtime leaves unordered. A call made inside a task (a kernel calling a kernel) is
plain Python, part of its caller's task.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
import typing
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol

from racecheck.dsl.context import activated, current
from racecheck.dsl.declared import signature_of
from racecheck.dsl.device_source import returned_names
from racecheck.dsl.dtypes import DType
from racecheck.dsl.location import innermost_user_frame, unsupported, user_location
from racecheck.dsl.scalars import DeviceIndex, as_index
from racecheck.dsl.tensors import TensorView, Tile
from racecheck.dsl.types import Direction, TensorType
from racecheck.events import SourceLocation
from racecheck.report.reasons import ReasonCode, reason


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskId:
    """What `with pl.at(...) as tid` binds: the task's number within its rank; for
    `pl.system.task_dummy`, no task of its own but the tasks it joins."""

    index: int
    joins: tuple[int, ...] = ()


def task_invalid() -> TaskId:
    """`pl.system.task_invalid()`: the id of no task; `deps=` naming it adds no edge."""
    return TaskId(index=-1)


def task_dummy(*, deps: object) -> TaskId:
    """`pl.system.task_dummy(deps=[...])`: a task with no work that completes once its
    `deps` (task ids, `pl.TASK_ID` arrays, None for no task) have: naming it in `deps=`
    names them all (docs/model.md)."""
    if _task_context() is None:
        raise unsupported(reason(ReasonCode.SCOPE_OUTSIDE_DEVICE, construct="pl.system.task_dummy"))
    named = [entry for entry in _listed(deps) if entry is not None]
    return TaskId(index=-1, joins=dep_indexes(named))


class TaskIdType(Enum):
    """`pl.TASK_ID`: the element type of an array of task ids."""

    TASK_ID = "TASK_ID"


class TaskIdArray:
    """`pl.array.create(extent, pl.TASK_ID)`: task ids set one slot at a time; `deps=`
    naming the array names every slot (docs/model.md)."""

    __slots__ = ("ids",)

    def __init__(self, extent: int) -> None:
        self.ids: list[TaskId | None] = [None] * extent

    def __getitem__(self, index: object) -> TaskId:
        return self._slot(as_index(index))

    def __setitem__(self, index: object, value: object) -> None:
        if not isinstance(value, TaskId):
            raise unsupported(reason(ReasonCode.SCOPE_NOT_TASK_ID, value=repr(value)))
        self.ids[as_index(index)] = value

    def __len__(self) -> int:
        return len(self.ids)

    def _slot(self, slot: int) -> TaskId:
        found = self.ids[slot]
        if found is None:
            raise unsupported(reason(ReasonCode.SCOPE_SLOT_UNSET, slot=slot))
        return found

    def task_ids(self) -> tuple[TaskId, ...]:
        return tuple(self._slot(slot) for slot in range(len(self.ids)))


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskTag:
    """One tensor argument of a task: its storage (`Memory.id`), declared direction and
    the bytes of that storage the argument's view spans."""

    memory: int
    direction: Direction
    span: tuple[int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    name: str
    location: SourceLocation
    tags: tuple[TaskTag, ...]
    deps: tuple[int, ...] = ()  # explicit `deps=`: TaskId indexes
    manual: bool = False  # inside `pl.manual_scope()`: no inferred edges
    region: bool = False  # a `pl.at` region: its accesses are its tags, and it runs in place
    untracked: tuple[int, ...] = ()  # `no_dep_args`, `pl.no_dep`: storages that give it no edges
    lane_of: int | None = None  # a lane (cube, AIV sub-lane) of this kernel task: runs beside it
    # the AIV sub-lane (1 or more) of its kernel that this lane is, and how many
    # `pl.split_aiv` regions the kernel entered
    sub_lane: tuple[int, int] | None = None
    block: int | None = None  # the block of a `pl.spmd` task this is (one thread of it)
    group: int | None = None  # a number the blocks of one `pl.spmd` task share: their edges

    @property
    def thread_name(self) -> str:
        """The thread as a finding names it: `task read_step`, `block 3 of push`."""
        return _thread_name(self.name, self.block)


@functools.lru_cache(maxsize=4096)
def _thread_name(task: str, block: int | None) -> str:
    """Made once per name: the co-simulation compares every task's with its rank's."""
    if block is None:
        return reason(ReasonCode.THREAD_TASK, task=task)
    return reason(ReasonCode.THREAD_BLOCK, block=block, task=task)


class TaskContext(Protocol):
    """The part of a rank context that runs tasks (`racecheck.cosim.rank.RankContext`)."""

    @property
    def task_depth(self) -> int: ...

    def call_task(
        self,
        spec: TaskSpec,
        body: Callable[[], Any],
        rerun: Callable[[Callable[[Any], Any]], Any],
        held: Callable[[], Any] = lambda: None,
    ) -> tuple[Any, int]:
        """Run a kernel call; if it turns out to mix cube ops with communication or to
        have AIV sub-lanes, also run its lanes (`rerun` with the proxy of each) as tasks
        nothing orders with it. Returns the call's result and
        the task's index; a call run as a thread of its own returns `held()`, which the
        call must return once it runs (`held_result`)."""
        ...

    def begin_task(self, spec: TaskSpec) -> int: ...

    def spawn_task(
        self,
        spec: TaskSpec,
        body: Callable[[], Any],
        rerun: Callable[[Callable[[Any], Any]], Any],
    ) -> int | None:
        """In a run with tasks as threads, `body` (an outlined region or block) as a
        thread of its own, and its index; else None (run it with `run_task`). `rerun`
        runs it again as an AIV sub-lane (`racecheck.dsl.lanes.SubLane`)."""
        ...

    def run_task(
        self,
        spec: TaskSpec,
        body: Callable[[], Any],
        rerun: Callable[[Callable[[Any], Any]], Any],
    ) -> int:
        """An outlined region or block run in place as a task, and its index."""
        ...

    def create_tensor(
        self, shape: tuple[int, ...], dtype: DType, *, manual_dep: bool, fill: float = 0
    ) -> TensorView: ...

    def end_task(self) -> None: ...

    @property
    def events(self) -> Sequence[object]: ...


_scope = threading.local()


def _task_context() -> TaskContext | None:
    """The running rank's context when a new task may start here (not inside a task)."""
    context = current()
    if context is None or not hasattr(context, "call_task"):
        return None
    tasks: TaskContext = context  # type: ignore[assignment]
    return tasks if tasks.task_depth == 0 else None


def task_context() -> TaskContext | None:
    """The running rank's context when a new task may start here (not inside a task)."""
    return _task_context()


def kernel_call(
    name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Call a kernel: a task of its own when a per-device function calls it, ordered
    after the tasks a `submitted` block names too, on the blocks of a `pl.spmd`
    dispatch or of `spmd_blocks`."""
    args, kwargs, dropped = _without_no_dep(args, kwargs)
    if any(isinstance(value, TaskId) for value in (*args, *kwargs.values())):
        raise unsupported(reason(ReasonCode.SCOPE_TASK_ID_ARGUMENT, kernel=name))
    deps, ids = getattr(_scope, "submit", ((), None))
    blocks: Spmd | None = getattr(_scope, "spmd_next", None)
    _scope.submit, _scope.spmd_next = ((), None), None  # this call's, not its inner calls'
    context = _task_context()
    if context is None:
        if blocks is not None:
            outside = reason(ReasonCode.SCOPE_OUTSIDE_DEVICE, construct="pl.spmd_submit")
            raise unsupported(outside, blocks.where)
        if ids is not None:
            ids.append(TaskId(index=-1))
        return function(*args, **kwargs)
    _refuse_written_locals(name, function, args, kwargs)
    spec = TaskSpec(
        name=name,
        location=user_location(),
        tags=tags_of(function, args, kwargs),
        deps=deps,
        manual=in_manual_scope(),
        untracked=dropped,
    )
    specs = [spec]
    if blocks is not None:  # `pl.spmd_submit`: a task of its own per block
        specs = [
            replace(spec, block=block, group=blocks.group, deps=(*deps, *blocks.deps))
            for block in range(blocks.count)
        ]
    result: Any = None
    indexes: list[int] = []
    for each in specs:
        result, index = _call_task(context, each, name, function, args, kwargs, ids is not None)
        indexes.append(index)
    if ids is not None:
        ids.append(TaskId(index=indexes[0], joins=tuple(indexes[1:])))
    return result


def _call_task(
    context: TaskContext,
    spec: TaskSpec,
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    submit: bool,
) -> tuple[Any, int]:
    """One kernel task (one block of a `pl.spmd_submit`): its result and index."""
    block = spec.block or 0

    # both run in the context of the task's own thread (`racecheck.cosim.threads`)
    def rerun(lane: Callable[[Any], Any]) -> Any:
        """The kernel again, as the lane `lane` makes of the context (`racecheck.dsl.lanes`)."""
        with in_block(block), activated(lane(current())):
            return function(*args, **kwargs)

    def body() -> Any:
        with in_block(block):
            return function(*args, **kwargs)

    return context.call_task(
        spec,
        body,
        rerun,
        lambda: held_result(name, function, args, kwargs, submit=submit),
    )


def _refuse_written_locals(
    name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """A task that writes a value local to the caller (a `pl.full`, or a
    `pl.create_tensor` made outside a per-device function's own body) is refused:
    racecheck shares only the tensors that body creates between its tasks."""
    try:
        arguments = _arguments(function, args, kwargs)
    except (TypeError, ValueError):
        return
    for key, value, annotation in arguments:
        if (
            isinstance(value, Tile)
            and isinstance(annotation, TensorType)
            and annotation.direction is not Direction.IN
        ):
            raise unsupported(reason(ReasonCode.SCOPE_WRITES_LOCAL, task=name, argument=key))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Results:
    """A call's declared result count and the tensors it writes: its `pl.Out` and
    `pl.InOut` arguments (`written`) and its `pl.Out` ones (`outs`)."""

    declared: int
    written: tuple[TensorView, ...]
    outs: tuple[TensorView, ...]

    @classmethod
    def of(
        cls,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        submit: bool,
    ) -> _Results:
        written: list[TensorView] = []
        outs: list[TensorView] = []
        bound = _arguments(function, args, kwargs)
        for _, value, annotation in bound:
            if not isinstance(value, TensorView) or not isinstance(annotation, TensorType):
                continue
            if annotation.direction is not Direction.IN:
                written.append(value)
            if annotation.direction is Direction.OUT:
                outs.append(value)
        unannotated = signature_of(function).return_annotation is inspect.Signature.empty
        if unannotated:
            returned = _returned_arguments(function, bound)
            if returned is not None:  # `return out, signal`: those arguments, as written
                return cls(declared=len(returned), written=returned, outs=())
        declared = len(written) if unannotated and not submit else declared_results(function)
        return cls(declared=declared, written=tuple(written), outs=tuple(outs))

    def given(self) -> Any:
        """The tensors that stand for the results (one, or a tuple); None when neither
        the written tensors nor the `pl.Out` ones are as many as declared."""
        held = self.written if len(self.written) == self.declared else self.outs
        if len(held) != self.declared:
            return None
        return held[0] if self.declared == 1 else held


def held_result(
    name: str,
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    submit: bool,
) -> Any:
    """What a kernel call that runs as a thread of its own gives its caller before it
    runs: one tensor per result its return annotation declares, the tensors it writes
    (a kernel returns those): its `pl.Out`/`pl.InOut` arguments if they are as many,
    else its `pl.Out` ones; nothing when it declares none. An unannotated kernel
    declares the tensor arguments its `return` names (`return out, signal`), else,
    called directly, as many as it writes, and through `pl.submit`, none. The call is
    refused when neither is as many; once it runs, what it returns must be them, or
    nothing (`stands_for`)."""
    results = _Results.of(function, args, kwargs, submit=submit)
    if results.declared == 0:  # `pl.submit` then returns the task id alone
        return None if submit else HeldBack(name=name, location=user_location())
    given = results.given()
    if given is None:
        raise unsupported(
            reason(
                ReasonCode.SCOPE_RESULTS_UNMATCHED,
                task=name,
                declared=results.declared,
                written=len(results.written),
                outs=len(results.outs),
            )
        )
    return given


def dispatch_result(
    name: str, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """What the host gets from a dispatch of `function`: the tensors it writes, one per
    result it declares (as `held_result`), nothing when it declares none; where they do
    not match, a value whose use is refused where it is used."""
    results = _Results.of(function, args, kwargs, submit=False)
    if results.declared == 0:
        return None
    given = results.given()
    if given is not None:
        return given
    why = reason(ReasonCode.SCOPE_DISPATCH_RESULTS, dispatch=name)
    return HeldBack(name=name, location=user_location(), why=why)


class HeldBack:
    """What the caller of a held-back kernel call that declares no result gets: using
    it is refused at the call, as what the call returns is known only once it runs."""

    __slots__ = ("location", "name", "why")

    def __init__(self, *, name: str, location: SourceLocation, why: str = "") -> None:
        self.name = name
        self.location = location
        self.why = why or reason(ReasonCode.SCOPE_RESULT_UNDECLARED, task=name)

    def __getattr__(self, attribute: str) -> Any:
        raise unsupported(self.why, self.location)

    def __iter__(self) -> Iterator[Any]:  # `s, d = held`
        raise unsupported(self.why, self.location)

    def __repr__(self) -> str:
        return reason(ReasonCode.SCOPE_HELD_BACK, task=self.name)


def stands_for(result: Any, held: Any) -> bool:
    """Whether a held-back call's result is what `held_result` gave in its place: the
    same views (memory, bytes, shape, dtype), or nothing (which no caller uses)."""
    if result is None or isinstance(held, HeldBack):
        return True
    if isinstance(held, tuple):
        return (
            isinstance(result, tuple)
            and len(result) == len(held)
            and all(map(stands_for, result, held))
        )
    if isinstance(held, TensorView):
        return isinstance(result, TensorView) and (
            result.memory,
            result.base,
            result.shape,
            result.dtype,
        ) == (held.memory, held.base, held.shape, held.dtype)
    return held is None


def _returned_arguments(
    function: Callable[..., Any], bound: list[tuple[str, Any, Any]]
) -> tuple[TensorView, ...] | None:
    """The tensor arguments an unannotated kernel's `return` names (PyPTO reads its
    results from it), when it names nothing else."""
    names = returned_names(function)
    values = {name: value for name, value, _ in bound}
    if not names or any(not isinstance(values.get(name), TensorView) for name in names):
        return None
    return tuple(values[name] for name in names)


def _arguments(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> list[tuple[str, Any, Any]]:
    """Each argument of the call `function(*args, **kwargs)`: its parameter's name, its
    value and its declared annotation (TypeError or ValueError if the call does not bind)."""
    signature = signature_of(function)
    bound = signature.bind(*args, **kwargs)
    return [
        (name, value, signature.parameters[name].annotation)
        for name, value in bound.arguments.items()
    ]


def declared_results(function: Callable[..., Any]) -> int:
    """How many results `function`'s return annotation declares (evaluated, also in a
    file that postpones annotations)."""
    declared = signature_of(function).return_annotation
    if declared in (inspect.Signature.empty, None, "None"):
        return 0
    return len(typing.get_args(declared)) if typing.get_origin(declared) is tuple else 1


@contextmanager
def submitted(deps: tuple[int, ...]) -> Iterator[list[TaskId]]:
    """The kernel call made inside is ordered after the tasks `deps` too (`pl.submit`);
    its `TaskId` is added to the list yielded."""
    ids: list[TaskId] = []
    _scope.submit = (deps, ids)
    try:
        yield ids
    finally:
        _scope.submit = ((), None)


def tags_of(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[TaskTag, ...]:
    """The tensors a call passes, with the directions the callee declares for them."""
    try:
        arguments = _arguments(function, args, kwargs)
    except (TypeError, ValueError):
        return tuple(view_tag(view, Direction.INOUT) for view in _views((*args, *kwargs.values())))
    tags: list[TaskTag] = []
    for _, value, annotation in arguments:
        direction = annotation.direction if isinstance(annotation, TensorType) else Direction.IN
        tags.extend(view_tag(view, direction) for view in _views((value,)))
    return tuple(tags)


def view_tag(view: TensorView, direction: Direction) -> TaskTag:
    """`view` as a task argument declared `direction`."""
    return TaskTag(
        memory=view.memory, direction=direction, span=(view.base, view.base + view.nbytes)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NoDep:
    """`pl.no_dep(x)` as an argument of a kernel call: this call's task gets no edges
    on `x`'s storage (docs/model.md)."""

    value: object


def no_dep(value: object) -> NoDep:
    if in_manual_scope():
        raise unsupported(reason(ReasonCode.SCOPE_NO_DEP_IN_MANUAL))
    return NoDep(value=value)


def _without_no_dep(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any], tuple[int, ...]]:
    """The call's arguments unwrapped from `pl.no_dep`, and the storages it wrapped."""
    wrapped = [value.value for value in (*args, *kwargs.values()) if isinstance(value, NoDep)]

    def bare(value: Any) -> Any:
        return value.value if isinstance(value, NoDep) else value

    plain = tuple(bare(value) for value in args)
    return plain, {key: bare(value) for key, value in kwargs.items()}, _storages(wrapped)


def _storages(values: Iterable[Any]) -> tuple[int, ...]:
    return tuple(sorted({view.memory for view in _views(values)}))


def _views(values: Iterable[Any]) -> Iterator[TensorView]:
    for value in values:
        if isinstance(value, TensorView):
            yield value
        elif isinstance(value, (list, tuple)):
            yield from _views(value)


_orchestrations: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


def note_orchestration(function: Callable[..., Any]) -> None:
    """`function` is a per-device function: its body is a CHIP orchestration body."""
    _orchestrations.add(inspect.unwrap(getattr(function, "__func__", function)))


def note_inline(function: Callable[..., Any]) -> None:
    """`function` is a `pl.jit.inline` body: spliced into its caller, it is an
    orchestration body where its caller is one (outside any task)."""
    _inlines.add(inspect.unwrap(getattr(function, "__func__", function)))


_inlines: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


def chip_tasks() -> TaskContext | None:
    """The running rank's tasks when this call is made in a CHIP orchestration body:
    the body of a per-device function itself (or of an inline function it calls),
    outside its kernel calls and regions."""
    frame = innermost_user_frame()
    bodies = (*_orchestrations, *_inlines)
    if frame is None or not any(body.__code__ is frame.f_code for body in bodies):
        return None
    return _task_context()


def in_manual_scope() -> bool:
    return bool(getattr(_scope, "manual", False))


@contextmanager
def at(
    level: object = None,
    role: object = None,
    *,
    optimizations: object = None,
    deps: object = None,
    no_dep_args: object = None,
    dumps: object = None,
    allow_early_resolve: bool = False,
    name_hint: str = "",
    windowize: bool = False,
) -> Iterator[TaskId]:
    """`pl.at(level, ...)` in a rank's code: one task, ordered after `deps` and by what
    its body accesses (less the tensors in `no_dep_args`); inside a task it is part of
    that task. In the host function it is `racecheck.dsl.host_regions.at`."""
    del optimizations, dumps, allow_early_resolve, windowize, role, level
    context = _task_context()
    if context is None:
        yield TaskId(index=-1)
        return
    index = context.begin_task(region_spec(deps=deps, no_dep_args=no_dep_args, name_hint=name_hint))
    try:
        yield TaskId(index=index)
    finally:
        context.end_task()


_groups = itertools.count()


def region_spec(
    *, deps: object = None, no_dep_args: object = None, name_hint: str = ""
) -> TaskSpec:
    """The task of a `pl.at` region starting here."""
    return TaskSpec(
        name=name_hint or "pl.at",
        location=user_location(),
        tags=(),
        untracked=_storages(_listed(no_dep_args)),
        deps=dep_indexes(deps),
        manual=in_manual_scope(),
        region=True,
    )


class Spmd:
    """`pl.spmd(core_num, ...)`: one task of `core_num` concurrent blocks, each a thread
    of its own (`TaskSpec.block`). In the loop form `for block in pl.spmd(n)` a block
    runs the body; in the dispatch form `with pl.spmd(n) as tid:` (outlined by
    `racecheck.dsl.host_regions.InlineSpmd`) it runs the body's kernel calls. A run in
    program order runs the blocks one after another, each a task of its own, which the
    runtime's rules leave unordered with each other (`racecheck.cosim.threads`).
    `pl.tile.get_block_idx()` is the running block's number."""

    def __init__(
        self,
        core_num: object,
        *,
        deps: object = None,
        predicate: object = None,
        allow_early_resolve: bool = False,
        name_hint: str = "",
        sync_start: bool = False,
        optimizations: object = None,  # hints only (racecheck.dsl.hints)
    ) -> None:
        del allow_early_resolve, sync_start, optimizations
        self.where = user_location()
        if predicate is not None:
            raise unsupported(reason(ReasonCode.SCOPE_SPMD_PREDICATE), self.where)
        self.deps = dep_indexes(deps)
        self.name = name_hint or "pl.spmd"
        self.count = as_index(core_num)
        self.group = next(_groups)
        self.manual = in_manual_scope()

    def spec(self, block: int, *, region: bool = True, tags: tuple[TaskTag, ...] = ()) -> TaskSpec:
        """Block `block`'s task: the `pl.spmd`'s deps and name, its group shared."""
        return TaskSpec(
            name=self.name,
            location=self.where,
            tags=tags,
            deps=self.deps,
            manual=self.manual,
            region=region,
            block=block,
            group=self.group,
        )

    def _context(self) -> TaskContext:
        context = _task_context()
        if context is None:
            outside = reason(ReasonCode.SCOPE_OUTSIDE_DEVICE, construct="pl.spmd")
            raise unsupported(outside, self.where)
        return context

    def __iter__(self) -> Iterator[int]:
        return self._blocks(self._context())

    def _blocks(self, context: TaskContext) -> Iterator[int]:
        for block in range(self.count):
            context.begin_task(self.spec(block))
            try:
                with in_block(block):
                    yield DeviceIndex(block)  # an INDEX device scalar: its `%` and `//` truncate
            finally:
                context.end_task()


@contextmanager
def in_block(block: int) -> Iterator[None]:
    """Code run as block `block` of a `pl.spmd` (`pl.tile.get_block_idx()`)."""
    outer = getattr(_scope, "block", None)
    _scope.block = block
    try:
        yield
    finally:
        _scope.block = outer


@contextmanager
def spmd_blocks(core_num: object) -> Iterator[None]:
    """The kernel call made inside runs on `core_num` concurrent blocks, as one task
    (`pl.spmd_submit`)."""
    _scope.spmd_next = Spmd(core_num)
    try:
        yield
    finally:
        _scope.spmd_next = None


def block_index() -> DeviceIndex:
    """`pl.tile.get_block_idx()`: the running `pl.spmd` block, 0 outside one."""
    block = getattr(_scope, "block", None)
    return DeviceIndex(0 if block is None else block)


def _listed(value: object) -> tuple[Any, ...]:
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def dep_indexes(deps: object) -> tuple[int, ...]:
    indexes: list[int] = []
    for entry in _listed(deps):
        named = entry.task_ids() if isinstance(entry, TaskIdArray) else (entry,)
        for dep in named:
            if not isinstance(dep, TaskId):
                raise unsupported(reason(ReasonCode.SCOPE_DEPS_NOT_IDS, dep=repr(dep)))
            if dep.index >= 0:
                indexes.append(dep.index)
            indexes.extend(dep.joins)
    return tuple(indexes)


@contextmanager
def manual_scope() -> Iterator[None]:
    """`pl.manual_scope()`: the tasks started inside get no inferred edges, only `deps=`."""
    if in_manual_scope():
        raise unsupported(reason(ReasonCode.SCOPE_MANUAL_NESTED))
    _scope.manual = True
    try:
        yield
    finally:
        _scope.manual = False


class ScopeMode(Enum):
    """`pl.ScopeMode`: whether a runtime scope infers its tasks' edges."""

    AUTO = "AUTO"
    MANUAL = "MANUAL"


_own_scopes: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


def note_own_scopes(function: Callable[..., Any]) -> None:
    """`function` is declared with `auto_scope=False`: it may open AUTO scopes itself."""
    _own_scopes.add(inspect.unwrap(getattr(function, "__func__", function)))


def scope(mode: ScopeMode = ScopeMode.AUTO) -> AbstractContextManager[None]:
    """`pl.scope(mode=...)`: MANUAL is `pl.manual_scope()`; AUTO infers edges as the
    scopes PyPTO places around every body do, so it changes no order. PyPTO accepts
    AUTO only in an orchestration declared `auto_scope=False`, and not inside MANUAL."""
    if mode is ScopeMode.MANUAL:
        return manual_scope()
    if in_manual_scope():
        raise unsupported(reason(ReasonCode.SCOPE_AUTO_IN_MANUAL))
    frame = innermost_user_frame()
    if frame is None or not any(body.__code__ is frame.f_code for body in _own_scopes):
        raise unsupported(reason(ReasonCode.SCOPE_AUTO_OUTSIDE_OWN))
    return nullcontext()
