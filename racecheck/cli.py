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
        print(f"racecheck {installed_version()}")
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
        description="Model checker and race detector for PyPTO distributed collectives.",
    )
    parser.add_argument("--version", action=_Version, help="print racecheck's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    verify = commands.add_parser(
        "verify",
        help="prove a collective correct or show its bug",
        description="Flags override the file's [tool.racecheck] settings in the nearest"
        " pyproject.toml (docs/ci.md); the defaults shown apply where neither says.",
    )
    _add_program_flags(verify, files="+")
    verify.add_argument(
        "--ranks",
        help="rank counts: 4, 2,4,8, 2..8, or all / 2.. (every P) (default: 2..8)",
    )
    verify.add_argument(
        "--fallback",
        metavar="RANKS",
        help="with --ranks all: the range checked if no proof (default: 2..8)",
    )
    verify.add_argument(
        "--require-every-p",
        action="store_const",
        const=True,
        help="with --ranks all: a fallback to the concrete range is unknown, exit 2 (default: off)",
    )
    engines = ",".join(choice.value for choice in EngineChoice)
    verify.add_argument(
        "--engine", metavar=f"{{{engines}}}", help="the engine that orders events (default: auto)"
    )
    verify.add_argument(
        "--expect",
        metavar="MODEL",
        help="golden model, e.g. allreduce-sum (default: report the matching model)",
    )
    verify.add_argument(
        "--require-model",
        action="store_const",
        const=True,
        help="a proved P whose outputs match no golden model is unknown, exit 2 (default: off)",
    )
    verify.add_argument(
        "--timeout",
        metavar="S",
        help="seconds per program and P (default: none: the work budgets end every run)",
    )
    verify.add_argument(
        "--assume",
        action="append",
        default=[],
        metavar="EXPR",
        help="a precondition on an input tensor's elements: 'NAME in LOW..HIGH', 'NAME <= HIGH'"
        " or 'NAME >= LOW' (repeatable); inputs outside it are not checked (default: none)",
    )
    verify.add_argument(
        "--jobs",
        metavar="N",
        help="worker processes for each file's (program, P) units (default: the machine's cores)",
    )
    verify.add_argument(
        "--format",
        choices=[f.value for f in OutputFormat],
        default="text",
        help="(default: text)",
    )
    verify.add_argument(
        "--html", metavar="FILE", help="also write a self-contained HTML report (default: none)"
    )
    verify.add_argument(
        "--no-color",
        action="store_true",
        help="never colour the text report (default: colour on a terminal)",
    )
    verify.add_argument(
        "--reset-windows",
        action="store_const",
        const=True,
        help="with --repeat N: zero the windows between calls, as PyPTO does by default"
        " (default: off)",
    )
    verify.add_argument(
        "--rounds",
        metavar="MODE",
        help="with --repeat N: 'free', each rank starts its next call as soon as it ends the"
        " last; 'joined', the host waits for every rank between calls, as serving does;"
        " the windows persist either way (default: free)",
    )
    verify.add_argument(
        "--per-call",
        metavar="NAME=EXPR",
        action="append",
        help="host scalar NAME gets EXPR at each call, {call} being the call number from 1"
        " (--per-call epoch={call}); repeatable (default: none)",
    )
    verify.add_argument(
        "--skip-no-program",
        action="store_true",
        help="a FILE that defines no program (an __init__.py, a helper module) is skipped"
        " rather than an error, as the pre-commit hook does (default: off)",
    )
    verify.add_argument(
        "--no-config",
        action="store_true",
        help="ignore [tool.racecheck] in pyproject.toml (default: read it)",
    )
    orders = ",".join(order.value for order in RuntimeOrder)
    verify.add_argument(
        "--runtime-order",
        metavar=f"{{{orders}}}",
        help="which dependencies PyPTO tracks between a rank's tasks: today's, or those "
        "before #1683 (remote_store/put/get/notify targets not counted as written)"
        " (default: current)",
    )
    trace = commands.add_parser("trace", help="print each rank's co-simulated events")
    _add_program_flags(trace, files=None)
    trace.add_argument("--ranks", required=True, metavar="P", help="one rank count (required)")
    export = commands.add_parser("export", help="write the traced protocol as a Promela model")
    _add_program_flags(export, files=None)
    export.add_argument("--ranks", required=True, metavar="P", help="one rank count (required)")
    export.add_argument(
        "--format", choices=["promela"], default="promela", help="(default: promela)"
    )
    return parser


def _add_program_flags(parser: argparse.ArgumentParser, *, files: str | None) -> None:
    parser.add_argument(
        "file", metavar="FILE", nargs=files, help="the Python file that holds the collective"
    )
    parser.add_argument(
        "--program",
        action="append",
        metavar="NAME",
        help="check only this program, repeatable (default: every program of the file)",
    )
    parser.add_argument(
        "--arg",
        action="append",
        metavar="NAME=VALUE",
        help="set a factory or entry parameter; VALUE is a Python literal, else an expression"
        " over the file's names (e.g. 'shape=make_shape(2, 64)'), else a string;"
        " repeatable (default: the parameters' own defaults)",
    )
    parser.add_argument(
        "--rank-param",
        metavar="NAME",
        help="the factory parameter that receives P (default: found from its name)",
    )
    parser.add_argument(
        "--repeat",
        metavar="N",
        help="N back-to-back calls on the same windows, never zeroed in between: persistent "
        "windows without PyPTO's reset between requests (add --reset-windows for its default)"
        " (default: 1)",
    )
    parser.add_argument("--seed", metavar="N", help="the random input values (default: 0)")
    parser.add_argument(
        "--cores",
        metavar="N",
        help="the cores of each rank: a running task, block or lane holds one, a spinning"
        f" wait keeps it (default: {DEFAULT_CORES}, the A2/A3 simulator's AIV cores)",
    )
    parser.add_argument(
        "--argv",
        metavar="ARGS",
        help="the file's own command line while it is imported (sys.argv[1:], split as a"
        " shell does); {P} is the rank count, and the file is imported afresh at each P"
        " (default: none)",
    )
    parser.add_argument(
        "--env",
        action="append",
        metavar="NAME=VALUE",
        help="an environment variable while the file is imported; {P} is the rank count"
        " (repeatable; default: none)",
    )
    parser.add_argument(
        "--import-root",
        metavar="DIR",
        help="the directory the file's absolute imports resolve against (default: the"
        " nearest parent holding pyproject.toml or .git)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks (default: off)")


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
                err.write(f"racecheck: skipped {path}: {error.message}\n")
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
        err.write(f"\r\033[Kracecheck: checking {program} at P={ranks}...")
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
            _write(out, f"{spec.name}  P={command.ranks}  skipped  {rejected.message}\n")
            continue
        execution = unchecked_run(instance, command.options)
        _write(out, ("\n" if traced else "") + render_trace(execution.trace, program=spec.name))
        traced += 1
    return 0 if traced else EXIT_NOT_CHECKED
