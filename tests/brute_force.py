"""The symbolic verdict held against brute force over every input in a small range
(the property tests of issue 23): shared by the generated all_to_all_v and routing
programs."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import racecheck
from racecheck.findings import Verdict

Inputs = tuple[tuple[str, int, float], ...]


def verdict_at_two(path: Path) -> tuple[Verdict, Inputs]:
    """The verdict at P = 2, and the inputs its first finding shows with (if any)."""
    (result,) = racecheck.verify(str(path), ranks="2").results
    inputs = next((finding.inputs for finding in result.findings if finding.inputs), ())
    return result.verdict, inputs


def agrees(
    symbolic: Verdict,
    concrete: dict[Hashable, Verdict],
    replayed: Hashable | None,
    *,
    complete: bool,
) -> None:
    """A proof has no concrete bug; a bug has one, and its counter-model (`replayed`,
    the key of the input it shows with, None: none in range) is one; with `complete`
    (the program is within the summary's fragment) no bug anywhere means a proof."""
    buggy = [key for key, verdict in concrete.items() if verdict is Verdict.BUG]
    if symbolic is Verdict.PROVED:
        assert not buggy, f"proved, but {buggy} are bugs"
    elif symbolic is Verdict.BUG:
        assert buggy
        if replayed is not None and replayed in concrete:
            assert concrete[replayed] is Verdict.BUG
    if complete and not buggy and all(verdict is Verdict.PROVED for verdict in concrete.values()):
        assert symbolic is Verdict.PROVED
