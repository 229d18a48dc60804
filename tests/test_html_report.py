"""The HTML report on hand-built reports and traces: well-formed, self-contained, escaped,
and its space-time diagram draws the witness (lanes, notify→wait and remote arrows, the
highlighted pair). The headless-browser check is in test_html_browser.py."""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser

from report_samples import (
    FILE,
    NOTIFY,
    cell,
    mixed_report,
    notify_step,
    proved_report,
    race,
    result,
)
from tracebuild import TraceBuilder, mesh_allreduce

from racecheck.analysis import find_hazards, step_of, to_finding
from racecheck.engines import prepare
from racecheck.events import SourceLocation, Trace, WaitCmp
from racecheck.findings import (
    BlockedWait,
    Finding,
    FindingKind,
    Place,
    Report,
    StepKind,
    StepStatus,
    Verdict,
    WitnessStep,
)
from racecheck.options import EngineChoice
from racecheck.report.html import notify_wait_pairs, render_html, space_time_svg, step_links

VOID_ELEMENTS = frozenset({"br", "hr", "img", "input", "link", "meta", "source", "wbr"})

WAIT = SourceLocation(
    file=FILE, line=36, text="pld.system.wait(signal, offsets=[src, 0], expected=2)"
)


# --- parsing helpers (the browser test uses them on the dumped DOM too) ---


@dataclass(frozen=True, slots=True, kw_only=True)
class Element:
    tag: str
    attrs: dict[str, str]
    ancestors: tuple[str, ...]

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


@dataclass(slots=True)
class ParsedPage:
    elements: list[Element] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def find(self, tag: str, *classes: str) -> list[Element]:
        wanted = set(classes)
        return [e for e in self.elements if e.tag == tag and wanted <= e.classes]

    def root(self) -> Element:
        return next(element for element in self.elements if element.tag == "html")


class _StrictParser(HTMLParser):
    """Records every element and every nesting mistake (unclosed, stray or crossed tags)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = ParsedPage()
        self.stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._record(tag, attrs)
        if tag not in VOID_ELEMENTS:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._record(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.page.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.page.text.append(data)

    def _record(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.page.elements.append(Element(tag=tag, attrs=values, ancestors=tuple(self.stack)))


def parse_page(html: str) -> ParsedPage:
    parser = _StrictParser()
    parser.feed(html)
    parser.close()
    parser.page.problems += [f"<{tag}> never closed" for tag in parser.stack]
    return parser.page


def outside_references(page: ParsedPage) -> list[str]:
    """Every src/href/xlink:href that is not a same-document fragment."""
    return [
        f"<{element.tag} {name}={value!r}>"
        for element in page.elements
        for name in ("src", "href", "xlink:href")
        if (value := element.attrs.get(name, "")) and not value.startswith("#")
    ]


def highlighted_steps(page: ParsedPage) -> set[tuple[str, str]]:
    return {(e.attrs["data-rank"], e.attrs["data-index"]) for e in page.find("g", "step", "hl")}


# --- hand-built findings ---


def deadlock() -> Finding:
    """Rank 0 waits for 2 on a cell two Set notifies each set to 1: it blocks forever."""
    blocked = WitnessStep(
        rank=0,
        index=3,
        kind=StepKind.WAIT,
        place=cell(0, 0, 0),
        cmp=WaitCmp.EQ,
        value=2,
        status=StepStatus.BLOCKED,
        location=WAIT,
        highlight=True,
    )
    return Finding(
        kind=FindingKind.DEADLOCK,
        detail="",
        locations=(WAIT,),
        ranks=(0,),
        blocked=(BlockedWait(rank=0, step=blocked, holds=1),),
        witness=(
            notify_step(1, 0, cell(0, 0, 0)),
            notify_step(2, 0, cell(0, 0, 0)),
            notify_step(2, 1, cell(1, 2, 0)),
            blocked,
        ),
    )


def race_and_deadlock_report() -> Report:
    return Report(
        file=FILE,
        results=(
            result(2, Verdict.PROVED, model="allreduce-sum"),
            result(3, Verdict.BUG, findings=(race((0, 1)),)),
            result(4, Verdict.BUG, findings=(deadlock(),)),
        ),
    )


# --- the page ---


def test_page_is_well_formed_and_loads_nothing_from_outside() -> None:
    html = render_html(race_and_deadlock_report())
    page = parse_page(html)
    assert page.problems == []
    assert html.startswith("<!DOCTYPE html>")
    assert outside_references(page) == []
    assert re.search(r"""(src|href)\s*=\s*["']?https?:""", html) is None
    assert "@import" not in html and "url(http" not in html


def test_page_holds_the_text_report() -> None:
    page = parse_page(render_html(mixed_report()))
    text = "".join(page.text)
    assert "MeshAllreduce  P=5  skipped  SIZE must be divisible by the rank count" in text
    assert "1 proved, 2 bugs, 1 skipped, 1 unknown" in text


def test_one_section_per_failing_result_each_with_a_diagram_per_finding() -> None:
    page = parse_page(render_html(mixed_report()))
    summaries = [e for e in page.elements if e.tag == "summary"]
    assert len(summaries) == 2  # P=3 and P=4 fail; proved, skipped and unknown draw nothing
    assert len(page.find("svg", "spacetime")) == 2
    assert "open" in page.find("details")[0].attrs
    assert "open" not in page.find("details")[1].attrs


def test_racing_pair_is_highlighted_and_joined() -> None:
    page = parse_page(
        render_html(Report(file=FILE, results=(result(3, Verdict.BUG, findings=(race((0, 1)),)),)))
    )
    assert highlighted_steps(page) == {("0", "7"), ("1", "1")}
    assert len(page.find("g", "step")) == 3
    assert len(page.find("path", "pair")) == 1
    assert {e.attrs["marker-end"] for e in page.find("line", "hl")} == {"url(#rc-arrow-hl)"}
    marker_ids = {e.attrs["id"] for e in page.find("marker")}
    assert marker_ids == {"rc-arrow", "rc-arrow-hl"}


def test_remote_read_points_at_the_owners_lane() -> None:
    svg = space_time_svg(race((0, 1)), 3)
    page = parse_page(svg)
    lanes = {e.attrs["x1"] for e in page.find("line", "lane")}
    assert len(lanes) == 3  # one lane per rank, also for rank 2 which the witness never names
    remote = page.find("line", "remote", "hl")
    assert len(remote) == 1  # rank 0's remote_load of data[1]; rank 1's store is local
    rank0_x, rank1_x = (float(x) for x in sorted(lanes, key=float)[:2])
    start, end = float(remote[0].attrs["x1"]), float(remote[0].attrs["x2"])
    assert start == rank0_x and rank0_x < end < rank1_x  # stops at the owner's dot rim
    # the unmatched notify rank 1 -> rank 0's cell is a plain (not highlighted) remote arrow
    assert len(page.find("line", "remote")) == 2


def test_deadlock_draws_notifies_into_the_blocked_wait() -> None:
    page = parse_page(render_html(race_and_deadlock_report()))
    figure = page.find("figure", "deadlock")
    assert len(figure) == 1
    assert ("0", "3") in highlighted_steps(page)
    assert len(page.find("line", "sync", "hl")) == 2  # both Set notifies of rank 0's signal[0, 0]
    assert len(page.find("path", "pair")) == 1  # only the race has a pair to join
    text = "".join(page.text)
    assert "blocked forever" in text
    assert "rank 0 waits forever on wait rank 0's signal[0, 0] == 2 (it holds 1)" in text


def test_every_step_has_a_hover_with_file_line_and_source() -> None:
    svg = space_time_svg(deadlock(), 4)
    titles = re.findall(r"<g class=\"step[^>]*><title>([^<]*)</title>", svg)
    assert titles == [
        f"{NOTIFY}: {NOTIFY.text}",
        f"{NOTIFY}: {NOTIFY.text}",
        f"{NOTIFY}: {NOTIFY.text}",
        f"{WAIT}: {WAIT.text}",
    ]


def test_user_text_is_escaped() -> None:
    nasty = SourceLocation(file='a"<b>.py', line=3, text="x = y < z & '<script>alert(1)</script>'")
    finding = dataclasses.replace(
        race(),
        place=Place(memory="<img src=x onerror=alert(1)>", owner=1, ranges=((0, 4),)),
        locations=(nasty,),
        witness=tuple(dataclasses.replace(step, location=nasty) for step in race().witness),
    )
    report = Report(file="<evil>.py", results=(result(3, Verdict.BUG, findings=(finding,)),))
    html = render_html(report)
    page = parse_page(html)
    assert page.problems == []
    assert "<script>alert" not in html and "<img" not in html and "<evil>" not in html
    assert [e.tag for e in page.elements].count("script") == 1  # only the page's own
    assert "x = y < z & '<script>alert(1)</script>'" in "".join(page.text)


def test_finding_without_witness_says_so_and_draws_nothing() -> None:
    finding = Finding(
        kind=FindingKind.OUT_OF_BOUNDS,
        detail="",
        reason="peer 2 outside [0, 2)",
        locations=(NOTIFY,),
        ranks=(1,),
    )
    page = parse_page(
        render_html(Report(file=FILE, results=(result(2, Verdict.BUG, findings=(finding,)),)))
    )
    assert page.find("svg", "spacetime") == []
    assert "no interleaving to draw for this finding" in "".join(page.text)


def test_proved_report_has_no_witness_section() -> None:
    page = parse_page(render_html(proved_report()))
    assert page.problems == []
    assert page.find("svg", "spacetime") == []
    assert "Witnesses" not in "".join(page.text)


def test_empty_report_is_not_called_proved() -> None:
    html = render_html(Report(file=FILE, errors=(f"{FILE}:3: error: cannot load",)))
    (verdict,) = parse_page(html).find("span", "verdict")
    assert verdict.classes == {"verdict", "unchecked"}
    assert f"{FILE}:3: error: cannot load" in html


# --- arrows from the trace agree with arrows from the action text ---


def _barrier_missing_one_notify() -> Trace:
    """All-to-all notify/wait barrier among 3 ranks; rank 2 never notifies rank 0."""
    builder = TraceBuilder(3)
    signal = builder.window("signal_buf", 12)
    for me in range(3):
        for peer in range(3):
            if peer != me and (me, peer) != (2, 0):
                builder.notify(me, signal, peer, 4 * me, 20)
        for src in range(3):
            if src != me:
                builder.wait(me, signal, 4 * src, 30)
    return builder.build()


def _every_event_as_step(trace: Trace) -> tuple[WitnessStep, ...]:
    return tuple(step_of(trace, e) for events in zip(*trace.events, strict=False) for e in events)


def test_links_come_from_the_typed_steps() -> None:
    for trace in (_barrier_missing_one_notify(), mesh_allreduce(3, barrier=True)):
        steps = _every_event_as_step(trace)
        links = [step_links(step) for step in steps]
        for step, link in zip(steps, links, strict=True):
            assert link.notifies == (step.kind is StepKind.NOTIFY)
            assert link.waits == (step.kind is StepKind.WAIT)
            assert step.place is not None
            owner = step.place.owner
            assert link.owner == (None if owner < 0 else owner)
        assert notify_wait_pairs(links)  # the protocols do have notify -> wait pairs


def test_notify_pairs_with_first_later_wait_on_its_cell_only() -> None:
    trace = mesh_allreduce(2, barrier=True)
    # rank 0: store, notify r1, wait r1's cell, ...; rank 1 likewise
    r0, r1 = trace.events
    order = [r0[2], r0[1], r1[1], r1[2]]  # rank 0 waits before anyone notifies it
    links = [step_links(step_of(trace, e)) for e in order]
    # r0's notify (position 1) releases r1's wait (3); r1's notify (2) has no later wait
    assert notify_wait_pairs(links) == [(1, 3)]


def _analysed(trace: Trace) -> list[Finding]:
    _, oracle = prepare(EngineChoice.AUTO, trace, deadline=time.monotonic() + 30)
    return [to_finding(trace, oracle, hazard)[0] for hazard in find_hazards(trace, oracle)]


def test_real_deadlock_witness_with_trace() -> None:
    trace = _barrier_missing_one_notify()
    (finding,) = _analysed(trace)
    assert finding.kind is FindingKind.DEADLOCK
    report = Report(file="proto.py", results=(result(3, Verdict.BUG, findings=(finding,)),))
    page = parse_page(render_html(report))
    assert page.problems == []
    (blocked,) = [step for step in finding.witness if step.highlight]
    assert highlighted_steps(page) == {(str(blocked.rank), str(blocked.index))}
    notifies = sum(step.kind is StepKind.NOTIFY for step in finding.witness)
    waits = sum(step.kind is StepKind.WAIT for step in finding.witness)
    # every wait that passed was released by a drawn notify; the blocked one by none
    assert len(page.find("line", "sync")) == waits - 1 <= notifies
    assert page.find("line", "sync", "hl") == []


def test_real_race_witness_with_trace() -> None:
    trace = mesh_allreduce(3, barrier=False)
    findings = _analysed(trace)
    races = [finding for finding in findings if finding.kind is FindingKind.RACE]
    assert races
    report = Report(file="proto.py", results=(result(3, Verdict.BUG, findings=tuple(races)),))
    page = parse_page(render_html(report))
    assert page.problems == []
    for finding in races:
        pair = {(str(s.rank), str(s.index)) for s in finding.witness if s.highlight}
        assert len(pair) == 2 and pair <= highlighted_steps(page)
    assert len(page.find("line", "remote", "hl")) >= len(races)  # each race has a remote read


def _task_steps() -> tuple[WitnessStep, ...]:
    """Rank 1 runs a notify in one task and a wait in another that may overlap it;
    rank 0's step belongs to no such task."""
    signal = cell(1, 0, 0)
    wait = WitnessStep(
        rank=1, index=4, kind=StepKind.WAIT, location=WAIT, place=signal, value=1, task="recv"
    )
    return (
        notify_step(0, 2, signal),
        dataclasses.replace(notify_step(1, 1, cell(0, 1, 0)), task="send (cube lane)"),
        wait,
    )


def test_a_rank_whose_tasks_may_overlap_gets_a_lane_per_task() -> None:
    finding = dataclasses.replace(race(), witness=_task_steps())
    page = parse_page(space_time_svg(finding, 2))
    lanes = sorted(float(e.attrs["x1"]) for e in page.find("line", "lane"))
    assert len(lanes) == 3  # rank 0; rank 1's two tasks
    labels = page.find("text", "task-label")
    assert len(labels) == 2
    steps = {e.attrs["data-index"]: e.attrs.get("data-task") for e in page.find("g", "step")}
    assert steps == {"2": None, "1": "send (cube lane)", "4": "recv"}
    dots = [float(e.attrs["cx"]) for e in page.find("circle")]
    assert dots == [lanes[0], lanes[1], lanes[2]]  # each step on its own task's lane
    text = "".join(page.text)
    assert "rank 1, recv: wait" in text and "rank 0: notify" in text


def test_a_rank_with_one_named_task_keeps_one_lane() -> None:
    steps = tuple(dataclasses.replace(step, task="") for step in _task_steps()[:2])
    steps += (dataclasses.replace(_task_steps()[2], task="recv"),)
    page = parse_page(space_time_svg(dataclasses.replace(race(), witness=steps), 2))
    assert len(page.find("line", "lane")) == 2
    assert page.find("text", "task-label") == []


def test_a_core_starvation_draws_a_lane_per_thread_under_its_rank() -> None:
    """The deadlock of a waiter holding rank 0's only core: one lane for each of rank
    0's two threads, labelled with the thread's name, under one `rank 0` label."""
    from test_units import explored, waiter_and_notifier

    (deadlock,) = explored(waiter_and_notifier(cores=1))
    page = parse_page(space_time_svg(deadlock, 1))
    assert page.problems == []
    assert len(page.find("line", "lane")) == 2
    assert len(page.find("text", "task-label")) == 2
    text = "".join(page.text)
    assert "task wait_step" in text and "task notify_step" in text
    assert "a free core of rank 0 (it has 1), held by rank 0, task wait_step" in text


def test_a_real_dispatch_deadlock_draws_each_rank_s_dispatches_as_lanes_under_it() -> None:
    """Example 176 checked end to end: each rank runs two dispatches of one kernel as two
    threads, drawn as two lanes under its `rank r` label, told apart by dispatch."""
    import racecheck

    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    path = os.path.join(examples, "176_three_groups_swap_bug_cross_domain_cycle.py")
    (result,) = racecheck.verify(path, ranks=[3]).results
    (deadlock,) = result.findings
    svg = space_time_svg(deadlock, 3)
    page = parse_page(svg)
    assert page.problems == []
    assert len(page.find("line", "lane")) == 6
    ranks = re.findall(r'<text class="lane-label"[^>]*>([^<]*)</text>', svg)
    assert ranks == ["rank 0", "rank 1", "rank 2"]
    labels = re.findall(r'<text class="task-label"[^>]*><title>[^<]*</title>([^<]*)</text>', svg)
    assert sorted(label[-2:] for label in labels) == ["#1", "#1", "#1", "#2", "#2", "#2"]
