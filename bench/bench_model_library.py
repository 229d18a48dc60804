"""Benchmark `racecheck verify` on a model library's communicating host entries (issue 22).

    python bench/bench_model_library.py --pypto-lib /path/to/pypto-lib [--ranks 2]

Each row runs one file of a pypto-lib checkout at its smallest P with the command line
its own CI uses: pypto-lib's daily CI runs every model file with a `__main__` as
`PYTHONPATH=<checkout> python FILE -p a2a3 -d DEVICES` at its default world size of 2,
lending a file marked `# ci: devices=2` two devices (`DEEPSEEK_V4_VARIANT=pro` for the
V4-Pro set), so racecheck gets `--argv "-p a2a3 -d 0,1 --ep {P}"` (one device per rank;
`--tp`/`--cp`, the degree the file reads), `--env` for the variant and `--import-root`
the checkout. A fresh process per row records the wall time, the peak
RSS (the child's rusage) and the verdict (or the first thing that stops it), against
issue 22's target of 30 s and 2 GiB per entry. `ENTRIES` lists every file of pypto-lib
634e77bd that has a communicating host entry; rows whose file the checkout lacks are
skipped.

The scalars, dynamic dims and inputs of an entry come from the file's own test
(`racecheck.file_harness`), whose spec builders compute with torch: run this with an
interpreter that has torch to measure what a pypto-lib user gets (the first line says
which); without it most rows stop at an unbound scalar or dim.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_SECONDS = 30.0
TARGET_MIB = 2048.0
OVERRUN = 1.5  # a row still running this many times its --timeout is killed

# (file inside pypto-lib, the degree it reads from sys.argv), as pypto-lib's CI runs them
ENTRIES = (
    ("examples/advanced/allreduce.py", ""),
    ("models/deepseek_v4_flash_dspark/decode_csa.py", "--tp {P}"),
    ("models/deepseek_v4_flash_dspark/decode_hca.py", "--tp {P}"),
    ("models/deepseek_v4_flash_dspark/decode_o_proj.py", "--tp {P}"),
    ("models/deepseek_v4_flash_dspark/decode_swa.py", "--tp {P}"),
    ("models/deepseek_v4_flash_dspark/dspark_drafter.py", "--ep {P}"),
    ("models/deepseek_v4_flash_dspark/lm_head.py", "--tp {P}"),
    ("models/deepseek_v4_flash_dspark/moe.py", "--ep {P}"),
    ("models/deepseek_v4_flash_dspark/prefill_kv_allgather.py", "--tp {P}"),
    ("models/deepseek_v4_flash_mtp/decode_fwd.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/decode_fwd_mtp.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/decode_layer.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/decode_mtp.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/lm_head.py", "--tp {P}"),
    ("models/deepseek_v4_flash_mtp/moe.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_cp_csa.py", "--cp {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_cp_fwd_draft.py", "--cp {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_cp_hca.py", "--cp {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_cp_layer.py", "--cp {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_cp_swa.py", "--cp {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_cp_zigzag.py", "--cp {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_fwd.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_layer.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_mtp.py", "--ep {P}"),
    ("models/deepseek_v4_pro/decode_fwd.py", "--ep {P}"),
    ("models/deepseek_v4_pro/decode_layer.py", "--ep {P}"),
    ("models/deepseek_v4_pro/decode_mtp.py", "--ep {P}"),
    ("models/deepseek_v4_pro/lm_head.py", "--tp {P}"),
    ("models/deepseek_v4_pro/moe.py", "--ep {P}"),
    ("models/deepseek_v4_pro/prefill_fwd.py", "--ep {P}"),
    ("models/deepseek_v4_pro/prefill_layer.py", "--ep {P}"),
    ("models/deepseek_v4_pro/prefill_mtp.py", "--ep {P}"),
)
CI_ARGV = "-p a2a3"  # the platform flag every CI run passes, before its device list
PRO_ENV = "DEEPSEEK_V4_VARIANT=pro"  # the V4-Pro set runs with it


def file_argv(degree: str, ranks: int) -> str:
    """The file's command line at P = `ranks`: CI's, one device per rank, the degree."""
    devices = ",".join(str(device) for device in range(ranks))
    return f"{CI_ARGV} -d {devices} {degree}".strip()


def measure(root: Path, file: str, argv: str, ranks: int, timeout: float) -> dict[str, object]:
    """One fresh `racecheck verify` of the row; one still running `OVERRUN` times its
    --timeout after it started (a stage that does not read the clock) is killed."""
    command = [sys.executable, "-m", "racecheck", "verify", file, "--ranks", str(ranks)]
    command += ["--argv", file_argv(argv, ranks), "--import-root", str(root)]
    if "deepseek_v4_pro/" in file:
        command += ["--env", PRO_ENV]
    command += ["--jobs", "1", "--timeout", str(timeout), "--format", "json"]
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(command, cwd=root, stdout=out, stderr=err, start_new_session=True)
        killed = False
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if not killed and time.monotonic() - started > OVERRUN * timeout:
                os.killpg(child.pid, signal.SIGKILL)
                killed = True
            time.sleep(0.2)
        seconds = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        verdict = _verdict(out.read(), err.read())
    if killed:
        verdict = f"killed after {seconds:.0f} s: still running {OVERRUN:g} times past --timeout"
    return {"seconds": seconds, "peak_mib": usage.ru_maxrss / 1024, "verdict": verdict}


def _verdict(stdout: str, stderr: str) -> str:
    """The file's verdict; for one that is not decided, the first thing that stopped it
    (the first undecided program's reason, or the error racecheck printed)."""
    try:
        report = json.loads(stdout)
    except ValueError:
        lines = stderr.strip().splitlines()
        return f"error: {lines[-1] if lines else '(nothing printed)'}"
    verdict = str(report["verdict"])
    stopped = [r for r in report["results"] if r["verdict"] not in ("proved", "bug")]
    if stopped:
        verdict += f": {stopped[0]['message']}"
    elif report["errors"]:
        verdict += f": {report['errors'][0]}"
    return verdict.replace("|", "/")[:200]


def _selected(file: str, only: list[str]) -> bool:
    return not only or any(part in file for part in only)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pypto-lib", required=True, help="a pypto-lib checkout")
    parser.add_argument("--ranks", type=int, default=2, help="the smallest P of the entries")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument(
        "--only", action="append", default=[], help="rows whose file contains this (repeatable)"
    )
    options = parser.parse_args()
    root = Path(options.pypto_lib)
    torch = importlib.util.find_spec("torch") is not None
    print(f"torch {'installed' if torch else 'not installed'} ({sys.executable})\n")
    print("| entry | --argv | P | seconds | peak MiB | verdict | within 30 s and 2 GiB |")
    print("|---|---|---|---|---|---|---|")
    for file, argv in ENTRIES:
        if not (root / file).is_file() or not _selected(file, options.only):
            continue
        row = measure(root, file, argv, options.ranks, options.timeout)
        within = row["seconds"] <= TARGET_SECONDS and row["peak_mib"] <= TARGET_MIB  # type: ignore[operator]
        print(
            f"| {file} | {file_argv(argv, options.ranks)} | {options.ranks} |"
            f" {row['seconds']:.1f} | {row['peak_mib']:.0f} |"
            f" {row['verdict']} | {'yes' if within else 'no'} |"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
