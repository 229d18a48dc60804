"""The device's `//` and `%` of input integers as symbolic forms, and pinned values
tried on every value they take: an address that depends on an input through them
gives the same verdict for every `--seed`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from pathlib import Path

import pytest
from expectations import markers_of
from hypothesis import given, settings
from hypothesis import strategies as st

from racecheck.dsl.scalars import DeviceInt, Tainted, truncating_div, truncating_mod
from racecheck.dsl.symbolic import Apply, Const, Decision, Expr, Op, Var, realises
from racecheck.engines.inputs_smt import Answer, flips
from racecheck.findings import FindingKind, Verdict
from racecheck.options import Options
from racecheck.pipeline import check

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
BUG = EXAMPLES / "195_input_slot_bug_parity.py"
CORRECT = EXAMPLES / "196_input_slot_parity_per_rank.py"
LEFT = Var("left", 0, is_float=False)
RIGHT = Var("right", 0, is_float=False)
DEVICE = {operator.floordiv: truncating_div, operator.mod: truncating_mod}
DIVISIONS = st.sampled_from([operator.floordiv, operator.mod])


def _pinned(expr: Expr, value: int, *, taken: bool = True) -> Decision:
    return Decision(condition=Apply(Op.EQ, (expr, Const(value))), taken=taken)


def _divided(
    op: Callable[[object, object], Tainted], left: int, right: int, symbolic_right: bool
) -> Tainted:
    divisor = Tainted(right, frozenset(), RIGHT) if symbolic_right else right
    return op(Tainted(left, frozenset(), LEFT), divisor)


@settings(max_examples=80, deadline=None)
@given(
    op=DIVISIONS,
    left=st.integers(-(10**6), 10**6),
    right=st.integers(-40, 40).filter(bool),
    symbolic_right=st.booleans(),
)
def test_the_form_denotes_the_value_the_device_computes(
    op: Callable[[object, object], Tainted], left: int, right: int, symbolic_right: bool
) -> None:
    result = _divided(op, left, right, symbolic_right)
    assert result.value == op(DeviceInt(left), DeviceInt(right)) == DEVICE[op](left, right)
    assert result.symbolic is not None
    operands = [_pinned(LEFT, left)] + ([_pinned(RIGHT, right)] if symbolic_right else [])
    # with the operands' values, no input gives the form another value
    made = [*operands, _pinned(result.symbolic, result.value)]
    ((_, other),) = flips(made, len(made) - 1, deadline=float("inf"))
    assert other.answer is Answer.INFEASIBLE
    # inputs z3 picks for the value compute it on the device
    ((_, picked),) = flips([_pinned(result.symbolic, result.value, taken=False)], 0, deadline=1e12)
    assert picked.answer is Answer.FOUND
    chosen = {name: int(value) for name, _, value in picked.values}
    divisor = chosen.get("right", right) if symbolic_right else right
    assert DEVICE[op](chosen.get("left", left), divisor) == result.value


@pytest.mark.parametrize("op", [operator.floordiv, operator.mod])
def test_a_zero_divisor_is_never_picked(op: Callable[[object, object], Tainted]) -> None:
    """The run raises at a division by zero: z3's value for it is no value the run
    computes, so a decision holds only where its divisors are not zero."""
    form = _divided(op, 7, 2, symbolic_right=True).symbolic
    assert form is not None
    zero = [
        Decision(condition=Apply(Op.GE, (RIGHT, Const(0))), taken=True),
        Decision(condition=Apply(Op.LE, (RIGHT, Const(0))), taken=True),
    ]
    ((_, other),) = flips([*zero, _pinned(form, 5, taken=False)], 2, deadline=float("inf"))
    assert other.answer is Answer.INFEASIBLE


def test_floats_divide_without_a_form() -> None:
    number = Var("x", 0, is_float=True)
    assert (Tainted(2.5, frozenset(), number) // 2).symbolic is None
    assert (Tainted(2.5, frozenset(), number) % 2).symbolic is None


def test_a_pinned_value_is_met_by_another_value_only() -> None:
    column = Apply(Op.MUL, (LEFT, Const(16)))
    assert realises(_pinned(column, 0), _pinned(column, 16, taken=False))
    assert not realises(_pinned(column, 16), _pinned(column, 16, taken=False))
    assert not realises(_pinned(LEFT, 0), _pinned(column, 16, taken=False))
    branch = Decision(condition=Apply(Op.LT, (LEFT, Const(3))), taken=False)
    assert not realises(Decision(condition=branch.condition, taken=True), branch)


@pytest.mark.parametrize("seed", range(4))
def test_a_column_from_the_input_parity_races_for_every_seed(seed: int) -> None:
    (result,) = check(str(BUG), Options(ranks=(2,), seed=seed)).results
    assert result.verdict is Verdict.BUG, result.message
    ((finding),) = result.findings
    assert (finding.kind, finding.detail) == (FindingKind.RACE, "write-after-write")
    assert {location.line for location in finding.locations} == {markers_of(BUG.read_text())["put"]}
    assert finding.ranks == (0, 1)
    for name, index, _ in finding.inputs:  # none where the --seed draw showed it
        assert (name, index) in {("slot", 0), ("slot", 1)}


@pytest.mark.parametrize("seed", range(4))
def test_a_column_every_value_of_which_is_the_ranks_own_is_proved(seed: int) -> None:
    results = check(str(CORRECT), Options(ranks=(2, 3), seed=seed)).results
    assert [result.verdict for result in results] == [Verdict.PROVED] * 2


def test_a_pinned_value_with_more_values_than_the_budget_is_unknown(tmp_path: Path) -> None:
    """Twenty columns per rank: each is one path, past the budget of 16."""
    source = CORRECT.read_text()
    for two, twenty in [("% 2) + 2) % 2", "% 20) + 20) % 20"), ("2 * me", "20 * me")]:
        source = source.replace(two, twenty)
    path = tmp_path / "twenty.py"
    path.write_text(source.replace("2 * nr * SIZE", "20 * nr * SIZE"))
    (result,) = check(str(path), Options(ranks=(2,))).results
    assert result.verdict is Verdict.UNKNOWN
    assert f"twenty.py:{markers_of(source)['put']} depends on input data" in result.message
    assert "past the budget of 16 paths" in result.message


def test_a_divisor_an_input_can_make_zero_is_not_proved(tmp_path: Path) -> None:
    """`8 % chosen` at `chosen == 0` is a division by zero, which the device does not
    define (the run raises there); every other input gives a column of the rank's own,
    so only that input is wrong. The divisor is a decision: its zero is a path."""
    source = CORRECT.read_text().replace("((chosen % 2) + 2) % 2", "((8 % chosen) + 8) % 2")
    path = tmp_path / "zero_divisor.py"
    path.write_text(source)
    for seed in range(2):
        (result,) = check(str(path), Options(ranks=(2,), seed=seed)).results
        assert (result.verdict, result.findings) == (Verdict.UNKNOWN, ())
        assert result.message.endswith(
            "raised ZeroDivisionError: integer division or modulo by zero"
        )


def test_a_divisor_no_input_makes_zero_is_proved(tmp_path: Path) -> None:
    # the square in INDEX (64 bits, docs/model.md §1): INT32 × INT32 would wrap
    source = CORRECT.read_text().replace(
        "((chosen % 2) + 2) % 2", "((8 % (pl.cast(chosen, pl.INDEX) * chosen + 1)) + 8) % 2"
    )
    path = tmp_path / "nonzero_divisor.py"
    path.write_text(source)
    (result,) = check(str(path), Options(ranks=(2,))).results
    assert result.verdict is Verdict.PROVED, result.message
