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
    options: Options | None = None,
) -> str:
    """The model text of the one program of `path` (or of `--program`) at `ranks` ranks,
    imported and run with `options` as `verify` reads them: the file's command line,
    environment and import root, `--repeat`, the input values `--seed` draws, `--cores`."""
    options = options or Options()
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
    from racecheck.cosim import unchecked_run
    from racecheck.load import discover, load_file

    loaded = load_file(path, config=options.import_config.at(ranks))
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
    trace = unchecked_run(instance, options).trace
    escaped = path.replace("*/", "* /")
    header = reason(
        ReasonCode.EXPORT_HEADER,
        program=spec.name,
        path=escaped,
        ranks=ranks,
        repeat=options.repeat,
    )
    return f"/* {header} */\n" + to_promela(trace)
