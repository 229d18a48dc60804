"""`--ranks all` on programs that read their input (issue 23 item 3): a `pl.read` of a host
input in a kernel is a symbolic value of its dtype's range, narrowed by the user's
assumptions, each event instance's its own; a counter-model stands only once the ordinary
pipeline confirms it at a concrete P; an input that steers a notify or a wait keeps
today's fallback with its reason. A `pl.read` of a window cell only Set notifies write is
0 or a value they store; any other writer, or one outside those values, is a fallback."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import racecheck
from racecheck.allp import Answer, prove_every_p
from racecheck.cli import main
from racecheck.findings import FindingKind, Verdict
from racecheck.load import discover, load_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SHIFT = EXAMPLES / "281_input_count_shift.py"
NO_UPPER_CLAMP = EXAMPLES / "287_input_count_shift_bug_no_upper_clamp.py"
WINDOW_COUNTS = EXAMPLES / "262_input_counts_all_to_all_v.py"
CLAMP = "count = pl.max(pl.min(pl.read(send_count, [0]), MAX_ROWS), 0)  # @clamp"
PUSH = "pld.tile.remote_store(tile, inbox, peer=right, offsets=[row, 0])  # @push"
INT32_RANGE = "every input satisfying send_count in -2147483648..2147483647 (its dtype INT32)"


def _line_of(path: Path, marker: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(f"no {marker} in {path}")


def _variant(tmp_path: Path, name: str, old: str, new: str, source: Path = SHIFT) -> Path:
    text = source.read_text()
    assert old in text
    path = tmp_path / f"{name}.py"
    path.write_text(text.replace(old, new))
    return path


def _never_proved_for_every_p(report: racecheck.Report) -> None:
    assert all(result.every_p is None for result in report.results)


def test_an_input_count_feeding_loop_bounds_is_proved_for_every_p_and_every_input() -> None:
    report = racecheck.verify(str(SHIFT), ranks="all")
    (result,) = report.results
    assert result.verdict is Verdict.PROVED and result.engine == "allp"
    assert result.every_p is not None and result.every_p.low == 2
    assert INT32_RANGE in result.every_p.assumptions
    assert report.exit_code == 0


def test_the_proof_states_the_input_assumption_in_json() -> None:
    out = io.StringIO()
    assert main(["verify", str(SHIFT), "--ranks", "all", "--format", "json"], stdout=out) == 0
    (result,) = json.loads(out.getvalue())["results"]
    assert result["ranks"] == "all" and result["verdict"] == "proved"
    assert INT32_RANGE in json.dumps(result)


def test_a_count_without_its_upper_clamp_is_refuted_and_confirmed_at_two() -> None:
    report = racecheck.verify(str(NO_UPPER_CLAMP), ranks="all")
    (result,) = report.results
    assert (result.ranks, result.verdict, result.every_p) == (2, Verdict.BUG, None)
    assert result.notes[0].startswith("smallest failing P=2: no proof that every access in bounds")
    load = _line_of(NO_UPPER_CLAMP, "@load")
    (finding,) = [f for f in result.findings if f.kind is FindingKind.OUT_OF_BOUNDS]
    assert {location.line for location in finding.locations} == {load}
    # the concrete count that overflows
    assert any(name == "send_count" and value > 2 for name, _, value in finding.inputs)


def test_an_assumption_on_the_input_is_the_proofs_and_printed(tmp_path: Path) -> None:
    """`--assume` and the in-file form narrow the read's range: the unclamped twin is
    proved under `send_count in 0..2` and says so."""
    out = io.StringIO()
    command = ["verify", str(NO_UPPER_CLAMP), "--ranks", "all", "--assume", "send_count in 0..2"]
    assert main(command, stdout=out, stderr=io.StringIO()) == 0
    assert "every input satisfying send_count in 0..2 (assumed)" in out.getvalue()
    declared = tmp_path / "declared.py"
    declared.write_text("# racecheck: assume send_count in 0..2\n" + NO_UPPER_CLAMP.read_text())
    (result,) = racecheck.verify(str(declared), ranks="all").results
    assert result.verdict is Verdict.PROVED and result.every_p is not None
    assert "every input satisfying send_count in 0..2 (assumed)" in result.every_p.assumptions
    beyond = tmp_path / "beyond.py"
    beyond.write_text("# racecheck: assume send_count in 0..3\n" + NO_UPPER_CLAMP.read_text())
    (result,) = racecheck.verify(str(beyond), ranks="all").results
    assert (result.ranks, result.verdict) == (2, Verdict.BUG)


def test_a_clamp_off_by_one_from_rank_forty_fails_first_at_forty_one(tmp_path: Path) -> None:
    wider = "count = pl.max(pl.min(pl.read(send_count, [0]), MAX_ROWS + pld.rank(ctx) // 40), 0)"
    path = _variant(tmp_path, "late", CLAMP, wider + "  # @clamp")
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert (result.ranks, result.verdict) == (41, Verdict.BUG)
    assert any(f.kind is FindingKind.OUT_OF_BOUNDS and f.ranks == (40,) for f in result.findings)


def test_an_input_used_as_a_peer_is_a_bug_clamped_or_not(tmp_path: Path) -> None:
    clamped = "peer=pl.max(pl.min(pl.read(send_count, [0]), pld.nranks(ctx) - 1), 0)"
    for name, peer in (("clamped", clamped), ("raw", "peer=pl.read(send_count, [0])")):
        path = _variant(tmp_path, name, PUSH, PUSH.replace("peer=right", peer))
        (result,) = racecheck.verify(str(path), ranks="all").results
        assert (result.ranks, result.verdict) == (2, Verdict.BUG), name
        assert result.notes[0].startswith("smallest failing P=2"), name


def _own_counts(text: str) -> str:
    """Rows below the sender's count put after its notify, rows from the receiver's
    count on read after its wait: disjoint only if the two counts are one value."""
    body = text[text.index("    for row in pl.range(count):") : text.index("    return pl.store")]
    own = (
        "    pld.system.notify(signal, peer=right, offsets=[0, 0], value=1,"
        " op=pld.NotifyOp.AtomicAdd)\n"
        "    for row in pl.range(count):\n"
        "        tile = pl.load(x, [row, 0], [1, SIZE])\n"
        f"        {PUSH}\n"
        "    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)\n"
        "    for row in pl.range(count, MAX_ROWS):\n"
        "        received = pl.load(inbox, [row, 0], [1, SIZE])  # @read\n"
        "        y = pl.store(received, [row, 0], y)\n"
        "    return y\n"
    )
    return text.replace(body, own).replace("    return pl.store(received, [0, 0], y)\n", "")


def test_each_rank_reads_an_input_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "own.py"
    path.write_text(_own_counts(SHIFT.read_text()))
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert (result.ranks, result.verdict) == (2, Verdict.BUG)
    assert any(f.kind is FindingKind.RACE for f in result.findings)


def test_a_counter_model_no_concrete_input_confirms_is_no_bug(tmp_path: Path) -> None:
    """Every rank reads the one cell of a shared count: the proof's values are each
    instance's own, so it finds a counter-model no input has, and falls back."""
    shared = (
        _own_counts(SHIFT.read_text())
        .replace("send_count: pl.Tensor[[NR, 1], pl.INT32]", "send_count: pl.Tensor[[1], pl.INT32]")
        .replace("per_rank(x[r], send_count[r], y[r]", "per_rank(x[r], send_count, y[r]")
    )
    path = tmp_path / "shared.py"
    path.write_text(shared)
    report = racecheck.verify(str(path), ranks="all", fallback="2")
    _never_proved_for_every_p(report)
    assert {result.verdict for result in report.results} == {Verdict.PROVED}
    assert "find no bug" in report.results[0].notes[0]


def test_an_input_steering_a_notify_keeps_the_fallback_with_its_reason(tmp_path: Path) -> None:
    one = "offsets=[0, 0], value=1, op=pld.NotifyOp.AtomicAdd)"
    path = _variant(tmp_path, "valued", one, one.replace("value=1", "value=count"))
    report = racecheck.verify(str(path), ranks="all", fallback="2..3")
    _never_proved_for_every_p(report)
    assert "a value read from an input steers a notify at" in report.results[0].notes[0]


def test_a_count_read_back_from_a_window_is_proved_for_every_p_and_every_input() -> None:
    """The receiver's `pl.read` of the counts cell is 0 or a value its Set notifies store
    (the clamped count, 0..2): the copy loop stays in its slot for every input."""
    (result,) = racecheck.verify(str(WINDOW_COUNTS), ranks="all", fallback="2").results
    assert result.verdict is Verdict.PROVED and result.every_p is not None
    line = _line_of(WINDOW_COUNTS, "@count")
    read = f"pl.read of window2 at line {line}: 0 (never written) or a value its Set notifies"
    assert f"{read} and pl.writes store (0..2)" in result.every_p.assumptions


def test_a_count_the_wait_itself_orders_is_proved_and_one_read_early_is_a_race() -> None:
    """Example 21 publishes each count with the Set a wait waits for, and reads it back
    after that wait: the Set itself is the release (no notify after it). Its twin 22
    reads the count before the wait: a race, confirmed at P=2."""
    path = EXAMPLES / "21_all_to_all_v.py"
    (proved,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    assert proved.verdict is Verdict.PROVED and proved.every_p is not None
    early = EXAMPLES / "22_all_to_all_v_bug_early_count.py"
    (result,) = racecheck.verify(str(early), ranks="all", fallback="2").results
    assert (result.ranks, result.verdict, result.every_p) == (2, Verdict.BUG, None)
    (race,) = [f for f in result.findings if f.kind is FindingKind.RACE]
    lines = {location.line for location in race.locations}
    assert lines == {_line_of(early, "@count"), _line_of(early, "@publish")}
    assert set(race.ranks) == {0, 1}


PUBLISH = """                pld.system.notify(counts, peer=dest, offsets=[me, 0], value=count,
                                  op=pld.NotifyOp.Set)
"""


def _published(tmp_path: Path, name: str, lines: str, old: str = PUBLISH) -> Path:
    """Example 262 with `lines` in place of `old` (the count's Set notify)."""
    return _variant(tmp_path, name, old, lines, source=WINDOW_COUNTS)


def test_a_second_set_of_another_value_on_the_counts_cell_is_a_bug(tmp_path: Path) -> None:
    """A Set of MAX_ROWS + 1 after the count's: the hull of the values is 0..3, and the
    receiver copies a third row past its slot, which the concrete check confirms."""
    second = PUBLISH.replace("value=count", "value=MAX_ROWS + 1").rstrip() + "  # @second\n"
    path = _published(tmp_path, "second", PUBLISH + second)
    (result,) = racecheck.verify(str(path), ranks="all").results
    assert (result.ranks, result.verdict, result.every_p) == (2, Verdict.BUG, None)
    assert result.notes[0].startswith("smallest failing P=2: no proof that every access in bounds")
    copy = _line_of(path, "@copy") + 1  # the load of the row from the inbox
    (finding,) = [f for f in result.findings if f.kind is FindingKind.OUT_OF_BOUNDS]
    assert [location.line for location in finding.locations] == [copy]


def _fallback_reason(path: Path) -> str:
    (spec,) = discover(load_file(str(path)))
    outcome = prove_every_p(spec, 2)
    assert outcome.answer is Answer.FALLBACK
    return outcome.reason


def test_a_set_after_the_read_outside_its_values_is_a_fallback(tmp_path: Path) -> None:
    """The receiver sets its own cell to 7 after reading it: the value the read was
    traced with (0..2) does not cover what the cell may hold."""
    reset = (
        "                pld.system.notify(counts, peer=me, offsets=[source, 0], value=7,"
        "  # @reset\n                                  op=pld.NotifyOp.Set)\n"
    )
    anchor = "                received = pl.read(counts, [source, 0])  # @count\n"
    path = _published(tmp_path, "reset", anchor + reset, old=anchor)
    reason = _fallback_reason(path)
    line, read = _line_of(path, "@reset"), _line_of(path, "@count")
    assert f"line {line} stores 7..7 into window2" in reason
    assert f"the pl.read at line {read}" in reason


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("value=MAX_ROWS, op=pld.NotifyOp.AtomicAdd", "other than by a Set notify"),
        ("value=count, op=pld.NotifyOp.AtomicAdd", "a value read from an input steers a notify"),
    ],
)
def test_a_counts_cell_added_to_is_a_fallback(tmp_path: Path, op: str, expected: str) -> None:
    lines = PUBLISH.replace(
        "value=count,\n                                  op=pld.NotifyOp.Set", op
    )
    assert lines != PUBLISH
    assert expected in _fallback_reason(_published(tmp_path, "added", lines))


def test_a_counts_cell_a_wait_reads_is_a_fallback(tmp_path: Path) -> None:
    """A wait on the cell compares its threshold with the notified count, an input."""
    anchor = "                received = pl.read(counts, [source, 0])  # @count\n"
    wait = (
        "                pld.system.wait(counts, offsets=[source, 0], expected=0,"
        " cmp=pld.WaitCmp.Ge)\n"
    )
    path = _published(tmp_path, "waited", wait + anchor, old=anchor)
    assert "with a value read from an input, and a wait reads window2" in _fallback_reason(path)


def test_an_input_the_kernel_writes_before_reading_keeps_the_fallback(tmp_path: Path) -> None:
    overwrite = "send_count = pl.store(pl.load(send_count, [0], [1]), [0], send_count)\n    "
    path = _variant(tmp_path, "written", CLAMP, overwrite + CLAMP)
    report = racecheck.verify(str(path), ranks="all", fallback="2")
    _never_proved_for_every_p(report)
    assert "which the program also reads as an input" in report.results[0].notes[0]


@pytest.mark.parametrize(
    ("high", "low", "verdict"),
    [("MAX_ROWS - 1", "1", Verdict.PROVED), ("MAX_ROWS", "-1", Verdict.BUG)],
)
def test_the_every_p_verdict_of_other_clamps_is_the_concrete_one(
    tmp_path: Path, high: str, low: str, verdict: Verdict
) -> None:
    """A narrower clamp is proved; a lower clamp at -1 starts the rest loop at row -1."""
    clamp = f"count = pl.max(pl.min(pl.read(send_count, [0]), {high}), {low})  # @clamp"
    path = _variant(tmp_path, "clamp", CLAMP, clamp)
    (every,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    (concrete,) = racecheck.verify(str(path), ranks=[2]).results
    assert every.verdict is concrete.verdict is verdict
    assert (every.every_p is not None) == (verdict is Verdict.PROVED)


SIGNAL = "    signal: pld.DistributedTensor[[1, 1], pl.INT32],\n"
SENT = "    sent: pl.Out[pl.Tensor[[1], pl.INT32]],\n"
HOST_Y = "    y: pl.Out[pl.Tensor[[NR, MAX_ROWS, SIZE], pl.FP32]],\n"
LOOP = "    for row in pl.range(count):\n"


def _with_sent(tmp_path: Path, write: str) -> Path:
    """Example 281 with an INT32 output `sent` that each rank's kernel `pl.write`s with
    `write`, a line before its loops."""
    text = SHIFT.read_text()
    replacements = [
        (SIGNAL + "):\n    ctx", SIGNAL + SENT + "):\n    ctx"),
        (SIGNAL + "):\n    return", SIGNAL + SENT + "):\n    return"),
        ("inbox, signal)", "inbox, signal, sent)"),
        (HOST_Y, HOST_Y + SENT.replace("[[1]", "[[NR, 1]")),
        ("signal, device=r)", "signal, sent[r], device=r)"),
        (LOOP, f"    {write}  # @write\n" + LOOP),
    ]
    for old, new in replacements:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "sent.py"
    path.write_text(text)
    return path


@pytest.mark.parametrize("index", ["[0]", "0"])
def test_a_pl_write_of_the_count_into_a_local_output_is_proved_for_every_p(
    tmp_path: Path, index: str
) -> None:
    """Also with PyPTO's bare index (`pl.write(t, 0, v)`, wrapped in a list)."""
    path = _with_sent(tmp_path, f"pl.write(sent, {index}, count)")
    (result,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    assert result.verdict is Verdict.PROVED and result.every_p is not None


@pytest.mark.parametrize("index", ["[1]", "1"])
def test_a_pl_write_one_element_past_its_tensor_is_refuted_at_two(
    tmp_path: Path, index: str
) -> None:
    """The write is of exactly one element: `[1]` of a one-element tensor is out of it."""
    path = _with_sent(tmp_path, f"pl.write(sent, {index}, count)")
    (result,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    assert (result.ranks, result.verdict, result.every_p) == (2, Verdict.BUG, None)
    (finding,) = [f for f in result.findings if f.kind is FindingKind.OUT_OF_BOUNDS]
    assert [location.line for location in finding.locations] == [_line_of(path, "@write")]
    assert finding.ranks == (0,)


def test_a_pl_write_of_the_own_signal_before_its_wait_is_a_race_at_two(tmp_path: Path) -> None:
    """A reset of the signal cell the neighbour adds to, before the wait orders it."""
    wait = "    pld.system.wait(signal, offsets=[0, 0], expected=1, cmp=pld.WaitCmp.Ge)\n"
    reset = "    pl.write(signal, [0, 0], 0)  # @write\n"
    path = _variant(tmp_path, "reset", wait, reset + wait)
    (result,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    assert (result.ranks, result.verdict, result.every_p) == (2, Verdict.BUG, None)
    races = [f for f in result.findings if f.kind is FindingKind.RACE]
    write = _line_of(path, "@write")
    assert any(
        write in {location.line for location in race.locations} and set(race.ranks) == {0, 1}
        for race in races
    )


def test_a_pl_write_of_a_counts_cell_read_back_is_a_fallback(tmp_path: Path) -> None:
    """The receiver zeroes the counts cell it read: a writer other than its notifies, so
    the read is no longer 0 or a value the Sets store."""
    anchor = "                received = pl.read(counts, [source, 0])  # @count\n"
    write = "                pl.write(counts, [source, 0], 0)  # @write\n"
    path = _published(tmp_path, "zeroed", anchor + write, old=anchor)
    reason = _fallback_reason(path)
    assert f"a store into signal window window2 (line {_line_of(path, '@write')})" in reason


def _inbox_written(tmp_path: Path, row: str) -> Path:
    """Example 262 whose receiver, after the wait for `source`, writes one element of
    its inbox at row `row`."""
    anchor = "                received = pl.read(counts, [source, 0])  # @count\n"
    write = f"                pl.write(inbox, [{row}, 0], 0)  # @write\n"
    return _published(tmp_path, "inbox", anchor + write, old=anchor)


def test_a_pl_write_into_the_slot_its_wait_orders_is_proved_for_every_p(
    tmp_path: Path,
) -> None:
    path = _inbox_written(tmp_path, "MAX_ROWS * source")
    (result,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    assert result.verdict is Verdict.PROVED and result.every_p is not None


def test_a_pl_write_into_the_next_sources_slot_is_a_race_at_two(tmp_path: Path) -> None:
    """One slot on, the element is the next source's, not yet waited for (and past the
    inbox for the last source): exactly that element conflicts with its put."""
    path = _inbox_written(tmp_path, "MAX_ROWS * source + MAX_ROWS")
    (result,) = racecheck.verify(str(path), ranks="all", fallback="2").results
    assert (result.ranks, result.verdict, result.every_p) == (2, Verdict.BUG, None)
    write = _line_of(path, "@write")
    (race,) = [f for f in result.findings if f.kind is FindingKind.RACE]
    assert write in {location.line for location in race.locations}
    assert set(race.ranks) == {0, 1}
    (bounds,) = [f for f in result.findings if f.kind is FindingKind.OUT_OF_BOUNDS]
    assert [location.line for location in bounds.locations] == [write]
