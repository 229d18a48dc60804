"""`pytest --racecheck`: one test item per (file, program, P) of the `[tool.racecheck]`
configuration (docs/ci.md), failing with the text report, so pytest-xdist
(`pytest -n 2 --racecheck`) spreads a model library's checks over cores.

The files are those the `[[tool.racecheck.files]]` tables' `path` globs match. A file
with `expect` (or `require_model`) gets one item per P; without either, the P of a
program are judged together (the cross-P step compares their outputs), so one item
checks them all; `ranks = "all"` is one item per program. Registered through the
`pytest11` entry point; nothing happens without `--racecheck`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from racecheck.config import Config, find_config, options_of
from racecheck.errors import NoProgram, UsageError, UserError
from racecheck.options import Options
from racecheck.report.phrases import describe_rank_counts
from racecheck.report.reasons import ReasonCode, reason


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("racecheck")
    group.addoption(
        "--racecheck",
        action="store_true",
        help=reason(ReasonCode.HELP_PYTEST_RACECHECK),
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if not config.getoption("racecheck"):
        return
    found = find_config(Path(config.rootpath))
    if found is None:
        raise pytest.UsageError(reason(ReasonCode.PYTEST_NO_CONFIG, root=str(config.rootpath)))
    collector = ConfigFile.from_parent(session, path=found.source, config_data=found)
    items.extend(collector.collect())


class ConfigFile(pytest.File):
    """The pyproject.toml whose `[tool.racecheck]` names the collectives."""

    def __init__(self, *, config_data: Config, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.config_data = config_data

    def collect(self) -> Iterator[CheckItem]:
        for table in self.config_data.unmatched():
            unmatched = reason(ReasonCode.CONFIG_MATCHES_NO_FILE, table=table)
            error = UsageError(unmatched, file=str(self.config_data.source)).render()
            name = str(table)  # pytest takes a node's name as a plain str only
            yield self._item(name, self.config_data.source, None, None, error=error)
        for path in self.config_data.paths():
            yield from self._items(path)

    def _items(self, path: Path) -> Iterator[CheckItem]:
        relative = path.relative_to(self.config_data.root).as_posix()
        try:
            settings = self.config_data.settings_for(path)
            options = options_of(dataclasses.replace(settings, jobs=settings.jobs or 1))
            names = _program_names(path, options)
        except NoProgram as none:
            yield self._item(relative, path, None, None, skip=none.message)
            return
        except UserError as error:
            yield self._item(relative, path, None, None, error=error.render())
            return
        for name in names:
            if options.every_p is not None:
                yield self._item(relative, path, name, options, label="P=all")
            elif options.expect is not None or options.require_model:
                for ranks in options.ranks:
                    one = dataclasses.replace(options, ranks=(ranks,))
                    yield self._item(relative, path, name, one, label=f"P={ranks}")
            else:
                label = f"P={describe_rank_counts(options.ranks)}"
                yield self._item(relative, path, name, options, label=label)

    def _item(
        self,
        relative: str,
        path: Path,
        program: str | None,
        options: Options | None,
        *,
        label: str = "",
        skip: str | None = None,
        error: str | None = None,
    ) -> CheckItem:
        name = relative if program is None else f"{relative}::{program}[{label}]"
        return CheckItem.from_parent(
            self, name=name, target=path, program=program, options=options, skip=skip, error=error
        )


class CheckItem(pytest.Item):
    def __init__(
        self,
        *,
        target: Path,
        program: str | None,
        options: Options | None,
        skip: str | None,
        error: str | None,
        **kwargs: object,
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.target = target
        self.program = program
        self.options = options
        self.skip = skip
        self.error = error

    def runtest(self) -> None:
        if self.skip is not None:
            pytest.skip(f"{self.target.name}: {self.skip}")
        if self.error is not None or self.options is None or self.program is None:
            raise CheckFailed(self.error or "")
        from racecheck.pipeline import check
        from racecheck.report.text import render_text

        options = dataclasses.replace(self.options, programs=(self.program,))
        report = check(str(self.target), options)
        if report.exit_code != 0:
            raise CheckFailed(render_text(report, color=False) + "\n".join(report.errors))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:  # type: ignore[no-untyped-def, override]
        if isinstance(excinfo.value, CheckFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.target, None, self.name


class CheckFailed(Exception):
    """A racecheck item that is not proved: the text report is the message."""


def _program_names(path: Path, options: Options) -> list[str]:
    from racecheck.load import discover, load_file

    loaded = load_file(str(path), timeout=options.timeout)
    specs = discover(
        loaded, programs=options.programs, args=dict(options.args), rank_param=options.rank_param
    )
    return [spec.name for spec in specs]
