"""`%`, `//` and `divmod` on Python ints in DSL bodies divide like the device
(racecheck/dsl/device_source.py, docs/model.md): a factory's `nr`, a literal, a Python
`range` index or `int(...)` of a rank truncate toward zero there, and only there."""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from types import CodeType
from typing import TYPE_CHECKING

import pytest

import racecheck
from racecheck.dsl.device_source import device_arithmetic, on_device
from racecheck.findings import FindingKind, ProgramResult, Verdict
from racecheck.load import load_file

if TYPE_CHECKING:
    from racecheck.dsl.scalars import DeviceInt

EXAMPLE = (
    Path(__file__).resolve().parent.parent
    / "examples"
    / ("170_ring_shift_factory_python_int_peer.py")
)
BUG = EXAMPLE.with_name("171_ring_shift_factory_python_int_peer_bug_negative.py")
LEFT = "            left = (me - 1 + nr) % nr\n"


def _variant(tmp_path: Path, left: str, *, prelude: str = "") -> tuple[Path, int]:
    """Example 170 with its left-peer line replaced by `left` (lines of the kernel's
    body), and `prelude` before the factory; the put's line in the result."""
    source = EXAMPLE.read_text()
    assert LEFT in source
    body = "".join(f"            {line}\n" for line in left.splitlines())
    changed = source.replace(LEFT, body).replace("\n\ndef build_", f"\n{prelude}\n\ndef build_")
    path = tmp_path / "variant.py"
    path.write_text(changed)
    put = next(n for n, text in enumerate(changed.splitlines(), start=1) if text.endswith("# @put"))
    return path, put


def _verdicts(path: Path, ranks: str = "2..4") -> list[ProgramResult]:
    return list(racecheck.verify(str(path), ranks=ranks).results)


def _assert_out_of_bounds_at(path: Path, line: int, ranks: str = "2..4") -> None:
    for result in _verdicts(path, ranks):
        assert result.verdict is Verdict.BUG, result
        (finding,) = result.findings
        assert finding.kind is FindingKind.OUT_OF_BOUNDS
        assert finding.locations[0].line == line
        assert 0 in finding.ranks


@pytest.mark.parametrize(
    "left",
    [
        "k = 0\nleft = (k - 1) % nr",  # u03: a literal and the factory's nr
        "left = int(me - 1) % nr",  # e07
        "left = me\nfor i in range(nr):\n    left = (i - 1) % nr if i == me else left",
        "left = (me - 1) % NR_MOD",  # a module constant (the prelude's)
        "left = me - 1\nleft %= nr",
        "left = divmod(me - 1, nr)[1]",
        "steps = [me - 1]\nsteps[0] %= nr\nleft = steps[0]",
        "left = (me - 1) - ((me - 1) // nr) * nr",  # floor division of -1 is 0 on the device
    ],
    ids=["u03", "e07", "range", "module", "augassign", "divmod", "augassign-item", "floordiv"],
)
def test_python_int_arithmetic_in_a_kernel_truncates(tmp_path: Path, left: str) -> None:
    path, put = _variant(tmp_path, left, prelude="NR_MOD = 4\n")
    ranks = "4" if "NR_MOD" in left else "2..4"
    _assert_out_of_bounds_at(path, put, ranks)


@pytest.mark.parametrize(
    ("per_rank", "host"),
    [
        ("k = 0\n            left = (k - 1) % nr\n", "left = 0"),  # in the per-device body
        ("", "left = (int(r) - 1) % nr"),  # in the host entry's body
    ],
    ids=["per-device", "host"],
)
def test_python_int_arithmetic_in_orchestration_bodies_truncates(
    tmp_path: Path, per_rank: str, host: str
) -> None:
    """The left peer computed outside the kernel and passed to it."""
    source = EXAMPLE.read_text()
    replacements = {
        "            me = int(pld.rank(pld.get_comm_ctx(inbox)))\n": "",
        LEFT: "",
        "            signal: pld.DistributedTensor[[1, 1], pl.INT32],\n        ):\n": (
            "            signal: pld.DistributedTensor[[1, 1], pl.INT32],\n"
            "            left: pl.Scalar[pl.INT32],\n        ):\n"
        ),
        "            return self.pass_left(x, y, inbox, signal)\n": (
            f"            {per_rank}            return self.pass_left(x, y, inbox, signal, left)\n"
        ),
        "                self.per_rank(x[r], y[r], inbox, signal, device=r)\n": (
            f"                {host}\n"
            "                self.per_rank(x[r], y[r], inbox, signal, left, device=r)\n"
        ),
    }
    for old, new in replacements.items():
        assert old in source, old
        source = source.replace(old, new)
    path = tmp_path / "orchestration.py"
    path.write_text(source)
    put = next(n for n, text in enumerate(source.splitlines(), 1) if text.endswith("# @put"))
    for result in _verdicts(path, "2..3"):
        assert result.verdict is Verdict.BUG, result
        (finding,) = result.findings
        assert finding.kind is FindingKind.OUT_OF_BOUNDS
        assert finding.locations[0].line == put and 0 in finding.ranks


def test_an_inline_chip_region_divides_like_the_device(tmp_path: Path) -> None:
    """`(k - 1) // ROWS` with `k = 0` in a `pl.at(level=CHIP)` region is row 0 on the
    device (Python's -1 would be an out-of-bounds load that is not there)."""
    source = (EXAMPLE.parent / "133_host_inline_chip_region.py").read_text()
    replacements = {
        "        f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],\n    ) -> pl.Tensor[[ROWS, COLS], "
        "pl.FP32]:\n        tile = pl.load(a, [0, 0], [ROWS, COLS])": (
            "        f: pl.Out[pl.Tensor[[ROWS, COLS], pl.FP32]],\n"
            "        row: pl.Scalar[pl.INDEX],\n    ) -> pl.Tensor[[ROWS, COLS], pl.FP32]:\n"
            "        tile = pl.load(a, [row, 0], [ROWS, COLS])"
        ),
        "            out_f, copied = pl.submit(self.copy_step, a, f)\n": (
            "            k = 0\n"
            "            out_f, copied = pl.submit(self.copy_step, a, f, (k - 1) // ROWS)\n"
        ),
    }
    for old, new in replacements.items():
        assert old in source, old
        source = source.replace(old, new)
    path = tmp_path / "chip_region.py"
    path.write_text(source)
    (result,) = _verdicts(path, "1")
    assert result.verdict is Verdict.PROVED, result


def _lines(code: CodeType) -> set[int]:
    return {line for _, _, line in code.co_lines() if line is not None}


def _code_named(code: CodeType, name: str) -> CodeType:
    nested = [code]
    while nested:
        candidate = nested.pop()
        if candidate.co_name == name:
            return candidate
        nested.extend(c for c in candidate.co_consts if isinstance(c, CodeType))
    raise LookupError(name)


def test_the_recompiled_kernel_keeps_its_lines_and_identity() -> None:
    loaded = load_file(str(BUG))
    program = loaded.namespace["build_ring_shift"](3)
    kernel = vars(program.cls)["pass_left"].function
    written = _code_named(compile(BUG.read_text(), str(BUG), "exec"), "pass_left")
    assert kernel.__code__.co_filename == loaded.namespace["build_ring_shift"].__code__.co_filename
    assert kernel.__code__.co_firstlineno == written.co_firstlineno
    assert _lines(kernel.__code__) == _lines(written)
    assert kernel.__qualname__ == "build_ring_shift.<locals>.RingShift.pass_left"
    assert inspect.getclosurevars(kernel).nonlocals["nr"] == 3
    assert list(inspect.signature(kernel).parameters) == ["self", "x", "y", "inbox", "signal"]


def test_the_correct_twin_is_proved_and_the_bug_is_reported_at_its_line() -> None:
    assert all(result.verdict is Verdict.PROVED for result in _verdicts(EXAMPLE))
    put = next(
        n for n, text in enumerate(BUG.read_text().splitlines(), start=1) if text.endswith("# @put")
    )
    _assert_out_of_bounds_at(BUG, put)


def test_host_python_around_the_program_keeps_python_semantics(tmp_path: Path) -> None:
    """A builder the factory calls, and the module's top level, run as Python."""
    prelude = (
        "LEFT_OF_ZERO = (0 - 1) % 4\n\n\n"
        "def left_of(me: int, nr: int) -> int:\n    return (me - 1) % nr\n"
    )
    path, _ = _variant(tmp_path, "left = left_of(me, nr) + LEFT_OF_ZERO - 3", prelude=prelude)
    assert all(result.verdict is Verdict.PROVED for result in _verdicts(path, "4"))


GENERATED_KERNEL = """
def pass_left(x, y, inbox, signal):
    ctx = pld.get_comm_ctx(inbox)
    left = int(pld.rank(ctx) - 1) % int(pld.nranks(ctx))
    pld.tensor.put(inbox, left, x)
    pld.system.notify(signal, peer=left, offsets=[0, 0], value=1, op=pld.NotifyOp.Set)
    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)
    recv = pl.load(inbox, [0, 0], [1, SIZE])
    return pl.store(recv, [0, 0], y)
"""


def _generated(tmp_path: Path, kernel: str) -> Path:
    source = (EXAMPLE.parent / "02_ring_shift_p2p.py").read_text()
    start = source.index("@pl.jit.incore\n")
    end = source.index("@pl.jit\n", start)
    generated = (
        f"exec(compile({kernel!r}, '<generated>', 'exec'))\n"
        "pass_left = pl.jit.incore(pass_left)  # noqa: F821\n\n\n"
    )
    path = tmp_path / "generated_kernel.py"
    path.write_text(source[:start] + generated + source[end:])
    return path


def test_a_kernel_without_source_that_divides_is_refused(tmp_path: Path) -> None:
    """A kernel made by `exec` has no source to parse: run as Python, its `%` would hide
    the negative peer, so racecheck refuses it instead of proving it."""
    (result,) = _verdicts(_generated(tmp_path, GENERATED_KERNEL), "2")
    assert result.verdict is Verdict.UNKNOWN
    assert "could not recompile pass_left() from its source" in result.message


def test_a_kernel_without_source_that_does_not_divide_runs(tmp_path: Path) -> None:
    old = "int(pld.rank(ctx) - 1) % int(pld.nranks(ctx))"
    kernel = GENERATED_KERNEL.replace(
        old, "pld.rank(ctx) - 1 if pld.rank(ctx) > 0 else pld.nranks(ctx) - 1"
    )
    assert kernel != GENERATED_KERNEL
    (result,) = _verdicts(_generated(tmp_path, kernel), "2")
    assert result.verdict is Verdict.PROVED


@pytest.mark.parametrize(
    ("symbol", "left", "right", "expected"),
    [
        ("%", -1, 4, -1),
        ("//", -7, 2, -3),
        ("%", 7, -2, 1),
        ("divmod", -7, 2, (-3, -1)),
        ("%", -1.5, 4, 2.5),  # floats as Python
        ("//", True, 2, 0),
    ],
)
def test_device_arithmetic(symbol: str, left: object, right: object, expected: object) -> None:
    assert device_arithmetic(symbol, left, right) == expected


def _left(me: int, nr: int = 4, *, step: int = 1) -> int:
    return (me - step) % nr


def _right(me: int, nr: int) -> int:
    return me + 1 - nr if me + 1 >= nr else me + 1


class _Ring:
    __step = 1

    def left(self, me: int, nr: int) -> int:
        return (me - self.__step) % nr


def _left_through_a_helper(me: int, nr: int) -> int:
    def peer(rank: DeviceInt) -> DeviceInt:  # never evaluated: the module's future import
        return (rank - 1) % nr

    return int(peer(me))  # type: ignore[arg-type]


def test_a_recompiled_function_keeps_its_modules_future_imports() -> None:
    """Annotations this module leaves unevaluated stay so (was a NameError)."""
    device = on_device(_left_through_a_helper)
    assert device is not None and device(0, 4) == -1 and _left_through_a_helper(0, 4) == 3


def test_a_recompiled_function_is_the_function_as_written() -> None:
    device = on_device(_left)
    assert device is not None and device is not _left
    assert device(0) == -1 and _left(0) == 3
    assert device(5, step=2) == 3 and device.__defaults__ == (4,)
    assert device.__kwdefaults__ == {"step": 1}
    assert device.__annotations__ is _left.__annotations__
    assert (device.__name__, device.__qualname__) == ("_left", "_left")
    assert inspect.getsource(device) == inspect.getsource(_left)
    again = on_device(device)  # a body already rewritten is rewritten from its source
    assert again is not None and again(0) == -1
    assert on_device(_right) is _right  # nothing to rewrite: the function itself
    assert on_device(functools.wraps(_left)(lambda *a, **k: _left(*a, **k))) is None
    ring = on_device(_Ring.left)  # private names mangle as in the class
    assert ring is not None and ring(_Ring(), 0, 4) == -1


FORWARDING = "    def inner(*args, **kwargs):\n        return fn(*args, **kwargs)\n"


@pytest.mark.parametrize(
    "wrapper",
    [
        FORWARDING,
        "    def inner(self, x, y, inbox, signal):\n        return fn(self, x, y, inbox, signal)\n",
    ],
    ids=["forwarding", "fixed-signature"],
)
def test_a_kernel_under_a_wrapper_without_wrapped_that_divides_is_refused(
    tmp_path: Path, wrapper: str
) -> None:
    """The wrapper calls the function its closure holds, whose `%` would run with
    Python's rounding: refused, not proved, whether it forwards `*args, **kwargs` or
    has the kernel's own parameters (made by the decorator, not by the class body)."""
    source = (Path(__file__).resolve().parent / "fixtures" / "unwrapped_decorator.py").read_text()
    assert source.count(FORWARDING) == 1
    path = tmp_path / "wrapped.py"
    path.write_text(source.replace(FORWARDING, wrapper))
    for result in _verdicts(path, "2..3"):
        assert result.verdict is Verdict.UNKNOWN
        assert "could not recompile inner() from its source" in result.message
