"""Host-joined rounds (`--rounds joined`) and per-call host scalars (`--per-call`).

The program: every rank puts its row into every rank's `recv` and bumps `arrived`, a
counter that is never retired, then waits for `arrived >= epoch` from every source and
reads the rows. It is correct only when the host joins the calls (nothing else stops a
fast rank's next put from landing before a peer's read) and the epoch is the call
number (a fixed epoch passes at once on the second call)."""

from __future__ import annotations

import dataclasses
import io
import json
import time
from pathlib import Path

import pytest
from bruteforce import BruteForce, cross_rank_pairs, replay

import racecheck
from racecheck.cli import main
from racecheck.cosim import simulate
from racecheck.engines import ENGINES
from racecheck.engines.skeleton import SyncSkeleton
from racecheck.errors import UsageError
from racecheck.events import Trace
from racecheck.load import discover, load_file
from racecheck.report.phrases import describe_finding, describe_step
from racecheck.rounds import Calls, call_value

PROGRAM = """
import pypto.language as pl
import pypto.language.distributed as pld

MAX_RANKS = 8
SIZE = 4


@pl.jit
def exchange(
    x: pl.Tensor[[1, SIZE], pl.FP32],
    out: pl.Out[pl.Tensor[[MAX_RANKS, SIZE], pl.FP32]],
    recv: pld.DistributedTensor[[MAX_RANKS, SIZE], pl.FP32],
    arrived: pld.DistributedTensor[[MAX_RANKS, 1], pl.INT32],
    epoch: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(recv)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="push"):
        for dst in pl.range(n):
            pld.tensor.put(recv, dst, x, dst_offsets=[me, 0], src_offsets=[0, 0], shape=[1, SIZE])
            pld.system.notify(
                arrived, peer=dst, offsets=[me, 0], value=1, op=pld.NotifyOp.AtomicAdd
            )
        for src in pl.range(n):
            pld.system.wait(arrived, offsets=[src, 0], expected=epoch, cmp=pld.WaitCmp.Ge)
        for src in pl.range(n):
            row = pl.load(recv, [src, 0], [1, SIZE])
            pl.store(row, [src, 0], out)
    return out


@pl.jit.host
def entry(
    x: pl.Tensor[[pl.dynamic("NR"), 1, SIZE], pl.FP32],
    out: pl.Out[pl.Tensor[[pl.dynamic("NR"), MAX_RANKS, SIZE], pl.FP32]],
    epoch: pl.Scalar[pl.INT32] = 1,
):
    recv_buf = pld.alloc_window_buffer([MAX_RANKS, SIZE], dtype=pl.FP32)
    arrived_buf = pld.alloc_window_buffer([MAX_RANKS, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        recv = pld.window(recv_buf, [MAX_RANKS, SIZE], dtype=pl.FP32)
        arrived = pld.window(arrived_buf, [MAX_RANKS, 1], dtype=pl.INT32)
        exchange(x[r], out[r], recv, arrived, epoch, device=r)
"""


@pytest.fixture
def program(tmp_path: Path) -> str:
    path = tmp_path / "epochs.py"
    path.write_text(PROGRAM)
    return str(path)


def _verdicts(path: str, **options: object) -> dict[int, str]:
    report = racecheck.verify(path, ranks=(2, 3), jobs=1, **options)  # type: ignore[arg-type]
    assert not report.errors, report.errors
    return {result.ranks: result.verdict.value for result in report.results}


def _findings(path: str, **options: object) -> set[str]:
    report = racecheck.verify(path, ranks=(2,), jobs=1, **options)  # type: ignore[arg-type]
    return {f"{f.kind.value} {f.detail}" for result in report.results for f in result.findings}


def test_joined_rounds_with_the_call_number_as_epoch_are_proved(program: str) -> None:
    joined = {"repeat": 3, "rounds": "joined", "per_call": {"epoch": "{call}"}}
    assert _verdicts(program, **joined) == {2: "proved", 3: "proved"}


def test_free_rounds_let_a_fast_rank_overwrite_a_row_a_peer_still_reads(program: str) -> None:
    free = {"repeat": 3, "per_call": {"epoch": "{call}"}}
    assert _findings(program, **free) == {"race write-after-read"}


def test_joined_rounds_with_a_fixed_epoch_read_before_the_put(program: str) -> None:
    assert _findings(program, repeat=2, rounds="joined") == {"race read-after-write"}


def test_an_epoch_one_call_ahead_hangs(program: str) -> None:
    ahead = {"repeat": 2, "rounds": "joined", "per_call": {"epoch": "{call} + 1"}}
    assert _findings(program, **ahead) == {"deadlock "}


def test_the_report_says_which_rounds_ran(program: str) -> None:
    out = io.StringIO()
    argv = ["verify", program, "--ranks", "2", "--repeat", "2", "--rounds", "joined"]
    main([*argv, "--per-call", "epoch={call}", "--format", "json"], stdout=out)
    (result,) = json.loads(out.getvalue())["results"]
    assert any(note.startswith("--rounds joined: the host waits") for note in result["notes"])
    assert "--per-call epoch={call}" in result["notes"]


def test_one_call_alone_has_no_join(program: str) -> None:
    report = racecheck.verify(program, ranks=(2,), rounds="joined", per_call={"epoch": "{call}"})
    (result,) = report.results
    assert result.verdict.value == "proved"
    assert not any("--rounds" in note for note in result.notes)


def test_the_pyproject_keys_set_rounds_and_per_call(program: str) -> None:
    folder = Path(program).parent
    (folder / "pyproject.toml").write_text(
        '[tool.racecheck]\nrepeat = 2\nrounds = "joined"\nper_call = { epoch = "{call}" }\n'
    )
    assert _verdicts(program) == {2: "proved", 3: "proved"}


@pytest.mark.parametrize(
    ("template", "call", "value"),
    [("{call}", 3, 3), ("{call} * 2 + 1", 2, 5), ("-{call}", 4, -4), ("({call} - 1) % 2", 2, 1)],
)
def test_a_per_call_expression_is_whole_number_arithmetic_over_the_call(
    template: str, call: int, value: int
) -> None:
    assert call_value("epoch", template, call) == value


BAD = [
    (["--per-call", "epoch"], "--per-call 'epoch': expected NAME=EXPR"),
    (["--per-call", "epoch={call}.5"], "--per-call 'epoch={call}.5': expected NAME=EXPR"),
    (["--per-call", "epoch=open()"], "expected NAME=EXPR"),
    (["--per-call", "epoch={call}", "--arg", "epoch=1"], "also given by --arg epoch"),
    (["--per-call", "epoch={call}", "--reset-windows"], "--per-call with --reset-windows"),
    (["--rounds", "sometimes"], "unknown rounds 'sometimes'; choose one of free, joined"),
    (
        ["--per-call", "step={call}"],
        "--per-call step: the host entry of entry has no scalar parameter of that name"
        " (its scalars: epoch)",
    ),
]


@pytest.mark.parametrize(("extra", "says"), BAD, ids=lambda x: str(x))
def test_a_bad_round_option_is_one_line_and_exit_2(
    program: str, extra: list[str], says: str
) -> None:
    err = io.StringIO()
    code = main(["verify", program, "--ranks", "2", "--repeat", "2", *extra], stderr=err)
    assert code == 2
    assert len(err.getvalue().splitlines()) == 1, err.getvalue()
    assert says in err.getvalue()


def test_the_api_refuses_in_the_cli_s_words(program: str) -> None:
    with pytest.raises(UsageError, match="unknown rounds 'sometimes'"):
        racecheck.verify(program, ranks=(2,), rounds="sometimes")
    with pytest.raises(UsageError, match="expected NAME=EXPR"):
        racecheck.verify(program, ranks=(2,), per_call={"epoch": "{call} +"})


SCRUBBED = PROGRAM.replace(
    """        for src in pl.range(n):
            pld.system.wait(""",
    """    with pl.at(level=pl.Level.CORE_GROUP, name_hint="gather"):
        for src in pl.range(n):
            pld.system.wait(""",
).replace(
    "    return out\n",
    """    with pl.at(level=pl.Level.CORE_GROUP, name_hint="scrub"):
        pl.store(pl.full([1, SIZE], pl.FP32, 0.0), [me, 0], recv)  # @scrub
    return out
""",
)
"""`scrub` zeroes the row this rank put into its own `recv`, after `push` (it writes
`recv` too) but unordered with `gather`, which only reads `recv` (write-after-read is
not tracked): it can zero the row before `gather` has read it, in every call."""


def _line(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), start=1) if text in line)


def _races(path: Path, **options: object) -> set[tuple[object, ...]]:
    report = racecheck.verify(str(path), ranks=(2,), jobs=1, **options)  # type: ignore[arg-type]
    return {
        (f.code.value, tuple(at.line for at in f.locations), f.ranks, f.threads, f.confirmed)
        for result in report.results
        for f in result.findings
    }


def _scrub_race(*threads: str) -> set[tuple[object, ...]]:
    loaded = (_line(SCRUBBED, "row = pl.load(recv"), _line(SCRUBBED, "# @scrub"))
    return {("race-war", loaded, (0, 0), threads, True)}


def test_a_race_between_a_rank_s_tasks_is_found_in_one_call(tmp_path: Path) -> None:
    path = tmp_path / "scrub.py"
    path.write_text(SCRUBBED)
    assert _races(path) == _scrub_race("task gather", "task scrub")


def test_joined_rounds_do_not_hide_a_race_between_a_rank_s_tasks(tmp_path: Path) -> None:
    """With joined rounds a rank's tasks are threads too, the host's join a thread
    between its calls: the race between two tasks of one call is found as in one call."""
    path = tmp_path / "scrub.py"
    path.write_text(SCRUBBED)
    joined = {"repeat": 2, "rounds": "joined", "per_call": {"epoch": "{call}"}}
    site = _line(SCRUBBED, "exchange(x[r]")
    gather, scrub = (f"task {name} (dispatch 1, line {site})" for name in ("gather", "scrub"))
    assert _races(path, **joined) == _scrub_race(gather, scrub)


STAMPED = SCRUBBED.replace(
    "        pl.store(pl.full([1, SIZE], pl.FP32, 0.0), [me, 0], recv)  # @scrub",
    "        pl.store(pl.load(x, [0, 0], [1, SIZE]), [MAX_RANKS - 1, 0], out)",
).replace('name_hint="scrub"', 'name_hint="stamp"')
"""Three tasks: `push`, `gather` after it, and `stamp`, unordered with both, which
copies `x` into a row of `out` no other task writes."""


@pytest.mark.parametrize("ranks", [2, 3])
def test_a_fixed_epoch_over_joined_threads_reads_before_the_put(tmp_path: Path, ranks: int) -> None:
    """The epoch is 1 in every call, so call 2's wait passes on call 1's arrivals and
    `gather` can read a row before its peer's call-2 put. The witness runs the next
    call's tasks as soon as the host's join lets them, and replays."""
    path = tmp_path / "stamped.py"
    path.write_text(STAMPED)
    report = racecheck.verify(str(path), ranks=(ranks,), repeat=2, rounds="joined", jobs=1)
    site = _line(STAMPED, "exchange(x[r]")
    (result,) = report.results
    assert result.verdict.value == "bug"
    assert {
        (f.code.value, tuple(at.line for at in f.locations), f.threads, f.confirmed)
        for f in result.findings
    } == {
        (
            "race-raw",
            (_line(STAMPED, "row = pl.load(recv"), _line(STAMPED, "pld.tensor.put(")),
            (f"task gather (dispatch 2, line {site})", f"task push (dispatch 2, line {site})"),
            True,
        )
    }
    with_epochs = racecheck.verify(
        str(path), ranks=(ranks,), repeat=2, rounds="joined", per_call={"epoch": "{call}"}, jobs=1
    )
    assert [result.verdict.value for result in with_epochs.results] == ["proved"]


def _joined_trace(tmp_path: Path, source: str) -> Trace:
    """The trace of two joined calls at P=2, the epoch the call number."""
    path = tmp_path / "joined.py"
    path.write_text(source)
    (spec,) = discover(load_file(str(path)))
    calls = Calls(joined=True, per_call=(("epoch", "{call}"),))
    return simulate(dataclasses.replace(spec.instantiate(2), calls=calls), repeat=2).trace


PINGS = """
import pypto.language as pl
import pypto.language.distributed as pld


@pl.jit
def ping(
    x: pl.Tensor[[1, 4], pl.FP32],
    out: pl.Out[pl.Tensor[[1, 4], pl.FP32]],
    arrived: pld.DistributedTensor[[1, 1], pl.INT32],
    epoch: pl.Scalar[pl.INT32],
):
    ctx = pld.get_comm_ctx(arrived)
    me = pld.rank(ctx)
    n = pld.nranks(ctx)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="signal"):
        pld.system.notify(
            arrived, peer=(me + 1) % n, offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd
        )
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="await"):
        pld.system.wait(arrived, offsets=[0, 0], expected=epoch, cmp=pld.WaitCmp.Ge)
    with pl.at(level=pl.Level.CORE_GROUP, name_hint="stamp"):
        pl.store(pl.load(x, [0, 0], [1, 4]), [0, 0], out)
    return out


@pl.jit.host
def entry(
    x: pl.Tensor[[pl.dynamic("NR"), 1, 4], pl.FP32],
    out: pl.Out[pl.Tensor[[pl.dynamic("NR"), 1, 4], pl.FP32]],
    epoch: pl.Scalar[pl.INT32] = 1,
):
    arrived_buf = pld.alloc_window_buffer([1, 1], dtype=pl.INT32)
    for r in pl.range(pld.world_size()):
        arrived = pld.window(arrived_buf, [1, 1], dtype=pl.INT32)
        ping(x[r], out[r], arrived, epoch, device=r)
"""
"""A ring of notifies and a wait, beside a task of its own (`stamp`): tasks as threads."""


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@pytest.mark.parametrize("source", ["PROGRAM", "PINGS"])
def test_every_engine_orders_joined_calls_as_the_brute_force(
    tmp_path: Path, engine_name: str, source: str
) -> None:
    """The brute force waits at the host's join like at any wait (it once let it pass
    at once), and every engine agrees with it on every pair of events of two threads,
    whether each rank is one thread or its tasks and joins are threads (PINGS)."""
    trace = _joined_trace(tmp_path, globals()[source])
    truth = BruteForce(trace)
    skeleton = SyncSkeleton(trace)
    engine = ENGINES[engine_name]()
    assert engine.unsupported(skeleton) is None
    oracle = engine.order(skeleton, deadline=time.monotonic() + 60)
    events = [event for thread in trace.events for event in thread]
    late = [e.ref for e in events if (trace.device(e.rank), e.repeat) == (0, 1) and not e.synthetic]
    early = [
        e.ref for e in events if (trace.device(e.rank), e.repeat) == (1, 0) and not e.synthetic
    ]
    assert late and early
    assert not any(truth.can_precede(first, second) for first in late for second in early)
    for first, second in cross_rank_pairs(trace):
        expected = truth.can_precede(first, second)
        assert oracle.can_precede(first, second) == expected, (first, second)
    replay(trace, oracle.witness(early[-1], late[0]))
    assert oracle.stuck() is None and not truth.has_stuck_state()


def test_the_host_join_is_a_thread_between_a_rank_s_calls(tmp_path: Path) -> None:
    """Each rank's join after call 1 holds no core, starts after the call's last tasks
    (`await` and `stamp`: `signal` is before `await`), and the next call's first tasks
    start after it alone."""
    trace = _joined_trace(tmp_path, PINGS)
    for rank in range(2):
        threads = [thread for thread in trace.threads if thread.rank == rank and thread.name]
        name = {thread.task: thread.name.split(" (")[0] for thread in threads}
        (join,) = [thread for thread in threads if thread.name == "host join after call 1"]
        assert join.resource == ""
        assert sorted(name[task] for task in join.after) == ["task await", "task stamp"]
        second = [thread for thread in threads if "(dispatch 2," in thread.name]
        assert {
            thread.name.split(" (")[0] for thread in second if thread.after == (join.task,)
        } == {
            "task signal",
            "task stamp",
        }


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
WARM = EXAMPLES / "349_warm_state_handshake_bug_skip_when_warm.py"


def test_reset_windows_does_not_check_one_call_when_an_output_steers_the_next(
    tmp_path: Path,
) -> None:
    """`state` is a pl.Out host tensor the kernel reads: zeros on the first call, what
    the first call left on the second, which skips the wait. Checking one call from
    zeroed windows proved it; it must not."""
    path = tmp_path / "out_state.py"
    source = WARM.read_text().replace("# racecheck: assume state in 0..0", "")
    path.write_text(source.replace("pl.InOut[pl.Tensor[", "pl.Out[pl.Tensor["))
    reset = racecheck.verify(str(path), ranks=(2,), repeat=2, reset_windows=True, jobs=1)
    (result,) = reset.results
    assert result.verdict.value == "unknown"
    assert "host tensor state, which the program writes, steers it" in result.message
    persistent = racecheck.verify(str(path), ranks=(2,), repeat=2, jobs=1)
    assert persistent.results[0].verdict.value == "bug"


def test_joined_rounds_do_not_hide_a_race_between_unordered_tasks_of_a_rank() -> None:
    """The #1670 split wait: `read` may load the window while `wait` still spins, a
    race only another order of one rank's tasks shows, in joined rounds as in one call."""
    path = EXAMPLES / "200_split_wait_bug_unordered_read.py"
    report = racecheck.verify(str(path), ranks=(2,), repeat=2, rounds="joined", jobs=1)
    (result,) = report.results
    assert [(f.code.value, f.ranks, f.confirmed) for f in result.findings] == [
        ("race-raw", (1, 0), True)
    ]


def test_a_thread_held_at_the_host_s_join_cannot_start_in_the_deadlock() -> None:
    """Example 223 in two joined calls: lane 1's wait hangs in call 1, so the host's join
    after call 1 never ends and call 2's first task cannot start; the summary says so in
    a kernel author's words, counts the other blocked threads as threads, and tells
    the two lane_wait tasks of a call apart."""
    path = EXAMPLES / "223_moe_retire_joined_calls_bug_one_element_anchor.py"
    report = racecheck.verify(str(path), ranks=(2,), repeat=2, rounds="joined", jobs=1)
    (finding,) = report.results[0].findings
    push = "task combine_push (dispatch 2, line 122)"
    # two tasks of each call share a name: the line says which, the dispatch which call
    lane = "task lane_wait (line 96, dispatch 1 at line 122)"
    assert describe_finding(finding).split("; ")[:2] == [
        f"rank 0, {lane} waits forever on wait rank 0's arrived_buf[9, 0] >= 1 (it holds 0)",
        f"rank 1, {lane} waits forever on wait rank 1's arrived_buf[8, 0] >= 1 (it holds 0)",
    ]
    assert describe_finding(finding).split("; ")[2:] == [
        f"rank 0, {push} cannot start: it starts after rank 0, host join after call 1,"
        " which never ends",
        f"rank 1, {push} cannot start: it starts after rank 1, host join after call 1,"
        " which never ends",
        "and 8 more threads wait forever likewise",
    ]
    held = finding.blocked[2].step
    assert (held.task, held.starts_after) == (push, "rank 0, host join after call 1")
    assert describe_step(held) == "starts after rank 0, host join after call 1 ends"
