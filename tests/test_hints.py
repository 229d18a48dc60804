"""Performance hints (racecheck.dsl.hints): accepted where they change nothing checked,
refused where they would change how the region runs."""

from __future__ import annotations

import pytest

from racecheck.dsl import hints
from racecheck.dsl.scopes import Spmd
from racecheck.dsl.types import SplitMode
from racecheck.errors import UnsupportedConstruct


def test_a_real_split_mode_is_refused_and_none_is_accepted() -> None:
    assert hints.split(SplitMode.NONE, slot_num=2).name == "pl.split(NONE)"
    with pytest.raises(UnsupportedConstruct, match="sub-lanes"):
        hints.split(SplitMode.UP_DOWN)


def test_spmd_takes_optimizations() -> None:
    block = Spmd(4, optimizations=[hints.cross_core_slot(slot_num=2)])
    assert block is not None


def test_a_prefetch_needs_a_tensor_and_a_context() -> None:
    with pytest.raises(TypeError, match="async_prefetch"):
        hints.async_prefetch(3, hints.make_context())
