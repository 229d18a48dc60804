"""The symbolic integers of the all-P tracer against the device's own arithmetic: the
quotient case split of `%` and `//` by a symbolic divisor picks exactly the truncating
quotient, and a Sym folds to the same value as a DeviceInt."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from racecheck.allp.expr import (
    All,
    Any_,
    Bin,
    Cmp,
    Cond,
    Const,
    Expr,
    Not,
    Op,
    Rel,
    Sym,
    Var,
    quotient_is,
)
from racecheck.dsl.scalars import DeviceInt


def _value(expr: Expr, env: dict[str, int]) -> int:
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        return env[expr.name]
    assert isinstance(expr, Bin)
    left, right = DeviceInt(_value(expr.left, env)), DeviceInt(_value(expr.right, env))
    return int(
        {
            Op.ADD: lambda: left + right,
            Op.SUB: lambda: left - right,
            Op.MUL: lambda: left * right,
            Op.TDIV: lambda: left // right,
            Op.TMOD: lambda: left % right,
        }[expr.op]()
    )


def _holds(cond: Cond, env: dict[str, int]) -> bool:
    if isinstance(cond, Cmp):
        left, right = _value(cond.left, env), _value(cond.right, env)
        return {
            Rel.EQ: left == right,
            Rel.NE: left != right,
            Rel.LT: left < right,
            Rel.LE: left <= right,
        }[cond.rel]
    if isinstance(cond, Not):
        return not _holds(cond.inner, env)
    if isinstance(cond, All):
        return all(_holds(part, env) for part in cond.parts)
    assert isinstance(cond, Any_)
    return any(_holds(part, env) for part in cond.parts)


class _Replay:
    """Decides every branch by the concrete values in `env`, as a run at that point would."""

    def __init__(self, env: dict[str, int]) -> None:
        self.env = env

    def __call__(self, cond: Cond) -> bool:
        return _holds(cond, self.env)

    def choose(self, options: tuple[Cond, ...]) -> int:
        holding = [n for n, option in enumerate(options) if _holds(option, self.env)]
        assert len(holding) == 1, holding  # the cases are exclusive and exhaustive
        return holding[0]

    def computed(self, value: Expr) -> None:
        pass  # the values here are small


@given(
    numerator=st.integers(-40, 40),
    divisor=st.integers(1, 40),
    constant_numerator=st.booleans(),
)
def test_division_by_a_symbolic_divisor_matches_the_device(
    numerator: int, divisor: int, constant_numerator: bool
) -> None:
    env = {"a": numerator, "N": divisor}
    replay = _Replay(env)
    left = Sym(Var("a"), replay) if not constant_numerator else numerator
    right = Sym(Var("N"), replay)
    expected_div = DeviceInt(numerator) // DeviceInt(divisor)
    expected_mod = DeviceInt(numerator) % DeviceInt(divisor)
    in_cases = constant_numerator or -2 * divisor < numerator < 2 * divisor
    if not in_cases:
        return  # outside the bounded cases: the tracer refuses (tested end to end)
    assert _as_int(left // right, env) == expected_div
    assert _as_int(left % right, env) == expected_mod


def _as_int(value: int | Sym, env: dict[str, int]) -> int:
    return value if isinstance(value, int) else _value(value.expr, env)


@given(quotient=st.integers(-3, 3), numerator=st.integers(-50, 50), divisor=st.integers(1, 20))
def test_a_quotient_case_holds_exactly_for_its_quotient(
    quotient: int, numerator: int, divisor: int
) -> None:
    cond = quotient_is(quotient, Var("a"), Var("N"))
    truncated = DeviceInt(numerator) // DeviceInt(divisor)
    assert _holds(cond, {"a": numerator, "N": divisor}) == (truncated == quotient)


def test_symbolic_arithmetic_folds_like_device_ints() -> None:
    replay = _Replay({"N": 5})
    n = Sym(Var("N"), replay)
    assert _value((n - 6).expr, {"N": 5}) == -1
    assert (n * 0 + 7) % 4 == DeviceInt(7) % 4
    assert Bin(Op.ADD, Const(1), Const(2)) != Const(3)  # trees are not simplified
