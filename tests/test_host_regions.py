"""Inline `with` regions outlined from the source (racecheck.dsl.host_regions)."""

from __future__ import annotations

from pathlib import Path

import racecheck

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
INLINE = EXAMPLES / "231_ep_dispatch_combine_inline_bug_count.py"
HEADER = 'with pl.spmd(LANES, name_hint="dispatch_push") as push:'


def test_a_with_header_binding_its_task_on_a_continuation_line_binds_it(tmp_path: Path) -> None:
    """`as tid` on the header's second line (pypto-lib's long pl.spmd headers) runs
    before the body is skipped: a later `deps=[tid]` finds it."""
    source = INLINE.read_text(encoding="utf-8")
    assert HEADER in source
    wrapped = tmp_path / "wrapped.py"
    wrapped.write_text(
        source.replace(
            HEADER, 'with pl.spmd(LANES,\n                 name_hint="dispatch_push") as push:'
        ),
        encoding="utf-8",
    )
    (plain,) = racecheck.verify(str(INLINE), ranks=[2]).results
    report = racecheck.verify(str(wrapped), ranks=[2])
    (result,) = report.results
    assert not report.errors and result.verdict is plain.verdict
    assert [finding.kind for finding in result.findings] == [
        finding.kind for finding in plain.findings
    ]


TUPLE = EXAMPLES / "350_host_dispatch_tuple_results.py"


def test_a_dispatch_declaring_more_results_than_it_writes_is_refused(tmp_path: Path) -> None:
    """The host gets a dispatch's written tensors, one per declared result: three
    declared results of a dispatch that writes two cannot be given."""
    source = TUPLE.read_text(encoding="utf-8")
    two = (
        "        ) -> tuple[pl.Tensor[[1, SIZE], pl.FP32], pl.Tensor[[1, SIZE], pl.FP32]]:\n"
        "            total, gap = self.split_step"
    )
    assert two in source
    three = two.replace("pl.FP32]]:", "pl.FP32], pl.Tensor[[1, SIZE], pl.FP32]]:")
    bad = tmp_path / "three_results.py"
    bad.write_text(source.replace(two, three), encoding="utf-8")
    (result,) = racecheck.verify(str(bad), ranks=[2]).results
    assert result.verdict is racecheck.Verdict.UNKNOWN
    assert "the host uses what dispatch split_orch returns" in result.message
