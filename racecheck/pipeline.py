"""The pipeline, as its stages: load the file's programs → for each program at each P,
every path of it (`racecheck.stages.check_path`: build → co-simulate → engines →
analysis → reference → alternatives → verdict), its tasks as threads in every order
PyPTO's runtime allows (`racecheck.cosim.threads`) → the verdict across P
(`racecheck.judge`) and the gate's demands (`racecheck.gate`) → the report. `check`
reads as that list. `docs/architecture.md` names the record that crosses each stage's
boundary and every place a stage re-enters the co-simulation.

With `--jobs N` the (program, P) units are checked in worker processes
(`racecheck.workers`); what depends on several units — the cross-P step, `--ranks
all`'s choice of the next P to check — is decided here, from their results in order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from racecheck import clock, gate, judge
from racecheck.errors import TracingError, UnsupportedConstruct
from racecheck.file_goldens import golden_notes
from racecheck.findings import ProgramResult, Report, noted
from racecheck.judge import Outcome
from racecheck.load import ProgramSpec, load_programs
from racecheck.models import parse_model
from racecheck.options import EveryP, Options
from racecheck.paths import Exploration
from racecheck.project_imports import describe_import, forget_project_modules
from racecheck.report.reasons import ReasonCode, has_code, reason
from racecheck.session import Session
from racecheck.stages import assumed_state, check_path, outcome_of
from racecheck.while_loops import while_notes
from racecheck.workers import Workers

__all__ = ["check", "check_path", "check_program"]

Progress = Callable[[str, int], None]


def check(path: str, options: Options, *, progress: Progress | None = None) -> Report:
    """Every program of the file at every P of `options`, judged and reported."""
    with Workers(options.jobs) as workers, Session():
        if options.expect is not None:
            parse_model(options.expect)  # a bad model name is a usage error before any work
        specs = _programs(path, options)
        imported_with = describe_import(options.import_config, path)  # before units reload
        file = _File(path=path, options=options, workers=workers)
        errors: list[str] = []
        results = _every_unit(file, specs, errors, progress)
        return Report(
            file=path,
            results=tuple(_judged(file, specs, results)),
            errors=tuple(dict.fromkeys(errors)),
            imported_with=imported_with,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class _File:
    """The file being checked, with what every program of it is checked with."""

    path: str
    options: Options
    workers: Workers


@dataclass(frozen=True, slots=True, kw_only=True)
class _Unit:
    """One program at one P, as a worker process gets it: the program is found again by
    its place among the file's programs (`_programs`), with the same options."""

    path: str
    program: int
    ranks: int
    options: Options


@dataclass(frozen=True, slots=True, kw_only=True)
class _Checked:
    outcome: Outcome
    error: str | None = None  # a program the DSL could not follow at this P
    printed: str = ""  # what the user's code printed while a worker checked the unit


def _every_unit(
    file: _File,
    specs: Sequence[ProgramSpec],
    errors: list[str],
    progress: Progress | None,
) -> list[ProgramResult]:
    """Each program at each P of the options (one P for a single-device program), or
    proved for every P with `--ranks all`."""
    options = file.options
    if options.every_p is not None:
        return [
            result
            for index, spec in enumerate(specs)
            for result in (
                _check_ranks(file, specs, index, (1,), errors, progress)
                if spec.single_device
                else _check_every_p(file, specs, index, options.every_p, errors, progress)
            )
        ]
    units = [
        (index, ranks)
        for index, spec in enumerate(specs)
        for ranks in ((1,) if spec.single_device else options.ranks)
    ]
    return _check_units(file, specs, units, errors, progress)


def _judged(
    file: _File, specs: Sequence[ProgramSpec], results: Sequence[ProgramResult]
) -> list[ProgramResult]:
    """The results as the file's report gives them: a single-device program's noted,
    the gate's demands applied, the file's own notes added."""
    single = {spec.name for spec in specs if spec.single_device}
    results = [
        noted(result, judge.SINGLE_DEVICE_NOTE) if result.program in single else result
        for result in results
    ]
    results = gate.demand(results, file.options, single)
    # how a Python while was followed (PyPTO compiles it), and the file's own inputs and golden
    notes = (*while_notes(file.path), *golden_notes(file.path))
    return [dataclasses.replace(result, notes=(*result.notes, *notes)) for result in results]


def _programs(path: str, options: Options) -> list[ProgramSpec]:
    """The file's programs, from a fresh import of it and of the project modules it
    imports."""
    forget_project_modules()
    return load_programs(path, options)


def _check_units(
    file: _File,
    specs: Sequence[ProgramSpec],
    units: Sequence[tuple[int, int]],
    errors: list[str],
    progress: Progress | None,
) -> list[ProgramResult]:
    """The programs at the P of `units` (program index, P) — in worker processes with
    `--jobs` — each program's P judged together (the cross-P step) in this process."""
    checked: Iterator[_Checked]
    work = [
        _Unit(path=file.path, program=index, ranks=ranks, options=file.options)
        for index, ranks in units
    ]
    # Each unit imports the file afresh, in a worker or here: what one unit's run leaves
    # in the user's module (a program memoised per size) never reaches another, so the
    # report is the same for every --jobs.
    if len(units) == 1 or not file.workers.parallel:
        checked = map(_check_unit, work)
    else:
        checked = file.workers.map(_check_unit, work)
    outcomes: dict[int, list[Outcome]] = {}
    for index, ranks in units:
        if progress is not None:
            progress(specs[index].name, ranks)
        found = next(checked)
        sys.stdout.write(found.printed)
        if found.error is not None:
            errors.append(found.error)
        outcomes.setdefault(index, []).append(found.outcome)
    return [
        judge.decide(outcome)
        for program in outcomes.values()
        for outcome in judge.across_ranks(program, file.options)
    ]


def _check_unit(unit: _Unit) -> _Checked:
    """A worker process's unit, in a session of its own. What the user's code prints
    goes where it goes inline: loading's output once (the parent loaded the file), the
    check's output to the parent, which prints it in the units' order."""
    with Session():
        with contextlib.redirect_stdout(io.StringIO()):
            specs = _programs(unit.path, unit.options)
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            checked = _checked(specs[unit.program], unit.ranks, unit.options)
        return dataclasses.replace(checked, printed=printed.getvalue())


def _checked(spec: ProgramSpec, ranks: int, options: Options) -> _Checked:
    started = time.monotonic()
    try:
        return _Checked(outcome=_check_one(spec, ranks, options))
    except (UnsupportedConstruct, TracingError) as error:
        # One program the DSL cannot follow must not hide the file's other programs.
        unknown = outcome_of(spec, ranks, started, unknown=error.message)
        return _Checked(outcome=unknown, error=error.render())


def _check_ranks(
    file: _File,
    specs: Sequence[ProgramSpec],
    index: int,
    counts: tuple[int, ...],
    errors: list[str],
    progress: Progress | None,
) -> list[ProgramResult]:
    """One program at each P of `counts`, judged together."""
    return _check_units(file, specs, [(index, ranks) for ranks in counts], errors, progress)


def _check_every_p(
    file: _File,
    specs: Sequence[ProgramSpec],
    index: int,
    every_p: EveryP,
    errors: list[str],
    progress: Progress | None,
) -> list[ProgramResult]:
    """`--ranks all` (`racecheck.allp.driver`), its concrete checks by this pipeline."""
    from racecheck.allp.driver import check_every_p  # only --ranks all: 40 ms

    def concrete(counts: tuple[int, ...]) -> list[ProgramResult]:
        return _check_ranks(file, specs, index, counts, errors, progress)

    def fresh() -> ProgramSpec:
        with contextlib.redirect_stdout(io.StringIO()):  # loading printed once already
            return _programs(file.path, file.options)[index]

    options = file.options
    return check_every_p(
        fresh(),
        every_p,
        repeat=2 if options.per_call else options.repeat,  # per-call values: one call each
        timeout=options.timeout,
        concrete=concrete,
        fresh=fresh,
        assume=options.assume,
    )


def check_program(spec: ProgramSpec, ranks: int, options: Options) -> ProgramResult:
    """One program at one P, judged on its own (without the cross-P step)."""
    return judge.decide(_check_one(spec, ranks, options))


def _check_one(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    with clock.unit(options.timeout):  # one --timeout for the program at this P
        return _check_within(spec, ranks, options)


def _check_within(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    if options.reset_windows and options.repeat > 1:
        carried = assumed_state(spec, ranks, options)
        if carried is not None:
            why = reason(ReasonCode.RESET_ASSUMED_STATE, tensor=carried)
            return outcome_of(spec, ranks, time.monotonic(), unknown=why)
        # Each call starts after the previous one ended, from zeroed windows: the calls
        # are independent, and checking one is checking them all (docs/model.md).
        outcome = _check_one(spec, ranks, dataclasses.replace(options, repeat=1))
        notes = tuple(n for n in outcome.notes if not has_code(n, ReasonCode.SINGLE_USE))
        return dataclasses.replace(outcome, notes=(*notes, judge.RESET_NOTE))
    return _every_path(spec, ranks, options)


def _every_path(spec: ProgramSpec, ranks: int, options: Options) -> Outcome:
    """Every path of the program: the search (`racecheck.paths.Exploration`) names the
    next one, each is checked by the per-path stages (`racecheck.stages.check_path`).
    Its tasks are threads, decided in every order the runtime allows, its dispatches
    under each rank's dispatch lock (`racecheck.cosim.threads`)."""
    exploration = Exploration(timeout=options.timeout, summarise=options.expect is None)
    known: set[tuple[object, ...]] = set()  # earlier paths' findings: not replayed again
    path = exploration.next_path()
    while path is not None:
        checked = check_path(spec, ranks, options, path, exploration.deadline, known)
        if not path.summarised:  # a summary's findings may be its extra iterations'
            known.update(finding.identity for finding in checked.outcome.findings)
        exploration.record(path, checked)
        path = exploration.next_path()
    return exploration.outcome()
