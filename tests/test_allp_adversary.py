"""`--ranks all` against programs built to fool it: each variant of one correct gather
all-reduce hides a bug where the symbolic proof or its concrete cross-check could miss
it (a rank or a loop pass that exists only at larger P, a branch on P beyond the
concrete checks, a window that overflows past P=32). The answer must be the smallest
failing P with its concrete finding, or a proof whose assumptions name what it did not
check — never a silent "proved for every P".
"""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.allp.driver import PROVED_BUT_FAILS_HERE
from racecheck.findings import FindingKind, ProgramResult, Verdict

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "allp_gather_sum.py"
WAITS = """            for src in pl.range(nranks):
                pld.system.wait(signal, offsets=[src, 0], expected=1, cmp=pld.WaitCmp.Ge)
"""
SUM = """            for src in pl.range(1, nranks):
                row = pl.load(gather, [src, 0], [1, SIZE])
                acc = pl.add(acc, row)
"""
RETURN = "            return pl.store(acc, [0, 0], y)\n"
NOTIFY = "            for peer in pl.range(nranks):\n"
CELL = "signal, peer=peer, offsets=[my_rank, 0], value=1"


def _verify_all(tmp_path: Path, *edits: tuple[str, str]) -> list[ProgramResult]:
    source = FIXTURE.read_text()
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path = tmp_path / "variant.py"
    path.write_text(source)
    return list(racecheck.verify(str(path), ranks="all").results)


def _line(tmp_path: Path, marker: str) -> int:
    lines = (tmp_path / "variant.py").read_text().splitlines()
    return next(number for number, text in enumerate(lines, start=1) if marker in text)


def test_the_fixture_is_proved_for_every_p_from_its_lowest_p(tmp_path: Path) -> None:
    (result,) = _verify_all(tmp_path)
    assert result.every_p is not None and result.model == "allreduce-sum"
    assert not any("not run concretely" in text for text in result.every_p.assumptions)


@pytest.mark.parametrize(
    ("old", "new", "ranks", "wrong_rank"),
    [
        # rank 9 adds its own slice twice: rank 9 exists from P=10 on
        (
            RETURN,
            "            if my_rank == 9:\n                acc = pl.add(acc, local)\n" + RETURN,
            10,
            9,
        ),
        # rank 9 returns before its waits, with its own slice only
        (
            WAITS,
            "            if my_rank == 9:\n                return pl.store(local, [0, 0], y)\n"
            + WAITS,
            10,
            9,
        ),
        # the sum skips row 20: loop pass 20 exists from P=21 on, on every rank
        (
            SUM,
            SUM.replace(
                "                row =",
                "                if src == 20:\n"
                "                    continue\n                row =",
            ),
            21,
            0,
        ),
    ],
    ids=["rank-9-adds-twice", "rank-9-returns-early", "pass-20-skipped"],
)
def test_a_path_that_exists_only_at_larger_p_is_checked_concretely_at_its_smallest_p(
    tmp_path: Path, old: str, new: str, ranks: int, wrong_rank: int
) -> None:
    """No race, deadlock or overflow at any P, so the symbolic proof holds; the numbers are
    wrong only where the path runs, which the concrete check at P=2..8 never reaches: the
    smallest P of every branch side is checked too."""
    results = _verify_all(tmp_path, (old, new))
    failing = [result for result in results if result.verdict is Verdict.BUG]
    assert [result.ranks for result in failing] == [ranks]
    (finding,) = {f.kind: f for f in failing[0].findings}.values()
    assert finding.kind is FindingKind.WRONG_RESULT and wrong_rank in finding.ranks
    assert PROVED_BUT_FAILS_HERE in failing[0].notes
    assert all(result.verdict is Verdict.PROVED for result in results if result.ranks < ranks)


def test_a_harmless_branch_on_a_late_rank_keeps_the_proof_and_runs_that_rank(
    tmp_path: Path,
) -> None:
    (result,) = _verify_all(
        tmp_path, (RETURN, "            if my_rank == 9:\n    " + RETURN + RETURN)
    )
    assert result.every_p is not None and result.verdict is Verdict.PROVED
    checked = next(text for text in result.every_p.assumptions if "checked concretely" in text)
    assert checked.startswith("checked concretely at P=2,3,4,5,6,7,8,10 (")


def test_a_branch_taken_only_beyond_the_concrete_cap_is_named_in_the_assumptions(
    tmp_path: Path,
) -> None:
    """P=40 is past the largest P run concretely (32): races, deadlocks and bounds on that
    path are proved, its numbers (wrong here) are not, and the proof says so."""
    forty = "            if nranks == 40:  # @forty\n                acc = pl.add(acc, local)\n"
    (result,) = _verify_all(tmp_path, (RETURN, forty + RETURN))
    assert result.every_p is not None
    (unchecked,) = (text for text in result.every_p.assumptions if "not run concretely" in text)
    assert f"line {_line(tmp_path, '# @forty')}" in unchecked and "(e.g. at P=40)" in unchecked


def test_a_window_sized_for_32_ranks_overflows_at_33_beyond_the_concrete_cap(
    tmp_path: Path,
) -> None:
    """The bounds obligation, not the concrete representatives, finds P=33."""
    (result,) = _verify_all(tmp_path, ("    ROWS = nr\n", "    ROWS = 32\n"))
    assert (result.ranks, result.verdict) == (33, Verdict.BUG)
    kinds = {finding.kind for finding in result.findings}
    assert FindingKind.OUT_OF_BOUNDS in kinds
    assert any(32 in finding.ranks for finding in result.findings)
    assert "smallest failing P=33" in result.notes[0]


BEYOND_EIGHT = (
    # beyond 8 ranks every rank notifies cell 0 only: the waits on cells 1.. hang
    (
        NOTIFY,
        "            cell = my_rank\n            if nranks > 8:\n                cell = 0\n"
        + NOTIFY,
    ),
    (CELL, CELL.replace("[my_rank, 0]", "[cell, 0]")),
)
# ranks above 20 overwrite row 1 of rank 0 while rank 0 sums it
ABOVE_TWENTY = (
    (
        RETURN,
        "            if my_rank > 20:\n"
        "                pld.tile.remote_store(local, gather, peer=0, offsets=[1, 0])\n" + RETURN,
    ),
)

# probe: the notify value and the threshold reach 2^31 at P=16, a device scalar outside
# INT32 there (it wraps or is undefined on the device); the proof's integers did not wrap
WRAPS_AT_16 = (
    (CELL, CELL.replace("value=1", "value=nranks * 2**27")),
    (WAITS, WAITS.replace("expected=1", "expected=nranks * 2**27")),
)


@pytest.mark.parametrize(
    ("edits", "ranks", "kind"),
    [
        (BEYOND_EIGHT, 9, FindingKind.DEADLOCK),
        (ABOVE_TWENTY, 22, FindingKind.RACE),
    ],
    ids=["branch-on-p-gt-8", "rank-above-20-overwrites"],
)
def test_a_bug_that_starts_at_larger_p_is_refuted_at_its_smallest_p(
    tmp_path: Path, edits: tuple[tuple[str, str], ...], ranks: int, kind: FindingKind
) -> None:
    (result,) = _verify_all(tmp_path, *edits)
    assert (result.ranks, result.verdict) == (ranks, Verdict.BUG)
    assert kind in {finding.kind for finding in result.findings}
    assert f"smallest failing P={ranks}" in result.notes[0]


def test_a_signal_value_leaving_int32_at_16_is_not_proved_for_every_p(tmp_path: Path) -> None:
    results = _verify_all(tmp_path, *WRAPS_AT_16)
    line = _line(tmp_path, "value=nranks * 2**27")
    assert [(result.ranks, result.verdict) for result in results] == [
        (ranks, Verdict.PROVED) for ranks in range(2, 9)
    ]
    reason = f"at P=16, line {line} computes `(P * 134217728)` outside the INT32 range"
    assert results[0].notes[0].startswith(f"not proved for every P: {reason}")
    # `nranks * 2**27` is INDEX (a literal promotes it, docs/model.md §1): 2^31 exactly,
    # which the notify and the wait cast to INT32 as the cell is: -2^31, so every wait
    # passes at once and the reads race with the puts
    (at_16,) = racecheck.verify(str(tmp_path / "variant.py"), ranks="16").results
    assert at_16.verdict is Verdict.BUG
    assert {(f.kind, f.detail) for f in at_16.findings} == {(FindingKind.RACE, "read-after-write")}


EXTRA = "                extra = pl.load(gather, [0, 0], [1, SIZE])\n"
READ_EXTRA = "            acc = pl.add(acc, pl.sub(extra, extra))\n"
# `extra` is bound only in passes with src + nranks < 33: none at P >= 32
SOME_PASSES = SUM + "                if src + nranks < 33:\n    " + EXTRA
# `extra` is bound in every pass of a loop that runs zero times from P=40 on
EMPTY_FROM_40 = SUM + "            for k in pl.range(nranks, 40):\n" + EXTRA


@pytest.mark.parametrize(
    ("body", "reason", "crashes_at"),
    [
        (SOME_PASSES, "binds 'extra' on some paths through its body only", 33),
        (EMPTY_FROM_40, "may run zero times, leaving 'extra' unbound where it is read", 40),
    ],
    ids=["bound-on-some-passes", "loop-empty-from-40"],
)
def test_a_name_the_loop_may_leave_unbound_is_refused_where_it_is_read(
    tmp_path: Path, body: str, reason: str, crashes_at: int
) -> None:
    """The passes through a loop body share one frame, and one symbolic pass stands for
    at least one iteration: neither shows that at P=33 (or 40) `extra` is never bound."""
    results = _verify_all(tmp_path, (SUM, body + READ_EXTRA))
    result = results[0]
    assert result.every_p is None and reason in result.notes[0], result.notes
    (crashed,) = racecheck.verify(str(tmp_path / "variant.py"), ranks=str(crashes_at)).results
    assert crashed.verdict is Verdict.UNKNOWN and "UnboundLocalError" in crashed.message


@pytest.mark.parametrize("body", [SOME_PASSES, EMPTY_FROM_40], ids=["some-passes", "empty-loop"])
def test_a_name_the_loop_may_leave_unbound_but_nobody_reads_keeps_the_proof(
    tmp_path: Path, body: str
) -> None:
    (result,) = _verify_all(tmp_path, (SUM, body))
    assert result.every_p is not None and result.verdict is Verdict.PROVED, result.notes


def test_text_made_of_the_world_size_is_refused_outside_a_raise(tmp_path: Path) -> None:
    """`str(N)` is the same text on every path, so `== "12"` would be false at every P
    (the output is no all-reduce at P=12): the tracer refuses the text."""
    twelve = (
        '            if str(nranks) == "12":  # @text\n                acc = pl.add(acc, local)\n'
    )
    results = _verify_all(tmp_path, (RETURN, twelve + RETURN))
    line = _line(tmp_path, "# @text")
    reason = f"the symbolic value N is turned into text (line {line}) outside a raise statement"
    assert results[0].every_p is None and reason in results[0].notes[0], results[0].notes
    eleven, twelve_ranks = racecheck.verify(str(tmp_path / "variant.py"), ranks="11..12").results
    assert (eleven.model, twelve_ranks.model) == ("allreduce-sum", None)


def test_an_all_p_proof_names_a_model_only_if_every_concrete_p_matched_it(
    tmp_path: Path,
) -> None:
    """Even passes read the previous row again: at P=2 only row 1 is summed, the
    all-reduce; from P=3 on, row 1 counts twice and row 2 never, which is no model. No
    race at any P, so the proof holds, but it must not carry P=2's label."""
    parity = SUM.replace(
        "                row = pl.load(gather, [src, 0], [1, SIZE])\n",
        "                if src % 2 == 1:\n"
        "                    row = pl.load(gather, [src, 0], [1, SIZE])\n"
        "                else:\n"
        "                    row = pl.load(gather, [src - 1, 0], [1, SIZE])\n",
    )
    (answer,) = _verify_all(tmp_path, (SUM, parity))
    assert answer.every_p is not None and answer.verdict is Verdict.PROVED
    assert answer.model is None
    assert answer.every_p.assumptions[-1].endswith("matches no model")
    (two,) = racecheck.verify(str(tmp_path / "variant.py"), ranks="2").results
    assert two.model == "allreduce-sum"
