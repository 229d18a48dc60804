"""Benchmark `racecheck verify` as whole processes: wall time (median) and peak memory.

    pip install '.[bench]'                       # matplotlib, for the plot
    python bench/bench_verify.py                 # every table, writes docs/benchmarks.md
    python bench/bench_verify.py --quick         # P up to 16, one engine, for a smoke run

Each cell runs `racecheck verify FILE --ranks P --engine E --format json` in a fresh
process `--repeats` times and records the median wall time and the largest peak RSS
(from the child's rusage). First the hard cases of issue 13, each against its target
(`HARD_CASES`) and `--jobs 1` against `--jobs 2` on one file at many P (`--hard-only`
stops there); then every example at P = 2..8 with
`--repeat 3`, one process per file, against the 2 s target per P (`--examples-only`
runs just that table); then every protocol of `PROTOCOLS` for growing P, a row
stopping once a run exceeds `--budget` seconds, with the growth of the checking time
in P and in events.
SPIN, when installed, runs on racecheck's Promela export of the mesh all-reduce (the
same trace racecheck decides) until one P exceeds 300 s or 8 GB; next to it, racecheck
`auto` on the same P, in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# (label, file, extra --arg values); sizes are chosen so every P in the sweep divides them.
PROTOCOLS = (
    ("mesh allreduce", "08_allreduce_mesh.py", ()),
    ("two-phase allreduce", "11_allreduce_two_phase.py", ("size=3840",)),
    ("ring allreduce", "14_allreduce_ring.py", ("size=3840",)),
    ("allgather", "17_allgather.py", ()),
    ("all_to_all", "20_all_to_all.py", ("use_builtin=False",)),
)
FULL_RANKS = (2, 4, 8, 16, 32, 64, 128)
SET_RESET = "05_shift_counter_barrier_bug_set_reset.py"
EXAMPLE_RANKS = "2..8"
EXAMPLE_REPEAT = 3
EXAMPLE_SECONDS = 2.0  # target: each P's own checking time
SINGLE_SLOT = "16_allreduce_ring_outbox_bug_single_slot.py"
MESH = "08_allreduce_mesh.py"
JOBS_RANGES = ("2..8", "2..64")  # start-up against the gain
JOBS = (1, 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class HardCase:
    """One row of issue 13's table: a workload and the target it must meet."""

    label: str
    file: str
    ranks: int
    seconds: float  # target: median wall time of the whole process
    engine: str = "auto"
    args: tuple[str, ...] = ()
    repeat: int = 1
    mebibytes: float | None = None  # target: peak RSS


HARD_CASES = (
    *(  # issue 23: every input at once, counts from the input (a summary run)
        HardCase(
            label=f"input-count all_to_all_v {name}, for every input",
            file=file,
            ranks=p,
            seconds=5.0,
        )
        for name, file in (
            ("(proved)", "262_input_counts_all_to_all_v.py"),
            ("without a clamp (bug)", "263_input_counts_all_to_all_v_bug_no_clamp.py"),
        )
        for p in (2, 4, 8)
    ),
    *(
        HardCase(
            label="example 05 (Set reset) --repeat 2",
            file=SET_RESET,
            ranks=p,
            seconds=2.0,
            repeat=2,
        )
        for p in range(2, 9)
    ),
    *(
        HardCase(
            label="mesh allreduce, --engine explore",
            file="08_allreduce_mesh.py",
            ranks=p,
            seconds=10.0,
            engine="explore",
        )
        for p in range(2, 9)
    ),
    HardCase(
        label="allgather threshold bug (deadlock), --engine explore",
        file="18_allgather_bug_threshold.py",
        ranks=8,
        seconds=10.0,
        engine="explore",
    ),
    HardCase(
        label="400 rounds through one slot (example 16 --repeat 67)",
        file=SINGLE_SLOT,
        ranks=4,
        seconds=5.0,
        repeat=67,
    ),
    HardCase(
        label="ring allreduce",
        file="14_allreduce_ring.py",
        ranks=128,
        seconds=10.0,
        args=("size=3840",),
    ),
    HardCase(
        label="two-phase allreduce",
        file="11_allreduce_two_phase.py",
        ranks=128,
        seconds=10.0,
        args=("size=3840",),
    ),
    HardCase(label="mesh allreduce", file="08_allreduce_mesh.py", ranks=128, seconds=10.0),
    HardCase(
        label="mesh allreduce",
        file="08_allreduce_mesh.py",
        ranks=256,
        seconds=60.0,
        mebibytes=1024.0,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    protocol: str
    engine: str
    ranks: int
    seconds: float  # median wall time of the whole process
    peak_mib: float
    verdict: str
    checking: float = 0.0  # median of the report's own per-program seconds (no start-up)
    events: int = 0  # events of the trace (summed over the run's programs)


def run_json(
    path: Path,
    ranks: int | str,
    engine: str,
    args: tuple[str, ...],
    repeat: int = 1,
    jobs: int | None = None,
    tree: Path | None = None,
) -> tuple[float, float, list[dict[str, Any]] | str]:
    """(wall seconds, peak RSS in MiB, the JSON results or an error line) of one whole
    `racecheck verify` process; `tree`, a checkout whose racecheck runs instead of the
    installed one (bench/bench_compare.py)."""
    command = [sys.executable, "-m", "racecheck", "verify", str(path), "--ranks", str(ranks)]
    command += ["--engine", engine, "--format", "json", "--repeat", str(repeat)]
    command += [] if jobs is None else ["--jobs", str(jobs)]
    for value in args:
        command += ["--arg", value]
    started = time.perf_counter()
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    child = subprocess.Popen(  # `-m` puts the working folder first on the import path
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tree
    )
    assert child.stdout is not None and child.stderr is not None
    stdout, stderr = child.stdout.read(), child.stderr.read()
    _, _, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    child.returncode = 0  # reaped by wait4 above
    try:
        results: list[dict[str, Any]] | str = json.loads(stdout)["results"]
    except (json.JSONDecodeError, KeyError):
        results = f"error: {stderr.strip()[:80]}"
    return elapsed, usage.ru_maxrss / 1024, results


def run_once(
    path: Path,
    ranks: int | str,
    engine: str,
    args: tuple[str, ...],
    repeat: int = 1,
    jobs: int | None = None,
    tree: Path | None = None,
) -> tuple[float, float, str, float, int]:
    """(wall seconds, peak RSS in MiB, verdicts, checking seconds, events) of one whole
    `racecheck verify` process; checking excludes interpreter start-up and imports."""
    elapsed, peak, results = run_json(path, ranks, engine, args, repeat, jobs, tree)
    if isinstance(results, str):
        return elapsed, peak, results, 0.0, 0
    verdict = "/".join(sorted({result["verdict"] for result in results}))
    checking = sum(result["seconds"] for result in results)
    events = sum(result["events"] or 0 for result in results)
    return elapsed, peak, verdict, checking, events


def measure(
    label: str,
    path: Path,
    ranks: int,
    engine: str,
    args: tuple[str, ...],
    repeats: int,
    repeat: int = 1,
    give_up: float = float("inf"),
) -> Measurement:
    """Medians of `repeats` runs; one run only when it takes longer than `give_up`."""
    times, peaks, checks, verdict, events = [], [], [], "", 0
    for _ in range(repeats):
        elapsed, peak, verdict, checking, events = run_once(path, ranks, engine, args, repeat)
        times.append(elapsed)
        peaks.append(peak)
        checks.append(checking)
        if elapsed > give_up:
            break
    return Measurement(
        protocol=label,
        engine=engine,
        ranks=ranks,
        seconds=statistics.median(times),
        peak_mib=max(peaks),
        verdict=verdict,
        checking=statistics.median(checks),
        events=events,
    )


def hard_cases(repeats: int) -> list[tuple[HardCase, Measurement]]:
    rows = []
    for case in HARD_CASES:
        row = measure(
            case.label,
            EXAMPLES / case.file,
            case.ranks,
            case.engine,
            case.args,
            repeats,
            case.repeat,
        )
        rows.append((case, row))
        print(
            f"{case.label:54} P={case.ranks:<4} {row.seconds:7.2f} s (target {case.seconds:g})"
            f" {row.peak_mib:7.1f} MiB {row.events:7} events  {row.verdict}"
            f"  {'met' if met(case, row) else 'MISSED'}",
            flush=True,
        )
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class JobsRow:
    span: str  # the --ranks range
    jobs: int
    row: Measurement
    load: float  # the machine's 1-minute load average after the runs of this range


def jobs_rows(repeats: int) -> list[JobsRow]:
    """Issue 13's `--jobs` row: the mesh at P = 2..64 (and 2..8, where starting the
    workers is all there is to see) in one process, `--jobs 1` against `--jobs 2`, the
    runs interleaved so that a change in the machine's load hits both."""
    rows = []
    for span in JOBS_RANGES:
        runs: dict[int, list[tuple[float, float, str, float, int]]] = {jobs: [] for jobs in JOBS}
        for _ in range(repeats):
            for jobs in JOBS:
                runs[jobs].append(run_once(EXAMPLES / MESH, span, "auto", (), jobs=jobs))
        load = os.getloadavg()[0]
        for jobs, measured in runs.items():
            row = Measurement(
                protocol=f"mesh allreduce, --ranks {span}, --jobs {jobs}",
                engine="auto",
                ranks=int(span.partition("..")[2]),
                seconds=statistics.median(run[0] for run in measured),
                peak_mib=max(run[1] for run in measured),
                verdict=measured[-1][2],
                checking=statistics.median(run[3] for run in measured),
                events=measured[-1][4],
            )
            rows.append(JobsRow(span=span, jobs=jobs, row=row, load=load))
            print(
                f"{row.protocol:54} {row.seconds:7.2f} s {row.peak_mib:7.1f} MiB  load {load:.1f}",
                flush=True,
            )
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class ExampleRun:
    """One example at P = 2..8 with `--repeat 3`: its slowest P and that P's time."""

    file: str
    seconds: float  # wall time of the whole process (every P)
    slowest: int  # the P with the longest checking time
    checking: float  # that P's own checking time (its programs summed)
    events: int  # that P's events
    verdicts: str


def examples_table() -> list[ExampleRun]:
    rows = []
    for path in sorted(EXAMPLES.glob("*.py")):
        elapsed, _, results = run_json(path, EXAMPLE_RANKS, "auto", (), EXAMPLE_REPEAT)
        per_p: dict[int, tuple[float, int]] = {}
        for result in results if not isinstance(results, str) else ():
            seconds, events = per_p.get(result["ranks"], (0.0, 0))
            per_p[result["ranks"]] = (seconds + result["seconds"], events + (result["events"] or 0))
        slowest = max(per_p, key=lambda ranks: per_p[ranks][0], default=0)
        checking, events = per_p.get(slowest, (0.0, 0))
        verdicts = (
            results
            if isinstance(results, str)
            else "/".join(sorted({result["verdict"] for result in results}))
        )
        row = ExampleRun(
            file=path.name,
            seconds=elapsed,
            slowest=slowest,
            checking=checking,
            events=events,
            verdicts=verdicts,
        )
        rows.append(row)
        print(
            f"{row.file:58} {row.seconds:6.2f} s  slowest P={row.slowest}: {row.checking:6.3f} s"
            f" {row.events:6} events  {row.verdicts}"
            f"  {'met' if row.checking < EXAMPLE_SECONDS else 'MISSED'}",
            flush=True,
        )
    return rows


def met(case: HardCase, row: Measurement) -> bool:
    decided = row.verdict in ("proved", "bug")
    fits = case.mebibytes is None or row.peak_mib < case.mebibytes
    return decided and row.seconds < case.seconds and fits


def sweep(
    engines: tuple[str, ...], ranks: tuple[int, ...], repeats: int, budget: float
) -> list[Measurement]:
    rows = []
    for label, name, args in PROTOCOLS:
        for engine in engines:
            for count in ranks:
                row = measure(label, EXAMPLES / name, count, engine, args, repeats)
                rows.append(row)
                print(
                    f"{label:22} {engine:9} P={count:<4} {row.seconds:8.2f} s"
                    f" {row.peak_mib:8.1f} MiB  {row.verdict}",
                    flush=True,
                )
                if row.seconds > budget:
                    break
    return rows


def spin_sweep(limit_seconds: float, limit_mib: int) -> list[Measurement]:
    """SPIN on the exported mesh trace for P = 2, 3, ... until a P fails its limits."""
    from racecheck.cosim import simulate
    from racecheck.errors import EngineUnknown
    from racecheck.export.spin import check_with_spin
    from racecheck.load import discover, load_file

    (spec,) = discover(load_file(str(EXAMPLES / "08_allreduce_mesh.py")))
    rows = []
    for count in range(2, 17):
        trace = simulate(spec.instantiate(count)).trace
        started = time.perf_counter()
        try:
            outcome = check_with_spin(trace, timeout=limit_seconds, memory_mb=limit_mib)
        except EngineUnknown as stopped:
            verdict, peak = f"gave up: {stopped.reason}", float(limit_mib)
        else:
            verdict = "bug" if outcome.verdicts.races or outcome.run.deadlock else "proved"
            peak = outcome.run.megabytes
        elapsed = time.perf_counter() - started
        rows.append(_spin_row(count, elapsed, peak, verdict))
        own = measure(
            "mesh allreduce (vs SPIN)", EXAMPLES / "08_allreduce_mesh.py", count, "auto", (), 3
        )
        rows.append(own)
        print(
            f"SPIN P={count}: {elapsed:.2f} s ({verdict}); racecheck {own.seconds:.2f} s"
            f" (checking {own.checking:.3f} s)",
            flush=True,
        )
        if verdict.startswith("gave up"):
            break
    return rows


def _spin_row(count: int, seconds: float, peak: float, verdict: str) -> Measurement:
    return Measurement(
        protocol="mesh allreduce (vs SPIN)",
        engine="spin",
        ranks=count,
        seconds=seconds,
        peak_mib=peak,
        verdict=verdict,
    )


def plot(rows: list[Measurement], path: Path) -> None:
    """Time against P on log axes, one line per (protocol, engine)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 6))
    series = sorted({(row.protocol, row.engine) for row in rows})
    for protocol, engine in series:
        points = [
            (row.ranks, row.seconds)
            for row in rows
            if (row.protocol, row.engine) == (protocol, engine)
            and not row.verdict.startswith(("gave up", "error"))
        ]
        if points:
            xs, ys = zip(*points, strict=True)
            style = "--" if engine == "spin" else "-"
            axes.plot(xs, ys, style, marker="o", label=f"{protocol} [{engine}]")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("ranks P")
    axes.set_ylabel("wall time of the whole process (s, median)")
    axes.set_title("racecheck verify: time against P")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def growth_exponent(
    rows: list[Measurement], protocol: str, engine: str, *, in_events: bool = False
) -> float | None:
    """Least-squares slope of log(checking time) against log(P), or log(events), over
    the P >= 16 points (start-up is a constant that would flatten the slope)."""
    import math

    points = [
        (math.log(row.events if in_events else row.ranks), math.log(row.checking))
        for row in rows
        if row.protocol == protocol
        and row.engine == engine
        and row.ranks >= 16
        and row.checking > 0
        and row.events > 0
    ]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def growth_steps(rows: list[Measurement]) -> list[str]:
    """Per protocol (`auto`), from each P >= 32 to the next one measured: how much the
    events and the checking time grew."""
    lines = [
        "| protocol | P | events | × events | checking s | × checking time |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for label in dict.fromkeys(row.protocol for row in rows):
        by_ranks = {
            row.ranks: row
            for row in rows
            if row.protocol == label and row.engine == "auto" and row.checking > 0
        }
        series = [by_ranks[ranks] for ranks in sorted(by_ranks) if ranks >= 32]
        for before, after in zip(series, series[1:], strict=False):
            lines.append(
                f"| {label} | {before.ranks} → {after.ranks} | {after.events}"
                f" | {after.events / before.events:.2f} | {after.checking:.3f}"
                f" | {after.checking / before.checking:.2f} |"
            )
    return lines


def jobs_markdown(rows: list[JobsRow]) -> list[str]:
    lines = [
        "",
        "## `--jobs`: one file at many P in one process (issue 13)",
        "",
        "The mesh all-reduce; the runs of `--jobs 1` and `--jobs 2` interleaved. *checking s*"
        " is the sum of the units' own times, whichever process ran them; the reports are"
        " the same apart from those times. *load* is the machine's 1-minute load average"
        " after the runs, racecheck's own processes included: with 2 cores, a load well"
        " above 2 means other jobs had the second core.",
        "",
        "| --ranks | --jobs | events (all P) | seconds (median) | speed-up | checking s"
        " | peak MiB | verdict | load |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    alone = {entry.span: entry.row.seconds for entry in rows if entry.jobs == 1}
    for entry in rows:
        row = entry.row
        lines.append(
            f"| {entry.span} | {entry.jobs} | {row.events} | {row.seconds:.2f}"
            f" | {alone[entry.span] / row.seconds:.2f}× | {row.checking:.3f}"
            f" | {row.peak_mib:.0f} | {row.verdict} | {entry.load:.1f} |"
        )
    return lines


def markdown(
    hard: list[tuple[HardCase, Measurement]],
    jobs: list[JobsRow],
    examples: list[ExampleRun],
    rows: list[Measurement],
    command: str,
) -> str:
    lines = [
        "# racecheck benchmarks",
        "",
        f"Machine: {platform.machine()}, {platform.python_implementation()}"
        f" {platform.python_version()}, {platform.system()}; `nproc` = 2, 24 GiB, shared"
        " with other jobs while measured.",
        f"Command: `{command}`. Whole processes; median wall time of the repeats; peak RSS"
        " is the largest of the repeats. *checking s* is the report's own time per program"
        " and P (no interpreter start-up or imports).",
        "",
        "## The hard cases (issue 13)",
        "",
        "| workload | engine | P | events | seconds (median) | target | checking s"
        " | peak MiB | verdict | met |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for case, row in hard:
        target = f"< {case.seconds:g} s" + (
            f", < {case.mebibytes:g} MiB" if case.mebibytes is not None else ""
        )
        lines.append(
            f"| {case.label} | {case.engine} | {case.ranks} | {row.events} | {row.seconds:.2f}"
            f" | {target} | {row.checking:.3f} | {row.peak_mib:.0f} | {row.verdict}"
            f" | {'yes' if met(case, row) else '**no**'} |"
        )
    lines += jobs_markdown(jobs)
    lines += [
        "",
        f"## Every example at P = {EXAMPLE_RANKS} with `--repeat {EXAMPLE_REPEAT}`",
        "",
        f"One process per file; the slowest P's own checking time against the"
        f" {EXAMPLE_SECONDS:g} s target (one run each).",
        "",
        "| example | seconds (whole process) | slowest P | its events | its checking s"
        " | verdicts | met |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for example in examples:
        lines.append(
            f"| {example.file} | {example.seconds:.2f} | {example.slowest} | {example.events}"
            f" | {example.checking:.3f} | {example.verdicts}"
            f" | {'yes' if example.checking < EXAMPLE_SECONDS else '**no**'} |"
        )
    lines += [
        "",
        "## Growth in P",
        "",
        "![time against P, log axes](benchmarks.png)",
        "",
        "| protocol | engine | P | events | seconds (median) | checking s | peak MiB | verdict |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        checking = f"{row.checking:.3f}" if row.engine != "spin" else "—"
        lines.append(
            f"| {row.protocol} | {row.engine} | {row.ranks} | {row.events} | {row.seconds:.2f}"
            f" | {checking} | {row.peak_mib:.0f} | {row.verdict} |"
        )
    lines += [
        "",
        "Growth (slopes of log checking time against log P and against log events, P >= 16):",
        "",
    ]
    for label, _, _ in PROTOCOLS:
        for engine in sorted({row.engine for row in rows}):
            slope = growth_exponent(rows, label, engine)
            in_events = growth_exponent(rows, label, engine, in_events=True)
            if slope is not None and in_events is not None:
                lines.append(f"- {label}, {engine}: time ∝ P^{slope:.2f} ∝ events^{in_events:.2f}")
    lines += ["", "Growth in events, step by step (with the hard cases' mesh P = 256):", ""]
    lines += growth_steps([*rows, *(row for _, row in hard)])
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="P up to 16, auto engine only")
    parser.add_argument("--engines", default="auto", help="comma-separated engines")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=120.0, help="stop a row past this")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--no-spin", action="store_true", help="skip the SPIN comparison")
    parser.add_argument("--hard-only", action="store_true", help="only issue 13's table")
    parser.add_argument(
        "--examples-only", action="store_true", help="only print the examples' table"
    )
    options = parser.parse_args()
    if options.examples_only:
        examples_table()
        return 0
    ranks = tuple(p for p in FULL_RANKS if p <= 16) if options.quick else FULL_RANKS
    engines = tuple(options.engines.split(","))
    hard = hard_cases(options.repeats)
    jobs = jobs_rows(options.repeats)
    examples = [] if options.hard_only else examples_table()
    rows = [] if options.hard_only else sweep(engines, ranks, options.repeats, options.budget)
    if not (options.no_spin or options.hard_only):
        rows += spin_sweep(limit_seconds=300.0, limit_mib=8192)
    out = Path(options.out)
    out.write_text(markdown(hard, jobs, examples, rows, " ".join(["python", *sys.argv])))
    plot(rows or [row for _, row in hard], out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
