"""Time the every-input proofs and refutations of issue 23 as whole processes.

    python bench/bench_every_input.py              # every row, printed as a table
    python bench/bench_every_input.py --repeats 3  # median of three runs per row

Each row runs `racecheck verify FILE --ranks P --format json` in a fresh process and
records its wall time (median), its CPU time (user + system, from the child's rusage:
steadier than wall time on a shared machine) and the verdict, against the target of
5 s whole process. `--pypto DIR` adds PyPTO's two all_to_all_v system tests, copied
into DIR (they are not part of this repository).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TARGET_SECONDS = 5.0

# (label, file, P (a count or a range), the verdict it must give)
ROWS: tuple[tuple[str, str, int | str, str], ...] = (
    ("a2av, counts from input, clamped", "262_input_counts_all_to_all_v.py", 8, "proved"),
    ("  twin: no clamp", "263_input_counts_all_to_all_v_bug_no_clamp.py", 8, "bug"),
    (
        "  twin: count before wait",
        "264_input_counts_all_to_all_v_bug_count_before_wait.py",
        8,
        "bug",
    ),
    (
        "  twin: sender clamp only",
        "265_input_counts_all_to_all_v_bug_sender_clamp_only.py",
        8,
        "bug",
    ),
    (
        "  twin: clamp one row high",
        "275_input_counts_all_to_all_v_bug_clamp_off_by_one.py",
        8,
        "bug",
    ),
    (
        "  twin: only rank 6 over-clamps",
        "276_input_counts_all_to_all_v_bug_one_sender_at_7.py",
        7,
        "bug",
    ),
    ("a2av, clamped by branches", "273_input_counts_all_to_all_v_branch_clamp.py", 8, "proved"),
    (
        "  twin: branch off by one",
        "274_input_counts_all_to_all_v_bug_branch_clamp_off_by_one.py",
        8,
        "bug",
    ),
    ("PyPTO #2112's lowering, by hand", "278_pr2112_all_to_all_v_hand_rolled.py", 8, "proved"),
    (
        "  twin: count before barrier",
        "279_pr2112_all_to_all_v_bug_count_before_barrier.py",
        8,
        "bug",
    ),
    ("builtin a2av, one input count", "135_all_to_all_v_input_count.py", 8, "proved"),
    ("builtin a2av, P*P input counts", "268_all_to_all_v_input_counts.py", 8, "proved"),
    ("  twin: no lower clamp", "269_all_to_all_v_input_counts_bug_negative.py", 8, "bug"),
    (
        "a2av, range declared in the file",
        "270_input_counts_all_to_all_v_assumed_in_file.py",
        8,
        "proved",
    ),
    ("a2av, counts from the rank", "21_all_to_all_v.py", 8, "proved"),
    ("host a2av", "42_host_all_to_all_v.py", 8, "proved"),
    ("chip a2av", "126_chip_all_to_all_v.py", 8, "proved"),
    ("host a2av, separate flag", "131_host_all_to_all_v_separate_flag.py", 8, "proved"),
    (
        "shift, input credit as notify value and threshold",
        "271_shift_input_credit_threshold.py",
        4,
        "proved",
    ),
    (
        "  twin: threshold clamped from above only",
        "272_shift_input_credit_threshold_bug_receiver_clamp.py",
        4,
        "bug",
    ),
    (
        "  twin: threshold not clamped",
        "277_shift_input_credit_threshold_bug_unclamped.py",
        4,
        "bug",
    ),
    ("INDEX promotion: c * 256", "260_index_promotion_input_count.py", 8, "proved"),
    (
        "  twin: INT32 x INT32 wraps",
        "261_index_promotion_input_count_int32_wraps.py",
        8,
        "unknown",
    ),
    ("every P: shift of an input count", "281_input_count_shift.py", "all", "proved"),
    ("  twin: no upper clamp", "287_input_count_shift_bug_no_upper_clamp.py", "all", "bug"),
    ("every P: a2av, counts from input", "262_input_counts_all_to_all_v.py", "all", "proved"),
    ("every P: PyPTO #2112 by hand", "278_pr2112_all_to_all_v_hand_rolled.py", "all", "proved"),
    ("every P: a2av, counts from the rank", "21_all_to_all_v.py", "all", "proved"),
    ("MoE dispatch/combine, routed", "266_moe_dispatch_combine_routing.py", 8, "proved"),
    ("MoE dispatch/combine, routed", "266_moe_dispatch_combine_routing.py", "2..8", "proved"),
    (
        "  twin: lane one route small",
        "267_moe_dispatch_combine_routing_bug_small_lane.py",
        8,
        "bug",
    ),
)
PYPTO_ROWS = (
    ("PyPTO st: tensor all_to_all_v", "test_l3_tensor_all_to_all_v_intrinsic.py", 8, "proved"),
    ("PyPTO st: host all_to_all_v", "test_l3_host_tensor_all_to_all_v.py", 8, "proved"),
)
PYPTO_ARGS = ("--arg", "max_recv=4")  # their factories' capacity, as their tests pass it


def run_once(path: Path, ranks: int | str, extra: tuple[str, ...]) -> tuple[float, float, str]:
    """One whole process: wall seconds, CPU seconds, the verdict at P = `ranks`."""
    command = [sys.executable, "-m", "racecheck", "verify", str(path), "--ranks", str(ranks)]
    command += extra
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run([*command, "--format", "json"], capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    try:
        results = json.loads(done.stdout)["results"]
        verdicts = sorted({result["verdict"] for result in results})
        verdict = ",".join(verdicts)
    except (ValueError, KeyError):
        verdict = f"exit {done.returncode}"
    return wall, cpu, verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--pypto", type=Path, help="folder holding PyPTO's two system tests")
    args = parser.parse_args()
    rows: list[tuple[str, Path, int | str, str, tuple[str, ...]]] = [
        (label, EXAMPLES / name, ranks, want, ()) for label, name, ranks, want in ROWS
    ]
    if args.pypto is not None:
        rows += [
            (label, args.pypto / name, ranks, want, PYPTO_ARGS)
            for label, name, ranks, want in PYPTO_ROWS
        ]
    print(f"| case | P | verdict | wall s (median) | CPU s | under {TARGET_SECONDS:g} s |")
    print("|---|---|---|---|---|---|")
    failed = False
    for label, path, ranks, want, extra in rows:
        runs = [run_once(path, ranks, extra) for _ in range(args.repeats)]
        wall = statistics.median(run[0] for run in runs)
        cpu = statistics.median(run[1] for run in runs)
        verdict = runs[0][2]
        failed |= verdict != want
        mark = "yes" if wall < TARGET_SECONDS else "no"
        shown = verdict if verdict == want else f"{verdict} (expected {want})"
        print(f"| {label} | {ranks} | {shown} | {wall:.2f} | {cpu:.2f} | {mark} |")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
