"""Render racecheck's HTML report of a collective file and photograph it in headless Chromium.

    python docs/make_screenshot.py examples/09_allreduce_mesh_bug_no_barrier.py \
        --ranks 1..4 --output docs/mesh-no-barrier.png

Without a file it photographs a hand-built report of the mesh all-reduce without its
barrier (what racecheck reports for examples/09 at P=1..4), so the picture can be made
before the whole pipeline runs. Needs Debian's `chromium` on PATH
(`apt-get install -y chromium`). `headless_chromium` is also what the browser test uses.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from racecheck.events import Region, SourceLocation
from racecheck.findings import (
    Finding,
    FindingKind,
    OutputDiff,
    ProgramResult,
    Report,
    Verdict,
    WitnessStep,
)
from racecheck.report.html import render_html

CHROMIUM = "chromium"
INSTALL_HINT = "install Debian's chromium: apt-get update && apt-get install -y chromium"
WINDOW_SIZE = "1200,900"
_ISOLATION_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


class ChromiumMissing(RuntimeError):
    pass


def chromium_binary() -> str:
    binary = shutil.which(CHROMIUM)
    if binary is None:
        raise ChromiumMissing(f"{CHROMIUM} not found on PATH; {INSTALL_HINT}")
    return binary


def headless_chromium(page: Path, action: Sequence[str], *, timeout: float = 60.0) -> str:
    """Run Chromium on a local page with a throwaway profile; its stdout (e.g. --dump-dom)."""
    binary = chromium_binary()
    with tempfile.TemporaryDirectory(prefix="racecheck-chromium-") as profile:
        completed = subprocess.run(
            [
                binary,
                *_ISOLATION_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW_SIZE}",
                *action,
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    return completed.stdout


def screenshot(html: str, output: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="racecheck-html-") as folder:
        page = Path(folder) / "report.html"
        page.write_text(html, encoding="utf-8")
        headless_chromium(page, [f"--screenshot={output.resolve()}"])


def mesh_no_barrier_sample() -> Report:
    """A hand-built stand-in for racecheck's report on examples/09 at P=1..4."""
    file = "examples/09_allreduce_mesh_bug_no_barrier.py"
    stage = SourceLocation(
        file=file, line=41, text="data = pl.store(local, [0, 0], data)  # @stage"
    )
    fetch = SourceLocation(file=file, line=47, text="recv = pld.tile.remote_load(  # @fetch")
    results = [
        ProgramResult(
            program="MeshAllreduceNoBarrier",
            ranks=1,
            verdict=Verdict.PROVED,
            model="allreduce-sum",
            events=4,
            seconds=0.01,
        )
    ]
    for ranks in range(2, 5):
        race = Finding(
            kind=FindingKind.RACE,
            detail="read-after-write",
            message="rank 1 can read rank 0's data_buf bytes 0..256 before rank 0 writes it: "
            "nothing orders the two",
            locations=(fetch, stage),
            ranks=(1, 0),
            regions=(Region(memory=0, owner=0, ranges=((0, 256),)),),
            witness=(
                WitnessStep(
                    rank=1,
                    index=2,
                    action="remote_load (read) rank 0's data_buf bytes 0..256",
                    location=fetch,
                    highlight=True,
                ),
                WitnessStep(
                    rank=0,
                    index=0,
                    action="afterwards: store (write) rank 0's data_buf bytes 0..256",
                    location=stage,
                    highlight=True,
                ),
            ),
            confirmed=True,
            diff=OutputDiff(
                tensor="y", rank=1, index=(0, 0), got=(2.0, 2.0, 2.0), golden=(3.0, 3.0, 3.0)
            ),
        )
        results.append(
            ProgramResult(
                program="MeshAllreduceNoBarrier",
                ranks=ranks,
                verdict=Verdict.BUG,
                findings=(race,),
                events=(ranks + 3) * ranks,
                seconds=0.02,
            )
        )
    return Report(file=file, results=tuple(results))


def real_report(path: str, ranks: str) -> Report:
    from racecheck.options import Options, parse_ranks
    from racecheck.pipeline import check

    return check(path, Options(ranks=parse_ranks(ranks)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", help="collective file; omit for the built-in sample")
    parser.add_argument("--ranks", default="1..4")
    parser.add_argument("--output", default="docs/mesh-no-barrier.png")
    parser.add_argument("--html", help="also keep the rendered HTML here")
    options = parser.parse_args(argv)
    report = real_report(options.file, options.ranks) if options.file else mesh_no_barrier_sample()
    html = render_html(report)
    if options.html:
        Path(options.html).write_text(html, encoding="utf-8")
    try:
        screenshot(html, Path(options.output))
    except ChromiumMissing as missing:
        print(f"make_screenshot: {missing}", file=sys.stderr)
        return 2
    print(f"wrote {options.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
