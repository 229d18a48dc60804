"""The engines and the choice among them.

`ENGINES` is the one registry: every engine the product has, by name (the conformance
suite iterates it). `auto` takes the fastest exact route: the monotone engine when the
trace is monotone (no search at all), else explicit exploration within a state budget,
else z3 behind the cheap exact answers of `racecheck.engines.bounds` (monotone refuses
a trace whose threads share units: cores, a dispatch lock). Every engine reads the
trace's one compiled `SyncSkeleton`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from racecheck.clock import Overtime
from racecheck.engines.base import Engine, OrderOracle
from racecheck.engines.bounds import BoundedEngine
from racecheck.engines.explore import ExploreEngine
from racecheck.engines.monotone import MonotoneEngine
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.errors import EngineUnknown
from racecheck.events import Trace
from racecheck.options import EngineChoice
from racecheck.report.reasons import ReasonCode, reason

AUTO_EXPLORE_STATES = 50_000


def smt_engine() -> Engine:
    """Imported on use: z3 costs start-up time that monotone programs never need. Cheap
    exact answers go first (`racecheck.engines.bounds`); z3 decides the rest."""
    from racecheck.engines.smt import SmtEngine

    return BoundedEngine(SmtEngine())


ENGINES: Mapping[str, Callable[[], Engine]] = {
    "monotone": MonotoneEngine,
    "explore": ExploreEngine,
    "smt": smt_engine,
}

AUTO_ROUTE: tuple[Callable[[], Engine], ...] = (
    MonotoneEngine,
    # explore's macro-state search alone: adding its reduced search here made the
    # failing try before z3 (example 05 --repeat 2, P=8) 10 % slower (docs/benchmarks.md)
    lambda: ExploreEngine(max_states=AUTO_EXPLORE_STATES, reduced_steps=0),
    smt_engine,
)


def prepare(choice: EngineChoice, trace: Trace, *, deadline: float) -> tuple[str, OrderOracle]:
    """The engine that decides `trace` and its oracle; EngineUnknown if none can."""
    skeleton = SyncSkeleton(trace)
    refusal = skeleton.refusal()
    if refusal:
        raise EngineUnknown(reason(ReasonCode.ENGINE_NONE_EXACT, why=refusal))
    if choice is not EngineChoice.AUTO:
        engine = ENGINES[choice.value]()
        why = engine.unsupported(skeleton)
        if why:
            raise EngineUnknown(reason(ReasonCode.ENGINE_CANNOT, engine=engine.name, why=why))
        return engine.name, engine.order(skeleton, deadline=deadline)
    for make in AUTO_ROUTE:
        engine = make()
        if engine.unsupported(skeleton):
            continue
        try:
            return engine.name, engine.order(skeleton, deadline=deadline)
        except Overtime:
            raise  # past --timeout no other engine may run
        except EngineUnknown:
            if engine.name == "smt":
                raise
    raise EngineUnknown(reason(ReasonCode.ENGINE_NONE))
