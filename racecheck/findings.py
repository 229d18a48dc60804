"""Findings, verdicts and the report: racecheck's answer as data.

Renderers (text, JSON, SARIF, HTML) all read a `Report`; nothing here prints, and
nothing here is worded: findings and witness steps are typed facts, and every sentence
a user reads is written by `racecheck.report.phrases`.
Every finding has a stable kebab-case code (`FindingCode`): the `[race-raw]` of the
text report, the SARIF rule id and the JSON `code`; its kind (`FindingKind`) is the
JSON `kind` of docs/model.md. `FINDING_CODES` is the one record per code: its
severity, and its title, SARIF rule text and highlighted step as reasons worded in
`report/reasons.py` (`FINDING_*`, `RULE_*`, `STEP_*`), the only names findings have
outside `report.phrases`.
Codes never change meaning. The exit status is derived from verdicts and errors by
`exit_code_of` only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum

from racecheck.events import NotifyOp, Region, SourceLocation, WaitCmp
from racecheck.report.reasons import ReasonCode, reason


class Verdict(Enum):
    """One program's answer at one rank count (docs/model.md §3); a file's is `FileVerdict`."""

    PROVED = "proved"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    BUG = "bug"


class FindingKind(Enum):
    """The registry of finding codes (JSON `kind`, SARIF rule id)."""

    RACE = "race"
    DEADLOCK = "deadlock"
    OUT_OF_BOUNDS = "out-of-bounds"
    STALE_READ = "stale-read"
    WRONG_RESULT = "wrong-result"


class RaceDetail(Enum):
    READ_AFTER_WRITE = "read-after-write"
    WRITE_AFTER_READ = "write-after-read"
    WRITE_AFTER_WRITE = "write-after-write"
    SET_ADD_MIX = "set-add-mix"  # Set and Add on one cell, in any order (docs/model.md)


class FindingCode(Enum):
    """The registry of finding codes: text `[code]`, SARIF rule id, JSON `code`."""

    RACE_RAW = "race-raw"
    RACE_WAR = "race-war"
    RACE_WAW = "race-waw"
    DEADLOCK = "deadlock"
    OUT_OF_BOUNDS = "out-of-bounds"
    STALE_READ = "stale-read"
    WRONG_RESULT = "wrong-result"
    SET_ADD_MIX = "set-add-mix"  # a cell both Set and AtomicAdd, in any order

    @staticmethod
    def of(kind: FindingKind, detail: str) -> FindingCode:
        return _CODE_OF[(kind, detail if kind is FindingKind.RACE else "")]

    @property
    def record(self) -> CodeRecord:
        return FINDING_CODES[self]


class Severity(Enum):
    """An error makes the verdict `bug`; a warning is reported but leaves it `proved`."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRecord:
    """One finding code, its only home: what it stands for (a kind, and for a race the
    detail) and how every renderer names it."""

    code: FindingCode
    kind: FindingKind
    detail: str  # the race detail it stands for; "" for a kind with one code
    title: str  # the heading of its findings (text, HTML, SARIF message)
    rule: str  # SARIF's rule description
    severity: Severity  # what the analysis reports it as (the judge may raise it)
    step_note: str = reason(ReasonCode.STEP_OF_FINDING)  # HTML: the highlighted step


def _race(code: FindingCode, detail: RaceDetail, rule: ReasonCode) -> CodeRecord:
    return CodeRecord(
        code=code,
        kind=FindingKind.RACE,
        detail=detail.value,
        title=reason(ReasonCode.FINDING_DATA_RACE),
        rule=reason(rule),
        severity=Severity.ERROR,
        step_note=reason(ReasonCode.STEP_RACING),
    )


FINDING_CODES: dict[FindingCode, CodeRecord] = {
    record.code: record
    for record in (
        _race(
            FindingCode.RACE_RAW,
            RaceDetail.READ_AFTER_WRITE,
            ReasonCode.RULE_RACE_RAW,
        ),
        _race(
            FindingCode.RACE_WAR,
            RaceDetail.WRITE_AFTER_READ,
            ReasonCode.RULE_RACE_WAR,
        ),
        _race(
            FindingCode.RACE_WAW,
            RaceDetail.WRITE_AFTER_WRITE,
            ReasonCode.RULE_RACE_WAW,
        ),
        _race(
            FindingCode.SET_ADD_MIX,
            RaceDetail.SET_ADD_MIX,
            ReasonCode.RULE_SET_ADD_MIX,
        ),
        CodeRecord(
            code=FindingCode.DEADLOCK,
            kind=FindingKind.DEADLOCK,
            detail="",
            title=reason(ReasonCode.FINDING_DEADLOCK),
            rule=reason(ReasonCode.FINDING_DEADLOCK),
            severity=Severity.ERROR,
            step_note=reason(ReasonCode.STEP_BLOCKED),
        ),
        CodeRecord(
            code=FindingCode.OUT_OF_BOUNDS,
            kind=FindingKind.OUT_OF_BOUNDS,
            detail="",
            title=reason(ReasonCode.FINDING_OUT_OF_BOUNDS),
            rule=reason(ReasonCode.FINDING_OUT_OF_BOUNDS),
            severity=Severity.ERROR,
        ),
        CodeRecord(
            code=FindingCode.STALE_READ,
            kind=FindingKind.STALE_READ,
            detail="",
            title=reason(ReasonCode.FINDING_STALE_READ),
            rule=reason(ReasonCode.RULE_STALE_READ),
            severity=Severity.WARNING,
            step_note=reason(ReasonCode.STEP_UNWRITTEN),
        ),
        CodeRecord(
            code=FindingCode.WRONG_RESULT,
            kind=FindingKind.WRONG_RESULT,
            detail="",
            title=reason(ReasonCode.FINDING_WRONG_RESULT),
            rule=reason(ReasonCode.FINDING_WRONG_RESULT),
            severity=Severity.ERROR,
        ),
    )
}
"""The finding-code registry: one record per code, read by every renderer."""

_CODE_OF = {(record.kind, record.detail): code for code, record in FINDING_CODES.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputDiff:
    """Where the reference executor's output under the witness differs from the golden."""

    tensor: str
    rank: int
    index: tuple[int, ...]  # first differing element in the row's own shape
    got: tuple[float, ...]  # a few elements starting there
    golden: tuple[float, ...]
    model: str = ""  # the golden model's name, e.g. "allreduce-sum"
    store: SourceLocation | None = None  # the differing rank's last store into the output


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """Bytes of a buffer, or one signal cell, in the user's names."""

    memory: str  # the buffer's name, e.g. "data_buf"
    owner: int  # the rank owning the instance; HOST_OWNER for host tensors
    ranges: tuple[tuple[int, int], ...]  # bytes [start, end); a cell's four bytes
    cell: tuple[int, ...] | None = None  # a signal cell's element index in the program's view


class StepKind(Enum):
    READ = "read"
    WRITE = "write"
    ATOMIC_ADD = "atomic add"
    NOTIFY = "notify"
    WAIT = "wait"


class StepStatus(Enum):
    """Whether the witness schedule runs the step: highlighted steps it does not run
    come last, as what happens afterwards (a race) or what waits forever (a deadlock)."""

    RAN = "ran"
    AFTERWARDS = "afterwards"
    BLOCKED = "blocked"


@dataclass(frozen=True, slots=True, kw_only=True)
class WitnessStep:
    """One step of a witness interleaving: which rank did what, where."""

    rank: int
    index: int  # the event's position in its rank's sequence
    kind: StepKind
    location: SourceLocation
    call: str = ""  # the DSL call, e.g. "remote_load"; "" when it is the kind's own verb
    place: Place | None = None  # the bytes or the signal cell touched
    op: NotifyOp | None = None  # notify: Set or AtomicAdd
    cmp: WaitCmp | None = None  # wait: Eq or Ge
    value: int | None = None  # notify: the value; wait: the threshold
    repeat: int | None = None  # 1-based `--repeat` call, when there are several
    status: StepStatus = StepStatus.RAN
    highlight: bool = False  # one of the events the finding is about
    task: str = ""  # the task that ran it, when the runtime may overlap it with another
    loops: tuple[tuple[str, int], ...] = ()  # the device loops it ran in: (variable, value)
    starts_after: str = ""  # a start edge: the task it waits for, `rank 0, task push_step`


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockedWait:
    """A wait of a deadlock: it never passes; `holds` is its cell's final value."""

    rank: int
    step: WitnessStep
    holds: int | None = None


def identity(
    kind: FindingKind, detail: str, locations: tuple[SourceLocation, ...]
) -> tuple[object, ...]:
    """What makes two findings the same one: the paths of a program report it once."""
    return (kind, detail, locations)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """What was found, as facts. `ranks` is ordered like `locations` where the kind has
    one rank per location (a race: the reader, or the first writer, first)."""

    kind: FindingKind
    detail: str  # e.g. "read-after-write"; "" where the kind needs none
    locations: tuple[SourceLocation, ...]  # primary first: the read / the blocked wait
    ranks: tuple[int, ...]
    regions: tuple[Region, ...] = ()
    place: Place | None = None  # race, stale read: the bytes or cell in question
    steers: bool = False  # race: the value read steers control flow
    # unconfirmed: its witness ran the program on another path (a value read steered it)
    diverged: bool = False
    blocked: tuple[BlockedWait, ...] = ()  # deadlock: the waits that never pass
    later_writer: int | None = None  # stale read: a rank that writes the bytes only later
    # the thread of each of `ranks` where a rank runs several (`task read_step`), else ""
    threads: tuple[str, ...] = ()
    reason: str = ""  # out of bounds: what the access exceeded
    cause: SourceLocation | None = None  # wrong result: the stale read that explains it
    witness: tuple[WitnessStep, ...] = ()  # the events that matter, in execution order
    confirmed: bool = False  # the co-simulation replayed the witness to the bad state
    diff: OutputDiff | None = None
    severity: Severity = Severity.ERROR
    # the input elements chosen for the path it showed on (tensor, flat index, value);
    # the others are as --seed draws them (`racecheck.paths`)
    inputs: tuple[tuple[str, int, float], ...] = ()

    @property
    def code(self) -> FindingCode:
        return FindingCode.of(self.kind, self.detail)

    @property
    def identity(self) -> tuple[object, ...]:
        return identity(self.kind, self.detail, self.locations)


@dataclass(frozen=True, slots=True, kw_only=True)
class EveryPProof:
    """Races, deadlocks and bounds proved for every P >= low (below `high` if set: from
    `high` on, some device scalar the program computes leaves INT32), the outputs
    checked at `outputs_at` only, and what that proof rests on."""

    low: int
    assumptions: tuple[str, ...]
    high: int | None = None
    outputs_at: tuple[int, ...] = ()  # the P at which the outputs were checked concretely


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
    rank_param: str | None = None  # the factory parameter that received P
    every_p: EveryPProof | None = None  # set: this result holds for every P >= every_p.low

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.WARNING)


def noted(result: ProgramResult, note: str) -> ProgramResult:
    """`result` with `note` first among its notes."""
    return dataclasses.replace(result, notes=(note, *result.notes))


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    file: str
    results: tuple[ProgramResult, ...] = ()
    errors: tuple[str, ...] = field(default=())  # user-caused errors, "file:line: message"
    imported_with: tuple[str, ...] = ()  # argv, env, import root the file was imported with

    @property
    def verdict(self) -> FileVerdict:
        return file_verdict(self)

    @property
    def exit_code(self) -> int:
        return exit_code_of([self])


class FileVerdict(Enum):
    """A file's answer, from its results and errors (`file_verdict`)."""

    PROVED = "proved"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"
    BUG = "bug"
    ERROR = "error"  # nothing was checked: the file's errors stopped every program

    @property
    def exit_code(self) -> int:
        """docs/model.md §3: 1 on a bug; 0 when something was proved and nothing is
        undecided; else 2 (an error, an unknown, every P skipped)."""
        return {FileVerdict.BUG: 1, FileVerdict.PROVED: 0}.get(self, 2)


def file_verdict(report: Report) -> FileVerdict:
    """The one rule for a file's verdict: a bug anywhere is a bug; an error or an unknown
    leaves it undecided; a proved P with the others skipped by the program's own rule is
    proved (a skipped P checks nothing, so it takes nothing away)."""
    verdicts = {result.verdict for result in report.results}
    if Verdict.BUG in verdicts:
        return FileVerdict.BUG
    if report.errors and not report.results:
        return FileVerdict.ERROR
    if report.errors or Verdict.UNKNOWN in verdicts:
        return FileVerdict.UNKNOWN
    return FileVerdict.PROVED if Verdict.PROVED in verdicts else FileVerdict.SKIPPED


def exit_code_of(reports: list[Report]) -> int:
    """docs/model.md §3, for one file or several: 1 on any bug; else 2 if anything was not
    checked (an error, an unknown, nothing proved); else 0."""
    codes = [file_verdict(report).exit_code for report in reports]
    return 1 if 1 in codes else max(codes, default=2)
