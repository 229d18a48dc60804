"""The JSON report: the stable object for CI scripts (docs/report.schema.json).

The keys the schema requires keep their meaning forever (`schema` 1). Extra keys carry the
rest of the Report (engine, message, notes, regions, witness, diff, errors); they may
grow but never change what the contract keys say. Findings are not grouped across rank
counts here: each result lists its own.
"""

from __future__ import annotations

import json
import math
from typing import Any

from racecheck.events import Region, SourceLocation
from racecheck.findings import (
    Finding,
    OutputDiff,
    Place,
    ProgramResult,
    Report,
    Severity,
    WitnessStep,
)
from racecheck.report.phrases import describe_finding, describe_step

SCHEMA_VERSION = 1

JsonObject = dict[str, Any]


def render_json(report: Report) -> str:
    return json.dumps(report_to_json(report), indent=2, allow_nan=False) + "\n"


def report_to_json(report: Report) -> JsonObject:
    return {
        "schema": SCHEMA_VERSION,
        "file": report.file,
        "results": [_result(result) for result in report.results],
        "verdict": report.verdict.value,
        "exit_code": report.exit_code,
        "errors": list(report.errors),
        "imported_with": list(report.imported_with),
    }


def _result(result: ProgramResult) -> JsonObject:
    return {
        "program": result.program,
        "ranks": result.ranks,
        "verdict": result.verdict.value,
        "findings": [_finding(finding) for finding in result.findings],
        "model": result.model,
        "events": result.events,
        "seconds": round(result.seconds, 6),
        "engine": result.engine,
        "message": result.message,
        "notes": list(result.notes),
        "rank_param": result.rank_param,
        **_every_p(result),
    }


def _every_p(result: ProgramResult) -> JsonObject:
    """A result for every P: `"ranks": "all"`, its bounds (`high` exclusive, null for
    none) of the races, deadlocks and bounds proved, the P at which the outputs were
    checked (only there), and its assumptions."""
    if result.every_p is None:
        return {}
    return {
        "ranks": "all",
        "every_p": {
            "low": result.every_p.low,
            "high": result.every_p.high,
            "outputs_checked_at": list(result.every_p.outputs_at),
            "assumptions": list(result.every_p.assumptions),
        },
    }


def _finding(finding: Finding) -> JsonObject:
    return {
        "kind": finding.kind.value,
        "code": finding.code.value,
        "severity": finding.severity.value,
        "warning": finding.severity is Severity.WARNING,
        "detail": finding.detail,
        "message": describe_finding(finding),
        "locations": [_location(location) for location in finding.locations],
        "ranks": list(finding.ranks),
        "threads": list(finding.threads),  # one per rank when a rank runs several; else []
        "regions": [region_to_json(region) for region in finding.regions],
        "witness": [_witness_step(step) for step in finding.witness],
        "confirmed": finding.confirmed,
        "diff": _diff(finding.diff) if finding.diff is not None else None,
    }


def region_to_json(region: Region) -> JsonObject:
    """Memory id and owner rank (-1: host), byte ranges [start, end)."""
    return {
        "memory": region.memory,
        "owner": region.owner,
        "ranges": [list(span) for span in region.ranges],
    }


def _location(location: SourceLocation) -> JsonObject:
    return {"file": location.file, "line": location.line, "text": location.text}


def _witness_step(step: WitnessStep) -> JsonObject:
    return {
        "rank": step.rank,
        "thread": step.task or None,
        "index": step.index,
        "action": describe_step(step),
        "event": step.kind.value,
        "call": step.call or None,
        "starts_after": step.starts_after or None,
        "place": _place(step.place) if step.place is not None else None,
        "op": step.op.value if step.op is not None else None,
        "cmp": step.cmp.value if step.cmp is not None else None,
        "value": step.value,
        "repeat": step.repeat,
        "loops": [{"variable": name, "value": value} for name, value in step.loops],
        "status": step.status.value,
        "location": _location(step.location),
        "highlight": step.highlight,
    }


def _place(place: Place) -> JsonObject:
    """A buffer by name and owner rank (-1: host), its bytes, and a cell's index."""
    return {
        "memory": place.memory,
        "owner": place.owner,
        "ranges": [list(span) for span in place.ranges],
        "cell": list(place.cell) if place.cell is not None else None,
    }


def _diff(diff: OutputDiff) -> JsonObject:
    return {
        "tensor": diff.tensor,
        "rank": diff.rank,
        "index": list(diff.index),
        "got": [_number(value) for value in diff.got],
        "golden": [_number(value) for value in diff.golden],
        "model": diff.model or None,
    }


def _number(value: float) -> float | str:
    """JSON has no NaN or infinity: those become the strings "nan", "inf", "-inf"."""
    return value if math.isfinite(value) else str(value)
