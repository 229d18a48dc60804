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
    int32_span,
    quotient_is,
    span_of,
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
            Op.MIN: lambda: min(int(left), int(right)),
            Op.MAX: lambda: max(int(left), int(right)),
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


_LEAVES = st.one_of(st.sampled_from([Var("a"), Var("b")]), st.integers(-9, 9).map(Const))
_OPS = st.sampled_from([Op.ADD, Op.SUB, Op.MUL, Op.MIN, Op.MAX])
_DIVISORS = st.sampled_from([-3, -1, 2, 5]).map(Const)
_TREES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(Bin, _OPS, inner, inner),
        st.builds(Bin, st.sampled_from([Op.TDIV, Op.TMOD]), inner, _DIVISORS),
    ),
    max_leaves=6,
)
_BOUNDS = st.one_of(st.none(), st.integers(-20, 20))


@given(
    tree=_TREES,
    low=_BOUNDS,
    width=st.integers(0, 10),
    a=st.integers(-30, 30),
    b=st.integers(-30, 30),
)
def test_the_span_of_a_value_holds_every_value_it_takes(
    tree: Expr, low: int | None, width: int, a: int, b: int
) -> None:
    """`a` in its interval (unbounded below without `low`), `b` unbounded."""
    high = None if low is None else low + width
    if low is not None and not low <= a <= low + width:
        a = low
    value = _value(tree, {"a": a, "b": b})
    least, most = span_of(tree, {"a": (low, high)})
    assert least is None or least <= value
    assert most is None or value <= most


def test_a_span_beyond_int32_is_every_int32_value() -> None:
    """A stored value outside INT32 wraps into the cell: any INT32 value."""
    assert int32_span((0, 2)) == (0, 2)
    assert int32_span((None, 2)) == int32_span((0, 2**31)) == (-(2**31), 2**31 - 1)
