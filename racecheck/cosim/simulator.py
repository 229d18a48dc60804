"""The way into the co-simulation: one program instance, run under the user's options.

Every stage that runs a program (a path of the pipeline, a witness replay, the
interleaved run a golden is identified from, `racecheck trace` and `export`) runs it
through a `Simulator`, so a run's `--repeat`, `--seed`, `--timeout` and runtime order
are the options', never a copy of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from racecheck.cosim.execution import Execution
from racecheck.cosim.policies import SchedulePolicy
from racecheck.cosim.simulate import simulate
from racecheck.load import ProgramInstance
from racecheck.options import Options

UNCHECKED_RUN_SECONDS = 60.0
"""How long one run of `racecheck trace` or `export` (which take no --timeout) may take."""


@dataclass(frozen=True, slots=True)
class Simulator:
    instance: ProgramInstance
    options: Options

    def run(
        self,
        policy: SchedulePolicy | None = None,
        *,
        stage: str = "co-simulating the ranks",
        force_waits: bool = True,
        timeout: float | None = None,
    ) -> Execution:
        """One run under `policy`; past the `--timeout` in force (or `timeout` seconds,
        within it) `Overtime` names `stage`. Without `force_waits` a run whose ranks all
        block stops there (a deadlock's witness)."""
        options = self.options
        return simulate(
            self.instance,
            policy=policy,
            force_waits=force_waits,
            repeat=options.repeat,
            seed=options.seed,
            timeout=options.timeout if timeout is None else timeout,
            stage=stage,
            rules=options.runtime_order,
        )


def unchecked_run(instance: ProgramInstance, options: Options) -> Execution:
    """The one run `racecheck trace` and `export` show: `instance` with the options'
    cores, `--repeat` and `--seed`, under the default schedule, within
    `UNCHECKED_RUN_SECONDS` (they take no --timeout)."""
    run = dataclasses.replace(instance, cores=options.cores)
    return Simulator(run, options).run(timeout=UNCHECKED_RUN_SECONDS)
