"""The SARIF 2.1.0 report, for code scanning in CI.

One SARIF result per finding group (identical findings across rank counts are one
result; `properties.rankCounts` lists where it occurs). ruleId is the finding's
stable code (`race-raw`, `deadlock`, ...), its level the finding's severity; the
primary location is the finding's first location, the others are related locations;
the witness is a codeFlow with one threadFlow per thread (`rank 0, task push_step`; a rank
that is one thread: `rank 0`), its steps numbered in
execution order. Skipped and unknown results, and user errors, become tool
execution notifications: they are not findings, but CI must see them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from racecheck.events import SourceLocation
from racecheck.findings import FindingCode, Report, Verdict, WitnessStep
from racecheck.report.grouping import FindingGroup, group_findings
from racecheck.report.json import region_to_json
from racecheck.report.phrases import (
    describe_code,
    describe_diff,
    describe_every_p,
    describe_finding,
    describe_heading,
    describe_participants,
    describe_rank_counts,
    describe_step,
    describe_thread,
)
from racecheck.report.version import installed_version

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
RULES = tuple(FindingCode)

JsonObject = dict[str, Any]


def render_sarif(report: Report) -> str:
    return json.dumps(sarif_log(report), indent=2) + "\n"


def sarif_log(report: Report) -> JsonObject:
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": _driver()},
                "invocations": [_invocation(report)],
                "results": [_result(group) for group in group_findings(report)],
            }
        ],
    }


def _driver() -> JsonObject:
    return {
        "name": "racecheck",
        "version": installed_version(),
        "rules": [
            {
                "id": code.value,
                "name": code.name.title().replace("_", ""),
                "shortDescription": {"text": describe_code(code)},
                "defaultConfiguration": {"level": code.record.severity.value},
            }
            for code in RULES
        ],
    }


def _invocation(report: Report) -> JsonObject:
    notifications = [
        {
            "level": "warning" if result.verdict is Verdict.UNKNOWN else "note",
            "message": {
                "text": f"{result.program} at P={result.ranks}: {result.verdict.value}"
                + (f": {result.message}" if result.message else "")
            },
        }
        for result in report.results
        if result.verdict in (Verdict.SKIPPED, Verdict.UNKNOWN)
    ]
    notifications += [
        {
            "level": "note",
            "message": {
                "text": f"{result.program}: {describe_every_p(result.every_p)}, assuming "
                + "; ".join(result.every_p.assumptions)
            },
            "properties": {"ranks": "all"},
        }
        for result in report.results
        if result.every_p is not None
    ]
    notifications += [  # what a proof for every input assumed (racecheck.assumptions)
        {"level": "note", "message": {"text": f"{result.program} at P={result.ranks}: {note}"}}
        for result in report.results
        if result.verdict is Verdict.PROVED
        for note in result.notes
        if note.startswith(("assuming ", "for every input: "))
    ]
    notifications += [{"level": "error", "message": {"text": error}} for error in report.errors]
    return {
        "executionSuccessful": report.exit_code != 2,
        "toolExecutionNotifications": notifications,
    }


def _result(group: FindingGroup) -> JsonObject:
    finding = group.finding
    result: JsonObject = {
        "ruleId": finding.code.value,
        "ruleIndex": RULES.index(finding.code),
        "level": finding.severity.value,
        "message": {"text": _message(group)},
        "locations": [_location(finding.locations[0])] if finding.locations else [],
        "relatedLocations": [
            _location(location, related_id=position)
            for position, location in enumerate(finding.locations[1:], start=1)
        ],
        "properties": {
            "program": group.program,
            "rankCounts": list(group.rank_counts),
            "detail": finding.detail,
            "ranks": list(finding.ranks),
            "threads": list(finding.threads),
            "regions": [region_to_json(region) for region in finding.regions],
            "witnessReplayed": finding.confirmed,
        },
    }
    if finding.witness:
        result["codeFlows"] = [_code_flow(finding.witness)]
    return result


def _message(group: FindingGroup) -> str:
    finding = group.finding
    parts = [describe_heading(finding)]
    if finding.ranks:
        parts.append(describe_participants(finding))
    parts.append(f"in {group.program} at P={describe_rank_counts(group.rank_counts)}")
    text = " ".join(parts)
    message = describe_finding(finding)
    if message:
        text += f": {message}"
    if finding.diff is not None:
        text += f". Output under the witness: {describe_diff(finding.diff)}"
    return text


def _location(location: SourceLocation, *, related_id: int | None = None) -> JsonObject:
    physical: JsonObject = {"artifactLocation": {"uri": artifact_uri(location.file)}}
    if location.line >= 1:
        region: JsonObject = {"startLine": location.line}
        if location.text:
            region["snippet"] = {"text": location.text}
        physical["region"] = region
    sarif_location: JsonObject = {"physicalLocation": physical}
    if related_id is not None:
        sarif_location["id"] = related_id
    return sarif_location


def artifact_uri(path: str) -> str:
    """A relative path stays a relative URI reference; an absolute one becomes file://."""
    candidate = Path(path)
    if candidate.is_absolute():
        return candidate.as_uri()
    return quote(candidate.as_posix())


def _code_flow(witness: tuple[WitnessStep, ...]) -> JsonObject:
    """One threadFlow per thread (`rank 0, task push_step`; a rank that is one thread:
    `rank 0`), ordered by rank."""
    first: dict[tuple[int, str], WitnessStep] = {}
    flows: dict[tuple[int, str], list[JsonObject]] = {}
    for order, step in enumerate(witness, start=1):
        first.setdefault((step.rank, step.task), step)
        flows.setdefault((step.rank, step.task), []).append(_flow_location(order, step))
    return {
        "message": {"text": "witness interleaving"},
        "threadFlows": [
            {"id": describe_thread(first[thread]), "locations": steps}
            for thread, steps in sorted(flows.items())
        ],
    }


def _flow_location(order: int, step: WitnessStep) -> JsonObject:
    location = _location(step.location)
    location["message"] = {"text": f"{describe_thread(step)}: {describe_step(step)}"}
    return {
        "location": location,
        "executionOrder": order,
        "importance": "essential" if step.highlight else "important",
    }
