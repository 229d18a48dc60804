"""Regressions from red-teaming racecheck against PyPTO's runtime semantics (docs/model.md)."""

from pathlib import Path

import racecheck
from racecheck.findings import FindingKind, Verdict

FIXTURES = Path(__file__).parent / "fixtures"


def _line(path: Path, tag: str) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if tag in text)


def test_a_host_ring_chunk_of_partial_lines_is_said_with_its_line() -> None:
    path = FIXTURES / "host_ring_lines.py"
    report = racecheck.verify(str(path), ranks="2..4")
    ring = _line(path, "# @ring")
    said = {
        result.ranks: [note for note in result.notes if "unflushed" in note]
        for result in report.results
    }
    assert [result.verdict for result in report.results] == [Verdict.PROVED] * 3
    assert said[3] == []  # 16 elements: whole lines
    for ranks, chunk in ((2, 24), (4, 12)):
        (note,) = said[ranks]
        assert note.startswith(
            f"line {ring}: pld.tensor.allreduce(mode='ring') moves chunks of {chunk} elements"
        )


def test_host_tensor_bytes_another_rank_wrote_prove_nothing() -> None:
    """A signal between two ranks' dispatches does not carry host tensor data: each
    dispatch works on copies uploaded before it runs (no false proof). Reading its own
    row proves nothing either: every rank copies all of `h` back after its dispatch."""
    path = FIXTURES / "host_tensor_channel.py"
    report = racecheck.verify(str(path), ranks="2..3")
    write, read = _line(path, "# @write"), _line(path, "# @read")
    dispatch = _line(path, "# @dispatch")
    verdicts = {(result.program, result.ranks): result.verdict for result in report.results}
    assert set(verdicts.values()) == {Verdict.UNKNOWN}
    for result in report.results:
        if result.program == "build[own_row=False]":
            reader, writer = (0, result.ranks - 1)  # rank 0 reads its left neighbour's row
            assert result.message.startswith(
                f"rank {reader} reads bytes of host tensor h (line {read})"
                f" that rank {writer} writes (line {write})"
            )
        else:
            assert result.message.startswith(
                f"rank 0 writes bytes of host tensor h (line {write})"
                f" that rank 1 copies back (line {dispatch})"
            )


def test_host_tensor_bytes_two_ranks_write_prove_nothing() -> None:
    """Two ranks' stores into the same host tensor bytes, ordered by a signal: each
    dispatch writes its copy back after it runs, so the signal does not fix which store
    the tensor keeps (no false proof); into distinct rows neither, as each copy-back
    writes the whole unsliced tensor."""
    path = FIXTURES / "host_tensor_overwrite.py"
    report = racecheck.verify(str(path), ranks="2..3")
    first, second = _line(path, "# @first"), _line(path, "# @second")
    dispatch = _line(path, "# @dispatch")
    verdicts = {(result.program, result.ranks): result.verdict for result in report.results}
    assert set(verdicts.values()) == {Verdict.UNKNOWN}
    for result in report.results:
        same = result.program == "build[same_row=True]"
        assert result.message.startswith(
            f"rank 0 writes bytes of host tensor h (line {first})"
            + (
                f" that rank 1 writes (line {second})"
                if same
                else f" that rank 1 copies back (line {dispatch})"
            )
        )


def test_an_unsliced_out_argument_is_copied_back_whole() -> None:
    """Every rank stores its own row of an unsliced `Out` host tensor: each dispatch
    copies the whole tensor back, undoing the other ranks' rows in some order; this was
    proved. Passing each rank its row `y[r]` proves."""
    path = FIXTURES / "host_tensor_whole_out.py"
    report = racecheck.verify(str(path), ranks="2..3")
    store, dispatch = _line(path, "# @store"), _line(path, "# @dispatch")
    verdicts = {(result.program, result.ranks): result.verdict for result in report.results}
    assert verdicts == {
        ("build[whole=True]", 2): Verdict.UNKNOWN,
        ("build[whole=True]", 3): Verdict.UNKNOWN,
        ("build[whole=False]", 2): Verdict.PROVED,
        ("build[whole=False]", 3): Verdict.PROVED,
    }
    for result in report.results:
        if result.verdict is Verdict.UNKNOWN:
            assert result.message.startswith(
                f"rank 0 writes bytes of host tensor y (line {store})"
                f" that rank 1 copies back (line {dispatch})"
            )


def test_a_deadlock_before_any_event_is_confirmed() -> None:
    """Ranks that block on their first event: a deadlock with an empty witness, confirmed
    by replaying it (it was `unknown`, "did not replay")."""
    path = FIXTURES / "wait_before_notify.py"
    report = racecheck.verify(str(path), ranks="1..3")
    verdicts = {(result.program, result.ranks): result.verdict for result in report.results}
    assert verdicts == {
        **{("build[wait_first=True]", ranks): Verdict.BUG for ranks in (1, 2, 3)},
        **{("build[wait_first=False]", ranks): Verdict.PROVED for ranks in (1, 2, 3)},
    }
    early = _line(path, "# @early")
    for result in report.results:
        if result.verdict is Verdict.BUG:
            (deadlock,) = result.findings
            assert deadlock.kind is FindingKind.DEADLOCK and deadlock.confirmed
            assert [location.line for location in deadlock.locations] == [early]


def test_a_result_a_kernel_returns_undeclared_is_the_tensor_it_names() -> None:
    """`fetch` returns `inbox`, declared a plain input: its caller gets `inbox` itself
    (PyPTO reads an unannotated result from the return statement), so under the rules
    before #1683 the #1670 hazard is found: `unpack` loads it before the get writes it."""
    path = FIXTURES / "undeclared_result_held.py"
    (current,) = racecheck.verify(str(path), ranks=[2]).results
    assert (current.verdict, current.model) == (Verdict.PROVED, "shift+1")
    (before,) = racecheck.verify(str(path), ranks=[2], runtime_order="pre-1683").results
    assert before.verdict is Verdict.BUG
    races = [finding for finding in before.findings if finding.kind is FindingKind.RACE]
    assert races and all(race.detail == "read-after-write" for race in races)
    lines = {tuple(location.line for location in race.locations) for race in races}
    assert (_line(path, "# @load"), _line(path, "# @get")) in lines


def test_dispatches_of_two_domains_writing_one_row_prove_nothing() -> None:
    """PyPTO orders a rank's dispatches by the tokens of the domains they share and by
    tag edges only; two writers of one row in different domains were proved in program
    order."""
    path = FIXTURES / "two_domains_one_output.py"
    report = racecheck.verify(str(path), ranks=[3])
    results = {result.program: result for result in report.results}
    assert results["build[shared=False]"].verdict is Verdict.PROVED
    shared = results["build[shared=True]"]  # the two writes race, in either order
    assert shared.verdict is Verdict.BUG
    (race,) = shared.findings
    assert race.kind is FindingKind.RACE and race.detail == "write-after-write" and race.confirmed
    group_a, group_b = _line(path, "# @group_a"), _line(path, "# @group_b")
    assert set(race.threads) == {
        f"task swap (dispatch 1, line {group_a})",
        f"task swap (dispatch 2, line {group_b})",
    }
