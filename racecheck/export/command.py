"""`racecheck export FILE --ranks P --format promela`: one program's trace as a model file.

Loads and traces the program exactly as `verify` does (frontend, then co-simulation
under the default schedule) and renders the trace; it decides nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from racecheck.errors import ProgramRejected, UsageError
from racecheck.export.promela import to_promela
from racecheck.options import Options
from racecheck.report.reasons import ReasonCode, reason

FORMATS = ("promela",)


def export_command(
    path: str,
    ranks: int,
    fmt: str = "promela",
    *,
    programs: tuple[str, ...] = (),
    args: Mapping[str, str] | None = None,
    rank_param: str | None = None,
    repeat: int = 1,
    seed: int = 0,
) -> str:
    """The model text of the one program of `path` (or of `--program`) at `ranks` ranks,
    traced with the input values `seed` draws, as `verify --seed` traces it."""
    if fmt not in FORMATS:
        raise UsageError(
            reason(
                ReasonCode.USAGE_UNKNOWN_CHOICE,
                what="export format",
                name=repr(fmt),
                names=", ".join(FORMATS),
            )
        )
    # Imported on use, like the CLI's other commands: tracing pulls in the whole frontend.
    from racecheck.cosim import UNCHECKED_RUN_SECONDS, Simulator
    from racecheck.load import discover, load_file

    loaded = load_file(path)
    specs = discover(loaded, programs=programs, args=dict(args or {}), rank_param=rank_param)
    if len(specs) != 1:
        names = ", ".join(spec.name for spec in specs) or "none"
        raise UsageError(
            reason(ReasonCode.EXPORT_ONE_PROGRAM, path=path, count=len(specs), names=names)
        )
    (spec,) = specs
    try:
        instance = spec.instantiate(ranks)
    except ProgramRejected as rejected:
        raise UsageError(
            reason(ReasonCode.EXPORT_REJECTED, program=spec.name, ranks=ranks, why=rejected.message)
        ) from None
    options = Options(repeat=repeat, seed=seed, timeout=UNCHECKED_RUN_SECONDS)
    trace = Simulator(instance, options).run().trace
    escaped = path.replace("*/", "* /")
    header = reason(
        ReasonCode.EXPORT_HEADER, program=spec.name, path=escaped, ranks=ranks, repeat=repeat
    )
    return f"/* {header} */\n" + to_promela(trace)
