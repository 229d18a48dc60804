"""This tree against a baseline commit, side by side in one run: every hard case of
bench/bench_verify.py, each run alternately by both so that a change of the machine's
load hits both alike (machines differ up to 3x; only the ratio carries over).

    python bench/bench_compare.py --baseline ce656ac          # every hard case, 3 runs each
    python bench/bench_compare.py --baseline main~5 --only mesh --repeats 5

The baseline is checked out with `git worktree add` in a temporary folder and imported
in place of the installed racecheck (PYTHONPATH); both run this tree's example files.
A row's ratio is this tree's median wall time over the baseline's; a row over
`--limit` (default 1.5, the issues' bound) is marked SLOWER and the exit status is 1.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench_verify import EXAMPLES, HARD_CASES, ROOT, HardCase, run_once


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    seconds: float  # median wall time of the whole process
    peak_mib: float
    verdict: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Compared:
    case: HardCase
    baseline: Side
    current: Side

    @property
    def ratio(self) -> float:
        return self.current.seconds / self.baseline.seconds


def compare(case: HardCase, baseline: Path, repeats: int) -> Compared:
    runs: dict[Path | None, list[tuple[float, float, str, float, int]]] = {baseline: [], None: []}
    for _ in range(repeats):
        for tree in runs:
            path = EXAMPLES / case.file
            runs[tree].append(
                run_once(path, case.ranks, case.engine, case.args, case.repeat, tree=tree)
            )
    sides = {
        tree: Side(
            seconds=statistics.median(run[0] for run in measured),
            peak_mib=max(run[1] for run in measured),
            verdict=measured[-1][2],
        )
        for tree, measured in runs.items()
    }
    return Compared(case=case, baseline=sides[baseline], current=sides[None])


def checkout(commit: str, folder: Path) -> Path:
    """A detached worktree of `commit` under `folder` (removed by `release`)."""
    tree = folder / "baseline"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), commit],
        check=True,
    )
    return tree


def release(tree: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
    )


def row_text(row: Compared, limit: float) -> str:
    mark = "SLOWER" if row.ratio > limit else "ok"
    verdicts = row.current.verdict
    if row.baseline.verdict != row.current.verdict:
        verdicts = f"{row.baseline.verdict} -> {row.current.verdict}"
    return (
        f"{row.case.label[:48]:48} P={row.case.ranks:<4}"
        f" {row.baseline.seconds:7.2f} s {row.current.seconds:7.2f} s  x{row.ratio:5.2f}"
        f"  {row.current.peak_mib:7.1f} MiB  {mark:6} {verdicts}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare against")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=float, default=1.5, help="the slowest ratio allowed")
    parser.add_argument("--only", default="", help="only hard cases whose label has this")
    options = parser.parse_args()
    cases = [case for case in HARD_CASES if options.only in case.label]
    with tempfile.TemporaryDirectory() as folder:
        tree = checkout(options.baseline, Path(folder))
        try:
            print(f"{'row':48} {'P':6} {'baseline':>9} {'this tree':>9}  ratio", flush=True)
            rows = []
            for case in cases:
                rows.append(compare(case, tree, options.repeats))
                print(row_text(rows[-1], options.limit), flush=True)
        finally:
            release(tree)
    ratios = [row.ratio for row in rows]
    if ratios:
        print(f"median ratio x{statistics.median(ratios):.2f}, worst x{max(ratios):.2f}")
    return 1 if any(ratio > options.limit for ratio in ratios) else 0


if __name__ == "__main__":
    sys.exit(main())
