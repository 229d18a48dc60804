"""`--ranks all`: one proof for every P, the smallest failing P, or a fallback with its reason.

The last tests hold the all-P prover to the concrete pipeline: every program it proves
(the examples and generated programs) is checked at every P up to 16 (32 for the
examples) and must be proved or skipped there too — a wrong all-P proof is the worst
bug this feature can have.
"""

from __future__ import annotations

import ast
import functools
import io
import itertools
import json
import time
from pathlib import Path

import pytest
from allp_instances import concrete_events, symbolic_events
from dslgen import protocols, render
from hypothesis import HealthCheck, given, settings
from symgen import Collective

import racecheck
from racecheck.allp import Answer, prove_every_p
from racecheck.allp.driver import PROVED_BUT_FAILS_HERE
from racecheck.allp.obligations import Obligation
from racecheck.allp.paths import trace_protocol
from racecheck.allp.solver import satisfiable
from racecheck.cli import VerifyCommand, main, parse_command
from racecheck.errors import ProgramRejected, UsageError
from racecheck.findings import FileVerdict, FindingKind, Verdict
from racecheck.load import ProgramSpec, discover, load_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MESH = EXAMPLES / "08_allreduce_mesh.py"
MESH_NO_BARRIER = EXAMPLES / "09_allreduce_mesh_bug_no_barrier.py"
SIXTEEN_PEERS = EXAMPLES / "80_allreduce_gather_bug_sixteen_peers.py"
RING = EXAMPLES / "14_allreduce_ring.py"
TWO_PHASE = EXAMPLES / "11_allreduce_two_phase.py"
COUNTER_BARRIER = EXAMPLES / "04_shift_counter_barrier.py"
THRESHOLD_BUG = EXAMPLES / "18_allgather_bug_threshold.py"
ALLP = Path(racecheck.__file__).parent / "allp"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _line_of(path: Path, marker: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(f"no {marker} in {path}")


# --- options -------------------------------------------------------------------------


def _options(*flags: str):
    command = parse_command(["verify", "f.py", *flags], io.StringIO())
    assert isinstance(command, VerifyCommand)
    return command.options


def test_ranks_all_proves_from_two_and_falls_back_to_two_to_eight() -> None:
    options = _options("--ranks", "all")
    assert options.every_p is not None
    assert (options.every_p.low, options.every_p.fallback) == (2, tuple(range(2, 9)))


def test_an_open_range_starts_at_its_low_and_the_fallback_is_settable() -> None:
    options = _options("--ranks", "4..", "--fallback", "2..16")
    assert options.every_p is not None
    assert (options.every_p.low, options.every_p.fallback) == (4, tuple(range(4, 17)))
    assert _options("--ranks", "2..8").every_p is None


def test_fallback_without_ranks_all_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="fallback goes with ranks all"):
        _options("--ranks", "2..8", "--fallback", "2..4")


# --- the three answers -----------------------------------------------------------------


def test_the_mesh_allreduce_is_proved_for_every_p_with_its_assumptions() -> None:
    report = racecheck.verify(str(MESH), ranks="all")
    (result,) = report.results
    assert result.verdict is Verdict.PROVED
    assert result.every_p is not None and result.every_p.low == 2
    assert result.model == "allreduce-sum"
    assumptions = "\n".join(result.every_p.assumptions)
    for obligation in Obligation:
        assert obligation.value in assumptions
    assert "execution model" in assumptions
    assert report.exit_code == 0


HEADLINE = "races, deadlocks, bounds: every P >= 2; outputs: checked at P = 2..8"


def test_an_all_p_proof_reads_as_such_in_every_format(tmp_path: Path) -> None:
    """The headline claims for every P only what was proved for every P: the outputs
    were compared with the golden model at the P checked concretely, and it says so."""
    out = io.StringIO()
    page = tmp_path / "report.html"
    command = ["verify", str(MESH), "--ranks", "all"]
    assert main([*command, "--html", str(page)], stdout=out, stderr=io.StringIO()) == 0
    text = out.getvalue()
    assert "P>=2  proved" in text and HEADLINE in text and "proved for every" not in text
    assert "assumes: P >= 2" in text
    assert HEADLINE.replace(">", "&gt;") in page.read_text()
    out = io.StringIO()
    main([*command, "--format", "json"], stdout=out)
    (result,) = json.loads(out.getvalue())["results"]
    assert (result["ranks"], result["verdict"], result["every_p"]["low"]) == ("all", "proved", 2)
    assert result["every_p"]["outputs_checked_at"] == list(range(2, 9))
    out = io.StringIO()
    main([*command, "--format", "sarif"], stdout=out)
    (run,) = json.loads(out.getvalue())["runs"]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    (proof,) = [note for note in notes if note.get("properties", {}).get("ranks") == "all"]
    assert f"{HEADLINE}, assuming P >= 2;" in proof["message"]["text"]


def test_the_mesh_without_barrier_fails_first_at_two_with_a_replayed_witness() -> None:
    report = racecheck.verify(str(MESH_NO_BARRIER), ranks="all")
    (result,) = report.results
    assert (result.ranks, result.verdict, result.every_p) == (2, Verdict.BUG, None)
    assert result.notes[0].startswith("smallest failing P=2:")
    race = next(finding for finding in result.findings if finding.kind is FindingKind.RACE)
    lines = {location.line for location in race.locations}
    assert lines == {_line_of(MESH_NO_BARRIER, "@stage"), _line_of(MESH_NO_BARRIER, "@fetch")}
    assert race.detail == "read-after-write"
    assert race.confirmed and race.diff is not None


def test_a_buffer_for_sixteen_peers_fails_first_at_seventeen_without_a_sweep() -> None:
    report = racecheck.verify(str(SIXTEEN_PEERS), ranks="all")
    (result,) = report.results
    assert (result.ranks, result.verdict) == (17, Verdict.BUG)
    assert result.notes[0].startswith("smallest failing P=17:")
    push = _line_of(SIXTEEN_PEERS, "@push")
    assert any(
        finding.kind is FindingKind.OUT_OF_BOUNDS
        and {location.line for location in finding.locations} == {push}
        and finding.ranks == (16,)
        for finding in result.findings
    )


def test_the_smallest_failing_p_is_the_first_that_fails() -> None:
    report = racecheck.verify(str(THRESHOLD_BUG), ranks="2..")
    (result,) = report.results
    assert (result.ranks, result.verdict) == (3, Verdict.BUG)
    assert racecheck.verify(str(THRESHOLD_BUG), ranks=[2]).results[0].verdict is Verdict.PROVED


def test_the_ring_falls_back_to_the_range_and_says_why() -> None:
    report = racecheck.verify(str(RING), ranks="all", fallback="2..3")
    assert [result.ranks for result in report.results] == [2, 3]
    for result in report.results:
        assert result.verdict is Verdict.PROVED and result.every_p is None
        assert result.notes[0].startswith("not proved for every P: ")
        assert "checked P=2..3 instead" in result.notes[0]
        # the reason, in the user's terms: the ring's neighbour index wraps modulo N
        assert (
            "(((rank - i3) - 1) + (2 * N)) % N may have a quotient outside -1..1"
            in (result.notes[0])
        )


def test_a_counter_model_the_concrete_check_does_not_confirm_is_a_fallback() -> None:
    """The counter barrier's cells take several notifies: outside the unique-writer
    argument, so z3 finds a counter-model that the concrete check refutes. (The proof's
    budget is z3 work, so no loaded machine runs out of it: the default stands.)"""
    report = racecheck.verify(str(COUNTER_BARRIER), ranks="all", fallback="2..3")
    # every P at which an obligation fails is checked, from the smallest, up to 12 of them
    worlds = [result.ranks for result in report.results]
    assert worlds[:2] == [2, 3] and worlds == sorted(set(worlds)) and len(worlds) <= 14
    assert {result.verdict for result in report.results} == {Verdict.PROVED}
    assert all("find no bug" in result.notes[0] for result in report.results)


def test_pl_parallel_iterations_are_concurrent_in_the_all_p_proof() -> None:
    """Iterations of a kernel's pl.parallel loop may run concurrently: parking in row p
    is proved for every P; parking in row p % 8 is never proved for every P (the
    co-simulation refuses the loop from P = 9, where the pl.parallel obligation fails)."""
    (result,) = racecheck.verify(str(EXAMPLES / "280_shift_parallel_park.py"), ranks="all").results
    assert result.every_p is not None and result.model == "shift+1"
    report = racecheck.verify(str(FIXTURES / "allp_parallel_wrapped_row.py"), ranks="all")
    assert [result.ranks for result in report.results] == list(range(2, 10))
    assert report.results[-1].verdict is Verdict.UNKNOWN and report.verdict is FileVerdict.UNKNOWN
    assert "pl.parallel" in report.results[-1].message
    note = report.results[0].notes[0]
    assert note.startswith(f"not proved for every P: no proof that {Obligation.PARALLEL.value}")
    assert "counter-model at P=9" in note and "the concrete check at P=9 is unknown" in note


@pytest.mark.parametrize(
    ("name", "first"),
    [("282_allgather_wrapped_output_row", 9), ("284_allgather_recopy_first_row", 10)],
)
def test_the_outputs_are_checked_where_a_modulus_wraps_or_one_template_overlaps_itself(
    name: str, first: int
) -> None:
    """`src % 8` first wraps at P = 9; the recopy loop's store first writes one row twice
    at P = 10 (its template first occurs at P = 9): the concrete P come from these
    situations, so the wrong output there is found, never proved for every P."""
    report = racecheck.verify(str(EXAMPLES / f"{name}.py"), ranks="all", expect="allgather")
    failing = [result for result in report.results if result.verdict is Verdict.BUG]
    assert failing and failing[0].ranks == first
    assert {finding.kind for finding in failing[0].findings} == {FindingKind.WRONG_RESULT}
    assert PROVED_BUT_FAILS_HERE in failing[0].notes
    assert all(result.every_p is None for result in report.results)


def test_the_smallest_failing_p_is_the_smallest_over_every_failed_obligation() -> None:
    """The single-writer argument for the arrival cell fails from P = 3, where the
    counting argument holds; counting fails from P = 9 only, where the deadlock is."""
    path = EXAMPLES / "283_allgather_counted_arrivals_bug_eight_arrive.py"
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert (result.ranks, result.verdict) == (9, Verdict.BUG)
    assert result.notes[0].startswith("smallest failing P=9: no proof that each waited signal")
    deadlock = next(f for f in result.findings if f.kind is FindingKind.DEADLOCK)
    assert {location.line for location in deadlock.locations} == {_line_of(path, "@arrivals")}


def test_arrivals_counted_on_one_cell_are_proved_and_set_arrivals_are_refuted() -> None:
    """One +1 from every other rank into one cell, waited for N - 1: proved by counting.
    Its twin Sets the cell instead: the count cannot be proved and P=3 hangs."""
    counted = EXAMPLES / "81_allgather_counted_arrivals.py"
    (result,) = racecheck.verify(str(counted), ranks="all").results
    assert result.every_p is not None and result.model == "allgather"
    lost = EXAMPLES / "24_allgather_bug_set_shared_cell.py"
    (result,) = racecheck.verify(str(lost), ranks="all").results
    assert (result.ranks, result.verdict) == (3, Verdict.BUG)
    assert {finding.kind for finding in result.findings} == {FindingKind.DEADLOCK}


def test_a_builtin_barrier_is_proved_for_every_p() -> None:
    (result,) = racecheck.verify(str(EXAMPLES / "01_shift_builtin_barrier.py"), ranks="all").results
    assert result.every_p is not None and result.model == "shift+1"


def test_the_two_phase_allreduce_and_reduce_scatter_are_proved_for_every_p() -> None:
    """SIZE // nr splits into one kernel per accepted quotient; each kernel's five
    `if peer != my_rank` loops are explored pass by pass, not as 2**5 paths."""
    for path, model in ((TWO_PHASE, "allreduce-sum"), (EXAMPLES / "19_reduce_scatter.py", None)):
        (result,) = racecheck.verify(str(path), ranks="all").results
        assert result.every_p is not None and result.verdict is Verdict.PROVED, result.notes
        assert model is None or result.model == model
    (spec,) = discover(load_file(str(TWO_PHASE)))
    assert spec.origin is not None
    protocol = trace_protocol(spec.origin, 2, satisfiable, time.monotonic() + 60)
    assert protocol.paths == 17  # 9 accepted rank-count cases, 8 rejected ones


def test_the_two_phase_twin_reusing_its_barrier_row_fails_first_at_two() -> None:
    path = EXAMPLES / "12_allreduce_two_phase_bug_reused_row.py"
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert (result.ranks, result.verdict) == (2, Verdict.BUG)
    assert result.notes[0].startswith("smallest failing P=2: ")
    race = next(f for f in result.findings if f.kind is FindingKind.RACE)
    lines = {location.line for location in race.locations}
    assert lines == {_line_of(path, "@gather"), _line_of(path, "@publish")}


def test_two_stamps_that_wrap_the_ack_cell_fail_first_at_three_without_a_sweep() -> None:
    """By code position the broadcast's waits are well ordered (by rank first they are
    not, which once gave a spurious P=2 counter-model and a sweep)."""
    path = EXAMPLES / "64_broadcast_ack_bug_stamp_overflow.py"
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert (result.ranks, result.verdict) == (3, Verdict.BUG)
    assert result.notes[0].startswith("smallest failing P=3: ")
    assert {finding.kind for finding in result.findings} == {FindingKind.DEADLOCK}


def test_a_barrier_that_waits_before_it_notifies_is_a_circular_wait_at_two(
    tmp_path: Path,
) -> None:
    """Barrier B of the two-phase all-reduce with its wait loop first: every rank waits
    for a notify each peer only sends after its own wait. Neither order of the waits
    (by code position, by rank) discharges it, and P=2 deadlocks."""
    source = TWO_PHASE.read_text()
    notify = """            for peer in pl.range(nranks):
                if peer != my_rank:
                    pld.system.notify(
                        signal, peer=peer, offsets=[1, my_rank], value=1, op=pld.NotifyOp.AtomicAdd
                    )
"""
    wait = """            for src in pl.range(nranks):
                if src != my_rank:
                    pld.system.wait(signal, offsets=[1, src], expected=1, cmp=pld.WaitCmp.Ge)
"""
    assert notify + wait in source
    path = tmp_path / "two_phase_wait_first.py"
    path.write_text(source.replace(notify + wait, wait + notify))
    (spec,) = discover(load_file(str(path)))
    outcome = prove_every_p(spec, 2)
    assert (outcome.answer, outcome.smallest) == (Answer.REFUTED, 2)
    assert Obligation.NO_CIRCULAR_WAIT.value in outcome.reason
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert (result.ranks, result.verdict) == (2, Verdict.BUG)
    assert {finding.kind for finding in result.findings} == {FindingKind.DEADLOCK}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            # the index of the pass that bound `row`, read on another path's pass
            """tile = pl.load(x, [0, 0], [1, 4])
        for peer in pl.range(nranks):
            if peer == 0:
                row = peer + 1
            else:
                pl.store(tile, [row, 0], data)""",
            "uses a loop index outside its iteration",
        ),
        (
            # the tile left behind has another shape on each path
            """for peer in pl.range(nranks):
            if peer == me:
                tile = pl.load(x, [0, 0], [1, 2])
            else:
                tile = pl.load(x, [0, 0], [1, 4])
        pl.store(tile, [1, 0], data)""",
            "the loop carries 'tile': its value after the loop depends on the path",
        ),
    ],
)
def test_one_path_through_a_loop_body_never_sees_what_another_left(
    tmp_path: Path, body: str, reason: str
) -> None:
    """The paths through a kernel loop's body run one after another in one frame: a
    value one leaves is refused where another would use it or where it outlives the loop."""
    source = (FIXTURES / "allp_branch_escape.py").read_text()
    escape = """for peer in pl.range(nranks):
            row = 1 if peer != me else 2
        tile = pl.load(x, [0, 0], [1, 4])
        pl.store(tile, [row, 0], data)"""
    assert escape in source
    path = tmp_path / "passes.py"
    path.write_text(source.replace(escape, body))
    (result,) = racecheck.verify(str(path), ranks="all", fallback="3").results
    assert result.every_p is None and reason in result.notes[0], result.notes


def test_a_value_of_the_index_bound_on_the_second_path_only_is_accepted(tmp_path: Path) -> None:
    """The first pass binds nothing, the second binds `row` from its own index: no pass
    can read another's value, and the code after the loop cannot use it."""
    source = (FIXTURES / "allp_branch_escape.py").read_text()
    escape = """for peer in pl.range(nranks):
            row = 1 if peer != me else 2
        tile = pl.load(x, [0, 0], [1, 4])
        pl.store(tile, [row, 0], data)"""
    body = """tile = pl.load(x, [0, 0], [1, 4])
        for peer in pl.range(nranks):
            if peer == me:
                pass
            else:
                row = peer - peer + 1
                pl.store(tile, [row, 0], data)"""
    path = tmp_path / "second_path.py"
    path.write_text(source.replace(escape, body))
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert result.every_p is not None and result.verdict is Verdict.PROVED, result.notes


def test_a_loop_carried_scalar_is_never_proved_for_every_p() -> None:
    """One symbolic iteration would count to 1 whatever N is: the tracer refuses."""
    report = racecheck.verify(str(FIXTURES / "allp_loop_carry.py"), ranks="all", fallback="4,5")
    assert [result.verdict for result in report.results] == [Verdict.PROVED, Verdict.BUG]
    assert "the loop carries 'count'" in report.results[0].notes[0]


def test_a_value_chosen_under_a_branch_on_the_loop_index_never_leaves_the_loop() -> None:
    path = FIXTURES / "allp_branch_escape.py"
    (result,) = racecheck.verify(str(path), ranks="all", fallback="3").results
    assert result.every_p is None and "the loop carries 'row'" in result.notes[0]
    assert result.verdict is Verdict.BUG


@pytest.mark.parametrize(
    "iteration",
    [
        "for count, peer in enumerate(pl.range(nranks)):",
        "for peer in list(pl.range(nranks)):",
        "for peer in [p for p in pl.range(nranks)]:",
    ],
)
def test_a_pl_range_consumed_by_anything_but_a_for_statement_is_refused(
    tmp_path: Path, iteration: str
) -> None:
    """enumerate() or list() would see the one symbolic iteration as one iteration."""
    source = (FIXTURES / "allp_loop_carry.py").read_text()
    source = source.replace("for _peer in pl.range(nranks):", iteration)
    path = tmp_path / "wrapped.py"
    path.write_text(source)
    (result,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    assert result.every_p is None
    assert "not the iterable of a for statement" in result.notes[0]


def test_a_while_loop_on_the_rank_count_ends_in_a_fallback() -> None:
    report = racecheck.verify(str(FIXTURES / "allp_while_loop.py"), ranks="all", fallback="2")
    (result,) = report.results
    assert result.verdict is Verdict.PROVED and result.every_p is None
    assert "symbolic branches on one path" in result.notes[0]


def test_repeat_is_outside_the_fragment() -> None:
    report = racecheck.verify(str(MESH), ranks="all", fallback="2", repeat=2)
    (result,) = report.results
    assert result.every_p is None and "--repeat" in result.notes[0]


def test_z3_is_imported_only_inside_the_solver_module_and_only_on_use() -> None:
    for path in ALLP.glob("*.py"):
        tree = ast.parse(path.read_text())
        top_level = {
            alias.name
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        } | {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
        assert "z3" not in top_level, path
        anywhere = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
            if alias.name == "z3"
        ]
        assert not anywhere or path.name == "solver.py", path


# --- agreement with the concrete pipeline ---------------------------------------------


# Where the concrete checks sample P up to 32 (every P to 13, then the powers of two and
# their neighbours, primes among them): a proof that fails at some P fails at one of these
# for every program the corpus and the adversary tests hold; all of 2..32 cost over 3 min
# of CI (tests/README.md).
RANK_SAMPLE = "2..13,15,16,17,23,31,32"
WINDOW_READ_SAMPLE = "2..7,9,12"


@functools.cache
def _proved_examples() -> tuple[tuple[Path, str], ...]:
    """Each example program proved for every P: found once, read by both slow tests."""
    proved = []
    for path in sorted(EXAMPLES.glob("*.py")):
        for spec in discover(load_file(str(path))):
            if prove_every_p(spec, 2).answer is Answer.PROVED:
                proved.append((path, spec.name))
    return tuple(proved)


@pytest.mark.slow
def test_every_example_proved_for_every_p_is_proved_at_sampled_p_up_to_32() -> None:
    """No race, deadlock or out-of-bounds access at any P; a bug there can only be what
    the proof leaves per P (example 32 loses its tail where P does not divide SIZE)."""
    proved = _proved_examples()
    names = {path.name for path, _ in proved}
    assert {
        *("08_allreduce_mesh.py", "07_broadcast.py", "17_allgather.py"),
        *("11_allreduce_two_phase.py", "19_reduce_scatter.py"),
    } <= names
    for path, program in proved:
        ranks = WINDOW_READ_SAMPLE if _reads_windows(path, program) else RANK_SAMPLE
        report = racecheck.verify(str(path), ranks=ranks, programs=[program])
        for result in report.results:
            kinds = {finding.kind for finding in result.findings}
            assert not kinds & PROVED_KINDS, (path, result.ranks, kinds)
            decided = result.verdict in (Verdict.PROVED, Verdict.SKIPPED)
            assert decided or (kinds <= PER_P_KINDS and not _claims_every_p(path, program)), (
                path,
                result.ranks,
                result.verdict,
            )


def _reads_windows(path: Path, program: str) -> bool:
    """Whether its proof reads counts out of windows (262, 278): their concrete runs grow
    with P squared, so the suite samples them to P=12 (tests/README.md: CI time)."""
    (spec,) = discover(load_file(str(path)), programs=(program,))
    assert spec.origin is not None
    return bool(trace_protocol(spec.origin, 2, satisfiable, time.monotonic() + 60).window_reads)


@functools.cache
def _claims_every_p(path: Path, program: str) -> bool:
    """Whether `--ranks all` says the program is proved for every P (asked only of a
    program some P fails: the others' claim cannot be contradicted)."""
    answers = racecheck.verify(str(path), ranks="all", programs=[program]).results
    return [answer.every_p is not None for answer in answers] == [True]


def test_a_tail_lost_where_p_does_not_divide_the_size_is_not_proved_for_every_p(
    chunk_tail_every_p: racecheck.Report,
) -> None:
    """Example 32 has no race, deadlock or bad bound at any P (the proof holds), but
    its numbers are wrong wherever P does not divide SIZE: the concrete check runs the
    fallback range and the smallest P of each case of SIZE // P, and finds them."""
    results = chunk_tail_every_p.results
    assert all(result.every_p is None for result in results)
    failing = [result.ranks for result in results if result.verdict is Verdict.BUG]
    assert failing[:3] == [5, 7, 9] and 25 in failing
    for result in results:
        if result.verdict is Verdict.BUG:
            assert PROVED_BUT_FAILS_HERE in result.notes
            assert {f.kind for f in result.findings} == {FindingKind.WRONG_RESULT}


def _agree(spec: ProgramSpec, counts: range) -> None:
    assert spec.origin is not None
    protocol = trace_protocol(spec.origin, 2, satisfiable, time.monotonic() + 60)
    if protocol.inputs or protocol.window_reads:
        # its templates stand for one multiset of events per input (or per value a window
        # read returns), the concrete run for one: tests/test_allp_inputs.py holds such
        # programs to the concrete verdict
        return
    for ranks in counts:
        try:
            concrete = concrete_events(spec, ranks)
        except ProgramRejected:
            continue
        assert symbolic_events(protocol, ranks) == concrete, (spec.name, ranks)


@pytest.mark.parametrize(
    "name",
    ["01_shift_builtin_barrier.py", "07_broadcast.py", "11_allreduce_two_phase.py"]
    + ["17_allgather.py", "20_all_to_all.py"],
)
def test_the_templates_at_a_given_p_are_the_events_of_the_concrete_run(name: str) -> None:
    """Rank by rank, the same accesses, notifies and waits: the builtins' lowering the
    tracer follows is the co-simulation's, and the passes through a loop body are its
    iterations."""
    for spec in discover(load_file(str(EXAMPLES / name))):
        _agree(spec, range(3, 4))


@pytest.mark.parametrize(
    ("fixture", "program"),
    [
        ("incore_builtins.py", "build_barrier"),
        ("builtin_collectives.py", "build_broadcast"),
        ("builtin_collectives.py", "build_allgather"),
        ("incore_builtins.py", "build_all_to_all"),
        ("incore_builtins.py", "build_all_to_all_v"),
    ],
)
def test_each_builtin_the_tracer_follows_has_the_co_simulations_events(
    fixture: str, program: str
) -> None:
    """Both sides run the one lowering of racecheck/dsl/lowering.py: the tracer's
    templates of each builtin, instantiated at P, are the co-simulation's events."""
    (spec,) = discover(load_file(str(FIXTURES / fixture)), programs=(program,))
    assert prove_every_p(spec, 2).answer is Answer.PROVED
    _agree(spec, range(2, 6))


@pytest.mark.parametrize(
    ("program", "builtin"),
    [
        ("build_barrier_then_kernel_allreduce", "barrier"),
        ("build_broadcast", "broadcast"),
        ("build_allgather", "allgather"),
        ("build_all_to_all", "all_to_all"),
    ],
)
def test_a_builtin_called_in_the_host_function_gets_no_all_p_answer(
    program: str, builtin: str
) -> None:
    """Its host kernel (tiled, per device) is the co-simulation's only: the tracer
    follows the InCore lowering inside a kernel and refuses the host call at its line."""
    path = FIXTURES / "host_builtins.py"
    (spec,) = discover(load_file(str(path)), programs=(program,))
    outcome = prove_every_p(spec, 2)
    assert outcome.answer is Answer.FALLBACK
    lines = path.read_text().splitlines()
    start = next(n for n, text in enumerate(lines) if text.startswith(f"def {program}("))
    call = next(
        number
        for number, text in enumerate(lines[start:], start=start + 1)
        if f"pld.tensor.{builtin}(" in text
    )
    assert outcome.reason.startswith("a per-rank operation outside a dispatch at ")
    assert outcome.reason.endswith(f"host_builtins.py:{call}"), outcome.reason


def test_a_builtin_whose_source_is_its_target_gets_no_all_p_answer() -> None:
    """The co-simulation refuses the call (test_builtins.py); the tracer says why."""
    (spec,) = discover(load_file(str(FIXTURES / "allgather_same_buffer.py")))
    outcome = prove_every_p(spec, 2)
    assert outcome.answer is Answer.FALLBACK
    assert outcome.reason == "pld.tensor.allgather: its source and target are views of one buffer"


@pytest.mark.slow
def test_every_example_proved_for_every_p_has_the_concrete_events_at_each_p_up_to_6() -> None:
    for path, program in _proved_examples():
        (spec,) = discover(load_file(str(path)), programs=(program,))
        _agree(spec, range(2, 7))


_file_numbers = itertools.count()


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(protocol=protocols(3, monotone=True) | protocols(3, monotone=False))
def test_every_generated_program_proved_for_every_p_has_no_such_bug_up_to_16(
    tmp_path_factory: pytest.TempPathFactory, protocol
) -> None:
    """Generated for three ranks, proved (or not) for every P >= 3; where the proof
    holds, no P up to 16 may show a race, deadlock or out-of-bounds access (stale reads
    and wrong results are per-P checks, outside the all-P proof)."""
    path = tmp_path_factory.mktemp("allp") / f"protocol_{next(_file_numbers)}.py"
    path.write_text(render(protocol))
    answers = racecheck.verify(str(path), ranks="3..", fallback="3").results
    held = any(
        answer.every_p is not None or PROVED_BUT_FAILS_HERE in answer.notes for answer in answers
    )
    if not held:
        return
    for result in (*answers, *racecheck.verify(str(path), ranks="4..16").results):
        assert not {finding.kind for finding in result.findings} & PROVED_KINDS, result


PROVED_KINDS = {FindingKind.RACE, FindingKind.DEADLOCK, FindingKind.OUT_OF_BOUNDS}
PER_P_KINDS = {FindingKind.STALE_READ, FindingKind.WRONG_RESULT}


SYMMETRIC = [
    Collective(
        shift=shift,
        mesh=mesh,
        store_first=first,
        wait=wait,
        expected=expected,
        rows=rows,
        shared=shared,
    )
    for shift, mesh, first, wait, expected, rows, shared in itertools.product(
        (1, 2),
        (True, False),
        (True, False),
        (True, False),
        ("1", "n - 1"),
        ("NR", "4"),
        (False, True),
    )
    if (wait or expected == "1") and (mesh or not shared) and (shift == 1 or not shared)
]


@pytest.mark.slow
@pytest.mark.parametrize("collective", SYMMETRIC, ids=repr)
def test_a_symmetric_collective_gets_the_all_p_answer_the_concrete_checks_give(
    tmp_path: Path, collective: Collective
) -> None:
    """Proved for every P: no race, deadlock or out-of-bounds access at any P up to 10.
    Smallest failing P=k: a bug at k, and none of those kinds below k."""
    path = tmp_path / "collective.py"
    path.write_text(collective.render())
    (answer,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    concrete = {
        result.ranks: result for result in racecheck.verify(str(path), ranks="2..10").results
    }
    bugs = sorted(p for p, result in concrete.items() if _covered(result))
    if answer.every_p is not None:
        assert not bugs, bugs
    elif answer.notes[0].startswith("smallest failing P="):
        assert answer.verdict is Verdict.BUG
        assert all(ranks >= answer.ranks for ranks in bugs), (answer.ranks, bugs)


@pytest.mark.slow
@pytest.mark.parametrize("collective", SYMMETRIC, ids=repr)
def test_a_symmetric_collective_has_the_concrete_events_at_each_p_up_to_4(
    tmp_path: Path, collective: Collective
) -> None:
    """Up to P=4 every generated collective stays in bounds (a fixed signal has 4 rows)."""
    path = tmp_path / "collective.py"
    path.write_text(collective.render())
    (spec,) = discover(load_file(str(path)))
    _agree(spec, range(2, 5))


def _covered(result: racecheck.ProgramResult) -> bool:
    return bool({finding.kind for finding in result.findings} & PROVED_KINDS)
