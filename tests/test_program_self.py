"""`self.kernel` in a module-level `@pl.jit` function (racecheck.dsl.program)."""

from __future__ import annotations

import pytest

from racecheck.dsl import program
from racecheck.errors import UnsupportedConstruct


def test_self_names_the_modules_jit_functions_only() -> None:
    def kernel() -> None:
        return None

    declared = program.jit.incore(kernel)
    scope = {"kernel": declared, "helper": len}
    this = program._ProgramSelf(scope)
    assert this.kernel is declared
    with pytest.raises(UnsupportedConstruct, match="no @pl.jit function 'helper'"):
        _ = this.helper


def test_self_is_bound_only_where_the_function_reads_it() -> None:
    scope: dict[str, object] = {}
    exec("def uses():\n    return self.k\n\ndef plain(self):\n    return self", scope)  # noqa: S102
    program._bind_program_self(scope["plain"])  # type: ignore[arg-type]
    assert "self" not in scope
    program._bind_program_self(scope["uses"])  # type: ignore[arg-type]
    assert isinstance(scope["self"], program._ProgramSelf)
