"""Wording every renderer shares: rank-count sets, rank sets and output diffs.

Regions, signal cells and events are named by `racecheck.describe`, which the
analysis also uses, so a report says `data[1] bytes 0..256` the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from racecheck.findings import Finding, FindingCode, OutputDiff

_CODE_TITLES = {
    FindingCode.RACE_RAW: "data race: a read can miss the write it was meant to see",
    FindingCode.RACE_WAR: "data race: a write can clobber data before it is read",
    FindingCode.RACE_WAW: "data race: two writes in either order",
    FindingCode.DEADLOCK: "deadlock",
    FindingCode.OUT_OF_BOUNDS: "out-of-bounds access",
    FindingCode.STALE_READ: "stale read of never-written window bytes",
    FindingCode.WRONG_RESULT: "wrong result",
    FindingCode.SET_ADD_MIX: "signal cell both Set and atomically added",
}


def describe_code(code: FindingCode) -> str:
    """One line on what a finding code means (SARIF rule descriptions)."""
    return _CODE_TITLES[code]


def describe_rank_counts(counts: Iterable[int]) -> str:
    """`2..4, 6` for {2, 3, 4, 6}: runs of consecutive rank counts collapse."""
    runs: list[list[int]] = []
    for count in sorted(set(counts)):
        if runs and count == runs[-1][-1] + 1:
            runs[-1].append(count)
        else:
            runs.append([count])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}..{run[-1]}" for run in runs)


def describe_ranks(ranks: Sequence[int]) -> str:
    """`on rank 1`, `between rank 0 and rank 3`, `among ranks 0, 1 and 3`; '' for none."""
    if not ranks:
        return ""
    if len(ranks) == 1:
        return f"on rank {ranks[0]}"
    if len(ranks) == 2:
        return f"between rank {ranks[0]} and rank {ranks[1]}"
    listed = ", ".join(str(rank) for rank in ranks[:-1])
    return f"among ranks {listed} and {ranks[-1]}"


def output_label(finding: Finding) -> str:
    """How a finding's output diff is introduced: under its witness, if it has one."""
    return "output under this witness" if finding.witness else "output of the traced run"


def describe_diff(diff: OutputDiff) -> str:
    """`rank 2, y[0, 0:4] = [1.0, 0.0, ...], golden allreduce-sum [6.0, ...]`."""
    golden = f"golden {diff.model} " if diff.model else "golden "
    return (
        f"rank {diff.rank}, {diff.tensor}[{_diff_span(diff)}] = {_numbers(diff.got)}, "
        f"{golden}{_numbers(diff.golden)}"
    )


def _diff_span(diff: OutputDiff) -> str:
    if not diff.index:
        return ""
    *leading, last = diff.index
    span = f"{last}:{last + len(diff.got)}" if len(diff.got) > 1 else str(last)
    return ", ".join([*(str(i) for i in leading), span])


def _numbers(values: Sequence[float]) -> str:
    return "[" + ", ".join(_number(value) for value in values) + "]"


def _number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:.1f}"
    return f"{value:.6g}"
