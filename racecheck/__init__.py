"""racecheck: prove hand-rolled PyPTO collectives race-free, deadlock-free and correct.

report = racecheck.verify("08_allreduce_mesh.py", ranks="2..8")
racecheck.assert_proved("08_allreduce_mesh.py", ranks="2..8", expect="allreduce-sum")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from racecheck.findings import Finding, FindingKind, ProgramResult, Report, Verdict
from racecheck.options import (
    Options,
    engine_choice,
    machine_cores,
    parse_every_p,
    parse_ranks,
    runtime_order_choice,
)

__all__ = [
    "Finding",
    "FindingKind",
    "ProgramResult",
    "Report",
    "Verdict",
    "assert_proved",
    "verify",
]


def verify(
    path: str,
    *,
    ranks: str | Sequence[int] = "2..8",
    engine: str = "auto",
    expect: str | None = None,
    repeat: int = 1,
    programs: Sequence[str] = (),
    args: Mapping[str, object] = {},  # noqa: B006 - read-only default
    rank_param: str | None = None,
    timeout: float = 60.0,
    seed: int = 0,
    runtime_order: str = "current",
    reset_windows: bool = False,
    fallback: str | None = None,
    jobs: int | None = None,
    argv: Sequence[str] = (),
    env: Mapping[str, str] = {},  # noqa: B006 - read-only default
    import_root: str | None = None,
) -> Report:
    """Check every program of the file at every rank count; see docs/cli.md for the result.
    `ranks="all"` (or `"2.."`) proves for every P, else checks `fallback` (default 2..8).
    `jobs` worker processes check the program and P units (default: the machine's cores).
    `argv`, `env` and `import_root` are what the file is imported with (`{P}` in argv or an
    env value is the rank count: the file is then imported afresh at each P).

    The options are validated as the CLI's are (`racecheck.options.Options`): a bad
    value raises `racecheck.errors.UsageError`."""
    from racecheck.check import check

    every_p = parse_every_p(ranks, fallback) if isinstance(ranks, str) else None
    if every_p is not None:
        counts = every_p.fallback
    else:
        counts = parse_ranks(ranks) if isinstance(ranks, str) else tuple(sorted(set(ranks)))
    options = Options(
        every_p=every_p,
        ranks=counts,
        engine=engine_choice(engine),
        programs=tuple(programs),
        args=tuple((name, str(value)) for name, value in args.items()),
        rank_param=rank_param,
        repeat=repeat,
        expect=expect,
        timeout=timeout,
        seed=seed,
        runtime_order=runtime_order_choice(runtime_order),
        reset_windows=reset_windows,
        jobs=machine_cores() if jobs is None else jobs,
        argv=tuple(argv),
        env=tuple(env.items()),
        import_root=import_root,
    )
    return check(path, options)


def assert_proved(path: str, **kwargs) -> Report:
    """Fail (AssertionError carrying the human report) unless every P is proved or skipped
    by the program's own rule, with at least one proved (exit status 0)."""
    report = verify(path, **kwargs)
    if report.exit_code != 0:
        from racecheck.report.text import render_text

        raise AssertionError(render_text(report, color=False))
    return report
