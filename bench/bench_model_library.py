"""Benchmark `racecheck verify` on a model library's communicating host entries (issue 22).

    python bench/bench_model_library.py --pypto-lib /path/to/pypto-lib [--ranks 2]

Each row runs one entry of a pypto-lib checkout at its smallest P with the command line
its own CI uses (`--argv "--ep {P}"` and kin) in a fresh process, and records the wall
time, the peak RSS (the child's rusage) and the verdict, against issue 22's target of
30 s and 2 GiB per entry. `ENTRIES` lists the largest entries (by host-tensor bytes)
first; rows whose file the checkout lacks are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

TARGET_SECONDS = 30.0
TARGET_MIB = 2048.0

# (file inside pypto-lib, the file's own command line), largest host tensors first
ENTRIES = (
    ("models/deepseek_v4_pro/decode_fwd.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/decode_fwd.py", "--ep {P}"),
    ("models/deepseek_v4_pro/moe.py", "--ep {P}"),
    ("models/deepseek_v4_flash_dspark/dspark_drafter.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/decode_layer.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/moe.py", "--ep {P}"),
    ("models/deepseek_v4_flash_mtp/lm_head.py", "--tp {P}"),
    ("models/deepseek_v4_flash_dspark/moe.py", "--ep {P}"),
    ("models/deepseek_v4_flash_dspark/decode_o_proj.py", "--tp {P}"),
    ("models/deepseek_v4_flash_mtp/prefill_cp_zigzag.py", "--cp {P}"),
    ("examples/advanced/allreduce.py", ""),
)


def measure(root: Path, file: str, argv: str, ranks: int, timeout: float) -> dict[str, object]:
    command = [sys.executable, "-m", "racecheck", "verify", file, "--ranks", str(ranks)]
    command += ["--argv", argv, "--jobs", "1", "--timeout", str(timeout), "--format", "json"]
    started = time.monotonic()
    child = subprocess.Popen(
        command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    stdout, stderr = child.stdout.read(), child.stderr.read()  # type: ignore[union-attr]
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    try:
        verdict = json.loads(stdout)["verdict"]
    except (ValueError, KeyError):
        verdict = f"exit {child.returncode}: {stderr.strip().splitlines()[-1:]}"
    return {"seconds": seconds, "peak_mib": usage.ru_maxrss / 1024, "verdict": verdict}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pypto-lib", required=True, help="a pypto-lib checkout")
    parser.add_argument("--ranks", type=int, default=2, help="the smallest P of the entries")
    parser.add_argument("--timeout", type=float, default=60.0)
    options = parser.parse_args()
    root = Path(options.pypto_lib)
    print("| entry | P | seconds | peak MiB | verdict | within 30 s and 2 GiB |")
    print("|---|---|---|---|---|---|")
    for file, argv in ENTRIES:
        if not (root / file).is_file():
            continue
        row = measure(root, file, argv, options.ranks, options.timeout)
        within = row["seconds"] <= TARGET_SECONDS and row["peak_mib"] <= TARGET_MIB  # type: ignore[operator]
        print(
            f"| {file} | {options.ranks} | {row['seconds']:.1f} | {row['peak_mib']:.0f} |"
            f" {row['verdict']} | {'yes' if within else 'no'} |"
        )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
