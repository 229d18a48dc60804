"""The human report: one line per program and rank count, then one block per bug.

Decides the layout a kernel author reads; assumes nothing about the terminal. ANSI
colour appears only when `color=True`, so the plain output is stable enough for tests
and CI logs to compare. Identical findings across rank counts print once (see
`grouping`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from racecheck.findings import (
    Finding,
    ProgramResult,
    Report,
    Severity,
    StepStatus,
    Verdict,
    WitnessStep,
)
from racecheck.report.grouping import FindingGroup, group_findings, group_notes
from racecheck.report.phrases import (
    describe_diff,
    describe_every_p,
    describe_finding,
    describe_heading,
    describe_iteration,
    describe_participant,
    describe_participants,
    describe_rank_counts,
    describe_step,
    describe_thread,
    output_label,
)
from racecheck.report.witness import Elided, shortened

_RESET = "\033[0m"
MAX_LANES = 8  # witness steps are indented one column per rank up to this many ranks
_BOLD = "1"
_RED = "31"
_GREEN = "32"
_YELLOW = "33"
_VERDICT_COLOUR = {
    Verdict.PROVED: _GREEN,
    Verdict.SKIPPED: _YELLOW,
    Verdict.UNKNOWN: _YELLOW,
    Verdict.BUG: _RED,
}


@dataclass(frozen=True, slots=True)
class _Paint:
    enabled: bool

    def __call__(self, text: str, *codes: str) -> str:
        if not self.enabled or not codes:
            return text
        return f"\033[{';'.join(codes)}m{text}{_RESET}"


def render_text(report: Report, *, color: bool) -> str:
    paint = _Paint(color)
    lines = [report.file]
    lines += [f"imported with {setting}" for setting in report.imported_with]
    lines += _result_lines(report.results, paint)
    lines += [
        f"note: {note.program} at P={describe_rank_counts(note.rank_counts)}: {note.text}"
        for note in group_notes(report)
    ]
    lines += [
        f"note: {program} receives P through its parameter {parameter!r}"
        for program, parameter in _rank_params(report)
    ]
    for group in group_findings(report):
        lines.append("")
        lines += _finding_block(group, report.file, paint)
    lines.append("")
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def _rank_params(report: Report) -> list[tuple[str, str]]:
    """(program, parameter) for each factory program, once."""
    found = {r.program: r.rank_param for r in report.results if r.rank_param is not None}
    return list(found.items())


def _result_lines(results: Sequence[ProgramResult], paint: _Paint) -> list[str]:
    name_width = max((len(result.program) for result in results), default=0)
    rank_width = max((len(_rank_label(result)) for result in results), default=0)
    lines = []
    for result in results:
        lines.append(_result_line(result, name_width, rank_width, paint))
        if result.every_p is not None:
            lines += [f"    assumes: {assumption}" for assumption in result.every_p.assumptions]
    return lines


def _rank_label(result: ProgramResult) -> str:
    """`P=4`, or `P>=2` for a result that holds for every P from 2 on."""
    if result.every_p is not None:
        return f"P>={result.every_p.low}"
    return f"P={result.ranks}"


def _result_line(result: ProgramResult, name_width: int, rank_width: int, paint: _Paint) -> str:
    verdict = paint(result.verdict.value, _VERDICT_COLOUR[result.verdict])
    fields = [f"  {result.program:<{name_width}}", f"{_rank_label(result):<{rank_width}}", verdict]
    if result.verdict is Verdict.SKIPPED:
        return "  ".join([*fields, result.message]).rstrip()
    unit = "events" if result.every_p is None else "templates"  # an all-P proof's count
    fields += [f"{result.events} {unit}", f"{result.seconds:.2f}s"]
    if result.verdict is Verdict.UNKNOWN:
        fields.append(result.message)
    elif result.verdict is Verdict.PROVED:
        fields.append(result.model if result.model is not None else "matches no model")
        if result.every_p is not None:
            fields.append(describe_every_p(result.every_p))
        warnings = len(result.warnings)
        if warnings:
            fields.append(f"({warnings} warning{'' if warnings == 1 else 's'})")
    return "  ".join(fields).rstrip()


def _finding_block(group: FindingGroup, file: str, paint: _Paint) -> list[str]:
    finding = group.finding
    where = str(finding.locations[0]) if finding.locations else file
    title = describe_heading(finding)
    ranks = describe_participants(finding)
    level = f"{finding.severity.value}:"
    level = paint(level, _BOLD, _RED if finding.severity is Severity.ERROR else _YELLOW)
    header = f"{where}: {level} [{finding.code.value}] {paint(title, _BOLD)}"
    header += f" {ranks}" if ranks else ""
    header += f" [{group.program} at P={describe_rank_counts(group.rank_counts)}]"
    lines = [header]
    lines += _quoted_sources(finding)
    message = describe_finding(finding)
    if message:
        lines.append(f"  {message}")
    lines += _witness_lines(finding, paint)
    if finding.diff is not None:
        lines.append(f"  {output_label(finding)}: {describe_diff(finding.diff)}")
    return lines


def _quoted_sources(finding: Finding) -> list[str]:
    # Locations and ranks pair up by position when the finding gives one rank per location.
    paired = len(finding.ranks) == len(finding.locations)
    lines = []
    for position, location in enumerate(finding.locations):
        who = f"  ({describe_participant(finding, position)})" if paired else ""
        lines.append(f"  {location}: {location.text}{who}")
    return lines


def _witness_lines(finding: Finding, paint: _Paint) -> list[str]:
    if not finding.witness:
        return []
    replayed = "replayed" if finding.confirmed else "not replayed"
    shown = shortened(finding.witness)
    steps = [entry for entry in shown if not isinstance(entry, Elided)]
    elided = len(finding.witness) - len(steps)
    note = (
        f", {elided} of {len(finding.witness)} steps elided: --format json has all"
        if elided
        else ""
    )
    lines = [f"  witness ({replayed}{note}):"]
    ranks = sorted({step.rank for _, step in steps})
    # one column per rank while they fit; past that, indenting says nothing
    lanes = {rank: lane if len(ranks) <= MAX_LANES else 0 for lane, rank in enumerate(ranks)}
    width = len(str(len(finding.witness)))
    for entry in shown:
        if isinstance(entry, Elided):
            lines.append(
                f"    {'':>{width}}  ... {entry.count} step{'s' if entry.count > 1 else ''}"
            )
        else:
            number, step = entry
            lines.append(_witness_step(number, width, lanes[step.rank], step, paint))
    return lines


def _witness_step(number: int, width: int, lane: int, step: WitnessStep, paint: _Paint) -> str:
    """One witness step, the only place a step is worded for the text report."""
    marker = ">" if step.highlight else " "
    who = describe_thread(step)
    named = step.loops and (step.highlight or step.status is not StepStatus.RAN)
    where = f"{step.location}, {describe_iteration(step)}" if named else f"{step.location}"
    body = f"{'  ' * lane}{who}: {describe_step(step)}  ({where})"
    if step.highlight:
        body = paint(body, _BOLD)
    return f"  {marker} {number:>{width}}. {body}"


def _summary(report: Report) -> str:
    counts = Counter(result.verdict for result in report.results)
    bugs = counts[Verdict.BUG]
    parts = [
        f"{counts[Verdict.PROVED]} proved",
        f"{bugs} bug" + ("" if bugs == 1 else "s"),
        f"{counts[Verdict.SKIPPED]} skipped",
        f"{counts[Verdict.UNKNOWN]} unknown",
    ]
    if report.errors:
        parts.append(f"{len(report.errors)} error" + ("" if len(report.errors) == 1 else "s"))
    return ", ".join(parts)
