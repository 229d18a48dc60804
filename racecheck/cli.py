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

from racecheck.errors import ProgramRejected, UsageError, UserError
from racecheck.findings import Report, exit_code_of
from racecheck.options import (
    EngineChoice,
    ImportConfig,
    Options,
    RuntimeOrder,
    engine_choice,
    machine_cores,
    parse_arg,
    parse_count,
    parse_env,
    parse_every_p,
    parse_ranks,
    parse_seconds,
    runtime_order_choice,
)
from racecheck.report import OutputFormat, installed_version, render

EXIT_NOT_CHECKED = 2
ProgressSink = Callable[[str, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyCommand:
    paths: tuple[str, ...]
    options: Options
    output_format: OutputFormat
    color: bool
    html: str | None
    debug: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceCommand:
    path: str
    ranks: int
    programs: tuple[str, ...]
    args: tuple[tuple[str, str], ...]
    rank_param: str | None
    repeat: int
    seed: int
    import_config: ImportConfig = ImportConfig()


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
    except KeyboardInterrupt:
        return _fail(err, "racecheck: interrupted; nothing was proved", debug=debug)
    except Exception as error:  # the one place an internal failure becomes exit status 2
        line = (
            f"racecheck: internal error: {type(error).__name__}: {error} "
            "(nothing was proved; run again with --debug for the traceback)"
        )
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
    verify = commands.add_parser("verify", help="prove a collective correct or show its bug")
    _add_program_flags(verify, files="+")
    verify.add_argument(
        "--ranks", default="2..8", help="rank counts: 4, 2,4,8, 2..8, or all / 2.. (every P)"
    )
    verify.add_argument(
        "--fallback", metavar="RANKS", help="with --ranks all: the range checked if no proof"
    )
    engines = ",".join(choice.value for choice in EngineChoice)
    verify.add_argument("--engine", default="auto", metavar=f"{{{engines}}}")
    verify.add_argument("--expect", metavar="MODEL", help="golden model, e.g. allreduce-sum")
    verify.add_argument("--timeout", default="60", metavar="S", help="seconds per program and P")
    verify.add_argument(
        "--jobs",
        metavar="N",
        help="worker processes for each file's (program, P) units (default: the machine's cores)",
    )
    verify.add_argument("--format", choices=[f.value for f in OutputFormat], default="text")
    verify.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")
    verify.add_argument("--no-color", action="store_true", help="never colour the text report")
    verify.add_argument(
        "--reset-windows",
        action="store_true",
        help="with --repeat N: zero the windows between calls, as PyPTO does by default",
    )
    orders = ",".join(order.value for order in RuntimeOrder)
    verify.add_argument(
        "--runtime-order",
        default=RuntimeOrder.CURRENT.value,
        choices=[order.value for order in RuntimeOrder],
        metavar=f"{{{orders}}}",
        help="which dependencies PyPTO tracks between a rank's tasks: today's, or those "
        "before #1683 (remote_store/put/get/notify targets not counted as written)",
    )
    trace = commands.add_parser("trace", help="print each rank's co-simulated events")
    _add_program_flags(trace, files=None)
    trace.add_argument("--ranks", required=True, metavar="P", help="one rank count")
    export = commands.add_parser("export", help="write the traced protocol as a Promela model")
    _add_program_flags(export, files=None)
    export.add_argument("--ranks", required=True, metavar="P", help="one rank count")
    export.add_argument("--format", choices=["promela"], default="promela")
    return parser


def _add_program_flags(parser: argparse.ArgumentParser, *, files: str | None) -> None:
    parser.add_argument(
        "file", metavar="FILE", nargs=files, help="the Python file that holds the collective"
    )
    parser.add_argument("--program", action="append", default=[], metavar="NAME")
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a factory or entry parameter; VALUE is a Python literal, else an expression"
        " over the file's names (e.g. 'shape=make_shape(2, 64)'), else a string",
    )
    parser.add_argument(
        "--rank-param", metavar="NAME", help="the factory parameter that receives P"
    )
    parser.add_argument(
        "--repeat",
        default="1",
        metavar="N",
        help="N back-to-back calls on the same windows, never zeroed in between: persistent "
        "windows without PyPTO's reset between requests (add --reset-windows for its default)",
    )
    parser.add_argument("--seed", default="0", metavar="N")
    parser.add_argument(
        "--argv",
        default="",
        metavar="ARGS",
        help="the file's own command line while it is imported (sys.argv[1:], split as a"
        " shell does); {P} is the rank count, and the file is imported afresh at each P",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable while the file is imported; {P} is the rank count",
    )
    parser.add_argument(
        "--import-root",
        metavar="DIR",
        help="the directory the file's absolute imports resolve against (default: the"
        " nearest parent holding pyproject.toml or .git)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def _verify_command(namespace: argparse.Namespace, out: TextIO) -> VerifyCommand:
    every_p = parse_every_p(namespace.ranks, namespace.fallback)
    options = Options(
        ranks=every_p.fallback if every_p is not None else parse_ranks(namespace.ranks),
        every_p=every_p,
        engine=engine_choice(namespace.engine),
        programs=tuple(namespace.program),
        args=tuple(parse_arg(text) for text in namespace.arg),
        rank_param=namespace.rank_param,
        repeat=parse_count("--repeat", namespace.repeat, minimum=1),
        expect=namespace.expect,
        timeout=parse_seconds("--timeout", namespace.timeout),
        seed=parse_count("--seed", namespace.seed, minimum=0),
        runtime_order=runtime_order_choice(namespace.runtime_order),
        reset_windows=namespace.reset_windows,
        jobs=machine_cores()
        if namespace.jobs is None
        else parse_count("--jobs", namespace.jobs, minimum=1),
        **_import_fields(namespace),
    )
    output_format = OutputFormat(namespace.format)
    paths = tuple(namespace.file)
    if len(paths) > 1 and (output_format is not OutputFormat.TEXT or namespace.html):
        raise UsageError(
            f"--format {output_format.value} and --html describe one file; give one FILE"
        )
    if namespace.html is not None:
        _check_writable(namespace.html)
    return VerifyCommand(
        paths=paths,
        options=options,
        output_format=output_format,
        color=not namespace.no_color and _wants_color(out),
        html=namespace.html,
        debug=namespace.debug,
    )


def _import_fields(namespace: argparse.Namespace) -> dict[str, Any]:
    """--argv, --env and --import-root as Options fields."""
    try:
        argv = tuple(shlex.split(namespace.argv))
    except ValueError as error:
        raise UsageError(f"--argv {namespace.argv!r}: {error}") from None
    return {
        "argv": argv,
        "env": tuple(parse_env(text) for text in namespace.env),
        "import_root": namespace.import_root,
    }


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
        raise UsageError(f"--html {path_text}: cannot write there")


def _wants_color(out: TextIO) -> bool:
    return out.isatty() and "NO_COLOR" not in os.environ


def _trace_command(namespace: argparse.Namespace) -> TraceCommand:
    ranks = parse_ranks(namespace.ranks)
    if len(ranks) != 1:
        raise UsageError(f"trace --ranks {namespace.ranks!r}: give one rank count, e.g. --ranks 4")
    return TraceCommand(
        path=namespace.file,
        ranks=ranks[0],
        programs=tuple(namespace.program),
        args=tuple(parse_arg(text) for text in namespace.arg),
        rank_param=namespace.rank_param,
        repeat=parse_count("--repeat", namespace.repeat, minimum=1),
        seed=parse_count("--seed", namespace.seed, minimum=0),
        import_config=Options(**_import_fields(namespace)).import_config,
    )


# --- commands --------------------------------------------------------------------------


def run_verify(command: VerifyCommand, out: TextIO, err: TextIO) -> int:
    # Imported on use: the pipeline pulls in z3, which --help and usage errors need not load.
    from racecheck.check import check

    progress = _terminal_progress(err) if err.isatty() else None
    reports = []
    for path in command.paths:
        try:
            report = check(path, command.options, progress=progress)
        except UserError as error:  # this file failed; the others are still checked
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
    return exit_code_of(reports)


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
            repeat=selection.repeat,
        ),
    )
    return 0


def run_trace(command: TraceCommand, out: TextIO) -> int:
    from racecheck.cosim import simulate
    from racecheck.load import discover, load_file
    from racecheck.report.trace import render_trace

    loaded = load_file(command.path, config=command.import_config.at(command.ranks))
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
        execution = simulate(instance, repeat=command.repeat, seed=command.seed)
        _write(out, ("\n" if traced else "") + render_trace(execution.trace, program=spec.name))
        traced += 1
    return 0 if traced else EXIT_NOT_CHECKED
