"""All the wording of a report: finding messages, witness steps, places, rank sets and
output diffs. Findings arrive as typed facts (`racecheck.findings`); every renderer
words them here, so a report says `rank 1's data bytes 0..256` the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from racecheck.events import HOST_OWNER, NotifyOp, WaitCmp
from racecheck.findings import (
    BlockedWait,
    EveryPProof,
    Finding,
    FindingCode,
    FindingKind,
    OutputDiff,
    Place,
    RaceDetail,
    StepKind,
    StepStatus,
    WitnessStep,
)


def describe_heading(finding: Finding) -> str:
    """A finding's heading: its code's title, with the detail that picked the code."""
    title = finding.code.record.title
    return f"{title} ({finding.detail})" if finding.detail else title


def describe_code(code: FindingCode) -> str:
    """One line on what a finding code means (SARIF rule descriptions)."""
    return code.record.rule


def describe_every_p(proof: EveryPProof) -> str:
    """`races, deadlocks, bounds: every P >= 4; outputs: checked at P = 4..8, 17`
    (`4 <= P < 65536` for a bounded proof): the headline claims for every P only what
    was proved for every P."""
    span = f"P >= {proof.low}" if proof.high is None else f"{proof.low} <= P < {proof.high}"
    outputs = describe_rank_counts(proof.outputs_at) if proof.outputs_at else "none"
    return f"races, deadlocks, bounds: every {span}; outputs: checked at P = {outputs}"


def describe_rank_counts(counts: Iterable[int]) -> str:
    """`2..4, 6` for {2, 3, 4, 6}: runs of consecutive rank counts collapse."""
    runs: list[list[int]] = []
    for count in sorted(set(counts)):
        if runs and count == runs[-1][-1] + 1:
            runs[-1].append(count)
        else:
            runs.append([count])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]}..{run[-1]}" for run in runs)


def describe_ranks(ranks: Sequence[int]) -> str:
    """`on rank 1`, `between rank 0 and rank 3`, `among ranks 0, 1 and 3`; '' for none."""
    if not ranks:
        return ""
    if len(ranks) == 1:
        return f"on rank {ranks[0]}"
    if len(ranks) == 2:
        return f"between rank {ranks[0]} and rank {ranks[1]}"
    listed = ", ".join(str(rank) for rank in ranks[:-1])
    return f"among ranks {listed} and {ranks[-1]}"


def describe_participants(finding: Finding) -> str:
    """`between rank 1, task read_step and rank 0, task push_step` when the finding names
    its threads (a rank runs several), else as `describe_ranks`."""
    if not finding.threads or len(finding.threads) != len(finding.ranks):
        return describe_ranks(finding.ranks)
    names = [describe_participant(finding, number) for number in range(len(finding.ranks))]
    if len(names) == 1:
        return f"on {names[0]}"
    return f"between {' and '.join(names)}" if len(names) == 2 else f"among {'; '.join(names)}"


def describe_participant(finding: Finding, number: int) -> str:
    """`rank 1, task read_step`: the finding's rank `number`, its thread when it has one."""
    return f"rank {_who(finding, number)}"


def describe_thread(step: WitnessStep) -> str:
    """`rank 1, task read_step`: who ran the step; a rank that is one thread is `rank 1`."""
    return f"rank {step.rank}, {step.task}" if step.task else f"rank {step.rank}"


def output_label(finding: Finding) -> str:
    """How a finding's output diff is introduced: under its witness, if it has one."""
    return "output under this witness" if finding.witness else "output of the traced run"


def describe_diff(diff: OutputDiff) -> str:
    """`rank 2, y[0, 0:4] = [1.0, 0.0, ...], golden allreduce-sum [6.0, ...]`."""
    golden = f"golden {diff.model} " if diff.model else "golden "
    return (
        f"rank {diff.rank}, {diff.tensor}[{_diff_span(diff)}] = {_numbers(diff.got)}, "
        f"{golden}{_numbers(diff.golden)}"
    )


def _diff_span(diff: OutputDiff) -> str:
    if not diff.index:
        return ""
    *leading, last = diff.index
    span = f"{last}:{last + len(diff.got)}" if len(diff.got) > 1 else str(last)
    return ", ".join([*(str(i) for i in leading), span])


def _numbers(values: Sequence[float]) -> str:
    return "[" + ", ".join(_number(value) for value in values) + "]"


def _number(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{value:.1f}"
    return f"{value:.6g}"


_RELATIONS = {WaitCmp.GE: ">=", WaitCmp.EQ: "==", WaitCmp.GE_UNSIGNED: ">= (as uint32)"}


def describe_place(place: Place) -> str:
    """`rank 1's signal[0, 0]` for a cell; `rank 1's data bytes 0..256` for bytes (host
    tensors have no owner: `y bytes 0..16`). Brackets after a name index its elements,
    never a rank's copy; a shape is written `shape [1, 64]`."""
    where = place.memory if place.owner == HOST_OWNER else f"rank {place.owner}'s {place.memory}"
    if place.cell is not None:
        return f"{where}[{', '.join(str(i) for i in place.cell)}]"
    spans = ", ".join(f"{start}..{end}" for start, end in place.ranges[:3])
    more = f" (+{len(place.ranges) - 3} more)" if len(place.ranges) > 3 else ""
    return f"{where} bytes {spans}{more}"


def _subject(place: Place | None) -> str:
    if place is None:
        return "memory"
    return ("signal cell " if place.cell is not None else "") + describe_place(place)


_STATUS_PREFIX = {
    StepStatus.RAN: "",
    StepStatus.AFTERWARDS: "afterwards: ",
    StepStatus.BLOCKED: "blocked forever: ",
}


def describe_iteration(step: WitnessStep) -> str:
    """`round k = 1`, or `round r = 0, k = 3` inside two loops: the iteration of each
    device loop the step ran in, outermost first."""
    return "round " + ", ".join(f"{name} = {value}" for name, value in step.loops)


def describe_step(step: WitnessStep) -> str:
    """`afterwards: call 2: remote_load (read) rank 1's data bytes 0..256`."""
    call = f"call {step.repeat}: " if step.repeat is not None else ""
    return _STATUS_PREFIX[step.status] + call + describe_action(step)


def describe_action(step: WitnessStep) -> str:
    """What the step does: `notify rank 1's signal[0, 0] += 1`, `wait ... >= 2`,
    `store (write) ...`."""
    place = describe_place(step.place) if step.place is not None else ""
    if step.kind is StepKind.NOTIFY:
        sign = "+=" if step.op is NotifyOp.ATOMIC_ADD else "="
        return f"notify {place} {sign} {step.value}"
    if step.kind is StepKind.WAIT and step.starts_after:  # a start edge
        return f"starts after {step.starts_after} ends"
    if step.kind is StepKind.WAIT and step.cmp is None and step.call:  # a unit (a core)
        return step.call
    if step.kind is StepKind.WAIT and step.cmp is not None:
        relation = _RELATIONS[step.cmp]
        return f"wait {place} {relation} {step.value}"
    action = f"{step.call} ({step.kind.value})" if step.call else step.kind.value
    return f"{action} {place}".rstrip()


def describe_finding(finding: Finding) -> str:
    """The finding's one-paragraph message (JSON `message`, text and HTML body)."""
    text = _MESSAGES[finding.kind](finding)
    if finding.inputs:
        chosen = ", ".join(
            f"{name}.flat[{index}] = {int(value) if value.is_integer() else value}"
            for name, index, value in finding.inputs
        )
        text += f"; it shows with the input {chosen} (the other elements as --seed draws them)"
    return text


def _who(finding: Finding, number: int) -> str:
    """`1`, or `1, task read_step` when the rank runs several threads."""
    rank = finding.ranks[number]
    return f"{rank}, {finding.threads[number]}" if finding.threads else f"{rank}"


def _race_message(finding: Finding) -> str:
    first, second = _who(finding, 0), _who(finding, 1)
    what = _subject(finding.place)
    detail = RaceDetail(finding.detail)
    if detail is RaceDetail.READ_AFTER_WRITE:
        text = (
            f"rank {first} can read {what} before rank {second} writes it, and see stale"
            " data (zeros on a first call): nothing orders the two"
        )
    elif detail is RaceDetail.WRITE_AFTER_READ:
        text = (
            f"rank {second} can overwrite {what} before rank {first} has read it:"
            " nothing orders the two"
        )
    elif detail is RaceDetail.SET_ADD_MIX:
        text = (
            f"{what} is written by a Set (rank {first}) and by an atomic add (rank {second});"
            " PyPTO forbids mixing them on one cell: the Set is a plain store that can lose"
            " a concurrent add"
        )
    else:
        both = (
            f"ranks {first} and {second}"
            if not finding.threads
            else f"rank {first} and rank {second}"
        )
        text = f"{both} both write {what} in either order"
    if finding.steers:
        text += "; control flow depends on this value, so other executions may differ further"
    return text


_LISTED_WAITS = 4  # a deadlock names this many blocked waits, then counts the rest


def _deadlock_message(finding: Finding) -> str:
    text = "; ".join(_blocked_message(wait) for wait in _listed(finding.blocked))
    more = len(finding.blocked) - _LISTED_WAITS
    some = "threads" if any(wait.step.task for wait in finding.blocked) else "ranks"
    return text + (f"; and {more} more {some} wait forever likewise" if more > 0 else "")


def _listed(blocked: Sequence[BlockedWait]) -> list[BlockedWait]:
    """The blocked waits a deadlock names: the first, the program's own waits listed
    before racecheck's (`racecheck.analysis.deadlock`), one thread left without a core
    or the dispatch lock kept among them when there is one, to say who holds them."""
    listed = list(blocked[:_LISTED_WAITS])
    unit = next((wait for wait in blocked[_LISTED_WAITS:] if _waits_for_unit(wait)), None)
    if unit is not None and not any(_waits_for_unit(wait) for wait in listed):
        listed[-1] = unit
    return listed


def _waits_for_unit(wait: BlockedWait) -> bool:
    """A thread waiting for a core or the dispatch lock: racecheck's own wait (no cell
    value held) that is no start edge."""
    return wait.holds is None and not wait.step.starts_after


def _blocked_message(wait: BlockedWait) -> str:
    """`rank 0, task gather cannot start: it starts after rank 0, host join after call 1,
    which never ends`, or `rank 1 waits forever on wait ... (it holds 0)`."""
    who = describe_thread(wait.step)
    if wait.step.starts_after:
        return f"{who} cannot start: it starts after {wait.step.starts_after}, which never ends"
    held = f" (it holds {wait.holds})" if wait.holds is not None else ""
    return f"{who} waits forever on {describe_action(wait.step)}{held}"


def _stale_message(finding: Finding) -> str:
    text = (
        f"rank {_who(finding, 0)} reads {_subject(finding.place)}, which no write can reach"
        " before the read: it always sees the zero-initialised window"
    )
    if finding.later_writer is not None:
        text += f" (rank {finding.later_writer} writes it only afterwards)"
    return text


def _bounds_message(finding: Finding) -> str:
    return (
        f"rank {finding.ranks[0]}: {finding.reason}"
        if finding.ranks
        else f"the host: {finding.reason}"
    )


def _wrong_result_message(finding: Finding) -> str:
    model = finding.diff.model if finding.diff is not None and finding.diff.model else "the golden"
    text = f"the outputs do not match {model}"
    if finding.cause is not None:
        text += f"; likely cause: the stale read at {finding.cause}"
    return text


_MESSAGES = {
    FindingKind.RACE: _race_message,
    FindingKind.DEADLOCK: _deadlock_message,
    FindingKind.STALE_READ: _stale_message,
    FindingKind.OUT_OF_BOUNDS: _bounds_message,
    FindingKind.WRONG_RESULT: _wrong_result_message,
}
