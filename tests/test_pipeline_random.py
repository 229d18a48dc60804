"""End to end on generated collectives: random DSL files through the whole pipeline.

Each example renders a `dslgen.Protocol` to a real DSL file and runs `racecheck.verify`
on it, then holds the answers to properties that must hold on every program:

* the engines agree, run once or twice back to back (`--repeat`): explore and smt
  always, monotone wherever it decides (it must decide every monotone protocol);
* the executor agrees with the verdict: a proved program is determinate (the same host
  outputs under random schedules); every race and deadlock finding was confirmed by
  replaying its witness;
* relabelling the ranks keeps the verdict and the findings, operation for operation;
* an added sync edge never adds a race.

Findings are compared through the `# @TAG` on each generated line, so two programs
whose lines moved (relabelled, an edge inserted) can be compared operation by operation.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from dslgen import Op, OpKind, Protocol, protocols, render, tags_by_line
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import racecheck
from racecheck.cosim import RandomPolicy, TensorRole, simulate
from racecheck.findings import FindingKind, ProgramResult, Verdict
from racecheck.load import discover, load_file

pytestmark = pytest.mark.slow  # hypothesis through the whole pipeline

RANKS = st.integers(2, 4)
SCHEDULE_SEEDS = range(4)
TIMEOUT = 300.0  # far above any generated program's time: load cannot make it unknown

_file_numbers = itertools.count()

examples = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("generated")


def _write(workdir: Path, protocol: Protocol) -> Path:
    """A fresh file per program: locations are read back from the file by line."""
    path = workdir / f"protocol_{next(_file_numbers)}.py"
    path.write_text(render(protocol))
    return path


def _verify(path: Path, ranks: int, engine: str = "auto", repeat: int = 1) -> ProgramResult:
    report = racecheck.verify(
        str(path), ranks=[ranks], engine=engine, repeat=repeat, timeout=TIMEOUT
    )
    assert not report.errors, report.errors
    (result,) = report.results
    return result


def _lines(result: ProgramResult, *, stuck_lines: bool) -> set[tuple[str, str, tuple[int, ...]]]:
    """(kind, detail, sorted lines) of every finding. A deadlock's lines are its blocked
    waits in the stuck state the engine picked: the only one when the protocol is
    monotone, one of several otherwise."""
    return {
        (
            finding.kind.value,
            finding.detail,
            tuple(sorted(loc.line for loc in finding.locations))
            if stuck_lines or finding.kind is not FindingKind.DEADLOCK
            else (),
        )
        for finding in result.findings
    }


def _by_operation(path: Path, result: ProgramResult) -> set[tuple[str, str, frozenset[str]]]:
    """(kind, detail, tags) of every finding, for comparing two related programs.

    A stale read is compared by its read (the write shown beside it is the first of
    several); a deadlock by kind (the stuck state's waits are relabelled too, but which
    of several stuck states an engine picks need not be)."""
    tags = tags_by_line(path.read_text())
    comparable = set()
    for finding in result.findings:
        lines = [location.line for location in finding.locations]
        if finding.kind is FindingKind.DEADLOCK:
            lines = []
        elif finding.kind is FindingKind.STALE_READ:
            lines = lines[:1]
        comparable.add((finding.kind.value, finding.detail, frozenset(tags[n] for n in lines)))
    return comparable


def _race_pairs(path: Path, result: ProgramResult) -> set[frozenset[str]]:
    tags = tags_by_line(path.read_text())
    return {
        frozenset(tags[location.line] for location in finding.locations)
        for finding in result.findings
        if finding.kind is FindingKind.RACE
    }


def _decided(result: ProgramResult) -> ProgramResult:
    assert result.verdict in (Verdict.PROVED, Verdict.BUG), (result.verdict, result.message)
    return result


@st.composite
def _ranked_protocols(draw: st.DrawFn) -> Protocol:
    ranks = draw(RANKS, label="ranks")
    return draw(protocols(ranks, monotone=draw(st.booleans(), label="monotone")))


# ---------------------------------------------------------------------------- properties


@settings(examples, max_examples=50)
@given(protocol=_ranked_protocols(), repeat=st.sampled_from((1, 2)))
def test_engines_agree(workdir: Path, protocol: Protocol, repeat: int) -> None:
    path = _write(workdir, protocol)
    ranks = protocol.ranks
    explored = _decided(_verify(path, ranks, "explore", repeat))
    solved = _decided(_verify(path, ranks, "smt", repeat))
    monotone = _verify(path, ranks, "monotone", repeat)
    if monotone.verdict is Verdict.UNKNOWN:
        assert not protocol.monotone, monotone.message
        assert "monotone engine cannot decide" in monotone.message
    # where the monotone engine decides, every maximal run ends in the same state
    unique_stuck = monotone.verdict is not Verdict.UNKNOWN
    assert solved.verdict is explored.verdict
    assert _lines(solved, stuck_lines=unique_stuck) == _lines(explored, stuck_lines=unique_stuck)
    if unique_stuck:
        assert monotone.verdict is explored.verdict
        assert _lines(monotone, stuck_lines=True) == _lines(explored, stuck_lines=True)


@settings(examples, max_examples=40)
@given(protocol=_ranked_protocols())
def test_executor_agrees_with_the_verdict(workdir: Path, protocol: Protocol) -> None:
    path = _write(workdir, protocol)
    result = _decided(_verify(path, protocol.ranks))
    event(f"verdict {result.verdict.value}")
    if result.verdict is Verdict.PROVED:
        outputs = [_outputs(path, protocol.ranks, seed) for seed in SCHEDULE_SEEDS]
        for other in outputs[1:]:
            assert all(np.array_equal(a, b) for a, b in zip(outputs[0], other, strict=True))
    for finding in result.findings:
        if finding.kind in (FindingKind.RACE, FindingKind.DEADLOCK):
            assert finding.confirmed, finding


def _outputs(path: Path, ranks: int, schedule_seed: int) -> list[np.ndarray]:
    """The host outputs of one run under a random schedule (the same input data)."""
    (spec,) = discover(load_file(str(path)))
    execution = simulate(
        spec.instantiate(ranks), policy=RandomPolicy(schedule_seed), force_waits=False
    )
    assert not execution.stalled
    return [tensor.final for tensor in execution.tensors if tensor.role is TensorRole.OUTPUT]


@settings(examples, max_examples=30)
@given(data=st.data())
def test_relabelling_ranks_keeps_the_findings(workdir: Path, data: st.DataObject) -> None:
    protocol = data.draw(_ranked_protocols(), label="protocol")
    perm = tuple(data.draw(st.permutations(range(protocol.ranks)), label="perm"))
    path = _write(workdir, protocol)
    relabelled_path = _write(workdir, protocol.relabelled(perm))
    original = _decided(_verify(path, protocol.ranks))
    relabelled = _decided(_verify(relabelled_path, protocol.ranks))
    assert relabelled.verdict is original.verdict
    assert _by_operation(relabelled_path, relabelled) == _by_operation(path, original)


@settings(examples, max_examples=40)
@given(data=st.data())
def test_an_added_sync_edge_never_adds_a_race(workdir: Path, data: st.DataObject) -> None:
    protocol = data.draw(_ranked_protocols(), label="protocol")
    path = _write(workdir, protocol)
    original = _decided(_verify(path, protocol.ranks))
    before = _race_pairs(path, original)
    fenced = protocol.with_edge(**data.draw(_edges(protocol, before), label="edge"))
    fenced_path = _write(workdir, fenced)
    after = _race_pairs(fenced_path, _decided(_verify(fenced_path, protocol.ranks)))
    event("the edge removed a race" if after < before else "the edge kept the races")
    assert after <= before


def _edges(protocol: Protocol, races: set[frozenset[str]]) -> st.SearchStrategy[dict[str, int]]:
    """Anywhere, or half the time across a racing pair: after one of its operations,
    before the other."""
    anywhere = st.permutations(range(protocol.ranks)).flatmap(
        lambda ranks: st.fixed_dictionaries(
            {
                "notifier": st.just(ranks[0]),
                "after": st.integers(0, len(protocol.bodies[ranks[0]])),
                "waiter": st.just(ranks[1]),
                "before": st.integers(0, len(protocol.bodies[ranks[1]])),
            }
        )
    )
    if not races:
        return anywhere
    across = st.sampled_from(sorted(sorted(pair) for pair in races)).flatmap(st.permutations)
    return st.one_of(anywhere, across.map(lambda tags: _across(protocol, *tags)))


def _across(protocol: Protocol, first: str, second: str) -> dict[str, int]:
    notifier, after = protocol.position(first)
    waiter, before = protocol.position(second)
    return {"notifier": notifier, "after": after + 1, "waiter": waiter, "before": before}


# ---------------------------------------------------------------------------- anchors

_PULL = Protocol(
    ranks=2,
    bodies=(
        (
            Op(kind=OpKind.STORE, tag="r0stage"),
            Op(kind=OpKind.NOTIFY, tag="pull1n", peer=1, cell=(0, 0)),
            Op(kind=OpKind.OUTPUT_ACC, tag="r0out"),
        ),
        (
            Op(kind=OpKind.STORE, tag="r1stage"),
            Op(kind=OpKind.WAIT, tag="pull1w", cell=(0, 0)),
            Op(kind=OpKind.REMOTE_LOAD, tag="pull1l", peer=0),
            Op(kind=OpKind.OUTPUT_ACC, tag="r1out"),
        ),
    ),
)


def test_a_guarded_pull_is_proved_and_sums_the_inputs(workdir: Path) -> None:
    path = _write(workdir, _PULL)
    assert _verify(path, 2).verdict is Verdict.PROVED
    (spec,) = discover(load_file(str(path)))
    execution = simulate(spec.instantiate(2), policy=RandomPolicy(7))
    final = {tensor.name: tensor.final for tensor in execution.tensors}
    x, y = final["x"], final["y"]
    assert np.array_equal(y[0], x[0]) and np.allclose(y[1], x[0] + x[1])


def test_a_pull_without_its_wait_races_on_those_two_operations(workdir: Path) -> None:
    reader = tuple(op for op in _PULL.bodies[1] if op.kind is not OpKind.WAIT)
    path = _write(workdir, Protocol(ranks=2, bodies=(_PULL.bodies[0], reader)))
    result = _verify(path, 2)
    assert result.verdict is Verdict.BUG
    assert _by_operation(path, result) == {
        ("race", "read-after-write", frozenset({"pull1l", "r0stage"}))
    }
