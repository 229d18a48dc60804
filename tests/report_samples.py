"""Hand-built reports for the renderer and CLI tests: proved, bug with witness and diff,
skipped, unknown, and one race found at several rank counts."""

from __future__ import annotations

from racecheck.events import NotifyOp, Region, SourceLocation
from racecheck.findings import (
    Finding,
    FindingKind,
    OutputDiff,
    Place,
    ProgramResult,
    Report,
    Severity,
    StepKind,
    StepStatus,
    Verdict,
    WitnessStep,
)

FILE = "examples/08_allreduce_mesh.py"
STORE = SourceLocation(file=FILE, line=30, text="data = pl.store(local, [0, 0], data)")
LOAD = SourceLocation(
    file=FILE, line=42, text="recv = pld.tile.remote_load(data, peer=peer, offsets=[0, 0])"
)
NOTIFY = SourceLocation(file=FILE, line=33, text="pld.system.notify(signal, peer=peer)")


def cell(owner: int, *index: int) -> Place:
    """Signal cell `signal[owner][index]` (one INT32 per row)."""
    return Place(
        memory="signal", owner=owner, ranges=((4 * index[0], 4 * index[0] + 4),), cell=index
    )


def data(owner: int) -> Place:
    return Place(memory="data", owner=owner, ranges=((0, 256),))


def notify_step(
    rank: int, index: int, target: Place, *, op: NotifyOp = NotifyOp.SET
) -> WitnessStep:
    return WitnessStep(
        rank=rank, index=index, kind=StepKind.NOTIFY, location=NOTIFY, place=target, op=op, value=1
    )


def race(ranks: tuple[int, int] = (0, 1), *, confirmed: bool = True) -> Finding:
    reader, writer = ranks
    return Finding(
        kind=FindingKind.RACE,
        detail="read-after-write",
        locations=(LOAD, STORE),
        ranks=ranks,
        regions=(Region(memory=0, owner=writer, ranges=((0, 256),)),),
        place=data(writer),
        witness=(
            notify_step(1, 0, cell(0, 1, 0), op=NotifyOp.ATOMIC_ADD),
            WitnessStep(
                rank=reader,
                index=7,
                kind=StepKind.READ,
                call="remote_load",
                place=data(writer),
                location=LOAD,
                highlight=True,
            ),
            WitnessStep(
                rank=writer,
                index=1,
                kind=StepKind.WRITE,
                call="store",
                place=data(1),
                status=StepStatus.AFTERWARDS,
                location=STORE,
                highlight=True,
            ),
        ),
        confirmed=confirmed,
        diff=OutputDiff(
            tensor="y", rank=2, index=(0, 0), got=(1.0, 0.0, 0.0, 0.0), golden=(6.0,) * 4
        ),
    )


def stale_warning() -> Finding:
    """Rank 0 reads bytes of `data[0]` nothing writes: a warning while the outputs are right."""
    return Finding(
        kind=FindingKind.STALE_READ,
        detail="",
        locations=(LOAD,),
        ranks=(0,),
        place=Place(memory="data", owner=0, ranges=((256, 512),)),
        severity=Severity.WARNING,
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
