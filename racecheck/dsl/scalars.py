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

from racecheck.dsl.active import note_control, note_unfollowed
from racecheck.dsl.symbolic import Expr, combine, decision, negated, operand
from racecheck.events import INT32_MAX, INT32_MIN, EventRef

Number = int | float


def truncating_div(left: int, right: int) -> int:
    quotient = abs(left) // abs(right)
    return quotient if (left < 0) == (right < 0) else -quotient


def truncating_mod(left: int, right: int) -> int:
    return left - right * truncating_div(left, right)


def _is_integral(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int32(result: int, symbol: str, *operands: int) -> DeviceInt:
    """`result` of `symbol` over `operands` as a device scalar. Outside the INT32 range
    the device wraps or is undefined (docs/model.md), which racecheck does not follow:
    the run proves nothing (`note_unfollowed`)."""
    if INT32_MIN <= result <= INT32_MAX:
        return DeviceInt(result)
    left, *right = operands
    text = f"{left} {symbol} {right[0]}" if right else f"{symbol}({left})"
    note_unfollowed(
        f"`{text}` = {result} leaves the INT32 range; the device wraps or is undefined"
        " there (docs/model.md), racecheck does not follow it"
    )
    return DeviceInt(result)


def _device_method(op: Callable[[int, int], int], symbol: str, *, reflected: bool = False) -> Any:
    """`DeviceInt`'s operator `op` (written `symbol`): integer operands keep the type
    (and `op`'s device semantics); anything else is left to the other operand or to
    `int`."""
    low, high = INT32_MIN, INT32_MAX

    def method(self: DeviceInt, other: object) -> Any:
        if not _is_integral(other):
            return NotImplemented  # a Tainted, float or bool operand handles it itself
        left, right = (int(other), int(self)) if reflected else (int(self), int(other))  # type: ignore[call-overload]
        result = op(left, right)
        if low <= result <= high:  # the common case, without `_int32`'s call (hot path)
            return DeviceInt(result)
        return _int32(result, symbol, left, right)

    return method


def _device_divmod(self: DeviceInt, other: object, *, reflected: bool = False) -> Any:
    quotient = _device_method(truncating_div, "//", reflected=reflected)(self, other)
    if quotient is NotImplemented:
        return NotImplemented
    return quotient, _device_method(truncating_mod, "%", reflected=reflected)(self, other)


class DeviceInt(int):
    """An int with the device's truncating `%` and `//` (also through `divmod`); every
    integer operator keeps the type, so a rank derived through `^`, `<<` or `**` still
    divides like the device."""

    __slots__ = ()

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
            return _int32(left**right, "**", left, right)
        return int.__pow__(self, other, modulo)  # type: ignore[call-overload]

    def __rpow__(self, other: object, modulo: object = None) -> Any:
        if modulo is None and _is_integral(other) and self >= 0:
            left, right = int(other), int(self)  # type: ignore[call-overload]
            return _int32(left**right, "**", left, right)
        return int.__rpow__(self, other, modulo)  # type: ignore[call-overload, operator]

    def __divmod__(self, other: object) -> Any:
        return _device_divmod(self, other)

    def __rdivmod__(self, other: object) -> Any:
        return _device_divmod(self, other, reflected=True)

    def __neg__(self) -> DeviceInt:
        return _int32(-int(self), "-", int(self))

    def __pos__(self) -> DeviceInt:
        return self

    def __abs__(self) -> DeviceInt:
        return _int32(abs(int(self)), "abs", int(self))

    def __invert__(self) -> DeviceInt:
        return DeviceInt(~int(self))


def device_scalar(value: object) -> object:
    """A Python integer handed to the device (a dispatch argument, a loop-carried value)
    as the device scalar it becomes, whose `%` and `//` truncate (docs/model.md); any
    other value as it is. One outside the INT32 range is not cast: the run proves
    nothing, as for arithmetic that leaves it (`_int32`)."""
    if type(value) is not int:
        return value
    if not INT32_MIN <= value <= INT32_MAX:
        note_unfollowed(
            f"`{value}` handed to the device leaves the INT32 range; the device wraps or is"
            " undefined there (docs/model.md), racecheck does not follow it"
        )
    return DeviceInt(value)


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
            return DeviceInt(truncating_div(plain_left, plain_right))  # type: ignore[arg-type]
        if op is operator.mod:
            return DeviceInt(truncating_mod(plain_left, plain_right))  # type: ignore[arg-type]
    return op(plain_left, plain_right)


def _symbolic(value: object) -> Expr | None:
    if isinstance(value, Tainted):
        return value.symbolic
    return operand(value, None)


def _binary(op: Callable[[Any, Any], Any], reflected: bool = False) -> Callable[..., Tainted]:
    divides = op in (operator.floordiv, operator.mod)

    def method(self: Tainted, other: object) -> Tainted:
        left, right = (other, self) if reflected else (self, other)
        if divides and isinstance(right, Tainted):
            _note_divisor(right)
        symbolic = combine(op, _symbolic(left), _symbolic(right))
        return Tainted(_scalar_op(op, left, right), _sources(self, other), symbolic)

    return method


def _note_divisor(divisor: Tainted) -> None:
    """An integer divisor with a symbolic form decides whether the division is defined:
    the inputs that make it zero are another path, on which the run raises there
    (docs/model.md)."""
    symbolic = divisor.symbolic
    if symbolic is not None and _is_integral(divisor.value) and divisor.value != 0:
        note_control(divisor.sources, decision(symbolic, divisor.value, as_bool=True))


class Tainted:
    """A scalar value read from memory, with the load events it depends on and, for a
    value computed from input elements only, its symbolic form."""

    __slots__ = ("value", "sources", "symbolic")

    def __init__(
        self, value: Any, sources: frozenset[EventRef], symbolic: Expr | None = None
    ) -> None:
        self.value = value.item() if hasattr(value, "item") else value
        self.sources = sources
        self.symbolic = symbolic

    def __repr__(self) -> str:
        return repr(self.value)

    def reveal(self, *, as_bool: bool = False) -> Any:
        """The value, for a use that decides control flow or an address."""
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
        return Tainted(-self.value, self.sources, negated(self.symbolic))

    def __abs__(self) -> Tainted:
        return Tainted(abs(self.value), self.sources)


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
    raise TypeError(f"expected an integer, got {value!r}")


def as_data(value: object) -> Number:
    """A scalar used as data (written to memory, added to a tile): taint is not control."""
    plain = _plain(value)
    if isinstance(plain, (int, float)):
        return plain
    if hasattr(plain, "item"):
        return plain.item()  # type: ignore[union-attr]
    return float(plain)  # type: ignore[arg-type]
