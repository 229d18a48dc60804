"""Running SPIN on a trace's Promela model: an independent check of racecheck's verdicts.

Decides: the race, stale-read and deadlock verdicts of a trace (`check_with_spin`),
from one exhaustive SPIN safety search of the model of `racecheck.export.promela`:
every question (ordering, or whether an event runs at all) is answered by whether its
marker statement is reached (SPIN's
"unreached in proctype" report), and a deadlock exists iff the search meets an invalid
end state. The three verdicts come from one compiled verifier per trace.

How SPIN is run, in a temporary directory: `spin -a model.pml`; `gcc -O2 -DSAFETY
-DNOREDUCE -DMEMLIM=<MB>` (-O0 for small models, where compiling dominates); `./pan -c0
-m<depth> -w<hash bits>`. `-c0` keeps searching past invalid
end states so that the reachability report covers the whole state space; `-E` and `-n`
are not given because both the end-state check and the unreached report are needed.
Partial-order reduction is off: every step of the model reads or writes a global, so
it would reduce nothing, and without it the exactness argument needs no theory.

Unknown policy: a search that is not exhaustive (time limit, memory limit, depth
limit, a compiler or SPIN failure) raises EngineUnknown; a verdict is only ever read
from a completed search. A missing `spin` or `gcc` raises SpinUnavailable.

Limitations: the state space is every interleaving of the kept events (no data-event
collapsing as in the explore engine), so it grows fast with the rank count; signal
cells are 32-bit ints, so sums past 2^31 would wrap where racecheck's engines do not.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from racecheck.errors import EngineUnknown
from racecheck.events import Trace
from racecheck.export.promela import PromelaModel, write_model
from racecheck.export.properties import Question, Verdicts, decide, questions
from racecheck.report.reasons import ReasonCode, reason

MODEL_NAME = "model.pml"
SMALL_MODEL_STATES = 200_000  # below this, compiling pan.c fast beats running it fast


class SpinUnavailable(RuntimeError):
    """The `spin` binary or the C compiler its verifiers need is not installed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpinRun:
    """What one exhaustive search established."""

    reached: frozenset[Question]  # questions whose marker is reachable: answered yes
    deadlock: bool
    states: int
    megabytes: float  # pan's own memory use
    seconds: float  # wall-clock, spin + gcc + pan


@dataclass(frozen=True, slots=True, kw_only=True)
class SpinCheck:
    verdicts: Verdicts
    answers: dict[Question, bool]  # every question the verdicts rest on
    run: SpinRun


def check_with_spin(trace: Trace, *, timeout: float = 300.0, memory_mb: int = 8192) -> SpinCheck:
    """Race, stale-read and deadlock verdicts of `trace`, decided by SPIN alone."""
    asked = questions(trace)
    run = run_spin(write_model(trace, asked), timeout=timeout, memory_mb=memory_mb)
    answers = {question: question in run.reached for question in asked}
    verdicts = decide(trace, answers, deadlock=run.deadlock)
    return SpinCheck(verdicts=verdicts, answers=answers, run=run)


def require_spin() -> None:
    for tool in ("spin", "gcc"):
        if shutil.which(tool) is None:
            raise SpinUnavailable(reason(ReasonCode.SPIN_NOT_ON_PATH, tool=tool))


def run_spin(model: PromelaModel, *, timeout: float, memory_mb: int) -> SpinRun:
    """Search the whole state space of `model`; EngineUnknown if the search cannot finish."""
    require_spin()
    started = time.monotonic()
    deadline = started + timeout
    with tempfile.TemporaryDirectory(prefix="racecheck-spin-") as folder:
        work = Path(folder)
        (work / MODEL_NAME).write_text(model.text)
        _run(["spin", "-a", MODEL_NAME], work, deadline, "spin -a")
        bound = _position_bound(model)
        optimise = "-O2" if bound > SMALL_MODEL_STATES else "-O0"
        compile_flags = [optimise, "-DSAFETY", "-DNOREDUCE", f"-DMEMLIM={memory_mb}"]
        _run(["gcc", *compile_flags, "-o", "pan", "pan.c"], work, deadline, "gcc")
        depth = 4 * model.text.count("\n") + 1000  # a path executes each statement at most once
        hash_bits = min(max(bound.bit_length(), 16), 26)
        output = _run(["./pan", "-c0", f"-m{depth}", f"-w{hash_bits}"], work, deadline, "pan")
    _require_complete(output)
    unreached = _unreached_lines(output)
    reached = frozenset(q for line, q in model.markers.items() if line not in unreached)
    return SpinRun(
        reached=reached,
        deadlock=_number(output, r"errors: (\d+)") > 0,
        states=int(_number(output, r"(\d+) states, stored")),
        megabytes=_number(output, r"([\d.]+)\s+total actual memory usage"),
        seconds=time.monotonic() - started,
    )


def _position_bound(model: PromelaModel) -> int:
    """Combinations of rank positions: sizes the hash table and picks the optimisation level.

    Only a tuning hint (cell values can multiply the real state count); it never
    affects a verdict.
    """
    return math.prod(steps + 1 for steps in model.steps)


def _run(argv: list[str], work: Path, deadline: float, step: str) -> str:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise EngineUnknown(reason(ReasonCode.SPIN_NO_TIME_LEFT, step=step))
    try:
        done = subprocess.run(
            argv, cwd=work, capture_output=True, text=True, timeout=remaining, check=False
        )
    except subprocess.TimeoutExpired:
        raise EngineUnknown(reason(ReasonCode.SPIN_TIMED_OUT, step=step)) from None
    except FileNotFoundError as missing:
        why = reason(ReasonCode.SPIN_CANNOT_RUN, tool=argv[0], why=str(missing))
        raise SpinUnavailable(why) from None
    output = done.stdout + done.stderr
    if done.returncode != 0:
        tail = output.strip()[-500:]
        raise EngineUnknown(
            reason(ReasonCode.SPIN_STEP_FAILED, step=step, status=done.returncode, output=tail)
        )
    return output


INCOMPLETE_SIGNS = (
    "max search depth too small",
    "out of memory",
    "MEMLIM",
    "Search not completed",
)


def _require_complete(output: str) -> None:
    for sign in INCOMPLETE_SIGNS:
        if sign in output:
            raise EngineUnknown(reason(ReasonCode.SPIN_NOT_EXHAUSTIVE, sign=sign))
    if "Full statespace search" not in output or "unreached in proctype" not in output:
        raise EngineUnknown(reason(ReasonCode.SPIN_UNEXPECTED_OUTPUT, output=output.strip()[-500:]))


UNREACHED_LINE = re.compile(rf"^\s+{re.escape(MODEL_NAME)}:(\d+), state \d+, ", re.MULTILINE)


def _unreached_lines(output: str) -> set[int]:
    return {int(line) for line in UNREACHED_LINE.findall(output)}


def _number(output: str, pattern: str) -> float:
    found = re.search(pattern, output)
    if found is None:
        raise EngineUnknown(reason(ReasonCode.SPIN_UNREADABLE_OUTPUT, pattern=pattern))
    return float(found.group(1))
