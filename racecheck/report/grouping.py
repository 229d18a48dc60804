"""Grouping of identical findings and notes across rank counts.

A finding at P=2..8 that names the same kind, detail and source lines is one bug to a
kernel author, so renderers show it once with the rank counts it occurs at. The
representative is the occurrence at the smallest P: its witness is the shortest to
read. Grouping never merges different programs.
"""

from __future__ import annotations

from dataclasses import dataclass

from racecheck.findings import Finding, Report


@dataclass(frozen=True, slots=True, kw_only=True)
class FindingGroup:
    program: str
    rank_counts: tuple[int, ...]  # sorted
    finding: Finding  # the occurrence at the smallest rank count


@dataclass(frozen=True, slots=True, kw_only=True)
class NoteGroup:
    program: str
    rank_counts: tuple[int, ...]
    text: str


FindingKey = tuple[str, str, str, tuple[tuple[str, int], ...]]


def finding_key(program: str, finding: Finding) -> FindingKey:
    lines = tuple((location.file, location.line) for location in finding.locations)
    return (program, finding.kind.value, finding.detail, lines)


def group_findings(report: Report) -> tuple[FindingGroup, ...]:
    """Groups in order of first appearance in the report."""
    counts: dict[FindingKey, set[int]] = {}
    chosen: dict[FindingKey, tuple[int, Finding]] = {}
    for result in report.results:
        for finding in result.findings:
            key = finding_key(result.program, finding)
            counts.setdefault(key, set()).add(result.ranks)
            if key not in chosen or result.ranks < chosen[key][0]:
                chosen[key] = (result.ranks, finding)
    return tuple(
        FindingGroup(
            program=key[0],
            rank_counts=tuple(sorted(counts[key])),
            finding=finding,
        )
        for key, (_, finding) in chosen.items()
    )


def group_notes(report: Report) -> tuple[NoteGroup, ...]:
    counts: dict[tuple[str, str], set[int]] = {}
    for result in report.results:
        for note in result.notes:
            counts.setdefault((result.program, note), set()).add(result.ranks)
    return tuple(
        NoteGroup(program=program, rank_counts=tuple(sorted(ranks)), text=text)
        for (program, text), ranks in counts.items()
    )
