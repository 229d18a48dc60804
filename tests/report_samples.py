"""Hand-built reports for the renderer and CLI tests: proved, bug with witness and diff,
skipped, unknown, and one race found at several rank counts."""

from __future__ import annotations

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

FILE = "examples/08_allreduce_mesh.py"
STORE = SourceLocation(file=FILE, line=30, text="data = pl.store(local, [0, 0], data)")
LOAD = SourceLocation(
    file=FILE, line=42, text="recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0])"
)
NOTIFY = SourceLocation(file=FILE, line=33, text="pld.system.notify(signal, peer=peer)")


def race(ranks: tuple[int, int] = (0, 1), *, confirmed: bool = True) -> Finding:
    reader, writer = ranks
    return Finding(
        kind=FindingKind.RACE,
        detail="read-after-write",
        message=f"rank {reader} can read data[{writer}] bytes 0..256 before rank {writer} writes",
        locations=(LOAD, STORE),
        ranks=ranks,
        regions=(Region(memory=0, owner=writer, ranges=((0, 256),)),),
        witness=(
            WitnessStep(rank=1, index=0, action="notify signal[0][1, 0] += 1", location=NOTIFY),
            WitnessStep(
                rank=reader,
                index=7,
                action=f"remote_load (read) data[{writer}] bytes 0..256",
                location=LOAD,
                highlight=True,
            ),
            WitnessStep(
                rank=writer,
                index=1,
                action="afterwards: store (write) data[1] bytes 0..256",
                location=STORE,
                highlight=True,
            ),
        ),
        confirmed=confirmed,
        diff=OutputDiff(
            tensor="y", rank=2, index=(0, 0), got=(1.0, 0.0, 0.0, 0.0), golden=(6.0,) * 4
        ),
    )


def result(ranks: int, verdict: Verdict, **fields: object) -> ProgramResult:
    defaults: dict[str, object] = {"events": 13 * ranks, "seconds": 0.03, "engine": "monotone"}
    defaults.update(fields)
    return ProgramResult(program="MeshAllreduce", ranks=ranks, verdict=verdict, **defaults)  # type: ignore[arg-type]


def mixed_report() -> Report:
    """One of each verdict; the race occurs at P=3 and P=4 (different rank pairs)."""
    return Report(
        file=FILE,
        results=(
            result(2, Verdict.PROVED, model="allreduce-sum", notes=("signal cells left non-zero",)),
            result(3, Verdict.BUG, findings=(race((0, 1)),)),
            result(4, Verdict.BUG, findings=(race((2, 3)),), notes=("signal cells left non-zero",)),
            result(5, Verdict.SKIPPED, message="SIZE must be divisible by the rank count"),
            result(6, Verdict.UNKNOWN, message="timeout after 60s"),
        ),
    )


def proved_report(ranks: tuple[int, ...] = (2, 3, 4)) -> Report:
    return Report(
        file=FILE,
        results=tuple(result(p, Verdict.PROVED, model="allreduce-sum") for p in ranks),
    )
