"""Input synthesis: the host tensors a co-simulated run starts from."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from racecheck.assumptions import narrowed
from racecheck.cosim.execution import ROLES, TensorRole
from racecheck.cosim.host import HostContext
from racecheck.dsl.dtypes import DType
from racecheck.dsl.memory import MemoryState, zero_pages
from racecheck.dsl.tensors import TensorView
from racecheck.dsl.types import Direction, TensorType
from racecheck.load import ProgramInstance


def _initial_values(
    dtype: DType, shape: tuple[int, ...], direction: Direction, rng: np.random.Generator, ranks: int
) -> np.ndarray:
    if direction is Direction.OUT:
        return np.zeros(shape, dtype=dtype.compute)
    if dtype.name == "BOOL":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.is_float:
        values = rng.standard_normal(shape)
    else:
        values = rng.integers(2, 10, size=shape).astype(np.float64)
    if len(shape) > 0 and shape[0] == ranks:
        _spread_extremes(values.reshape(ranks, -1))
    values = values.astype(dtype.compute)
    return dtype.decode(dtype.encode(values)) if dtype.is_float else values


LAZY_BYTES = 8 << 20
"""A host tensor larger than this starts as zeros that are never materialised: only the
bytes a run reads or writes cost memory (a model's weights run to many GiB)."""


def _given(
    instance: ProgramInstance, name: str, shape: tuple[int, ...], annotation: TensorType
) -> np.ndarray | None:
    """The values the file's own test states for the input (`racecheck.file_harness`)."""
    if instance.given is None or annotation.direction is Direction.OUT:
        return None
    values = instance.given.values(name, shape)
    if values is None:
        return None
    dtype = annotation.dtype
    values = values.astype(dtype.compute)
    return dtype.decode(dtype.encode(values)) if dtype.is_float else values


def _spread_extremes(rows: np.ndarray) -> None:
    """Make column j's maximum rank j mod P and its minimum rank j+1 mod P, so no rank's
    row is the element-wise max or min of all rows by chance (a broadcast of it would
    then look like allreduce-max or -min to the golden models)."""
    ranks, width = rows.shape
    if ranks < 2 or width < 2:
        return
    columns = np.arange(width)
    high, low = rows.max(axis=0), rows.min(axis=0)
    rows[columns % ranks, columns] = high + 1
    rows[(columns + 1) % ranks, columns] = low - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class HostTensor:
    name: str
    role: TensorRole
    view: TensorView
    initial: np.ndarray


def create_host_arguments(
    instance: ProgramInstance, memory: MemoryState, host: HostContext, seed: int
) -> tuple[list[Any], list[HostTensor]]:
    rng = np.random.default_rng(seed)
    memory.assumed = instance.assumed
    arguments: list[Any] = []
    tensors: list[HostTensor] = []
    for parameter in instance.parameters:
        annotation = parameter.annotation
        if not isinstance(annotation, TensorType):
            arguments.append(parameter.value)
            continue
        shape = instance.shape_of(annotation)
        view, initial = _host_tensor(parameter.name, annotation, shape, memory, rng, instance)
        host.host_roots.add(view.memory)
        if annotation.direction is not Direction.OUT:
            memory.inputs[view.memory] = parameter.name
        arguments.append(view)
        tensors.append(
            HostTensor(
                name=parameter.name,
                role=ROLES[annotation.direction],
                view=view,
                initial=initial,
            )
        )
    return arguments, tensors


def _host_tensor(
    name: str,
    annotation: TensorType,
    shape: tuple[int, ...],
    memory: MemoryState,
    rng: np.random.Generator,
    instance: ProgramInstance,
) -> tuple[TensorView, np.ndarray]:
    """The tensor and its initial values (kept for the golden models)."""
    chosen = [(index, value) for tensor, index, value in instance.inputs if tensor == name]
    if math.prod(shape) * annotation.dtype.nbytes > LAZY_BYTES:
        view = memory.add_zero_host_tensor(name, shape, annotation.dtype)
        initial = zero_pages(shape, np.dtype(annotation.dtype.compute))
        for index, value in chosen:
            memory.set_element(view, index, value)
            np.put(initial, index, value)
        return view, initial
    given = _given(instance, name, shape, annotation)
    values = (
        _initial_values(annotation.dtype, shape, annotation.direction, rng, instance.ranks)
        if given is None
        else given
    )
    limits = annotation.dtype.limits
    if limits is not None and annotation.direction is not Direction.OUT:
        low, high = narrowed(limits, instance.assumed, name)
        values = np.clip(values, low, high).astype(values.dtype)  # what --assume allows
    for index, value in chosen:
        np.put(values, index, value)
    view = memory.add_host_tensor(name, values, annotation.dtype)
    return view, memory.snapshot(view)
