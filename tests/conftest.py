"""Shared fixtures, and hypothesis settings.

Hypothesis runs derandomized (the same examples every run, so a green build stays
green, on any machine); `RACECHECK_HYPOTHESIS=hunt` draws new examples each run to
keep hunting locally.

Work several test files assert different things about is done once per session here
(docs in tests/README.md, "Running them")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

import racecheck
from racecheck.findings import Report

settings.register_profile("deterministic", derandomize=True, print_blob=True, database=None)
settings.register_profile("hunt", print_blob=True)
settings.load_profile(
    "hunt" if os.environ.get("RACECHECK_HYPOTHESIS") == "hunt" else "deterministic"
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CHUNK_TAIL = EXAMPLES / "32_allreduce_two_phase_bug_chunk_tail.py"
FAR = 1e15  # a --timeout no run reaches: the report is the machine's, not the clock's


@pytest.fixture(scope="session")
def chunk_tail_every_p() -> Report:
    """Example 32 at `--ranks all` (one worker): the every-P proof, the P it derives
    and each verdict, read by test_allp.py (what it finds) and test_budgets.py (that
    load and a racing clock leave it the same)."""
    return racecheck.verify(str(CHUNK_TAIL), ranks="all", timeout=FAR, jobs=1)
