"""Renderers: every output format reads the same `Report` and returns text; none prints.

`OutputFormat` is the closed set of `--format` values; `render` dispatches on it.
"""

from __future__ import annotations

from enum import Enum

from racecheck.findings import Report
from racecheck.report.json import render_json
from racecheck.report.sarif import render_sarif
from racecheck.report.text import render_text


class OutputFormat(Enum):
    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"


def render(report: Report, output_format: OutputFormat, *, color: bool) -> str:
    if output_format is OutputFormat.JSON:
        return render_json(report)
    if output_format is OutputFormat.SARIF:
        return render_sarif(report)
    return render_text(report, color=color)


__all__ = ["OutputFormat", "render", "render_json", "render_sarif", "render_text"]
