"""The HTML report in a real headless Chromium: it renders, its script runs without
errors, the highlighted steps exist in the rendered DOM, and a screenshot is taken.

Chromium is required, not optional: without it this test fails and says how to
install it (CI installs it with `apt-get install -y chromium`).
"""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path
from types import ModuleType

import pytest
from test_html_report import highlighted_steps, parse_page, race_and_deadlock_report

from racecheck.report.html import render_html

pytestmark = pytest.mark.slow  # needs headless Chromium

SCREENSHOT_SCRIPT = Path(__file__).resolve().parents[1] / "docs" / "make_screenshot.py"


def _screenshot_module() -> ModuleType:
    """docs/make_screenshot.py holds the one Chromium command line; load it by path."""
    spec = importlib.util.spec_from_file_location("make_screenshot", SCREENSHOT_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def chromium() -> ModuleType:
    module = _screenshot_module()
    try:
        module.chromium_binary()
    except module.ChromiumMissing as missing:
        pytest.fail(f"the HTML report test needs a headless browser: {missing}")
    return module


@pytest.fixture
def page_file(tmp_path: Path) -> Path:
    page = tmp_path / "report.html"
    page.write_text(render_html(race_and_deadlock_report()), encoding="utf-8")
    return page


def test_rendered_dom_has_the_highlighted_steps_and_the_script_ran(
    chromium: ModuleType, page_file: Path
) -> None:
    dom = chromium.headless_chromium(page_file, ["--dump-dom"])
    page = parse_page(dom)
    root = page.root()
    assert root.attrs.get("data-ok") == "1", "the inline script did not run to its end"
    assert "data-js-error" not in root.attrs, root.attrs.get("data-js-error")
    # the race's pair (rank 0 #7, rank 1 #1) and the deadlock's blocked wait (rank 0 #3)
    assert highlighted_steps(page) == {("0", "7"), ("1", "1"), ("0", "3")}
    assert root.attrs.get("data-highlighted") == "3"  # what the browser itself counted
    assert len(page.find("path", "pair")) == 1


def test_screenshot_is_a_png_of_the_window(chromium: ModuleType, page_file: Path) -> None:
    png = page_file.with_suffix(".png")
    chromium.headless_chromium(page_file, [f"--screenshot={png}"])
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1200, 900)
    assert len(data) > 20_000  # a blank page compresses to a few kilobytes
