"""What one co-simulated run produced: its trace, schedule and host tensors."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from racecheck.dsl.types import Direction
from racecheck.events import (
    EventRef,
    Schedule,
    Trace,
)


class TensorRole(Enum):
    INPUT = "input"
    OUTPUT = "output"
    INOUT = "inout"


ROLES = {
    Direction.IN: TensorRole.INPUT,
    Direction.OUT: TensorRole.OUTPUT,
    Direction.INOUT: TensorRole.INOUT,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class HostTensorRecord:
    name: str
    role: TensorRole
    dtype: str
    initial: np.ndarray
    final: np.ndarray


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    trace: Trace
    schedule: Schedule  # the order events executed in this run
    tensors: tuple[HostTensorRecord, ...]
    forced: tuple[EventRef, ...] = ()
    stalled: tuple[EventRef, ...] = ()
