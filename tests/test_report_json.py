"""The JSON report against its contract (docs/cli.md), written here as a JSON schema."""

from __future__ import annotations

import dataclasses
import json
import math

import jsonschema
from report_samples import FILE, mixed_report, proved_report, race, result, stale_warning

from racecheck.findings import OutputDiff, Report, Verdict
from racecheck.report.json import render_json

LOCATION = {
    "type": "object",
    "required": ["file", "line"],
    "properties": {"file": {"type": "string"}, "line": {"type": "integer", "minimum": 0}},
}
FINDING = {
    "type": "object",
    "required": ["kind", "detail", "message", "locations", "ranks"],
    "properties": {
        "kind": {"enum": ["race", "deadlock", "out-of-bounds", "stale-read", "wrong-result"]},
        "detail": {"type": "string"},
        "message": {"type": "string"},
        "locations": {"type": "array", "items": LOCATION},
        "ranks": {"type": "array", "items": {"type": "integer", "minimum": 0}},
    },
}
RESULT = {
    "type": "object",
    "required": ["program", "ranks", "verdict", "findings", "model", "events", "seconds"],
    "properties": {
        "program": {"type": "string"},
        "ranks": {"type": "integer", "minimum": 1},
        "verdict": {"enum": ["proved", "bug", "skipped", "unknown"]},
        "findings": {"type": "array", "items": FINDING},
        "model": {"type": ["string", "null"]},
        "events": {"type": "integer", "minimum": 0},
        "seconds": {"type": "number", "minimum": 0},
    },
}
SPEC_SCHEMA = {
    "type": "object",
    "required": ["schema", "file", "results"],
    "properties": {
        "schema": {"const": 1},
        "file": {"type": "string"},
        "results": {"type": "array", "items": RESULT},
    },
}


def parsed(report: Report) -> dict[str, object]:
    document = json.loads(render_json(report))
    jsonschema.validate(document, SPEC_SCHEMA)
    return document


def test_every_verdict_fits_the_contract() -> None:
    document = parsed(mixed_report())
    assert document["file"] == FILE
    verdicts = [entry["verdict"] for entry in document["results"]]
    assert verdicts == ["proved", "bug", "bug", "skipped", "unknown"]


def test_proved_result_carries_model_events_seconds() -> None:
    first = parsed(proved_report())["results"][0]
    assert (first["program"], first["ranks"], first["model"]) == (
        "MeshAllreduce",
        2,
        "allreduce-sum",
    )
    assert (first["events"], first["seconds"], first["findings"]) == (26, 0.03, [])


def test_findings_are_listed_per_rank_count_with_locations_and_ranks() -> None:
    results = parsed(mixed_report())["results"]
    at_three, at_four = results[1]["findings"], results[2]["findings"]
    assert len(at_three) == len(at_four) == 1
    finding = at_four[0]
    assert (finding["kind"], finding["detail"], finding["ranks"]) == (
        "race",
        "read-after-write",
        [2, 3],
    )
    assert finding["locations"][0]["file"] == FILE
    assert [location["line"] for location in finding["locations"]] == [42, 30]
    assert results[1]["model"] is None


def test_extra_keys_carry_witness_diff_and_exit_code() -> None:
    document = parsed(mixed_report())
    finding = document["results"][1]["findings"][0]
    assert [step["highlight"] for step in finding["witness"]] == [False, True, True]
    assert finding["diff"]["got"] == [1.0, 0.0, 0.0, 0.0]
    assert finding["confirmed"] is True
    assert finding["regions"] == [{"memory": 0, "owner": 1, "ranges": [[0, 256]]}]
    assert document["exit_code"] == 1
    assert document["results"][3]["message"] == "SIZE must be divisible by the rank count"


def test_non_finite_outputs_stay_valid_json() -> None:
    diff = OutputDiff(tensor="y", rank=0, index=(0,), got=(math.inf, math.nan), golden=(1.0, 2.0))
    finding = dataclasses.replace(race(), diff=diff)
    bad = Report(file=FILE, results=(result(2, Verdict.BUG, findings=(finding,)),))
    text = render_json(bad)
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["results"][0]["findings"][0]["diff"]["got"] == ["inf", "nan"]


def test_findings_carry_their_code_severity_and_typed_witness_steps() -> None:
    document = parsed(mixed_report())
    finding = document["results"][1]["findings"][0]  # type: ignore[index]
    assert (finding["kind"], finding["code"], finding["severity"]) == ("race", "race-raw", "error")
    assert finding["warning"] is False
    notify, read, write = finding["witness"]
    assert (notify["event"], notify["op"], notify["value"]) == ("notify", "AtomicAdd", 1)
    assert notify["place"] == {"memory": "signal", "owner": 0, "ranges": [[4, 8]], "cell": [1, 0]}
    assert notify["action"] == "notify rank 0's signal[1, 0] += 1"
    assert (read["event"], read["call"], read["status"]) == ("read", "remote_load", "ran")
    assert write["status"] == "afterwards"
    assert write["action"] == "afterwards: store (write) rank 1's data bytes 0..256"


def test_a_stale_read_alone_is_a_warning_in_a_proved_result() -> None:
    report = Report(
        file=FILE,
        results=(result(2, Verdict.PROVED, model="allreduce-sum", findings=(stale_warning(),)),),
    )
    document = parsed(report)
    assert (document["verdict"], document["exit_code"]) == ("proved", 0)
    [finding] = document["results"][0]["findings"]  # type: ignore[index]
    assert (finding["code"], finding["severity"], finding["warning"]) == (
        "stale-read",
        "warning",
        True,
    )
    assert finding["message"].startswith("rank 0 reads rank 0's data bytes 256..512")
