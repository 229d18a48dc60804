"""The command line: parse flags once into frozen options, run one command, return its exit code.

Decides how failures reach the user: a `UserError` is one line on stderr
(`file:line: error: ...`, or `racecheck: error: ...` when no file is involved) and exit
status 2; any other exception is reported as an internal error, also exit 2 and never
a verdict. `--debug` adds the traceback. With `--format json` every outcome, errors
included, is one JSON object on stdout (docs/model.md). A closed stdout (`| head`) ends the
output quietly. Everything the report says is rendered by `racecheck.report`; this
module only chooses the renderer and the streams.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TextIO

from racecheck.config import Settings, given_options, options_of, settings_for
from racecheck.errors import NoProgram, ProgramRejected, UsageError, UserError
from racecheck.findings import Report, exit_code_of
from racecheck.options import (
    DEFAULT_CORES,
    EngineChoice,
    Options,
    RuntimeOrder,
    numeric,
    parse_arg,
    parse_env,
    parse_ranks,
)
from racecheck.report import OutputFormat, installed_version, render
from racecheck.report.reasons import ReasonCode, reason
from racecheck.rounds import parse_per_call

EXIT_NOT_CHECKED = 2
INTERRUPTED = reason(ReasonCode.INTERRUPTED)
ProgressSink = Callable[[str, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyCommand:
    paths: tuple[str, ...]
    options: Options  # the flags alone
    settings: Settings | None  # the flags as given, laid over each file's configuration
    output_format: OutputFormat
    color: bool
    html: str | None
    debug: bool = False
    skip_no_program: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceCommand:
    path: str
    ranks: int
    programs: tuple[str, ...]
    args: tuple[tuple[str, str], ...]
    rank_param: str | None
    options: Options = Options()  # the run's: --repeat, --seed, --cores, how the file imports


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportCommand:
    trace: TraceCommand  # the same file, program and rank count selection
    output_format: str


class _ParserExit(Exception):
    """argparse finished on its own (--help): nothing to check, exit with `status`."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            raise UsageError(message.strip())
        raise _ParserExit(status)


class _Version(argparse.Action):
    """`--version`: the installed package's version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(reason(ReasonCode.CLI_VERSION, version=installed_version()))
        parser.exit()


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    arguments = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in arguments
    try:
        command = parse_command(arguments, out)
        if isinstance(command, VerifyCommand):
            return run_verify(command, out, err)
        if isinstance(command, ExportCommand):
            return run_export(command, out)
        return run_trace(command, out)
    except _ParserExit as done:
        return done.status
    except UserError as error:
        if _wants_json(arguments):
            _write(out, render(_error_report(None, error), OutputFormat.JSON, color=False))
        return _fail(err, _user_error_line(error), debug=debug)
    except KeyboardInterrupt:  # exit 2 like anything not checked; JSON still gets its object
        if _wants_json(arguments):
            interrupted = Report(file="", errors=(INTERRUPTED,))
            _write(out, render(interrupted, OutputFormat.JSON, color=False))
        return _fail(err, INTERRUPTED, debug=debug)
    except Exception as error:  # the one place an internal failure becomes exit status 2
        name = type(error).__name__
        line = reason(ReasonCode.INTERNAL_ERROR, error=name, message=str(error))
        return _fail(err, line, debug=debug)


def _wants_json(arguments: list[str]) -> bool:
    """`verify --format json` asked for, even if the rest of the command line is wrong."""
    pairs = zip(arguments, arguments[1:], strict=False)
    return "--format=json" in arguments or ("--format", "json") in pairs


def _error_report(path: str | None, error: UserError) -> Report:
    return Report(file=path or "", errors=(_user_error_line(error),))


def _write(out: TextIO, text: str) -> None:
    """Write to stdout; a reader that went away (`| head`) silences the rest quietly."""
    try:
        out.write(text)
        out.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())


def _user_error_line(error: UserError) -> str:
    line = error.render()
    return line if error.file is not None else f"racecheck: {line}"


def _fail(err: TextIO, line: str, *, debug: bool) -> int:
    if debug:
        traceback.print_exc(file=err)
    err.write(" ".join(line.splitlines()) + "\n")
    return EXIT_NOT_CHECKED


# --- parsing ---------------------------------------------------------------------------


def parse_command(
    arguments: Sequence[str], out: TextIO
) -> VerifyCommand | TraceCommand | ExportCommand:
    parser = _build_parser()
    with contextlib.redirect_stdout(out):  # --help prints to the caller's stdout
        namespace = parser.parse_args(arguments)
    if namespace.command == "verify":
        return _verify_command(namespace, out)
    if namespace.command == "export":
        return ExportCommand(trace=_trace_command(namespace), output_format=namespace.format)
    return _trace_command(namespace)


def _build_parser() -> _Parser:
    parser = _Parser(
        prog="racecheck",
        description=reason(ReasonCode.HELP_DESCRIPTION),
    )
    parser.add_argument("--version", action=_Version, help=reason(ReasonCode.HELP_VERSION))
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    verify = commands.add_parser(
        "verify",
        help=reason(ReasonCode.HELP_VERIFY),
        description=reason(ReasonCode.HELP_VERIFY_DESCRIPTION),
    )
    _add_program_flags(verify, files="+")
    verify.add_argument(
        "--ranks",
        help=reason(ReasonCode.HELP_RANKS),
    )
    verify.add_argument(
        "--fallback",
        metavar="RANKS",
        help=reason(ReasonCode.HELP_FALLBACK),
    )
    verify.add_argument(
        "--require-every-p",
        action="store_const",
        const=True,
        help=reason(ReasonCode.HELP_REQUIRE_EVERY_P),
    )
    engines = ",".join(choice.value for choice in EngineChoice)
    verify.add_argument("--engine", metavar=f"{{{engines}}}", help=reason(ReasonCode.HELP_ENGINE))
    verify.add_argument(
        "--expect",
        metavar="MODEL",
        help=reason(ReasonCode.HELP_EXPECT),
    )
    verify.add_argument(
        "--require-model",
        action="store_const",
        const=True,
        help=reason(ReasonCode.HELP_REQUIRE_MODEL),
    )
    verify.add_argument(
        "--timeout",
        metavar="S",
        help=reason(ReasonCode.HELP_TIMEOUT),
    )
    verify.add_argument(
        "--assume",
        action="append",
        default=[],
        metavar="EXPR",
        help=reason(ReasonCode.HELP_ASSUME),
    )
    verify.add_argument(
        "--jobs",
        metavar="N",
        help=reason(ReasonCode.HELP_JOBS),
    )
    verify.add_argument(
        "--format",
        choices=[f.value for f in OutputFormat],
        default="text",
        help=reason(ReasonCode.HELP_DEFAULT, default="text"),
    )
    verify.add_argument("--html", metavar="FILE", help=reason(ReasonCode.HELP_HTML))
    verify.add_argument(
        "--no-color",
        action="store_true",
        help=reason(ReasonCode.HELP_NO_COLOR),
    )
    verify.add_argument(
        "--reset-windows",
        action="store_const",
        const=True,
        help=reason(ReasonCode.HELP_RESET_WINDOWS),
    )
    verify.add_argument(
        "--rounds",
        metavar="MODE",
        help=reason(ReasonCode.HELP_ROUNDS),
    )
    verify.add_argument(
        "--per-call",
        metavar="NAME=EXPR",
        action="append",
        help=reason(ReasonCode.HELP_PER_CALL),
    )
    verify.add_argument(
        "--skip-no-program",
        action="store_true",
        help=reason(ReasonCode.HELP_SKIP_NO_PROGRAM),
    )
    verify.add_argument(
        "--no-config",
        action="store_true",
        help=reason(ReasonCode.HELP_NO_CONFIG),
    )
    orders = ",".join(order.value for order in RuntimeOrder)
    verify.add_argument(
        "--runtime-order",
        metavar=f"{{{orders}}}",
        help=reason(ReasonCode.HELP_RUNTIME_ORDER),
    )
    trace = commands.add_parser("trace", help=reason(ReasonCode.HELP_TRACE))
    _add_program_flags(trace, files=None)
    trace.add_argument(
        "--ranks", required=True, metavar="P", help=reason(ReasonCode.HELP_ONE_RANK_COUNT)
    )
    export = commands.add_parser("export", help=reason(ReasonCode.HELP_EXPORT))
    _add_program_flags(export, files=None)
    export.add_argument(
        "--ranks", required=True, metavar="P", help=reason(ReasonCode.HELP_ONE_RANK_COUNT)
    )
    export.add_argument(
        "--format",
        choices=["promela"],
        default="promela",
        help=reason(ReasonCode.HELP_DEFAULT, default="promela"),
    )
    return parser


def _add_program_flags(parser: argparse.ArgumentParser, *, files: str | None) -> None:
    parser.add_argument("file", metavar="FILE", nargs=files, help=reason(ReasonCode.HELP_FILE))
    parser.add_argument(
        "--program",
        action="append",
        metavar="NAME",
        help=reason(ReasonCode.HELP_PROGRAM),
    )
    parser.add_argument(
        "--arg",
        action="append",
        metavar="NAME=VALUE",
        help=reason(ReasonCode.HELP_ARG),
    )
    parser.add_argument(
        "--rank-param",
        metavar="NAME",
        help=reason(ReasonCode.HELP_RANK_PARAM),
    )
    parser.add_argument(
        "--repeat",
        metavar="N",
        help=reason(ReasonCode.HELP_REPEAT),
    )
    parser.add_argument("--seed", metavar="N", help=reason(ReasonCode.HELP_SEED))
    parser.add_argument(
        "--cores",
        metavar="N",
        help=reason(ReasonCode.HELP_CORES, cores=DEFAULT_CORES),
    )
    parser.add_argument(
        "--argv",
        metavar="ARGS",
        help=reason(ReasonCode.HELP_ARGV),
    )
    parser.add_argument(
        "--env",
        action="append",
        metavar="NAME=VALUE",
        help=reason(ReasonCode.HELP_ENV),
    )
    parser.add_argument(
        "--import-root",
        metavar="DIR",
        help=reason(ReasonCode.HELP_IMPORT_ROOT),
    )
    parser.add_argument("--debug", action="store_true", help=reason(ReasonCode.HELP_DEBUG))


def _verify_command(namespace: argparse.Namespace, out: TextIO) -> VerifyCommand:
    given = _given_settings(namespace)
    options = given_options(given)  # the flags' own mistakes, before any file is read
    output_format = OutputFormat(namespace.format)
    paths = tuple(namespace.file)
    if len(paths) > 1 and (output_format is not OutputFormat.TEXT or namespace.html):
        raise UsageError(reason(ReasonCode.USAGE_ONE_FILE, format=output_format.value))
    if namespace.html is not None:
        _check_writable(namespace.html)
    return VerifyCommand(
        paths=paths,
        options=options,
        settings=None if namespace.no_config else given,
        output_format=output_format,
        color=not namespace.no_color and _wants_color(out),
        html=namespace.html,
        debug=namespace.debug,
        skip_no_program=namespace.skip_no_program,
    )


def _given_settings(namespace: argparse.Namespace) -> Settings:
    """The flags given on the command line; None for each one left out."""
    return Settings(
        ranks=namespace.ranks,
        fallback=namespace.fallback,
        engine=namespace.engine,
        expect=namespace.expect,
        programs=None if namespace.program is None else tuple(namespace.program),
        args=None if namespace.arg is None else tuple(parse_arg(text) for text in namespace.arg),
        rank_param=namespace.rank_param,
        repeat=_number(namespace.repeat),
        timeout=_number(namespace.timeout),
        seed=_number(namespace.seed),
        cores=_number(namespace.cores),
        runtime_order=namespace.runtime_order,
        reset_windows=namespace.reset_windows,
        rounds=namespace.rounds,
        per_call=None
        if namespace.per_call is None
        else tuple(parse_per_call(text) for text in namespace.per_call),
        jobs=_number(namespace.jobs),
        require_model=namespace.require_model,
        require_every_p=namespace.require_every_p,
        assumptions=tuple(namespace.assume) or None,
        **_import_fields(namespace),
    )


def _number(text: str | None) -> object:
    return None if text is None else numeric(text)


def options_for(path: str, command: VerifyCommand) -> Options:
    """The options `path` is checked with: the flags over its [tool.racecheck] settings."""
    if command.settings is None:
        return command.options
    return options_of(settings_for(path, command.settings))


def _import_fields(namespace: argparse.Namespace) -> dict[str, Any]:
    """--argv, --env and --import-root as given; None for each one left out."""
    argv = None
    if namespace.argv is not None:
        try:
            argv = tuple(shlex.split(namespace.argv))
        except ValueError as error:
            raise UsageError(
                reason(ReasonCode.USAGE_ARGV_SPLIT, argv=repr(namespace.argv), why=str(error))
            ) from None
    env = None if namespace.env is None else tuple(parse_env(text) for text in namespace.env)
    return {"argv": argv, "env": env, "import_root": namespace.import_root}


def _check_writable(path_text: str) -> None:
    """--html must be writable before the run, not after minutes of checking."""
    path = Path(path_text)
    folder = path.parent if str(path.parent) else Path(".")
    writable = (
        (not path.is_dir() and os.access(path, os.W_OK))
        if path.exists()
        else folder.is_dir() and os.access(folder, os.W_OK)
    )
    if not writable:
        raise UsageError(reason(ReasonCode.USAGE_UNWRITABLE, path=path_text))


def _wants_color(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ


def _trace_command(namespace: argparse.Namespace) -> TraceCommand:
    ranks = parse_ranks(namespace.ranks)
    if len(ranks) != 1:
        raise UsageError(reason(ReasonCode.USAGE_TRACE_RANKS, ranks=repr(namespace.ranks)))
    return TraceCommand(
        path=namespace.file,
        ranks=ranks[0],
        programs=tuple(namespace.program or ()),
        args=tuple(parse_arg(text) for text in namespace.arg or ()),
        rank_param=namespace.rank_param,
        options=Options(**_run_fields(namespace)),  # validated as verify's options are
    )


def _run_fields(namespace: argparse.Namespace) -> dict[str, Any]:
    """The flags of `trace` and `export` that shape the run, as `verify` reads them."""
    numbers = {"repeat": namespace.repeat, "seed": namespace.seed, "cores": namespace.cores}
    given = {name: numeric(text) for name, text in numbers.items() if text is not None}
    return {**given, **{name: value for name, value in _import_fields(namespace).items() if value}}


# --- commands --------------------------------------------------------------------------


def run_verify(command: VerifyCommand, out: TextIO, err: TextIO) -> int:
    # Imported on use: the pipeline pulls in z3, which --help and usage errors need not load.
    from racecheck.pipeline import check

    progress = _terminal_progress(err) if err.isatty() else None
    reports = []
    skipped = 0
    for path in command.paths:
        try:
            report = check(path, options_for(path, command), progress=progress)
        except UserError as error:  # this file failed; the others are still checked
            if isinstance(error, NoProgram) and command.skip_no_program:
                err.write(reason(ReasonCode.CLI_SKIPPED, path=path, why=error.message) + "\n")
                skipped += 1
                continue
            if command.debug:
                traceback.print_exc(file=err)
            report = _error_report(path, error)
        finally:
            if progress is not None:
                err.write("\r\033[K")  # erase the progress line, also before an error line
        if report.results or command.output_format is not OutputFormat.TEXT:
            _write(out, render(report, command.output_format, color=command.color))
        for line in report.errors:  # load errors, programs the DSL could not follow
            err.write(line + "\n")
        if command.html is not None:
            from racecheck.report.html import render_html

            Path(command.html).write_text(render_html(report), encoding="utf-8")
        reports.append(report)
    return exit_code_of(reports) if reports or not skipped else 0


def _terminal_progress(err: TextIO) -> ProgressSink:
    def show(program: str, ranks: int) -> None:
        err.write("\r\033[K" + reason(ReasonCode.CLI_PROGRESS, program=program, ranks=ranks))
        err.flush()

    return show


def run_export(command: ExportCommand, out: TextIO) -> int:
    from racecheck.export import export_command

    selection = command.trace
    _write(
        out,
        export_command(
            selection.path,
            selection.ranks,
            command.output_format,
            programs=selection.programs,
            args=dict(selection.args),
            rank_param=selection.rank_param,
            options=selection.options,
        ),
    )
    return 0


def run_trace(command: TraceCommand, out: TextIO) -> int:
    from racecheck.cosim import unchecked_run
    from racecheck.load import discover, load_file
    from racecheck.report.trace import render_trace

    loaded = load_file(command.path, config=command.options.import_config.at(command.ranks))
    traced = 0
    specs = discover(
        loaded,
        programs=command.programs,
        args=dict(command.args),
        rank_param=command.rank_param,
    )
    for spec in specs:
        try:
            instance = spec.instantiate(command.ranks)
        except ProgramRejected as rejected:
            skipped = reason(
                ReasonCode.TRACE_SKIPPED,
                program=spec.name,
                ranks=command.ranks,
                why=rejected.message,
            )
            _write(out, skipped + "\n")
            continue
        execution = unchecked_run(instance, command.options)
        _write(out, ("\n" if traced else "") + render_trace(execution.trace, program=spec.name))
        traced += 1
    return 0 if traced else EXIT_NOT_CHECKED
