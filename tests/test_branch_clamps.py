"""A clamp written as a branch, `if n > T: n = T`, is the exact choice `pl.min` makes
(racecheck/dsl/device_source.py, docs/model.md §1): it computes what the branch does,
and for an input count it splits no path, so the summary run can prove every count."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import racecheck
from racecheck.dsl.device_source import Operator, clamp_of, device_arithmetic
from racecheck.dsl.scalars import DeviceIndex, DeviceInt, Tainted
from racecheck.dsl.symbolic import Apply, Const, Op, Var
from racecheck.events import EventRef
from racecheck.findings import Verdict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CLAMPED = EXAMPLES / "273_input_counts_all_to_all_v_branch_clamp.py"


def _if(source: str) -> ast.If:
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.If)
    return node


@pytest.mark.parametrize(
    ("source", "clamp"),
    [
        ("if n > T: n = T", Operator.UPPER),
        ("if n >= T + 1: n = T + 1", Operator.UPPER_EQ),
        ("if T < n: n = T", Operator.UPPER),
        ("if n < 0: n = 0", Operator.LOWER),
        ("if 0 >= n: n = 0", Operator.LOWER_EQ),
        ("if n > self.cap: n = self.cap", Operator.UPPER),
    ],
)
def test_a_branch_that_assigns_the_bound_it_compared_with_is_a_clamp(
    source: str, clamp: Operator
) -> None:
    found = clamp_of(_if(source))
    assert found is not None and found[:2] == (clamp, "n")


@pytest.mark.parametrize(
    "source",
    [
        "if n > T: n = T + 1",  # assigns another value than it compared with
        "if n > T:\n    n = T\nelse:\n    n = 0",  # an else
        "if n > T:\n    n = T\n    m = 1",  # more than the assignment
        "if n > f(): n = f()",  # a call: evaluated again it may differ
        "if n > a[0]: n = a[0]",  # a subscript: may read memory
        "if m > T: n = T",  # assigns a name it did not compare
        "if n == T: n = T",  # no bound
        "if n > n + 1: n = n + 1",  # the bound reads the name assigned
        "if 0 < n < T: n = T",  # a chained comparison
    ],
)
def test_anything_else_stays_a_branch(source: str) -> None:
    assert clamp_of(_if(source)) is None


@pytest.mark.parametrize(
    ("clamp", "value", "bound", "expected"),
    [
        (Operator.UPPER, 5, 3, 3),
        (Operator.UPPER, 3, 3, 3),
        (Operator.UPPER, 1, 3, 1),
        (Operator.LOWER_EQ, -2, 0, 0),
        (Operator.LOWER, 4, 0, 4),
    ],
)
def test_a_clamp_of_plain_values_is_the_branch(
    clamp: Operator, value: int, bound: int, expected: int
) -> None:
    assert device_arithmetic(clamp.value, value, bound) == expected


def test_a_clamp_of_plain_device_scalars_keeps_the_type_the_branch_gives() -> None:
    kept = device_arithmetic(Operator.UPPER.value, DeviceInt(2), 5)
    assert type(kept) is DeviceInt  # not past the bound: the value itself
    bounded = device_arithmetic(Operator.UPPER.value, DeviceInt(9), DeviceIndex(5))
    assert type(bounded) is DeviceIndex


def test_a_clamp_of_an_input_count_is_the_exact_choice_without_a_branch() -> None:
    count = Var("send_counts", 0, is_float=False)
    read = Tainted(7, frozenset({EventRef(rank=0, index=0)}), count)
    clamped = device_arithmetic(Operator.UPPER.value, read, 2)
    assert isinstance(clamped, Tainted)
    assert clamped.value == 2
    assert clamped.symbolic == Apply(Op.MIN, (count, Const(2)))


def test_a_float_clamp_is_the_branch() -> None:
    read = Tainted(0.5, frozenset({EventRef(rank=0, index=0)}), Var("x", 0, is_float=True))
    assert device_arithmetic(Operator.UPPER.value, read, 1.0) is read


def test_counts_clamped_by_branches_are_proved_for_every_input() -> None:
    (result,) = racecheck.verify(str(CLAMPED), ranks="2").results
    assert result.verdict is Verdict.PROVED
    assert any("max(min(send_counts.flat[0], 2), 0)" in note for note in result.notes)
