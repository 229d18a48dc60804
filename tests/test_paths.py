"""Never proved from one path: reads-from alternatives and input-dependent branches are
explored, and what cannot be explored is unknown naming its line (issue 10.3, 10.4).

The property test generates programs whose rank 0 branches on a value that depends on
the order of two Sets or on an input element, and reads a peer's window on each side
(a peer that stages its data late makes that side racy). Its oracle enumerates the
Set orders and a grid of input values directly: racecheck's verdict must match it.
"""

from __future__ import annotations

import itertools
from collections.abc import Container
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import racecheck.pipeline
from racecheck import judge
from racecheck.cosim import simulate
from racecheck.engines import prepare
from racecheck.findings import Finding, FindingKind, Verdict
from racecheck.load import discover, load_file
from racecheck.options import EngineChoice, Options
from racecheck.paths import SATURATED_AFTER
from racecheck.pipeline import check
from racecheck.steering import Cause, open_reads

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

PROGRAM = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 8


def build(nr: int):
    @pl.program
    class Generated:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
            cells: pl.InOut[pld.DistributedTensor[[2, 1], pl.INT32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(data))
            row = pl.load(x, [0, 0], [1, SIZE])
            if me == 0:
                pld.system.wait(cells, offsets=[1, 0], expected=2, cmp=pld.WaitCmp.Ge)
                if {condition}:  # @branch
                    got = pld.tile.remote_load(data, {peer_true}, [0, 0], [1, SIZE])
                else:
                    got = pld.tile.remote_load(data, {peer_false}, [0, 0], [1, SIZE])
                y = pl.store(got, [0, 0], y)
{senders}
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def generated(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            cells_buf = pld.alloc_window_buffer([2, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                cells = pld.window(cells_buf, [2, 1], dtype=pl.INT32)
                self.step(x[r], y[r], data, cells, device=r)
            return y

    return Generated
"""

SENDER = """            if me == {rank}:
{early}                pld.system.notify(cells, 0, [0, 0], {value}, op=pld.NotifyOp.Set)
                pld.system.notify(cells, 0, [1, 0], 1, op=pld.NotifyOp.AtomicAdd)
{late}                y = pl.store(row, [0, 0], y)
"""
STAGE = "                data = pl.store(row, [0, 0], data)\n"
INPUT_GRID = (-2.0, -0.5, 0.0, 0.5, 2.0)


def _render(case: dict) -> str:
    senders = "".join(
        SENDER.format(
            rank=rank,
            value=case["values"][rank - 1],
            early="" if case["late"][rank - 1] else STAGE,
            late=STAGE if case["late"][rank - 1] else "",
        )
        for rank in (1, 2)
    )
    if case["on"] == "order":
        condition = f"pl.read(cells, [0, 0]) > {case['threshold']}"
    else:
        condition = f"{case['scale']} * pl.read(x, [0, 0]) > {case['threshold'] - 1.5}"
    return PROGRAM.format(
        condition=condition,
        peer_true=case["peers"][0],
        peer_false=case["peers"][1],
        senders=senders,
    )


def _brute_force_bug(case: dict) -> bool:
    """Some feasible side of the branch reads a peer that stages late: every order of
    the two Sets (each can land last), every input value of the grid. Two Sets of
    different values to one cell are plain stores in either order: a race of their own."""
    if case["values"][0] != case["values"][1]:
        return True
    if case["on"] == "order":
        outcomes = {case["values"][last] > case["threshold"] for last in (0, 1)}
    else:
        outcomes = {case["scale"] * x > case["threshold"] - 1.5 for x in INPUT_GRID}
    return any(case["late"][case["peers"][0 if taken else 1] - 1] for taken in outcomes)


CASES = st.fixed_dictionaries(
    {
        "on": st.sampled_from(["order", "input"]),
        "values": st.tuples(st.integers(1, 3), st.integers(1, 3)),
        "threshold": st.integers(0, 3),
        "scale": st.sampled_from([0.0, 1.0, -1.0]),
        "late": st.tuples(st.booleans(), st.booleans()),
        "peers": st.tuples(st.sampled_from([1, 2]), st.sampled_from([1, 2])),
    }
)

_numbers = itertools.count()


@settings(max_examples=12, deadline=None)
@given(case=CASES, seed=st.integers(0, 3))
def test_the_verdict_equals_brute_force_over_orders_and_inputs(
    tmp_path_factory: pytest.TempPathFactory, case: dict, seed: int
) -> None:
    path = tmp_path_factory.mktemp("paths") / f"generated_{next(_numbers)}.py"
    path.write_text(_render(case))
    (result,) = check(str(path), Options(ranks=(3,), seed=seed)).results
    expected = Verdict.BUG if _brute_force_bug(case) else Verdict.PROVED
    assert result.verdict is expected, (result.message, case)
    if expected is Verdict.BUG:
        assert {finding.kind for finding in result.findings} == {FindingKind.RACE}


@pytest.mark.parametrize(
    ("name", "verdict"),
    [
        ("74_input_branch_bug_skipped_barrier.py", Verdict.BUG),
        ("75_input_branch.py", Verdict.PROVED),
    ],
)
def test_the_verdict_does_not_depend_on_the_seed(name: str, verdict: Verdict) -> None:
    for seed in range(5):
        results = check(str(EXAMPLES / name), Options(ranks=(2, 3), seed=seed)).results
        assert [result.verdict for result in results] == [verdict, verdict], seed


def test_past_the_path_budget_the_verdict_is_unknown_naming_the_branch() -> None:
    (result,) = check(str(EXAMPLES / "75_input_branch.py"), Options(ranks=(5,))).results
    assert result.verdict is Verdict.UNKNOWN
    assert "75_input_branch.py:36 depends on input data" in result.message
    assert "past the budget of 16 paths" in result.message


def test_once_a_bug_is_shown_exploring_stops_when_paths_add_nothing(monkeypatch) -> None:
    """Example 50 at P=3: the first path shows its races, the second (a negative count)
    adds the out-of-bounds access, the next SATURATED_AFTER add nothing: exploring stops
    there, the rest of the input branches named in a note, not checked one by one."""
    checked: list[object] = []
    check_path = racecheck.pipeline.check_path

    def counted(spec, ranks, options, path, *rest):  # type: ignore[no-untyped-def]
        checked.append(path)
        return check_path(spec, ranks, options, path, *rest)

    monkeypatch.setattr(racecheck.pipeline, "check_path", counted)
    name = "50_kernel_all_to_all_v_bug_loop.py"
    (result,) = check(str(EXAMPLES / name), Options(ranks=(3,))).results
    assert result.verdict is Verdict.BUG
    kinds = {finding.kind for finding in result.findings}
    assert kinds == {FindingKind.RACE, FindingKind.OUT_OF_BOUNDS}
    assert len(checked) == 2 + SATURATED_AFTER
    (note,) = [note for note in result.notes if note.startswith("more may be wrong")]
    # the builtin's clamp min(count, M) is an exact choice: the loop over it (line 52) steers
    assert f"{name}:52 depends on input data read at" in note
    assert f"the last {SATURATED_AFTER} paths added no finding" in note


KERNEL = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 8


def build(nr: int):
    @pl.program
    class Indirect:
        @pl.function(type=pl.FunctionType.InCore)
        def step(
            self,
            x: pl.Tensor[[1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[1, SIZE], pl.FP32]],
            data: pl.InOut[pld.DistributedTensor[[1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[1, SIZE], pl.FP32]:
            row = pl.load(x, [0, 0], [1, SIZE])
            {body}
            y = pl.store(row, [0, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def indirect(
            self,
            x: pl.Tensor[[nr, 1, SIZE], pl.FP32],
            y: pl.Out[pl.Tensor[[nr, 1, SIZE], pl.FP32]],
        ) -> pl.Tensor[[nr, 1, SIZE], pl.FP32]:
            data_buf = pld.alloc_window_buffer([1, SIZE], dtype=pl.FP32)
            for r in pl.range(pld.world_size()):
                data = pld.window(data_buf, [1, SIZE], dtype=pl.FP32)
                self.step(x[r], y[r], data, device=r)
            return y

    return Indirect
"""


@pytest.mark.parametrize(
    "body",
    [
        # input -> window -> load -> branch: followed by taint on the stored bytes
        """data = pl.store(row, [0, 0], data)
            again = pl.load(data, [0, 0], [1, SIZE])
            if again[0, 0] > 1.0:  # @branch
                pass""",
        # tile arithmetic on the input: no symbolic form
        """doubled = pl.add(row, row)
            if doubled[0, 0] > 1.0:  # @branch
                pass""",
    ],
    ids=["through-memory", "tile-arithmetic"],
)
def test_an_input_dependence_without_a_symbolic_form_is_unknown(tmp_path, body) -> None:
    path = tmp_path / "indirect.py"
    path.write_text(KERNEL.format(body=body))
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "@branch" in text)
    for seed in range(3):
        (result,) = check(str(path), Options(ranks=(2,), seed=seed)).results
        assert result.verdict is Verdict.UNKNOWN
        assert f"indirect.py:{line} depends on input data" in result.message
        assert "no symbolic form" in result.message


def _opened(tmp_path: Path, values: tuple[int, int], op: str) -> list:
    """The open reads of rank 0 reading one cell two senders wrote with `op`."""
    case = {
        "on": "order",
        "values": values,
        "threshold": 1,
        "scale": 1.0,
        "late": (False, False),
        "peers": (1, 1),
    }
    path = tmp_path / "cells.py"
    path.write_text(_render(case).replace("NotifyOp.Set", f"NotifyOp.{op}"))
    (spec,) = discover(load_file(str(path)))
    execution = simulate(spec.instantiate(3))
    _, oracle = prepare(EngineChoice.AUTO, execution.trace, deadline=float("inf"))
    return open_reads(execution, oracle)


def test_two_sets_of_different_values_are_order_dependent(tmp_path) -> None:
    (opened,) = _opened(tmp_path, (1, 2), "Set")
    assert opened.cause is Cause.ORDER and len(opened.writers) == 2 and opened.last_wins


@pytest.mark.parametrize(("values", "op"), [((2, 2), "Set"), ((1, 2), "AtomicAdd")])
def test_equal_sets_and_integer_adds_commute(tmp_path, values, op) -> None:
    assert _opened(tmp_path, values, op) == []


def test_a_finding_seen_on_an_earlier_path_is_replayed_once_and_reported_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Example 50 shows its races on every input path: each is replayed on the first
    path only, and the report equals the one that replays them on every path."""
    example = str(EXAMPLES / "50_kernel_all_to_all_v_bug_loop.py")
    options = Options(ranks=(2,), repeat=3, jobs=1)
    original_confirm = judge.confirm
    replayed: list[tuple[object, ...]] = []

    def counting(*args: Any, known: Container[tuple[object, ...]] = frozenset()) -> Finding:
        finding = original_confirm(*args, known=known)
        if finding.witness and finding.identity not in known:
            replayed.append(finding.identity)
        return finding

    monkeypatch.setattr(judge, "confirm", counting)
    (deduplicated,) = check(example, options).results
    assert len(replayed) == len(set(replayed)) > 0

    def every_path(*args: Any, known: Container[tuple[object, ...]] = frozenset()) -> Finding:
        return counting(*args)

    replayed.clear()
    monkeypatch.setattr(judge, "confirm", every_path)
    (replaying,) = check(example, options).results
    assert len(replayed) > len(set(replayed))  # the same finding shows on several paths
    assert deduplicated.findings == replaying.findings
    assert deduplicated.verdict is replaying.verdict is Verdict.BUG


def test_a_finding_seen_on_an_earlier_path_gets_no_witness_built_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The paths after the first of example 50 show its races again: `confirm` neither
    builds nor replays their witnesses (`racecheck.paths.merged` keeps the first)."""
    example = str(EXAMPLES / "50_kernel_all_to_all_v_bug_loop.py")
    original_confirm = judge.confirm
    again: list[Finding] = []

    def recording(*args: Any, known: Container[tuple[object, ...]] = frozenset()) -> Finding:
        finding = original_confirm(*args, known=known)
        if finding.identity in known:
            again.append(finding)
        return finding

    monkeypatch.setattr(judge, "confirm", recording)
    (result,) = check(example, Options(ranks=(2,), repeat=3, jobs=1)).results
    assert {finding.code.value for finding in again} >= {"race-war"}
    assert all(not finding.witness and not finding.confirmed for finding in again)
    races = [finding for finding in result.findings if finding.kind is FindingKind.RACE]
    assert races and all(finding.witness and finding.confirmed for finding in races)


def test_a_golden_model_is_named_only_when_the_outputs_of_every_path_match_it(
    tmp_path: Path,
) -> None:
    # the rows after the counted ones are copied from count * (3 - count): at count 1,
    # a path the first (seeded) one does not take, row 1 of every block is never copied
    source = (EXAMPLES / "135_all_to_all_v_input_count.py").read_text()
    skipping = source.replace(
        "pl.range(n_rows, MAX_RECV)", "pl.range(n_rows * (3 - n_rows), MAX_RECV)"
    )
    assert skipping != source
    path = tmp_path / "rest_skips_at_one.py"
    path.write_text(skipping)
    (result,) = check(str(path), Options(ranks=(2,))).results
    assert result.verdict is Verdict.PROVED  # no race: only the output is off
    assert result.model is None
    (correct,) = check(
        str(EXAMPLES / "135_all_to_all_v_input_count.py"), Options(ranks=(2,))
    ).results
    assert (correct.verdict, correct.model) == (Verdict.PROVED, "all_to_all")
