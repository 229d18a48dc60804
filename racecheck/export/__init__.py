"""Exporting a trace to other tools: a Promela model, and SPIN's verdicts on it.

`to_promela(trace)` writes the model; `check_with_spin(trace)` runs SPIN on it and
returns race, stale-read and deadlock verdicts decided by SPIN alone;
`export_command(path, ranks)` is the body of `racecheck export`.
"""

from racecheck.export.command import export_command
from racecheck.export.promela import PromelaModel, to_promela, write_model
from racecheck.export.properties import Question, StaleRead, Verdicts
from racecheck.export.spin import SpinCheck, SpinRun, SpinUnavailable, check_with_spin

__all__ = [
    "PromelaModel",
    "Question",
    "SpinCheck",
    "SpinRun",
    "SpinUnavailable",
    "StaleRead",
    "Verdicts",
    "check_with_spin",
    "export_command",
    "to_promela",
    "write_model",
]
