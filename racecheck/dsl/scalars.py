"""Device scalars: integers with C division, and values read from memory.

`DeviceInt` is what `pld.rank`, `pld.nranks`, `pld.world_size` and loop indices
return: `%` and `//` truncate toward zero as on the device (`(0 - 1) % 4 == -1`), and
every other integer operator keeps the type, so derived rank arithmetic stays on the
device's semantics.

`Tainted` wraps a value that came out of memory (`pl.read`, an element of a loaded
tile) with the load events it came from. Arithmetic propagates the taint; when the
value decides control flow (`bool`, `int`, an index) the loads are reported as
control reads.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from racecheck.dsl.active import note_control, note_unfollowed
from racecheck.dsl.dtypes import ALL_DTYPES, INDEX, INT32, DType
from racecheck.dsl.location import user_location
from racecheck.dsl.summary_state import active as summary_active
from racecheck.dsl.summary_state import note_revealed, widen
from racecheck.dsl.symbolic import (
    Decision,
    Expr,
    Op,
    bounds,
    chosen,
    combine,
    counts,
    decision,
    in_type,
    negated,
    operand,
)
from racecheck.events import INT32_MAX, INT32_MIN, EventRef
from racecheck.report.reasons import ReasonCode, reason

Number = int | float


def truncating_div(left: int, right: int) -> int:
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def truncating_mod(left: int, right: int) -> int:
    return left - right * truncating_div(left, right)


def _is_integral(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def scalar_type(value: object) -> DType | None:
    """The device scalar type of an integer operand (None: not an integer). A device
    scalar has its own; a plain Python integer in a DSL body is a literal or a value
    PyPTO's parser folds to one, typed INDEX (docs/model.md §1)."""
    if isinstance(value, DeviceInt):
        return value.dtype
    if isinstance(value, Tainted):
        return value.dtype
    if isinstance(value, np.integer):
        return _NUMPY_TYPES.get(value.dtype)
    return INDEX if _is_integral(value) else None


def promoted(left: DType, right: DType) -> DType:
    """The type of a binary operation on two integer scalars: the wider one, the left
    one when they are as wide (PyPTO's `PromoteSameCategoryDtype`, docs/model.md §1)."""
    return right if right.nbytes > left.nbytes else left


def fits_type(result: int, dtype: DType) -> bool:
    low, high = dtype.limits or (INT32_MIN, INT32_MAX)
    return low <= result <= high


def note_outside(result: int, dtype: DType, symbol: str, *operands: object) -> None:
    """`result` of `symbol` over `operands` leaves its type `dtype`: the device wraps
    or is undefined (docs/model.md), which racecheck does not follow: the run proves
    nothing (`note_unfollowed`)."""
    left, *right = operands
    text = f"{left} {symbol} {right[0]}" if right else f"{symbol}({left})"
    note_unfollowed(reason(ReasonCode.DSL_RESULT_RANGE, text=text, result=result, dtype=dtype.name))


def typed(dtype: DType, result: int) -> DeviceInt:
    """`result` as a device scalar of `dtype` (not checked against its range)."""
    return _DEVICE_CLASSES.get(dtype.name, DeviceInt)(result)


_INDEX_LOW, _INDEX_HIGH = INDEX.limits or (0, 0)


def _result(dtype: DType, result: int, symbol: str, *operands: int) -> DeviceInt:
    if not fits_type(result, dtype):
        note_outside(result, dtype, symbol, *operands)
    return typed(dtype, result)


def _device_method(op: Callable[[int, int], int], symbol: str, *, reflected: bool = False) -> Any:
    """`DeviceInt`'s operator `op` (written `symbol`): integer operands give a device
    scalar of the promoted type (with `op`'s device semantics); anything else is left
    to the other operand or to `int`."""

    def method(self: DeviceInt, other: object) -> Any:
        if type(other) is int:  # a literal, INDEX: the hot path, without promoted()
            dtype = self.dtype if self.dtype.nbytes >= INDEX.nbytes else INDEX
        elif _is_integral(other):
            theirs = scalar_type(other) or INDEX
            dtype = promoted(theirs, self.dtype) if reflected else promoted(self.dtype, theirs)
        else:
            return NotImplemented  # a Tainted, float or bool operand handles it itself
        left, right = (int(other), int(self)) if reflected else (int(self), int(other))  # type: ignore[call-overload]
        result = op(left, right)
        if _INDEX_LOW <= result <= _INDEX_HIGH and dtype is INDEX:
            return DeviceIndex(result)
        return _result(dtype, result, symbol, left, right)

    return method


def _device_divmod(self: DeviceInt, other: object, *, reflected: bool = False) -> Any:
    quotient = _device_method(truncating_div, "//", reflected=reflected)(self, other)
    if quotient is NotImplemented:
        return NotImplemented
    return quotient, _device_method(truncating_mod, "%", reflected=reflected)(self, other)


class DeviceInt(int):
    """A device scalar of type INT32 (a rank, a rank count; `DeviceIndex` and the other
    subclasses of `typed` for other types): the device's truncating `%` and `//` (also
    through `divmod`), and every integer operator gives a device scalar of the promoted
    type, so a rank derived through `^`, `<<` or `**` still divides like the device."""

    __slots__ = ()
    dtype: DType = INT32

    def __repr__(self) -> str:
        return int.__repr__(self)

    __add__ = _device_method(operator.add, "+")
    __radd__ = _device_method(operator.add, "+", reflected=True)
    __sub__ = _device_method(operator.sub, "-")
    __rsub__ = _device_method(operator.sub, "-", reflected=True)
    __mul__ = _device_method(operator.mul, "*")
    __rmul__ = _device_method(operator.mul, "*", reflected=True)
    __floordiv__ = _device_method(truncating_div, "//")
    __rfloordiv__ = _device_method(truncating_div, "//", reflected=True)
    __mod__ = _device_method(truncating_mod, "%")
    __rmod__ = _device_method(truncating_mod, "%", reflected=True)
    __and__ = _device_method(operator.and_, "&")
    __rand__ = _device_method(operator.and_, "&", reflected=True)
    __or__ = _device_method(operator.or_, "|")
    __ror__ = _device_method(operator.or_, "|", reflected=True)
    __xor__ = _device_method(operator.xor, "^")
    __rxor__ = _device_method(operator.xor, "^", reflected=True)
    __lshift__ = _device_method(operator.lshift, "<<")
    __rlshift__ = _device_method(operator.lshift, "<<", reflected=True)
    __rshift__ = _device_method(operator.rshift, ">>")
    __rrshift__ = _device_method(operator.rshift, ">>", reflected=True)

    def __pow__(self, other: object, modulo: object = None) -> Any:
        if modulo is None and _is_integral(other) and other >= 0:  # type: ignore[operator]
            left, right = int(self), int(other)  # type: ignore[call-overload]
            dtype = promoted(self.dtype, scalar_type(other) or INDEX)
            return _result(dtype, left**right, "**", left, right)
        return int.__pow__(self, other, modulo)  # type: ignore[call-overload]

    def __rpow__(self, other: object, modulo: object = None) -> Any:
        if modulo is None and _is_integral(other) and self >= 0:
            left, right = int(other), int(self)  # type: ignore[call-overload]
            dtype = promoted(scalar_type(other) or INDEX, self.dtype)
            return _result(dtype, left**right, "**", left, right)
        return int.__rpow__(self, other, modulo)  # type: ignore[call-overload, operator]

    def __divmod__(self, other: object) -> Any:
        return _device_divmod(self, other)

    def __rdivmod__(self, other: object) -> Any:
        return _device_divmod(self, other, reflected=True)

    def __neg__(self) -> DeviceInt:
        return _result(self.dtype, -int(self), "-", int(self))

    def __pos__(self) -> DeviceInt:
        return self

    def __abs__(self) -> DeviceInt:
        return _result(self.dtype, abs(int(self)), "abs", int(self))

    def __invert__(self) -> DeviceInt:
        return typed(self.dtype, ~int(self))


class DeviceIndex(DeviceInt):
    """A device scalar of type INDEX (64-bit): a loop index, a block index, a literal
    cast with `pl.cast(..., pl.INDEX)`."""

    __slots__ = ()
    dtype = INDEX


def _device_class(dtype: DType) -> type[DeviceInt]:
    return type(f"Device{dtype.name.title()}", (DeviceInt,), {"__slots__": (), "dtype": dtype})


_DEVICE_CLASSES: dict[str, type[DeviceInt]] = {
    "INT32": DeviceInt,
    "INDEX": DeviceIndex,
    **{
        dtype.name: _device_class(dtype)
        for dtype in ALL_DTYPES
        if dtype.limits is not None and dtype.name not in ("INT32", "INDEX", "BOOL")
    },
}
_NUMPY_TYPES: dict[np.dtype, DType] = {
    dtype.compute: dtype
    for dtype in reversed(ALL_DTYPES)  # INT64's numpy type is INDEX's: INT64 wins
    if dtype.limits is not None and dtype.name != "BOOL"
}


def device_scalar(value: object, dtype: DType = INT32) -> object:
    """A Python integer handed to the device as the device scalar of `dtype` it becomes
    (a dispatch argument: INT32; a loop-carried value: INDEX, as the literal it is in
    PyPTO), whose `%` and `//` truncate (docs/model.md); any other value as it is. One
    outside the type's range is not cast: the run proves nothing, as for arithmetic
    that leaves it (`_result`)."""
    if type(value) is not int:
        return value
    if not fits_type(value, dtype):
        note_unfollowed(reason(ReasonCode.DSL_HANDED_RANGE, value=value, dtype=dtype.name))
    return typed(dtype, value)


def _plain(value: object) -> object:
    return value.value if isinstance(value, Tainted) else value


def _sources(*values: object) -> frozenset[EventRef]:
    found: frozenset[EventRef] = frozenset()
    for value in values:
        found |= sources_of(value)
    return found


def sources_of(value: object) -> frozenset[EventRef]:
    """The loads a value (a tainted scalar or a tile) was computed from."""
    sources = getattr(value, "sources", None)
    return sources if isinstance(sources, frozenset) else frozenset()


def _scalar_op(op: Callable[[Any, Any], Any], left: object, right: object) -> Any:
    """Apply `op` to plain values with device integer semantics."""
    plain_left, plain_right = _plain(left), _plain(right)
    if _is_integral(plain_left) and _is_integral(plain_right):
        if op is operator.floordiv:
            return truncating_div(plain_left, plain_right)  # type: ignore[arg-type]
        if op is operator.mod:
            return truncating_mod(plain_left, plain_right)  # type: ignore[arg-type]
    return op(plain_left, plain_right)


def _symbolic(value: object) -> Expr | None:
    if isinstance(value, Tainted):
        return value.symbolic
    return operand(value, None)


_SYMBOLS = {
    operator.add: "+",
    operator.sub: "-",
    operator.mul: "*",
    operator.floordiv: "//",
    operator.mod: "%",
}


def _binary(op: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[..., Tainted]:
    divides = op in (operator.floordiv, operator.mod)
    arithmetic = op in _SYMBOLS

    def method(self: Tainted, other: object) -> Tainted:
        left, right = (other, self) if reflected else (self, other)
        if divides and isinstance(right, Tainted):
            _note_divisor(right)
        symbolic = combine(op, _symbolic(left), _symbolic(right))
        value = _scalar_op(op, left, right)
        left_type, right_type = scalar_type(left), scalar_type(right)
        dtype = None
        guards = self.guards + (other.guards if isinstance(other, Tainted) else ())
        if arithmetic and left_type is not None and right_type is not None:
            dtype = promoted(left_type, right_type)
            if not fits_type(value, dtype):
                note_outside(value, dtype, _SYMBOLS[op], _plain(left), _plain(right))
            guards += in_type(symbolic, dtype.limits)
        return Tainted(value, _sources(self, other), symbolic, dtype=dtype, guards=guards)

    return method


def _note_divisor(divisor: Tainted) -> None:
    """An integer divisor with a symbolic form decides whether the division is defined:
    the inputs that make it zero are another path, on which the run raises there
    (docs/model.md)."""
    symbolic = divisor.symbolic
    note_revealed(divisor.sources)
    if symbolic is not None and _is_integral(divisor.value) and divisor.value != 0:
        note_control(divisor.sources, decision(symbolic, divisor.value, as_bool=True))


class Tainted:
    """A scalar value read from memory, with the load events it depends on and, for a
    value computed from input elements only, its symbolic form. An integer one has its
    device scalar type (`dtype`: the element type it was read as, or the promoted type
    of the operation that made it), and `guards`: the conditions under which every
    operation that made it stayed within its type (`symbolic.in_type`), which steer
    wherever the value does, as the inputs that break one make the device wrap."""

    __slots__ = ("value", "sources", "symbolic", "dtype", "guards")

    def __init__(
        self,
        value: Any,
        sources: frozenset[EventRef],
        symbolic: Expr | None = None,
        *,
        dtype: DType | None = None,
        guards: tuple[Expr, ...] = (),
    ) -> None:
        if dtype is None and not isinstance(value, (float, np.floating)):
            dtype = scalar_type(value) if type(value) is not int else INT32
        self.value = value.item() if hasattr(value, "item") else value
        self.sources = sources
        self.symbolic = symbolic
        self.dtype = dtype if _is_integral(self.value) else None
        self.guards = guards

    def __repr__(self) -> str:
        return repr(self.value)

    def reveal(self, *, as_bool: bool = False) -> Any:
        """The value, for a use that decides control flow or an address. In a summary
        run a value counted by a slot counter is not pinned: as an offset it stands for
        every value of its form (`summary_state.widen`); a branch on it is a decision."""
        if (
            not as_bool
            and not self.guards  # one that may wrap is pinned: other inputs wrap it
            and self.symbolic is not None
            and summary_active()
            and counts(self.symbolic)
        ):
            widen(user_location(), bounds(self.symbolic))
            return self.value
        note_revealed(self.sources)
        for guard in self.guards:
            note_control(self.sources, Decision(guard, taken=True))
        symbolic = self.symbolic
        made = None if symbolic is None else decision(symbolic, self.value, as_bool=as_bool)
        note_control(self.sources, made)
        return self.value

    def __bool__(self) -> bool:
        return bool(self.reveal(as_bool=True))

    def __index__(self) -> int:
        return int(self.reveal())

    def __int__(self) -> int:
        return int(self.reveal())

    def __float__(self) -> float:
        # a plain float leaves the taint behind: whatever it decides is not seen
        return float(self.reveal())

    def __hash__(self) -> int:
        return hash(self.reveal())

    __add__ = _binary(operator.add)
    __radd__ = _binary(operator.add, reflected=True)
    __sub__ = _binary(operator.sub)
    __rsub__ = _binary(operator.sub, reflected=True)
    __mul__ = _binary(operator.mul)
    __rmul__ = _binary(operator.mul, reflected=True)
    __truediv__ = _binary(operator.truediv)
    __rtruediv__ = _binary(operator.truediv, reflected=True)
    __floordiv__ = _binary(operator.floordiv)
    __rfloordiv__ = _binary(operator.floordiv, reflected=True)
    __mod__ = _binary(operator.mod)
    __rmod__ = _binary(operator.mod, reflected=True)
    __lt__ = _binary(operator.lt)
    __le__ = _binary(operator.le)
    __gt__ = _binary(operator.gt)
    __ge__ = _binary(operator.ge)
    __eq__ = _binary(operator.eq)  # type: ignore[assignment]
    __ne__ = _binary(operator.ne)  # type: ignore[assignment]
    __and__ = _binary(operator.and_)
    __or__ = _binary(operator.or_)

    def __neg__(self) -> Tainted:
        symbolic = negated(self.symbolic)
        guards = self.guards
        if self.dtype is not None:
            if not fits_type(-self.value, self.dtype):
                note_outside(-self.value, self.dtype, "-", self.value)
            guards += in_type(symbolic, self.dtype.limits)
        return Tainted(-self.value, self.sources, symbolic, dtype=self.dtype, guards=guards)

    def __abs__(self) -> Tainted:
        return Tainted(abs(self.value), self.sources, dtype=self.dtype, guards=self.guards)


def chosen_scalar(op: Op, left: object, right: object) -> Any:
    """`min` (`op` MIN) or `max` of two scalars, one of them read from memory, as the
    device computes it: the value of one, with the exact form of the choice and no
    branch (`symbolic.chosen`), so a clamp `pl.min(count, M)` does not split paths.
    Without an integer form for both it decides by comparison, as Python does."""
    pick: Any = min if op is Op.MIN else max
    form = chosen(op, _symbolic(left), _symbolic(right))
    left_type, right_type = scalar_type(left), scalar_type(right)
    if form is None or left_type is None or right_type is None:
        return pick(left, right)
    value = pick(_plain(left), _plain(right))
    guards = tuple(
        guard for side in (left, right) if isinstance(side, Tainted) for guard in side.guards
    )
    dtype = promoted(left_type, right_type)
    return Tainted(value, _sources(left, right), form, dtype=dtype, guards=guards)


def as_index(value: object) -> int:
    """An integer used as an address, offset, peer or loop bound (reveals taint)."""
    if type(value) is int or type(value) is DeviceInt:
        return int(value)
    if isinstance(value, Tainted):
        return int(value.reveal())
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return int(value)
    if hasattr(value, "__index__"):
        return int(value.__index__())  # type: ignore[union-attr]
    raise TypeError(reason(ReasonCode.DSL_NOT_INTEGER, value=repr(value)))


def as_data(value: object) -> Number:
    """A scalar used as data (written to memory, added to a tile): taint is not control."""
    plain = _plain(value)
    if isinstance(plain, (int, float)):
        return plain
    if hasattr(plain, "item"):
        return plain.item()  # type: ignore[union-attr]
    return float(plain)  # type: ignore[arg-type]
