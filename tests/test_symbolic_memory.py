"""Symbolic values through memory and loop bounds as comparisons (issue 11).

A value read from an input keeps its symbolic form when a rank writes it into memory
and reads exactly those bytes back (`MemoryState.forms_at`); any other write of them
forgets it. A loop bound with a form records the comparisons the loop made, a notify
value is data unless the engines use it, and the concolic exploration then finds the
one count a program misbehaves on.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracebuild import TraceBuilder

from racecheck.cosim import Execution, simulate
from racecheck.dsl import local_ops
from racecheck.dsl.dtypes import FP32, INT8, INT16, INT32, INT64, DType
from racecheck.dsl.memory import MemoryState
from racecheck.dsl.scalars import Tainted
from racecheck.dsl.symbolic import Apply, Const, Decision, InputBlock, Op, Var, first_form
from racecheck.dsl.tensors import TensorView
from racecheck.engines import prepare
from racecheck.engines.inputs_smt import Answer, flips
from racecheck.engines.monotone import MonotoneEngine
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.events import EventKind, MemoryKind, NotifyOp, SignalCell
from racecheck.findings import FindingKind, Verdict
from racecheck.load import discover, load_file
from racecheck.options import EngineChoice, Options
from racecheck.pipeline import check
from racecheck.report.phrases import describe_finding
from racecheck.steering import Cause, open_reads

COUNT = Var("count", 0, is_float=False)
WIDE = Var("wide", 0, is_float=False, limits=INT64.limits)  # an INT64 input element
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _memory() -> tuple[MemoryState, int]:
    memory = MemoryState(1)
    return memory, memory.add_window("box", 16).id


def _view(memory: int, dtype: DType, elements: int, base: int = 0) -> TensorView:
    return TensorView(
        memory=memory,
        kind=MemoryKind.WINDOW,
        name="box",
        base=base,
        shape=(elements,),
        dtype=dtype,
        memory_nbytes=16,
    )


def _forms(*exprs: object) -> np.ndarray:
    forms = np.empty(len(exprs), dtype=object)
    forms[:] = exprs
    return forms


def _read_back(memory: MemoryState, view: TensorView, at: int) -> object:
    forms = memory.forms_at(view, 0, [at], [1])
    return None if forms is None else forms[0]


def test_a_written_form_is_read_back_from_exactly_its_bytes() -> None:
    memory, box = _memory()
    ints = _view(box, INT32, 4)
    other = Var("count", 1, is_float=False)
    memory.write(ints, 0, [1], np.array([3, 5]), _forms(COUNT, other))
    assert _read_back(memory, ints, 1) == COUNT
    assert _read_back(memory, ints, 2) == other
    assert _read_back(memory, ints, 0) is None
    whole = memory.forms_at(ints, 0, [0], [4])
    assert whole is not None and whole.tolist() == [None, COUNT, other, None]
    assert _read_back(memory, _view(box, INT16, 8), 2) is None  # half of it, another type


@pytest.mark.parametrize(
    "overwrite",
    ["plain write", "atomic add", "partial overlap", "cell set without a form"],
)
def test_any_other_write_of_its_bytes_forgets_it(overwrite: str) -> None:
    memory, box = _memory()
    ints = _view(box, INT32, 4)
    neighbour = Var("count", 1, is_float=False)
    memory.write(ints, 0, [1], np.array([3, 5]), _forms(COUNT, neighbour))
    if overwrite == "plain write":
        memory.write(ints, 0, [1], np.array([3]))
    elif overwrite == "atomic add":
        memory.accumulate(ints, 0, [1], np.array([0]))
    elif overwrite == "partial overlap":
        memory.write(_view(box, INT16, 8), 0, [3], np.array([0]))  # bytes 6..8 of element 1
    else:
        memory.set_cell(SignalCell(memory=box, owner=0, offset=4, index=(1,)), 3)
    assert _read_back(memory, ints, 1) is None
    assert _read_back(memory, ints, 2) == neighbour  # bytes it did not touch


def test_a_cell_set_with_a_form_is_read_back_as_int32() -> None:
    memory, box = _memory()
    memory.set_cell(SignalCell(memory=box, owner=0, offset=8, index=(2,)), 3, COUNT)
    assert _read_back(memory, _view(box, INT32, 4), 2) == COUNT


@pytest.mark.parametrize(
    ("dtype", "form"),
    [
        (FP32, Var("x", 0, is_float=True)),  # a float could round
        (INT16, COUNT),  # could wrap
        (INT32, Apply(Op.ADD, (COUNT, Const(1)))),  # a sum could wrap
        (INT32, WIDE),  # an INT64 input could wrap
    ],
    ids=["float", "narrow", "sum", "wide"],
)
def test_only_forms_stored_unchanged_for_every_input_are_kept(dtype: DType, form) -> None:
    memory, box = _memory()
    view = _view(box, dtype, 16 // dtype.nbytes)
    memory.write(view, 0, [0], np.array([3]), _forms(form))
    assert memory.forms_at(view, 0, [0], [1]) is None


PROGRAM = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 4
LIMIT = 4


def build(nr: int):
    @pl.program
    class ThroughMemory:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            count: pl.Tensor[[1], pl.INT32],
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            box: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            {body}
            y = pl.store(pl.load(x, [0, 0], [1, SIZE]), [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def through_memory(
            self,
            count: pl.Tensor[[1], pl.INT32],
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            box_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                box = pld.window(box_buf, [2, 1], dtype=pl.INT32)
                self.step(count, x[r], y[r], box, device=r)
            return y

    return ThroughMemory
"""

STAGE = """pl.write(box, [0, 0], pl.read(count, [0]))
            n = pl.cast(pl.read(box, [0, 0]), pl.INDEX)
            """


def _program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "through_memory.py"
    path.write_text(PROGRAM.format(body=body))
    return path


def _run(path: Path, count: int, ranks: int = 1) -> Execution:
    (spec,) = discover(load_file(str(path)))
    instance = dataclasses.replace(spec.instantiate(ranks), inputs=(("count", 0, float(count)),))
    return simulate(instance)


def _made(execution: Execution) -> list[tuple[Op, tuple[object, ...], bool]]:
    made: list[tuple[Op, tuple[object, ...], bool]] = []
    for decided in execution.flow.decisions:
        condition = decided.decision.condition
        assert isinstance(condition, Apply)
        made.append((condition.op, condition.args, decided.decision.taken))
    return made


def test_a_loop_bound_read_back_records_its_comparisons_not_one_value(tmp_path) -> None:
    path = _program(tmp_path, STAGE + "for r in pl.range(n):\n                pass")
    made = _made(_run(path, 3))
    assert made == [(Op.GT, (COUNT, Const(k)), k < 3) for k in range(4)]  # n > k, k = 0..3
    execution = _run(path, 3)
    _, oracle = prepare(EngineChoice.AUTO, execution.trace, deadline=float("inf"))
    (opened,) = open_reads(execution, oracle)
    assert opened.cause is Cause.INPUT and opened.symbolic


def test_a_loop_from_a_symbolic_start_counts_in_its_form(tmp_path) -> None:
    body = STAGE + "for r in pl.range(n, LIMIT):\n                pl.write(box, [1, 0], r)"
    made = _made(_run(_program(tmp_path, body), 2))
    assert made == [
        (Op.LT, (COUNT, Const(4)), True),
        (Op.LT, (Apply(Op.ADD, (COUNT, Const(1))), Const(4)), True),
        (Op.LT, (Apply(Op.ADD, (COUNT, Const(2))), Const(4)), False),
    ]


def test_a_long_loop_from_a_symbolic_start_keeps_its_forms_shallow(tmp_path) -> None:
    """Each index is the start plus a constant, not the previous index plus the step:
    5000 iterations compare and solve without deep recursion."""
    body = STAGE + "for r in pl.range(n, LIMIT):\n                pass"
    made = _made(_run(_program(tmp_path, body), -5000))
    assert len(made) == 5005
    assert made[-1] == (Op.LT, (Apply(Op.ADD, (COUNT, Const(5004))), Const(4)), False)
    decisions = [Decision(condition=Apply(op, args), taken=taken) for op, args, taken in made]
    ((at, flipped),) = flips(decisions, len(decisions) - 1, deadline=time.monotonic() + 30)
    assert at == len(decisions) - 1 and flipped.answer is Answer.FOUND


def test_min_and_max_of_a_value_read_back_are_exact_choices_not_branches(tmp_path) -> None:
    """A clamp splits no path (docs/model.md §1): its form is the choice itself, and a
    loop over the clamped value compares that form."""
    body = STAGE + (
        "clamped = pl.max(pl.min(n, LIMIT), 0)\n            pl.write(box, [1, 0], clamped)"
        "\n            for r in pl.range(clamped):\n                pass"
    )
    clamp = Apply(Op.MAX, (Apply(Op.MIN, (COUNT, Const(4))), Const(0)))
    for count, iterations in [(7, 4), (-2, 0)]:
        made = _made(_run(_program(tmp_path, body), count))
        assert made == [(Op.GT, (clamp, Const(k)), k < iterations) for k in range(iterations + 1)]


PEER = """me = pld.rank(pld.get_comm_ctx(box))
            pl.write(box, [0, 0], pl.read(count, [0]) if me == 0 else 2)
            pld.system.notify(box, 1 - me, [1, 0], 1, op=pld.NotifyOp.AtomicAdd)
            pld.system.wait(box, offsets=[1, 0], expected=1, cmp=pld.WaitCmp.Ge)
            if me == 0:
                got = pld.tile.remote_load(box, 1, [0, 0], [1, 1])
                for r in pl.range(got[0, 0]):
                    pass
            """


def test_a_peers_bytes_are_read_with_their_own_forms_not_the_readers(tmp_path) -> None:
    # rank 0's own box holds the count's form; rank 1's holds a plain 2
    execution = _run(_program(tmp_path, PEER), 5, ranks=2)
    assert execution.flow.decisions == ()
    (result,) = check(str(_program(tmp_path, PEER)), Options(ranks=(2,))).results
    assert result.verdict is Verdict.PROVED, result.message


NOTIFY = """pld.system.notify(box, 0, [0, 0], pl.read(count, [0]), op=pld.NotifyOp.Set)
            """


def test_a_notify_value_nothing_waits_on_is_data_the_reader_follows(tmp_path) -> None:
    body = (
        NOTIFY + "n = pl.read(box, [0, 0])\n            for r in pl.range(n):\n                pass"
    )
    execution = _run(_program(tmp_path, body), 1)
    assert [op for op, _, _ in _made(execution)] == [Op.GT, Op.GT]  # the loop's, no pin
    (notify,) = [e for e in execution.trace.events[0] if e.kind is EventKind.NOTIFY]
    assert notify.ref in execution.flow.stored_from


def test_a_notify_value_a_wait_reads_is_pinned(tmp_path) -> None:
    body = NOTIFY + ("pld.system.wait(box, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)")
    made = _made(_run(_program(tmp_path, body), 5))
    assert made == [(Op.EQ, (COUNT, Const(5)), True)]


BAD = """pl.write(box, [0, 0], pl.max(pl.min(pl.read(count, [0]), LIMIT), 0))
            n = pl.cast(pl.read(box, [0, 0]), pl.INDEX)
            hits = 0
            for r in pl.range(n):
                hits = r + 1
            if hits == {bad}:
                y = pl.store(pl.load(x, [0, 0], [1, SIZE]), [1, 0], y)  # @bad
            """


@settings(max_examples=6, deadline=None)
@given(bad=st.integers(0, 5), seed=st.integers(0, 3))
def test_the_one_count_a_program_misbehaves_on_is_found(
    tmp_path_factory: pytest.TempPathFactory, bad: int, seed: int
) -> None:
    # `hits == bad` compares plain numbers: only the loop's comparisons lead there
    path = _program(tmp_path_factory.mktemp("bad"), BAD.format(bad=bad))
    (result,) = check(str(path), Options(ranks=(2,), seed=seed)).results
    if bad > 4:  # the clamped count never reaches it
        assert result.verdict is Verdict.PROVED, result.message
        return
    assert result.verdict is Verdict.BUG
    (finding,) = result.findings
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "@bad" in text)
    assert finding.kind is FindingKind.OUT_OF_BOUNDS
    assert [location.line for location in finding.locations] == [line]
    for name, index, value in finding.inputs:  # none if the --seed draw showed it
        assert (name, index) == ("count", 0)
        assert min(max(int(value), 0), 4) == bad


def test_a_finding_on_a_path_with_chosen_inputs_names_them() -> None:
    path = EXAMPLES / "136_all_to_all_v_input_count_bug_negative.py"
    (result,) = check(str(path), Options(ranks=(2,))).results
    (finding,) = result.findings
    ((name, index, value),) = finding.inputs
    assert (name, index) == ("count", 0) and value < 0
    assert f"with the input count.flat[0] = {int(value)} (the other" in describe_finding(finding)


def test_an_input_narrower_than_where_it_is_stored_is_kept() -> None:
    memory, box = _memory()
    small = Var("small", 0, is_float=False, limits=INT8.limits)
    view = _view(box, INT16, 8)
    memory.write(view, 0, [0], np.array([3]), _forms(small))
    assert _read_back(memory, view, 0) == small


def test_an_integer_input_takes_any_value_of_its_dtype_and_no_other() -> None:
    """An INT64 element reaches past INT32; an INT8 one does not reach 200."""
    past = Decision(condition=Apply(Op.LT, (WIDE, Const(2**31))), taken=True)
    ((_, wide),) = flips([past], 0, deadline=float("inf"))
    assert wide.answer is Answer.FOUND and wide.values[0][2] >= 2**31
    small = Var("small", 0, is_float=False, limits=INT8.limits)
    below = Decision(condition=Apply(Op.LT, (small, Const(200))), taken=True)
    ((_, narrow),) = flips([below], 0, deadline=float("inf"))
    assert narrow.answer is Answer.INFEASIBLE


def test_each_decision_flips_with_the_ones_before_it_kept() -> None:
    above = Decision(condition=Apply(Op.GT, (COUNT, Const(2))), taken=True)
    below = Decision(condition=Apply(Op.LT, (COUNT, Const(5))), taken=True)
    found = dict(flips([above, below, above], 0, deadline=float("inf")))
    assert found[0].answer is Answer.FOUND and found[0].values[0][2] < 0  # negative first
    assert found[1].answer is Answer.FOUND and found[1].values[0][2] >= 5
    assert found[2].answer is Answer.INFEASIBLE  # the same decision, made before
    first = dict(flips([above, below], 1, deadline=float("inf")))
    assert list(first) == [1]


@pytest.mark.parametrize("waited", [False, True])
def test_monotone_ignores_the_writes_of_a_cell_no_wait_reads(waited: bool) -> None:
    # rank 0 publishes a negative count into rank 1's counts cell, then both meet in a
    # barrier; a negative Set matters to the monotone engine only on a cell waited on
    builder = TraceBuilder(2)
    counts, signal = builder.window("counts", 4), builder.window("signal", 8)
    builder.notify(0, counts, 1, 0, 10, value=-1, op=NotifyOp.SET)
    for rank in range(2):
        builder.notify(rank, signal, 1 - rank, 0, 20)
        builder.wait(rank, signal, 0, 30)
    if waited:
        builder.wait(1, counts, 0, 40, expected=0)
    reason = MonotoneEngine().unsupported(SyncSkeleton(builder.build()))
    assert (reason is not None and "negative Set" in reason) is waited


def test_an_input_block_makes_the_symbols_of_the_elements_asked_for() -> None:
    """A wide tile from an input keeps flat indices, not one `Var` per element: slicing,
    padding and one element give what the object array of `Var`s gave."""
    block = InputBlock("x", np.arange(6, dtype=np.int64).reshape(2, 3) + 10, False)
    assert block[1, 2] == Var("x", 15, False)
    padded = block.padded((2, 4))
    assert padded[0, 3] is None and padded[1, 0] == Var("x", 13, False)
    assert list(padded.block((slice(0, 1), slice(1, 3))).forms().reshape(-1)) == [
        Var("x", 11, False),
        Var("x", 12, False),
    ]
    assert first_form(block.reshape(-1)) == Var("x", 10, False)


def test_an_integer_cast_wraps_and_keeps_the_form_only_where_the_target_holds_it() -> None:
    """`pl.cast(v, pl.INT8)` of an INT32 input of 300 is 44 on the device, and not `v`
    for every input; to INT64 it is `v` itself."""
    read = Tainted(300, frozenset(), COUNT)
    narrow = local_ops.cast(read, INT8)
    assert isinstance(narrow, Tainted) and (narrow.value, narrow.symbolic) == (44, None)
    wide = local_ops.cast(read, INT64)
    assert isinstance(wide, Tainted) and (wide.value, wide.symbolic) == (300, COUNT)
