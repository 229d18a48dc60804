"""The engines and the choice among them.

`auto` takes the fastest exact route: the monotone engine when the trace is monotone
(no search at all), else explicit exploration within a state budget, else z3.
"""

from __future__ import annotations

from collections.abc import Callable

from racecheck.engines.base import Engine, OrderOracle
from racecheck.engines.explore import ExploreEngine
from racecheck.engines.monotone import MonotoneEngine
from racecheck.errors import EngineUnknown
from racecheck.events import Trace
from racecheck.options import EngineChoice

AUTO_EXPLORE_STATES = 50_000


def smt_engine() -> Engine:
    """Imported on use: z3 costs start-up time that monotone programs never need."""
    from racecheck.engines.smt import SmtEngine

    return SmtEngine()


def engine_for(choice: EngineChoice) -> Engine:
    if choice is EngineChoice.MONOTONE:
        return MonotoneEngine()
    if choice is EngineChoice.EXPLORE:
        return ExploreEngine()
    return smt_engine()


AUTO_ROUTE: tuple[Callable[[], Engine], ...] = (
    MonotoneEngine,
    lambda: ExploreEngine(max_states=AUTO_EXPLORE_STATES),
    smt_engine,
)


def prepare(choice: EngineChoice, trace: Trace, *, deadline: float) -> tuple[str, OrderOracle]:
    """The engine that decides `trace` and its oracle; EngineUnknown if none can."""
    if choice is not EngineChoice.AUTO:
        engine = engine_for(choice)
        reason = engine.unsupported(trace)
        if reason:
            raise EngineUnknown(f"the {engine.name} engine cannot decide this program: {reason}")
        return engine.name, engine.order(trace, deadline=deadline)
    for make in AUTO_ROUTE:
        engine = make()
        if engine.unsupported(trace):
            continue
        try:
            return engine.name, engine.order(trace, deadline=deadline)
        except EngineUnknown:
            if engine.name == "smt":
                raise
    raise EngineUnknown("no engine can decide this program")
