"""Errors a user can cause, each rendered as one line: `file:line: error: message`."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input (file, construct, flags). Exit status 2."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line

    def render(self) -> str:
        where = ""
        if self.file is not None:
            where = f"{self.file}:{self.line}: " if self.line is not None else f"{self.file}: "
        return f"{where}error: {self.message}"


class UsageError(UserError):
    """Bad command-line flags or API arguments."""


class LoadError(UserError):
    """The file cannot be loaded: missing, syntax error, import-time failure."""


class NoProgram(UserError):
    """The file defines no program to check (an `__init__.py`, a module of helpers)."""


class UnsupportedConstruct(UserError):
    """A DSL call or argument racecheck does not model."""


class TracingError(UserError):
    """The user's kernel failed or did not terminate while being traced."""


class ProgramRejected(Exception):
    """The program (or its factory) rejects this rank count: the P is skipped."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class EngineUnknown(Exception):
    """An engine could not decide within its budget (timeout, state limit, z3 unknown)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
