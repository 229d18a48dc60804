"""Run a program once per branch path with symbolic N and rank; merge the paths.

The user's module has its `pl`/`pld` names and module-level DSL functions swapped
for the shadow surface during each run and restored after. A factory is called with
N for its rank-count parameter. A user exception on a path is the program rejecting
the P of that path (a precondition); any construct the surface does not follow ends
the attempt with `OutsideFragment`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from racecheck import clock
from racecheck.allp.expr import WORLD, Cmp, Cond, Const, OutsideFragment, Rel, Var
from racecheck.allp.functions import ShadowFunction, host_entry
from racecheck.allp.reasons import untraceable
from racecheck.allp.shadow import Surface
from racecheck.allp.templates import Protocol, Rejection
from racecheck.allp.tracer import PathRecord, Tracer
from racecheck.assumptions import Assumption
from racecheck.dsl import modules
from racecheck.dsl.location import traceback_location
from racecheck.dsl.program import DslFunction
from racecheck.dsl.types import TensorType
from racecheck.dsl.watchdog import Overrun, within
from racecheck.errors import ProgramRejected, UsageError, UserError
from racecheck.load import ProgramOrigin, bind_host, classify_raised
from racecheck.report.reasons import ReasonCode, reason

MAX_PATHS = 256


def trace_protocol(
    origin: ProgramOrigin,
    low: int,
    feasible: Callable[[Cond, float], bool],
    deadline: float,
    fresh: Callable[[], ProgramOrigin | None] | None = None,
    assumed: tuple[Assumption, ...] = (),
) -> Protocol:
    """Every path of the program at `origin`, each after the first on a fresh import
    of its file (`fresh`, if given): no run sees what another left in the module."""
    pending: list[list[int]] = [[]]
    records: list[PathRecord] = []
    rank_var = ""
    inputs: dict[str, None] = {}
    read_inputs: set[str] = set()
    while pending:
        if records and fresh is not None:
            reloaded = fresh()
            if reloaded is None:
                raise OutsideFragment("the program's origin is unknown")
            origin = reloaded
        if len(records) >= MAX_PATHS:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_PATHS, paths=MAX_PATHS))
        clock.check(deadline, _tracing(len(records) + 1))
        tracer = Tracer(
            pending.pop(), _until(feasible, deadline), Cmp(Rel.LE, Const(low), Var(WORLD))
        )
        surface = Surface(
            tracer,
            modules.MODULES["pypto.language"],
            modules.MODULES["pypto.language.distributed"],
            assumed,
        )
        _run_path(origin, surface, deadline, len(records) + 1)
        if tracer.left_early and tracer.record.rejection is None:
            raise OutsideFragment(tracer.left_early)
        if not surface.dispatched and tracer.record.rejection is None:
            raise OutsideFragment(reason(ReasonCode.OUTSIDE_NO_DISPATCH_LOOP))
        rank_var = rank_var or _dispatch_var(tracer)
        pending.extend(tracer.alternatives)
        records.append(tracer.record)
        inputs.update(dict.fromkeys(surface.read_ranges.values()))
        read_inputs |= surface.read_memories
    return Protocol(
        templates=tuple(dict.fromkeys(t for record in records for t in record.templates)),
        checks=tuple(dict.fromkeys(c for record in records for c in record.checks)),
        scalars=tuple(dict.fromkeys(c for record in records for c in record.scalars)),
        rejections=tuple(
            dict.fromkeys(r for record in records if (r := record.rejection) is not None)
        ),
        cases=tuple(dict.fromkeys(c for record in records for c in record.cases)),
        window_reads=tuple(
            dict.fromkeys(read for record in records for read in record.window_reads)
        ),
        rank_var=rank_var,
        paths=len(records),
        inputs=tuple(inputs),
        read_inputs=frozenset(read_inputs),
    )


def _until(feasible: Callable[[Cond, float], bool], deadline: float) -> Callable[[Cond], bool]:
    def check(cond: Cond) -> bool:
        return feasible(cond, deadline)

    return check


def _dispatch_var(tracer: Tracer) -> str:
    ranks = {template.rank for template in tracer.record.templates}
    return next(iter(ranks), "")


def _run_path(origin: ProgramOrigin, surface: Surface, deadline: float, number: int) -> None:
    """One path of the user's code, within `--timeout` (it may loop: `within`)."""

    def follow() -> None:
        entry, parameters = host_entry(_program(origin, surface), surface)
        entry(*_host_arguments(origin, entry, parameters, surface))

    with _swapped(origin.loaded.namespace, surface), modules.installed():
        try:
            within(follow, clock.left(deadline))
        except Overrun as overrun:
            raise clock.Overtime(_tracing(number), overrun.where) from None
        except clock.Overtime as cut:  # raised again in this thread, at the user's line
            where = traceback_location(cut.__traceback__) or cut.where
            raise clock.Overtime(_tracing(number), where) from None
        except (OutsideFragment, UserError):
            raise
        except Exception as error:  # noqa: BLE001 - the user's own exception, or ours
            failure = classify_raised(error, "")
            if not isinstance(failure, ProgramRejected):
                raise OutsideFragment(untraceable(error)) from None
            surface.tracer.reject(failure.message)


def _tracing(number: int) -> str:
    return f"proving every P (tracing branch path {number})"


def _program(origin: ProgramOrigin, surface: Surface) -> Any:
    value = origin.value
    if not inspect.isfunction(value):
        return value
    if origin.rank_parameter is None:
        raise OutsideFragment(reason(ReasonCode.OUTSIDE_NO_RANK_PARAMETER))
    keywords = dict(origin.keywords)
    keywords[origin.rank_parameter] = surface.tracer.world()
    return value(**keywords)


def _host_arguments(
    origin: ProgramOrigin,
    entry: Callable[..., Any],
    parameters: list[str],
    surface: Surface,
) -> list[object]:
    """The entry's arguments, bound by the loader's rule (`load.bind_host`), with the host
    tensors symbolic in N."""
    signature = inspect.signature(entry)
    try:
        binding = bind_host(
            origin.loaded,
            getattr(entry, "__name__", "the host entry"),
            entry,
            [signature.parameters[name] for name in parameters],
            dict(origin.args),
        )
    except UsageError:
        raise
    except UserError as error:
        raise OutsideFragment(error.message) from None
    surface.rank_dims = binding.rank_dims
    return [
        surface.host_tensor(parameter.name, parameter.annotation, binding.rank_dims)
        if isinstance(parameter.annotation, TensorType)
        else parameter.value
        for parameter in binding.parameters
    ]


@contextmanager
def _swapped(namespace: dict[str, Any], surface: Surface) -> Iterator[None]:
    replaced: dict[str, Any] = {}
    for name, value in namespace.items():
        if value is modules.MODULES["pypto.language"]:
            replaced[name] = surface.pl
        elif value is modules.MODULES["pypto.language.distributed"]:
            replaced[name] = surface.pld
        elif isinstance(value, DslFunction):
            replaced[name] = ShadowFunction(value.function, value.role, surface)
    saved = {name: namespace[name] for name in replaced}
    namespace.update(replaced)
    try:
        yield
    finally:
        namespace.update(saved)


__all__ = ["Rejection", "trace_protocol"]
