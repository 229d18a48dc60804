"""The part of a long witness a person needs to read: the steps the finding is about, and
the synchronisation chain that lets each of them run — the last wait before it on its
rank, with the write into that wait's cell that let it pass (the last one before it),
and that write's own chain. For a wait that never passes, the last writes into its
cell are what makes it fail. The other steps are elided from the text with their count;
the witness itself (JSON, SARIF, HTML, replay) keeps every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from racecheck.findings import Place, StepKind, StepStatus, WitnessStep

SHORT = 24  # a witness this long or shorter is shown whole
FOCUS = 4  # at most this many of the steps the finding is about, the first ones
_WRITES = (StepKind.NOTIFY, StepKind.WRITE, StepKind.ATOMIC_ADD)


@dataclass(frozen=True, slots=True)
class Elided:
    """`count` consecutive witness steps left out of the text."""

    count: int


def shortened(witness: Sequence[WitnessStep]) -> list[tuple[int, WitnessStep] | Elided]:
    """The witness as numbered steps (1-based, the full witness's numbers) and elisions."""
    if len(witness) <= SHORT:
        return list(enumerate(witness, start=1))
    kept = _kept(witness)
    shown: list[tuple[int, WitnessStep] | Elided] = []
    skipped = 0
    for position, step in enumerate(witness):
        if position in kept:
            if skipped:
                shown.append(Elided(skipped))
            shown.append((position + 1, step))
            skipped = 0
        else:
            skipped += 1
    if skipped:
        shown.append(Elided(skipped))
    return shown


def _kept(witness: Sequence[WitnessStep]) -> set[int]:
    focus = [i for i, step in enumerate(witness) if step.highlight][:FOCUS]
    if not focus:
        focus = [len(witness) - 1]
    kept: set[int] = set()
    pending = list(focus)
    for position in focus:
        step = witness[position]
        if step.kind is StepKind.WAIT and step.status is StepStatus.BLOCKED:
            # why it never passes: the last writes into its cell
            pending += _writes_into(witness, step.place, len(witness))[-FOCUS:]
    while pending:
        position = pending.pop()
        if position in kept:
            continue
        kept.add(position)
        pending += _chain(witness, position)
    return kept


def _chain(witness: Sequence[WitnessStep], position: int) -> list[int]:
    """The last wait before `position` on its rank, with the last write into its cell
    before it (the one that let it pass); their chains follow from them."""
    rank = witness[position].rank
    for earlier in range(position - 1, -1, -1):
        step = witness[earlier]
        if step.rank == rank and step.kind is StepKind.WAIT:
            return [earlier, *_writes_into(witness, step.place, earlier)[-1:]]
    return []


def _writes_into(witness: Sequence[WitnessStep], place: Place | None, before: int) -> list[int]:
    if place is None or place.cell is None:
        return []
    return [i for i in range(before) if witness[i].kind in _WRITES and witness[i].place == place]
