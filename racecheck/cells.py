"""A signal cell's semantics, the one home every interpreter calls (the co-simulation,
the engines' concrete replays, the judge): cells are INT32 and wrap (docs/model.md); a
Set makes a cell its value and an AtomicAdd adds to it; a wait passes when `Ge`, `Eq`
or `Ge(uint32)` (defer_wait: both sides as uint32) holds. The z3 encoding states the
same rules symbolically (`racecheck.engines.smt`)."""

from __future__ import annotations

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


def wrap_int32(value: int) -> int:
    """`value` as a signal cell holds it: cells are INT32 and wrap (docs/model.md)."""
    return (value - INT32_MIN) % 2**32 + INT32_MIN


def after_write(old: int, value: int, add: bool) -> int:
    """The cell's value once a write of `value` ran on `old`: an add wraps at 32 bits,
    a set is `value` (as the cell holds it)."""
    return wrap_int32(old + value if add else value)


def wait_passes(value: int, expected: int, equal: bool, unsigned: bool) -> bool:
    """Whether a wait for `expected` passes on a cell holding `value`: `Eq` if `equal`,
    else `Ge`, compared as uint32 if `unsigned`."""
    if equal:
        return value == expected
    if unsigned:
        return value % 2**32 >= expected % 2**32
    return value >= expected
