"""The HTML report: one self-contained page with the text report and, for every failing
program and rank count, a space-time diagram of each finding's witness.

Decides how a witness is drawn: one vertical lane per rank (one per task where a rank's
steps ran in tasks the runtime may overlap, `WitnessStep.task`), time flowing down, one row
per witness step in witness order; an arrow from each notify to the first later wait on
the same signal cell; an arrow from every access of another rank's memory to that
rank's lane; the steps the finding is about in a distinct colour, thicker, joined by a
dashed line when there are two. Every step carries an SVG <title> with `file:line` and
the source text.

Arrows come from the witness steps' typed fields (kind, place: signal cell or bytes,
owner). The page loads nothing: CSS, SVG and the small script that links a diagram's
steps to its rows are inline, and every string that came from the user's program is
escaped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import PurePath

from racecheck.events import HOST_OWNER
from racecheck.findings import (
    Finding,
    FindingCode,
    ProgramResult,
    Report,
    StepKind,
    WitnessStep,
)
from racecheck.report.phrases import (
    describe_diff,
    describe_finding,
    describe_heading,
    describe_participants,
    describe_step,
    describe_thread,
    output_label,
)
from racecheck.report.text import render_text

_ROW = 24  # vertical distance between witness steps
_TOP = 40  # room for the lane headers
_LEFT = 12
_TEXT_GAP = 18
_CHAR_WIDTH = 8.0  # monospace 12px (bold is wider); sizes the text column
_ARROW_GAP = 8  # stop arrowheads at the rim of the target dot


@dataclass(frozen=True, slots=True, kw_only=True)
class StepLinks:
    """What one witness step touches, as far as arrows need it.

    `cell` identifies a signal cell (any hashable key, equal for the same cell);
    `owner` is the rank owning the memory touched, or None for host memory or unknown.
    """

    notifies: bool = False
    waits: bool = False
    cell: Hashable | None = None
    owner: int | None = None


def _text_with_errors(report: Report) -> str:
    """The text report, followed by the errors the CLI writes to stderr beside it."""
    errors = "".join(f"{error}\n" for error in report.errors)
    return render_text(report, color=False) + errors


def render_html(report: Report) -> str:
    """The whole page: the text report, then a diagram per finding's witness."""
    failing = [result for result in report.results if result.findings]
    sections = [
        _result_section(result, open_=position == 0) for position, result in enumerate(failing)
    ]
    verdict = report.verdict.value if report.results else "unchecked"
    body = [
        f"<h1>racecheck: {escape(report.file)}</h1>",
        f'<p>verdict: <span class="verdict {verdict}">{verdict}</span></p>',
        _MARKERS,
        "<h2>Report</h2>",
        f"<pre>{escape(_text_with_errors(report))}</pre>",
    ]
    if sections:
        body += ["<h2>Witnesses</h2>", _LEGEND, *sections]
    return _page(f"racecheck: {report.file} ({verdict})", "\n".join(body))


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n"
        f"<body>\n{body}\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )


def _result_section(result: ProgramResult, *, open_: bool) -> str:
    count = len(result.findings)
    summary = f"{escape(result.program)} at P={result.ranks}: {count} finding" + (
        "" if count == 1 else "s"
    )
    figures = "\n".join(_finding_figure(finding, result.ranks) for finding in result.findings)
    opened = " open" if open_ else ""
    return f"<details{opened}>\n<summary>{summary}</summary>\n{figures}\n</details>"


def _finding_figure(finding: Finding, ranks: int) -> str:
    title = describe_heading(finding)
    title = f"{finding.severity.value}: [{finding.code.value}] {title}"
    who = describe_participants(finding)
    caption = [f'<p class="title">{escape(title)} {escape(who)}</p>']
    caption += [
        f'<p class="source"><code>{escape(str(location))}: {escape(location.text)}</code></p>'
        for location in finding.locations
    ]
    message = describe_finding(finding)
    if message:
        caption.append(f"<p>{escape(message)}</p>")
    parts = [f'<figure class="finding {finding.kind.value}">', *caption]
    if finding.witness:
        replayed = "replayed" if finding.confirmed else "not replayed"
        parts.append(f'<p class="note">witness ({replayed}), in execution order:</p>')
        parts.append(f'<div class="diagram">{space_time_svg(finding, ranks)}</div>')
    else:
        parts.append('<p class="note">no interleaving to draw for this finding</p>')
    if finding.diff is not None:
        label = output_label(finding)
        parts.append(f"<p>{label}: {escape(describe_diff(finding.diff))}</p>")
    parts.append("</figure>")
    return "\n".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lane:
    """One vertical lane: a rank, or one task of a rank whose tasks may overlap."""

    rank: int
    task: str = ""  # "" for the rank's only lane


@dataclass(frozen=True, slots=True, kw_only=True)
class _Layout:
    """Where lanes, rows and the text column of one diagram go."""

    lanes: tuple[Lane, ...]
    lane_width: int
    text_x: int
    width: int
    height: int

    def lane_x(self, number: int) -> int:
        return _LEFT + number * self.lane_width + self.lane_width // 2

    def rank_x(self, rank: int) -> int:
        """The middle of `rank`'s lanes: where arrows into its memory end."""
        numbers = [n for n, lane in enumerate(self.lanes) if lane.rank == rank]
        return (self.lane_x(numbers[0]) + self.lane_x(numbers[-1])) // 2

    def step_x(self, step: WitnessStep) -> int:
        own = [n for n, lane in enumerate(self.lanes) if lane.rank == step.rank]
        task = next((n for n in own if self.lanes[n].task == step.task), own[0])
        return self.lane_x(task)

    def row_y(self, position: int) -> int:
        return _TOP + position * _ROW + _ROW // 2

    def point(self, position: int, step: WitnessStep) -> tuple[int, int]:
        return self.step_x(step), self.row_y(position)


def witness_lanes(steps: Sequence[WitnessStep], ranks: int) -> tuple[Lane, ...]:
    """A lane per rank, split into one per task where a rank's steps ran in several
    tasks that the runtime may overlap (steps outside them share the first lane)."""
    rank_count = max([ranks, *(step.rank + 1 for step in steps)])
    tasks: dict[int, list[str]] = {rank: [] for rank in range(rank_count)}
    for step in steps:
        if step.task not in tasks[step.rank]:
            tasks[step.rank].append(step.task)
    lanes: list[Lane] = []
    for rank in range(rank_count):
        named = [task for task in tasks[rank] if task]
        if len(named) < 2:
            lanes.append(Lane(rank=rank))
            continue
        if "" in tasks[rank]:
            lanes.append(Lane(rank=rank))
        lanes += [Lane(rank=rank, task=task) for task in named]
    return tuple(lanes)


def _layout(steps: Sequence[WitnessStep], ranks: int, rows: Sequence[str]) -> _Layout:
    lanes = witness_lanes(steps, ranks)
    lane_width = max(28, min(110, 880 // len(lanes)))
    text_x = _LEFT + len(lanes) * lane_width + _TEXT_GAP
    return _Layout(
        lanes=lanes,
        lane_width=lane_width,
        text_x=text_x,
        width=int(text_x + _CHAR_WIDTH * max(len(row) for row in rows)) + _LEFT,
        height=_TOP + len(steps) * _ROW,
    )


def space_time_svg(finding: Finding, ranks: int) -> str:
    """The witness of one finding at rank count `ranks` as an inline <svg> element."""
    steps = finding.witness
    rows = [_row_text(number, step, finding.code) for number, step in enumerate(steps, 1)]
    layout = _layout(steps, ranks, rows)
    links = [step_links(step) for step in steps]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spacetime" width="{layout.width}" '
        f'height="{layout.height}" viewBox="0 0 {layout.width} {layout.height}" role="img">',
        f"<title>{escape(finding.code.record.title)}: witness over {ranks} ranks</title>",
        *_background(layout, len(steps)),
        *_arrows(steps, links, layout),
        *_pair_connector(steps, layout),
        *(
            _step_mark(position, step, layout, rows[position])
            for position, step in enumerate(steps)
        ),
        "</svg>",
    ]
    return "\n".join(parts)


def _background(layout: _Layout, step_count: int) -> list[str]:
    stripes = [
        f'<rect class="stripe" x="0" y="{_TOP + position * _ROW}" width="{layout.width}" '
        f'height="{_ROW}"/>'
        for position in range(0, step_count, 2)
    ]
    lanes = []
    for number, lane in enumerate(layout.lanes):
        x = layout.lane_x(number)
        lanes.append(f'<line class="lane" x1="{x}" y1="{_TOP - 8}" x2="{x}" y2="{layout.height}"/>')
        if lane.task:
            label = _short(lane.task, layout.lane_width)
            lanes.append(
                f'<text class="task-label" x="{x}" y="{_TOP - 12}">'
                f"<title>{escape(lane.task)}</title>{escape(label)}</text>"
            )
    for rank in sorted({lane.rank for lane in layout.lanes}):
        split = any(lane.rank == rank and lane.task for lane in layout.lanes)
        y = _TOP - 28 if split else _TOP - 16
        lanes.append(
            f'<text class="lane-label" x="{layout.rank_x(rank)}" y="{y}">rank {rank}</text>'
        )
    return stripes + lanes


_DISPATCH_NAME = re.compile(
    r"^(?P<name>.*) \((?:line (?P<line>\d+), )?dispatch (?P<number>\d+)(?:,| at) line \d+\)$"
)


def _short(task: str, width: int) -> str:
    """A lane's label in the room a lane of `width` pixels has: `swap_step #2` for `task
    swap_step (dispatch 2, line 81)`, `wait:40 #2` for `task wait (line 40, dispatch 2
    at line 66)`; a long name is cut before the line and dispatch, which tell two lanes
    of one task apart (the title has it all)."""
    name = task.removeprefix("task ")
    match = _DISPATCH_NAME.match(name)
    suffix = ""
    if match is not None:
        name = match["name"]
        suffix = (f":{match['line']}" if match["line"] else "") + f" #{match['number']}"
    room = max(3, int(width // (_CHAR_WIDTH * 0.75))) - len(suffix)
    return (name if len(name) <= room else name[: max(1, room - 1)] + "…") + suffix


def _arrows(steps: Sequence[WitnessStep], links: Sequence[StepLinks], layout: _Layout) -> list[str]:
    """notify→wait arrows, then an arrow to the owner's lane for every other remote access."""
    pairs = notify_wait_pairs(links)
    arrows = [
        _arrow(
            layout.point(source, steps[source]),
            layout.point(target, steps[target]),
            "sync",
            highlighted=steps[source].highlight or steps[target].highlight,
        )
        for source, target in pairs
    ]
    released = {source for source, _ in pairs}
    for position, (step, link) in enumerate(zip(steps, links, strict=True)):
        if link.owner is None or link.owner == step.rank or position in released:
            continue
        arrows.append(
            _arrow(
                layout.point(position, step),
                (layout.rank_x(link.owner), layout.row_y(position)),
                "remote",
                highlighted=step.highlight,
            )
        )
    return arrows


def _row_text(number: int, step: WitnessStep, code: FindingCode) -> str:
    # The full path is in the caption and the hover title; the row keeps the name short.
    where = f"{PurePath(step.location.file).name}:{step.location.line}"
    who = describe_thread(step)
    text = f"{number}. {who}: {describe_step(step)}  ({where})"
    if step.highlight:
        text += f"  ← {code.record.step_note}"
    return text


def _step_mark(position: int, step: WitnessStep, layout: _Layout, row: str) -> str:
    classes = "step hl" if step.highlight else "step"
    location = step.location
    hover = f"{location}: {location.text}" if location.text else str(location)
    x, y = layout.point(position, step)
    radius = 7 if step.highlight else 5
    task = f' data-task="{escape(step.task)}"' if step.task else ""
    return (
        f'<g class="{classes}" data-step="{position + 1}" data-rank="{step.rank}" '
        f'data-index="{step.index}"{task}>'
        f"<title>{escape(hover)}</title>"
        f'<circle cx="{x}" cy="{y}" r="{radius}"/>'
        f'<text class="row" x="{layout.text_x}" y="{y + 4}">{escape(row)}</text>'
        "</g>"
    )


def _arrow(start: tuple[int, int], end: tuple[int, int], kind: str, *, highlighted: bool) -> str:
    (x1, y1), (x2, y2) = start, _pulled_back(start, end, _ARROW_GAP)
    marker = "rc-arrow-hl" if highlighted else "rc-arrow"
    classes = f"{kind} hl" if highlighted else kind
    return (
        f'<line class="{classes}" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
        f'marker-end="url(#{marker})"/>'
    )


def _pulled_back(start: tuple[int, int], end: tuple[int, int], gap: float) -> tuple[float, float]:
    """`end` moved `gap` towards `start`, so an arrowhead stops at a dot's rim."""
    dx, dy = end[0] - start[0], end[1] - start[1]
    length = math.hypot(dx, dy)
    if length <= gap:
        return float(end[0]), float(end[1])
    scale = (length - gap) / length
    return round(start[0] + dx * scale, 1), round(start[1] + dy * scale, 1)


def _pair_connector(steps: Sequence[WitnessStep], layout: _Layout) -> list[str]:
    """A dashed curve joining the two steps a finding is about (a racing pair)."""
    marked = [position for position, step in enumerate(steps) if step.highlight]
    if len(marked) != 2:
        return []
    first, second = marked
    x1, y1 = layout.point(first, steps[first])
    x2, y2 = layout.point(second, steps[second])
    bend = x1 - layout.lane_width // 2 if x1 == x2 else (x1 + x2) // 2
    return [f'<path class="pair" d="M {x1} {y1} Q {bend} {(y1 + y2) // 2} {x2} {y2}" fill="none"/>']


def notify_wait_pairs(links: Sequence[StepLinks]) -> list[tuple[int, int]]:
    """(notify position, wait position): each notify with the first later wait on its cell."""
    pairs = []
    for source, link in enumerate(links):
        if not link.notifies or link.cell is None:
            continue
        target = next(
            (
                position
                for position in range(source + 1, len(links))
                if links[position].waits and links[position].cell == link.cell
            ),
            None,
        )
        if target is not None:
            pairs.append((source, target))
    return pairs


def step_links(step: WitnessStep) -> StepLinks:
    """A step's arrows: a notify or wait links through its cell; another rank's memory
    gets an arrow to its owner's lane; host memory gets none."""
    place = step.place
    if place is None:
        return StepLinks()
    owner = None if place.owner == HOST_OWNER else place.owner
    if step.kind in (StepKind.NOTIFY, StepKind.WAIT):
        return StepLinks(
            notifies=step.kind is StepKind.NOTIFY,
            waits=step.kind is StepKind.WAIT,
            cell=(place.memory, place.owner, place.ranges),
            owner=owner,
        )
    return StepLinks(owner=owner)


_MARKERS = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0" class="defs" aria-hidden="true">'
    "<defs>"
    '<marker id="rc-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
    'fill="#4a5a70"/></marker>'
    '<marker id="rc-arrow-hl" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
    'markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
    'fill="#c62828"/></marker>'
    "</defs></svg>"
)

_LEGEND = (
    '<p class="legend">Lanes are ranks, split into one lane per task where a rank\'s '
    "tasks may overlap; time flows down, one row per witness step. "
    '<span class="key sync">solid arrow</span>: a notify and the wait it releases; '
    '<span class="key remote">dashed arrow</span>: an access of another rank\'s memory; '
    '<span class="key hl">red</span>: the steps the finding is about. '
    "Hover a step for its source line.</p>"
)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #1d232b; }
h1 { font-size: 20px; word-break: break-all; }
h2 { font-size: 16px; margin-top: 28px; }
pre { background: #f4f6f8; padding: 12px; overflow-x: auto; font-size: 12px; }
.verdict { font-weight: bold; padding: 1px 6px; border-radius: 3px; color: #fff; }
.verdict.bug { background: #c62828; } .verdict.proved { background: #2e7d32; }
.verdict.unknown, .verdict.skipped { background: #b26a00; }
.verdict.unchecked { background: #666; }
details { margin: 12px 0; border: 1px solid #d5dbe1; border-radius: 4px; padding: 6px 10px; }
summary { cursor: pointer; font-weight: bold; }
figure { margin: 12px 0 20px; }
figure p { margin: 4px 0; }
.title { font-weight: bold; color: #c62828; }
.source code { font-size: 13px; }
.note, .legend { color: #555; font-size: 13px; }
.key.sync { color: #4a5a70; } .key.remote { color: #4a5a70; font-style: italic; }
.key.hl { color: #c62828; font-weight: bold; }
.diagram { overflow-x: auto; }
svg.defs { position: absolute; }
svg.spacetime { font-family: ui-monospace, monospace; font-size: 12px; }
svg .stripe { fill: #f6f8fa; }
svg .lane { stroke: #9aa5b1; stroke-width: 1; }
svg .lane-label { text-anchor: middle; font-weight: bold; fill: #333; }
svg .task-label { text-anchor: middle; font-size: 9px; fill: #555; }
svg .sync { stroke: #4a5a70; stroke-width: 1.3; }
svg .remote { stroke: #4a5a70; stroke-width: 1.3; stroke-dasharray: 4 3; }
svg .sync.hl, svg .remote.hl { stroke: #c62828; stroke-width: 2.5; }
svg .pair { stroke: #c62828; stroke-width: 2; stroke-dasharray: 6 4; }
svg .step circle { fill: #4a5a70; }
svg .step.hl circle { fill: #c62828; stroke: #7f0000; stroke-width: 2; }
svg .step .row { fill: #333; white-space: pre; }
svg .step.hl .row { fill: #c62828; font-weight: bold; }
svg .step.focus circle { stroke: #f9a825; stroke-width: 3; }
svg .step.focus .row { text-decoration: underline; }
"""

# Hovering a step's row or dot marks both; data-ok tells a headless check the script ran.
_SCRIPT = """
(function () {
  window.addEventListener('error', function (e) {
    document.documentElement.setAttribute('data-js-error', String(e.message));
  });
  document.querySelectorAll('svg.spacetime .step').forEach(function (step) {
    step.addEventListener('mouseenter', function () { step.classList.add('focus'); });
    step.addEventListener('mouseleave', function () { step.classList.remove('focus'); });
  });
  var marked = document.querySelectorAll('svg.spacetime .step.hl').length;
  document.documentElement.setAttribute('data-highlighted', String(marked));
  document.documentElement.setAttribute('data-ok', '1');
})();
"""
