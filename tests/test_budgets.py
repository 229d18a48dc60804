"""Budgets are work, never seconds (issue 24 §1): a file and its options get the same
answer on a loaded machine as on a quiet one; `--timeout` is the only bound in seconds,
every long loop reads it, and it ends in `unknown` naming the stage and the line it cut.

The tests of the timeout move racecheck's clock (`racecheck.clock._source`) instead of
sleeping: it stands still until a stage begins, then jumps past every deadline, so what
is cut, and how much work is done after the cut, is the same on every machine."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tracebuild import mesh_allreduce

import racecheck
from racecheck import clock
from racecheck.engines.monotone import MonotoneOracle
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.findings import Report, Verdict
from racecheck.report import OutputFormat, render

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
BUTTERFLY = EXAMPLES / "300_allreduce_butterfly.py"
ONE_ROW = EXAMPLES / "301_allreduce_butterfly_bug_one_row.py"
CHUNK_TAIL = EXAMPLES / "32_allreduce_two_phase_bug_chunk_tail.py"
PARITY = EXAMPLES / "196_input_slot_parity_per_rank.py"
TWO_PHASE = EXAMPLES / "11_allreduce_two_phase.py"
CUT = "did not finish within --timeout (60 s): cut while "


def verify(path: str, **options: Any) -> Report:
    """`racecheck.verify` with `--timeout 60` unless the test gives its own (racecheck's
    default is none)."""
    options.setdefault("timeout", 60)
    return racecheck.verify(path, **options)


class MovedClock:
    """racecheck's clock in a test: it stands still at 0 until `jump`, then runs on from
    far past every deadline set before."""

    def __init__(self) -> None:
        self.offset: float | None = None

    def __call__(self) -> float:
        return 0.0 if self.offset is None else time.monotonic() + self.offset

    def jump(self) -> None:
        if self.offset is None:
            self.offset = 1e9 - time.monotonic()


@pytest.fixture
def moved(monkeypatch: pytest.MonkeyPatch) -> MovedClock:
    moving = MovedClock()
    monkeypatch.setattr(clock, "_source", moving)
    return moving


def jump_after_events(monkeypatch: pytest.MonkeyPatch, moved: MovedClock, count: int) -> None:
    """The clock jumps once the co-simulation has executed `count` events."""
    from racecheck.cosim.scheduler import BatonScheduler

    executed = BatonScheduler.executed
    seen = [0]

    def counting(self: BatonScheduler, *args: Any) -> None:
        executed(self, *args)
        seen[0] += 1
        if seen[0] == count:
            moved.jump()

    monkeypatch.setattr(BatonScheduler, "executed", counting)


def jump_when_called(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, moved: MovedClock
) -> None:
    """The clock jumps when `owner.name` is called (the stage it begins)."""
    original = getattr(owner, name)

    def jumping(*args: Any, **kwargs: Any) -> Any:
        moved.jump()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, jumping)


def eq_butterfly(tmp_path: Path) -> Path:
    """Example 300 with Eq waits: outside the monotone engine, so explore and z3 decide."""
    path = tmp_path / "butterfly_eq.py"
    path.write_text(BUTTERFLY.read_text().replace("pld.WaitCmp.Ge", "pld.WaitCmp.Eq"))
    return path


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def only(report: Report) -> racecheck.ProgramResult:
    (result,) = report.results
    return result


def assert_cut(report: Report, stage: str, path: Path | None = None, text: str = "") -> str:
    """The one result is unknown, cut at `stage` (on the line holding `text`), and no
    error is pinned to any line."""
    result = only(report)
    assert result.verdict is Verdict.UNKNOWN, result
    assert CUT + stage in result.message, result.message
    if path is not None:
        assert f", at {path}:{line_of(path, text)} " in result.message, result.message
    assert report.errors == ()
    return result.message


# -- every stage that can run long reads the clock, and names where it was cut


def test_the_co_simulation_is_cut_at_an_event_naming_its_rank_and_line(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock
) -> None:
    jump_after_events(monkeypatch, moved, 100)
    report = verify(str(BUTTERFLY), ranks=[8], jobs=1)
    message = assert_cut(report, "co-simulating the ranks (rank ")
    assert re.search(rf", at {BUTTERFLY}:\d+ ", message), message
    # the events traced before the cut, not a misleading 0
    assert only(report).events == 100
    line = render(report, OutputFormat.TEXT, color=False).splitlines()[1]
    assert "  100 events  " in line and "unknown" in line


def swallowing(tmp_path: Path) -> Path:
    """A probe: example 301 with its kernel's body in `try: ... except Exception:
    return y`, which would swallow any Exception racecheck raises in it."""
    lines = ONE_ROW.read_text().splitlines(keepends=True)
    start = next(n for n, line in enumerate(lines) if "acc = pl.load(x" in line)
    end = next(n for n, line in enumerate(lines) if "return pl.store(acc, [0, 0], y)" in line)
    body = ["    " + line if line.strip() else line for line in lines[start : end + 1]]
    guarded = [
        "            try:\n",
        *body,
        "            except Exception:\n",
        "                return y\n",
    ]
    path = tmp_path / "swallows.py"
    path.write_text("".join([*lines[:start], *guarded, *lines[end + 1 :]]))
    assert verify(str(path), ranks=[4], jobs=1).results[0].verdict is Verdict.BUG
    return path


def test_a_kernel_that_catches_every_exception_cannot_swallow_the_cut(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock, tmp_path: Path
) -> None:
    """The cut must end the run: a trace cut short is never checked as if it were whole."""
    path = swallowing(tmp_path)
    jump_after_events(monkeypatch, moved, 30)
    report = verify(str(path), ranks=[4], jobs=1)
    assert_cut(report, "co-simulating the ranks (rank ")
    assert only(report).events >= 30


def test_a_kernel_that_catches_every_exception_cannot_swallow_the_event_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from racecheck.cosim.scheduler import BatonScheduler

    path = swallowing(tmp_path)
    init = BatonScheduler.__init__

    def small(self: BatonScheduler, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.max_events = 10

    monkeypatch.setattr(BatonScheduler, "__init__", small)
    report = verify(str(path), ranks=[4], jobs=1)
    assert only(report).verdict is Verdict.UNKNOWN
    assert "exceeded the budget of 10 events" in only(report).message


def test_the_explore_engine_is_cut_naming_the_step_it_searched(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock, tmp_path: Path
) -> None:
    import racecheck.engines.explore as explore

    searches = explore.explore_states

    def jumping(*args: Any, **kwargs: Any) -> Any:
        search = searches(*args, **kwargs)
        first = next(search)
        moved.jump()
        yield first
        return (yield from search)

    monkeypatch.setattr(explore, "explore_states", jumping)
    path = eq_butterfly(tmp_path)
    report = verify(str(path), ranks=[4], engine="explore", jobs=1)
    assert_cut(report, "the explore engine searched the ranks' interleavings", path, "notify(")


def test_the_smt_encoding_is_cut_naming_its_rank_and_line(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock, tmp_path: Path
) -> None:
    import racecheck.engines.smt as smt

    jump_when_called(monkeypatch, smt._Encoding, "_declare_signal_events", moved)
    path = eq_butterfly(tmp_path)
    report = verify(str(path), ranks=[4], engine="smt", jobs=1)
    assert_cut(report, "the smt engine encoded the trace for z3 (rank 0)", path, "notify(")


def test_a_z3_query_is_cut_naming_the_events_it_was_about(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock, tmp_path: Path
) -> None:
    """The first query asks for a deadlock; the clock jumps at the second."""
    import racecheck.engines.smt as smt

    checks = smt.limited_check
    asked = [0]

    def jumping(*args: Any, **kwargs: Any) -> Any:
        asked[0] += 1
        if asked[0] == 2:
            moved.jump()
        return checks(*args, **kwargs)

    monkeypatch.setattr(smt, "limited_check", jumping)
    path = eq_butterfly(tmp_path)
    message = assert_cut(
        verify(str(path), ranks=[4], engine="smt", jobs=1),
        "the smt engine asked z3 whether rank ",
    )
    assert re.search(r"event at line \d+ \(", message), message


@pytest.mark.parametrize(
    ("module", "owner", "name", "stage"),
    [
        ("racecheck.analysis", None, "races", "the analysis searched for races"),
        (
            "racecheck.engines.deadline",
            "DeadlineOracle",
            "can_precede",
            "the analysis asked which events can run before which (whether",
        ),
    ],
)
def test_the_analysis_is_cut_naming_the_line_it_was_on(
    monkeypatch: pytest.MonkeyPatch,
    moved: MovedClock,
    module: str,
    owner: str | None,
    name: str,
    stage: str,
) -> None:
    home: Any = importlib.import_module(module)
    jump_when_called(monkeypatch, getattr(home, owner) if owner else home, name, moved)
    message = assert_cut(verify(str(BUTTERFLY), ranks=[4], jobs=1), stage)
    assert re.search(rf", at {BUTTERFLY}:\d+ ", message), message


def test_replaying_a_witness_is_cut_naming_the_finding(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock
) -> None:
    import racecheck.reference as reference

    jump_when_called(monkeypatch, reference, "replay_witness", moved)
    report = verify(str(ONE_ROW), ranks=[4], jobs=1)
    assert_cut(report, "replaying the witness of a race")


def test_exploring_other_paths_is_cut_naming_the_value_left_open(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock
) -> None:
    import racecheck.paths as paths

    branches = paths._branches

    def jumping(*args: Any, **kwargs: Any) -> Any:
        found = branches(*args, **kwargs)
        moved.jump()
        return found

    monkeypatch.setattr(paths, "_branches", jumping)
    message = assert_cut(
        verify(str(PARITY), ranks=[3], jobs=1),
        "exploring the program's other paths (1 checked)",
    )
    assert re.search(rf"{PARITY}:\d+", message.split(CUT)[0]), message  # the open value's line


def test_choosing_inputs_is_cut_and_leaves_the_value_open(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock
) -> None:
    import racecheck.engines.inputs_smt as inputs_smt

    jump_when_called(monkeypatch, inputs_smt, "limited_check", moved)
    assert_cut(
        verify(str(PARITY), ranks=[3], jobs=1),
        "choosing inputs that take a branch's other side",
    )


def test_the_every_p_proof_is_cut_naming_the_obligation_and_line(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock
) -> None:
    """The fallback range is then checked, each P within a --timeout of its own."""
    from racecheck.allp.obligations import Prover

    jump_when_called(monkeypatch, Prover, "failures", moved)
    report = verify(str(TWO_PHASE), ranks="all", fallback="2..3", jobs=1)
    note = report.results[0].notes[0]
    assert "not proved for every P: " + CUT + "proving every P (" in note, note
    assert re.search(rf", at {TWO_PHASE}:\d+ ", note), note
    assert [result.verdict for result in report.results] == [Verdict.PROVED] * 2


def test_a_factory_that_loops_under_the_every_p_tracer_is_cut(
    monkeypatch: pytest.MonkeyPatch, moved: MovedClock, tmp_path: Path
) -> None:
    """The symbolic tracer runs the user's factory too: a loop there ends the proof in
    its fallback, naming the loop's line, instead of hanging."""
    import racecheck.allp.paths as allp_paths

    path = tmp_path / "loops.py"
    loop = "    while nr > 0:\n        pass\n"
    source = BUTTERFLY.read_text()
    head = '    """The butterfly all-reduce for ``nr`` ranks, a power of two."""\n'
    path.write_text(source.replace(head, head + loop))
    jump_when_called(monkeypatch, allp_paths, "within", moved)
    report = verify(str(path), ranks="all", fallback="2", timeout=0.5, jobs=1)
    (result,) = report.results
    assert "cut while proving every P (tracing branch path 1), at " in result.notes[0]
    assert f"{path}:{line_of(path, 'while nr > 0')} " in result.notes[0], result.notes[0]
    assert result.verdict is Verdict.UNKNOWN  # P=2 loops too: an error naming the loop


def test_past_the_timeout_the_auto_route_tries_no_other_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found at P=512: the monotone engine, cut, handed over to explore and then z3,
    which ran 3 s past a 3 s --timeout."""
    import racecheck.engines as engines
    from racecheck.options import EngineChoice

    tried: list[str] = []

    class Engine:
        def __init__(self, name: str) -> None:
            self.name = name

        def unsupported(self, skeleton: SyncSkeleton) -> None:
            return None

        def order(self, skeleton: SyncSkeleton, *, deadline: float) -> Any:
            tried.append(self.name)
            raise clock.Overtime(f"the {self.name} engine ran")

    route = (lambda: Engine("monotone"), lambda: Engine("explore"))
    monkeypatch.setattr(engines, "AUTO_ROUTE", route)
    with pytest.raises(clock.Overtime, match="the monotone engine ran"):
        engines.prepare(EngineChoice.AUTO, mesh_allreduce(2), deadline=clock.now() + 60)
    assert tried == ["monotone"]


def test_the_every_p_proof_past_its_budget_of_z3_work_names_it() -> None:
    """The budget is z3's work: 1,000 units are too few for example 11, on any machine;
    the default decides it."""
    from racecheck.allp import Answer, prove_every_p
    from racecheck.load import discover, load_file

    (spec,) = discover(load_file(str(TWO_PHASE)))
    outcome = prove_every_p(spec, 2, budget=1_000)
    assert outcome.answer is Answer.FALLBACK
    assert "used up its budget of 1,000 z3 resource units" in outcome.reason, outcome.reason
    assert prove_every_p(spec, 2).answer is Answer.PROVED


def test_the_monotone_engine_reads_the_clock_between_its_sweeps() -> None:
    skeleton = SyncSkeleton(mesh_allreduce(3))
    with pytest.raises(clock.Overtime, match=r"monotone engine .*\(holding rank 0 back\)"):
        MonotoneOracle(skeleton, deadline=clock.now() - 1, budget=0)


# -- a short --timeout on a large P returns right after it passes


@contextmanager
def calls_counted() -> Iterator[list[int]]:
    """How many Python functions run (in this thread and threads started inside)."""
    count = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            count[0] += 1
            if count[0] > AFTER_THE_CUT:  # the test fails: the rest need not crawl
                sys.setprofile(None)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


AFTER_THE_CUT = 1_000_000
"""Python calls racecheck may make once --timeout has passed: a few linear passes over
the trace (150,000 calls at P = 512 when the cut comes as the engines begin: the sync
skeleton, the access index), unwinding 512 rank threads, the report. The explorer's
saturation cap alone used to make 100 million, the issue's 39 s past a 3 s --timeout."""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "owner", "name", "cut", "eq"),
    [
        ("racecheck.cosim.scheduler", "BatonScheduler", "start", "co-simulating the ranks", 1),
        ("racecheck.stages", None, "prepare", "the explore engine searched", 1),
        ("racecheck.analysis", None, "races", "the analysis searched for races", 0),
    ],
)
def test_a_butterfly_at_512_ranks_returns_soon_after_a_short_timeout(
    monkeypatch: pytest.MonkeyPatch,
    moved: MovedClock,
    tmp_path: Path,
    module: str,
    owner: str | None,
    name: str,
    cut: str,
    eq: int,
) -> None:
    """--ranks 512 --timeout 3 with the clock past the deadline once `name` begins: the
    work done from there to the answer is bounded, the same on every machine. With Eq
    waits (`eq`) the explore and smt engines are tried; the race search is reached with
    Ge waits (with Eq waits at P=512, z3's deadlock query alone uses up its budget)."""
    home: Any = importlib.import_module(module)
    home = getattr(home, owner) if owner is not None else home
    original = getattr(home, name)
    counting = calls_counted()
    counted: list[list[int]] = []

    def jumping(*args: Any, **kwargs: Any) -> Any:
        moved.jump()
        counted.append(counting.__enter__())
        return original(*args, **kwargs)

    monkeypatch.setattr(home, name, jumping)
    try:
        path = eq_butterfly(tmp_path) if eq else BUTTERFLY
        report = verify(str(path), ranks=[512], timeout=3, jobs=1)
    finally:
        if counted:
            counting.__exit__(None, None, None)
    result = only(report)
    assert result.verdict is Verdict.UNKNOWN
    assert "did not finish within --timeout (3 s): cut while " + cut in result.message
    assert len(counted) == 1 and counted[0][0] < AFTER_THE_CUT, counted
    print(f"{name}: {counted[0][0]} calls after the cut")


# -- the same answer under load


def _report(path: Path, *args: str) -> dict[str, Any]:
    """The JSON report of a CLI run, its timings removed."""
    done = subprocess.run(
        [sys.executable, "-m", "racecheck", "verify", str(path), *args, "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=900,
    )
    assert done.returncode in (0, 1), done.stderr
    return _without_timings(json.loads(done.stdout))


def _without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_timings(item) for key, item in value.items() if key != "seconds"}
    if isinstance(value, list):
        return [_without_timings(item) for item in value]
    return value


HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextmanager
def cpu_hogs(count: int, seconds: float) -> Iterator[None]:
    """`count` processes burning a core each, for at most `seconds`."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)]) for _ in range(count)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


class RacingClock:
    """A clock that runs fast: every read is a minute later. To racecheck the machine
    seems thousands of times slower; only `--timeout` may notice."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 60.0
        return self.now


@pytest.mark.slow
def test_a_ranks_all_check_gives_the_same_report_on_a_machine_that_seems_very_slow(
    monkeypatch: pytest.MonkeyPatch, chunk_tail_every_p: Report
) -> None:
    """Example 32 at --ranks all with a --timeout no run reaches: the proof, the P it
    derives and every verdict are the same whatever the clock says (the every-P proof
    used to give up after 5 s and fall back to P = 2..8)."""
    far = 1e15
    quiet = chunk_tail_every_p
    monkeypatch.setattr(clock, "_source", RacingClock())
    slow = verify(str(CHUNK_TAIL), ranks="all", timeout=far, jobs=1)
    assert [r.ranks for r in quiet.results][-1] > 8
    assert _without_timings(_as_json(slow)) == _without_timings(_as_json(quiet))


def _as_json(report: Report) -> Any:
    return json.loads(render(report, OutputFormat.JSON, color=False))


@pytest.mark.slow
def test_a_ranks_all_check_gives_the_same_report_under_a_cpu_hog(
    chunk_tail_every_p: Report,
) -> None:
    """Example 32 at --ranks all: the every-P proof, the P it checks concretely and each
    verdict, alike on a quiet machine (the session's run) and from the CLI with every
    core busy (the issue: under load its proof gave up at a time limit and fell back to
    P = 2..8)."""
    quiet = _without_timings(_as_json(chunk_tail_every_p))
    checked = [result["ranks"] for result in quiet["results"]]
    assert checked[-1] > 8, checked  # the P the proof derived, beyond the fallback range
    with cpu_hogs(count=2 * len(_cores()), seconds=600):
        loaded = _report(CHUNK_TAIL, "--ranks", "all", "--jobs", "1")
    assert loaded == quiet


def _cores() -> list[int]:
    import os

    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]


# -- every budget is documented once, with the value the code uses


def _budget_table() -> dict[str, str]:
    """docs/model.md's budgets: constant → value as written."""
    text = (ROOT / "docs" / "model.md").read_text()
    section = text.split("### Budgets", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| [^|]+ \| [^|]+ \| ([\d,.]+) \| `([\w.]+)` \|$", section, re.M)
    return {constant: value for value, constant in rows}


def _value(constant: str) -> object:
    module, _, name = constant.rpartition(".")
    return getattr(__import__(module, fromlist=["_"]), name)


def test_every_budget_is_documented_with_the_value_the_code_uses() -> None:
    table = _budget_table()
    assert len(table) >= 12, table
    for constant, written in table.items():
        value = _value(constant)
        assert isinstance(value, (int, float)), constant
        assert f"{value:,}" == written or f"{value:g}" == written, (constant, value, written)


WALL_CLOCK_BOUND = re.compile(
    r"time\.monotonic\(\)\s*[-+<>]|[<>]\s*time\.monotonic\(\)|deadline.*time\.monotonic"
)


Z3_LIMIT = re.compile(r"""set(?:_param)?\(\s*["'](?:timeout|rlimit)["']""")


def test_no_budget_inside_racecheck_is_counted_in_seconds() -> None:
    """Only `racecheck.clock` turns the wall clock into a bound (the other reads of it
    are the durations a report shows), and only `racecheck.engines.solving` sets z3's
    limits. SPIN's own time limit is an external tool's, for the test oracle only."""
    for path in (ROOT / "racecheck").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            if path.name not in ("clock.py", "spin.py"):
                assert not WALL_CLOCK_BOUND.search(line) or "started" in line, where
            if path.name != "solving.py":
                assert not Z3_LIMIT.search(line), where
