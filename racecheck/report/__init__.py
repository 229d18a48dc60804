"""Renderers: every output format reads the same `Report` and returns text; none prints.

`OutputFormat` is the closed set of `--format` values; `render` dispatches on it.
"""

from __future__ import annotations

from enum import Enum

from racecheck.findings import Report
from racecheck.report.text import render_text
from racecheck.report.version import installed_version


class OutputFormat(Enum):
    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"


def render(report: Report, output_format: OutputFormat, *, color: bool) -> str:
    # the JSON and SARIF renderers are imported only when asked for (start-up time)
    if output_format is OutputFormat.JSON:
        from racecheck.report.json import render_json

        return render_json(report)
    if output_format is OutputFormat.SARIF:
        from racecheck.report.sarif import render_sarif

        return render_sarif(report)
    return render_text(report, color=color)


__all__ = ["OutputFormat", "installed_version", "render", "render_text"]
