"""PyPTO's device scalar types (docs/model.md §1): literals are INDEX, mixed arithmetic is
computed in the wider type, INT32 × INT32 stays INT32; a value read from an input keeps
its element type, and an operation its inputs could push past its type is a condition
on them (`guards`), so z3 can look for the inputs that wrap it."""

from __future__ import annotations

import numpy as np

from racecheck.dsl.dtypes import INDEX, INT8, INT32, INT64
from racecheck.dsl.scalars import DeviceIndex, DeviceInt, Tainted, promoted, scalar_type, typed
from racecheck.dsl.symbolic import Apply, Const, Op, Var, bounds, in_type, within

COUNT = Var("count", 0, False, INT32.limits)  # type: ignore[arg-type]


def test_a_literal_promotes_an_int32_to_index() -> None:
    product = DeviceInt(8) * 268435456
    assert (type(product), product) == (DeviceIndex, 2**31)
    assert type(268435456 * DeviceInt(8)) is DeviceIndex


def test_int32_by_int32_stays_int32_and_index_by_int32_is_index() -> None:
    assert type(DeviceInt(3) * DeviceInt(4)) is DeviceInt
    assert type(DeviceIndex(3) - DeviceInt(4)) is DeviceIndex
    assert type(DeviceInt(3) // DeviceIndex(2)) is DeviceIndex


def test_promotion_takes_the_wider_type_and_the_left_one_at_a_tie() -> None:
    assert promoted(INT32, INDEX) is INDEX and promoted(INDEX, INT32) is INDEX
    assert promoted(INDEX, INT64) is INDEX and promoted(INT64, INDEX) is INT64
    assert promoted(INT8, INT32) is INT32
    assert typed(INT64, 5).dtype is INT64 and typed(INT8, 5).dtype is INT8


def test_truncating_division_keeps_the_promoted_type() -> None:
    quotient, remainder = divmod(DeviceInt(-7), 2)
    assert (quotient, remainder) == (-3, -1)
    assert type(quotient) is DeviceIndex and type(remainder) is DeviceIndex


def test_scalar_types_of_operands() -> None:
    assert scalar_type(7) is INDEX
    assert scalar_type(np.int32(7)) is INT32
    assert scalar_type(np.int64(7)) is INT64
    assert scalar_type(DeviceInt(7)) is INT32
    assert scalar_type(1.5) is None and scalar_type(True) is None


def test_a_read_keeps_its_element_type() -> None:
    assert Tainted(np.int32(3), frozenset(), COUNT).dtype is INT32
    assert Tainted(np.int64(3), frozenset(), COUNT).dtype is INT64
    assert Tainted(np.float32(3.0), frozenset()).dtype is None


def test_times_a_literal_is_index_and_needs_no_condition() -> None:
    scaled = Tainted(np.int32(3), frozenset(), COUNT) * 256
    assert (scaled.value, scaled.dtype, scaled.guards) == (768, INDEX, ())


def test_int32_times_int32_is_a_condition_on_the_input() -> None:
    count = Tainted(np.int32(3), frozenset(), COUNT)
    square = count * count
    assert square.dtype is INT32
    form = Apply(Op.MUL, (COUNT, COUNT))
    # intervals do not see that a square is never negative: z3 finds that side infeasible
    assert square.guards == (
        Apply(Op.GE, (form, Const(-(2**31)))),
        Apply(Op.LE, (form, Const(2**31 - 1))),
    )
    product = count * DeviceInt(256)
    assert product.dtype is INT32 and len(product.guards) == 2
    assert (product * 2).guards == product.guards  # INDEX from there on


def test_bounds_and_conditions_of_forms() -> None:
    assert bounds(Apply(Op.MUL, (COUNT, Const(256)))) == (-(2**39), (2**31 - 1) * 256)
    assert bounds(Apply(Op.TRUNC_MOD, (COUNT, Const(4)))) == (-3, 3)
    assert in_type(Apply(Op.ADD, (COUNT, Const(1))), INT32.limits) == (
        Apply(Op.LE, (Apply(Op.ADD, (COUNT, Const(1))), Const(2**31 - 1))),
    )
    assert in_type(Apply(Op.ADD, (COUNT, Const(1))), INDEX.limits) == ()
    assert within(Apply(Op.MUL, (COUNT, Const(256))), INDEX.limits)
    assert not within(Apply(Op.MUL, (COUNT, Const(256))), INT32.limits)
    assert not within(Var("x", 0, True), INDEX.limits)
