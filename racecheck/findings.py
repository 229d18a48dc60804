"""Findings, verdicts and the report: racecheck's answer as data.

Renderers (text, JSON, SARIF, HTML) all read a `Report`; nothing here prints.
Finding codes are stable kebab-case strings: they are the JSON `kind` and the SARIF
rule ids, so they never change meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from racecheck.events import Region, SourceLocation


class Verdict(Enum):
    """Ordered worst-last: the verdict of several results is the maximum."""

    PROVED = "proved"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    BUG = "bug"

    @property
    def severity(self) -> int:
        return _SEVERITY[self]

    @staticmethod
    def worst(verdicts: list[Verdict]) -> Verdict:
        return max(verdicts, key=lambda verdict: verdict.severity, default=Verdict.SKIPPED)


_SEVERITY = {Verdict.PROVED: 0, Verdict.SKIPPED: 1, Verdict.UNKNOWN: 2, Verdict.BUG: 3}


class FindingKind(Enum):
    """The registry of finding codes (JSON `kind`, SARIF rule id)."""

    RACE = "race"
    DEADLOCK = "deadlock"
    OUT_OF_BOUNDS = "out-of-bounds"
    STALE_READ = "stale-read"
    WRONG_RESULT = "wrong-result"

    @property
    def title(self) -> str:
        return _TITLES[self]


_TITLES = {
    FindingKind.RACE: "data race",
    FindingKind.DEADLOCK: "deadlock",
    FindingKind.OUT_OF_BOUNDS: "out-of-bounds access",
    FindingKind.STALE_READ: "stale read",
    FindingKind.WRONG_RESULT: "wrong result",
}


class RaceDetail(Enum):
    READ_AFTER_WRITE = "read-after-write"
    WRITE_AFTER_READ = "write-after-read"
    WRITE_AFTER_WRITE = "write-after-write"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputDiff:
    """Where the reference executor's output under the witness differs from the golden."""

    tensor: str
    rank: int
    index: tuple[int, ...]  # first differing element in the row's own shape
    got: tuple[float, ...]  # a few elements starting there
    golden: tuple[float, ...]
    model: str = ""  # the golden model's name, e.g. "allreduce-sum"


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessStep:
    """One step of a witness interleaving, ready to show: which rank did what, where."""

    rank: int
    index: int  # the event's position in its rank's sequence
    action: str  # e.g. "remote_load data[1] bytes 0..256" or "wait signal[2][1,0] >= 1 (value 1)"
    location: SourceLocation
    highlight: bool = False  # one of the two events the finding is about


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    kind: FindingKind
    detail: str  # e.g. "read-after-write"; "" where the kind needs none
    message: str
    locations: tuple[SourceLocation, ...]  # primary first: the read / the blocked wait
    ranks: tuple[int, ...]
    regions: tuple[Region, ...] = ()
    witness: tuple[WitnessStep, ...] = ()  # the events that matter, in execution order
    confirmed: bool = False  # the co-simulation replayed the witness to the bad state
    diff: OutputDiff | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EveryPProof:
    """`proved for every P >= low`, and what that proof rests on."""

    low: int
    assumptions: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProgramResult:
    program: str
    ranks: int
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    model: str | None = None  # golden model the outputs match, if any
    events: int = 0
    seconds: float = 0.0
    engine: str = ""
    message: str = ""  # why skipped / unknown
    notes: tuple[str, ...] = ()
    every_p: EveryPProof | None = None  # set: this result holds for every P >= every_p.low


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    file: str
    results: tuple[ProgramResult, ...] = ()
    errors: tuple[str, ...] = field(default=())  # user-caused errors, "file:line: message"

    @property
    def verdict(self) -> Verdict:
        return Verdict.worst([result.verdict for result in self.results])

    @property
    def exit_code(self) -> int:
        """SPEC §4: 1 on any bug; else 2 if anything was not checked; else 0."""
        verdicts = [result.verdict for result in self.results]
        if Verdict.BUG in verdicts:
            return 1
        if self.errors or Verdict.UNKNOWN in verdicts or not verdicts:
            return 2
        if all(verdict is Verdict.SKIPPED for verdict in verdicts):
            return 2
        return 0
