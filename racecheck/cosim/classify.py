"""The one place that classifies what a user's code raised: a rejection of this rank
count, a located user error, or a tracing error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from racecheck.cosim.host import HostCrash
from racecheck.dsl.location import (
    traceback_location,
)
from racecheck.errors import ProgramRejected, UserError
from racecheck.load import classify_raised


def call_user(call: Callable[[], Any], program: str) -> Any:
    try:
        return call()
    except UserError as error:
        raise located(error) from None
    except (ProgramRejected, HostCrash):
        raise
    except BaseException as error:  # noqa: BLE001 - classified below
        raise classify(error, program) from error


def located(error: UserError) -> UserError:
    """The error, pinned to the user's line it came from when it does not name one."""
    if error.file is None:
        where = traceback_location(error.__traceback__)
        if where is not None:
            error.file, error.line = where.file, where.line
    return error


def classify(error: BaseException, program: str, *, in_kernel: bool = False) -> Exception:
    """A user exception: a rejection of this P (a raise/assert statement of the user's
    file, outside kernels) or an error. A kernel does not reject a P: what it raises is
    an error of the program."""
    return classify_raised(error, f"tracing {program}", in_kernel=in_kernel)
