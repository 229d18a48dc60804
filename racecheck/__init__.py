"""racecheck: prove hand-rolled PyPTO collectives race-free, deadlock-free and correct.

report = racecheck.verify("08_allreduce_mesh.py", ranks="2..8")
racecheck.assert_proved("08_allreduce_mesh.py", ranks="2..8", expect="allreduce-sum")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from racecheck.config import Settings, given_options, options_of, settings_for
from racecheck.findings import Finding, FindingKind, ProgramResult, Report, Verdict

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
    ranks: str | Sequence[int] | None = None,
    engine: str | None = None,
    expect: str | None = None,
    repeat: int | None = None,
    programs: Sequence[str] | None = None,
    args: Mapping[str, object] | None = None,
    rank_param: str | None = None,
    timeout: float | None = None,
    seed: int | None = None,
    cores: int | None = None,
    runtime_order: str | None = None,
    reset_windows: bool | None = None,
    rounds: str | None = None,
    per_call: Mapping[str, str] | None = None,
    fallback: str | None = None,
    jobs: int | None = None,
    require_model: bool | None = None,
    require_every_p: bool | None = None,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
    import_root: str | None = None,
    assumptions: Sequence[str] | None = None,
    config: bool = True,
) -> Report:
    """Check every program of the file at every rank count; see docs/cli.md for the result.
    `ranks="all"` (or `"2.."`) proves for every P, else checks `fallback` (default 2..8);
    `require_every_p` makes a fallback unknown, `require_model` a proved P whose outputs
    match no golden model. `jobs` worker processes check the program and P units (default:
    the machine's cores). `argv`, `env` and `import_root` are what the file is imported
    with (`{P}` in argv or an env value is the rank count: the file is then imported
    afresh at each P). `assumptions` are preconditions on input tensors' elements, as
    `--assume` takes them (`"NAME in LOW..HIGH"`, `"NAME <= HIGH"`, `"NAME >= LOW"`).
    A keyword left out (None) takes the file's `[tool.racecheck]` setting in the nearest
    pyproject.toml (docs/ci.md; `config=False` ignores it), else the CLI's default.

    The options are validated as the CLI's are (`racecheck.options.Options`): a bad
    value raises `racecheck.errors.UsageError`, in the CLI's words."""
    from racecheck.pipeline import check

    given = Settings(
        ranks=ranks if ranks is None or isinstance(ranks, str) else tuple(ranks),
        fallback=fallback,
        engine=engine,
        expect=expect,
        programs=None if programs is None else tuple(programs),
        args=None if args is None else tuple((name, str(value)) for name, value in args.items()),
        rank_param=rank_param,
        repeat=repeat,
        timeout=timeout,
        seed=seed,
        cores=cores,
        runtime_order=runtime_order,
        reset_windows=reset_windows,
        rounds=rounds,
        per_call=None if per_call is None else tuple(per_call.items()),
        jobs=jobs,
        require_model=require_model,
        require_every_p=require_every_p,
        argv=None if argv is None else tuple(argv),
        env=None if env is None else tuple(env.items()),
        import_root=import_root,
        assumptions=None if assumptions is None else tuple(assumptions),
    )
    options = given_options(given)  # the caller's own mistakes first, in their words
    if config:
        options = options_of(settings_for(path, given))
    return check(path, options)


def assert_proved(path: str, **kwargs) -> Report:
    """Fail (AssertionError carrying the human report) unless every P is proved or skipped
    by the program's own rule, with at least one proved (exit status 0)."""
    report = verify(path, **kwargs)
    if report.exit_code != 0:
        from racecheck.report.text import render_text

        raise AssertionError(render_text(report, color=False))
    return report
