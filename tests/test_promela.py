"""The Promela model's shape: what is kept, where the markers are, what the text says.

These tests read the model text only; SPIN's answers on it are in test_spin.py.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from tracebuild import LINE_OUT, TraceBuilder, mesh_allreduce

from racecheck.errors import UsageError
from racecheck.events import HOST_OWNER, EventKind, SourceLocation, Trace
from racecheck.export import export_command
from racecheck.export.promela import to_promela, write_model
from racecheck.export.properties import Question, questions


def message_passing() -> Trace:
    builder = TraceBuilder(2)
    data = builder.window("data", 16)
    signal = builder.window("signal", 4)
    builder.store(0, data, 1, 0, 16, line=10)
    builder.notify(0, signal, 1, 0, line=11)
    builder.wait(1, signal, 0, line=20)
    builder.load(1, data, 1, 0, 16, line=21)
    return builder.build()


def test_every_marker_line_holds_its_label_and_question() -> None:
    trace = mesh_allreduce(3)
    asked = questions(trace)
    model = write_model(trace, asked)
    lines = model.text.splitlines()
    assert sorted(model.markers.values(), key=repr) == sorted(asked, key=repr)
    for number, (line, question) in enumerate(sorted(model.markers.items())):
        text = lines[line - 1]
        assert text.startswith(f"q_{number}: ")
        second = question.second
        before = "" if second is None else f" before rank {second.rank} e{second.index}"
        assert f"can e{question.first.index} run{before}?" in text


def test_mesh_questions_are_the_store_load_pairs_both_ways() -> None:
    ranks = 3
    trace = mesh_allreduce(ranks)
    asked = set(questions(trace))
    # Each rank's store of its own slot against each peer's remote load of it, and
    # whether each load of a window runs at all.
    ordering = {question for question in asked if question.second is not None}
    assert len(ordering) == 2 * ranks * (ranks - 1)
    store = trace.events[0][0]
    (remote,) = [
        e for e in trace.events[1] if e.kind is EventKind.LOAD and e.access and e.access.owner == 0
    ]
    assert Question(first=store.ref, second=remote.ref) in asked
    assert Question(first=remote.ref, second=store.ref) in asked
    assert Question(first=remote.ref) in asked


def test_data_events_that_conflict_with_nothing_are_left_out() -> None:
    text = to_promela(mesh_allreduce(2))
    assert f"proto.py:{LINE_OUT}" not in text  # the host output rows are disjoint
    assert "e3: load" not in text  # a rank's read of its own slot conflicts with no peer


def test_waits_are_blocking_guards_and_notifies_update_cells() -> None:
    text = to_promela(message_passing())
    assert re.search(r"cell_0 = cell_0 \+ 1", text)
    assert re.search(r"^\s+cell_0 >= 1", text, re.MULTILINE)
    assert text.count("active proctype") == 2


def test_multi_line_source_text_keeps_marker_lines_exact() -> None:
    trace = message_passing()
    first = trace.events[0][0]
    spread = SourceLocation(file="p.py", line=10, text="pl.store(x,\n   y,\n   z)")
    events = ((dataclasses.replace(first, location=spread), *trace.events[0][1:]), trace.events[1])
    model = write_model(dataclasses.replace(trace, events=events), questions(trace))
    lines = model.text.splitlines()
    assert model.markers
    for line in model.markers:
        assert lines[line - 1].startswith("q_")


def test_rank_without_events_is_a_valid_proctype() -> None:
    builder = TraceBuilder(2)
    data = builder.host("y", 8)
    builder.store(0, data, HOST_OWNER, 0, 8, line=1)
    text = to_promela(builder.build())
    assert "active proctype rank_1() {\n    skip\n}" in text


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_export_command_writes_the_traced_example() -> None:
    text = export_command(str(EXAMPLES / "08_allreduce_mesh.py"), 3)
    assert [f"active proctype rank_{rank}()" in text for rank in range(4)] == [1, 1, 1, 0]
    assert "pld.tile.remote_load" in text  # events carry their source lines
    assert text.count(" >= 1") == 3 * 2  # every rank waits on both peers


def test_export_command_rejects_unknown_formats() -> None:
    with pytest.raises(UsageError, match="promela"):
        export_command(str(EXAMPLES / "08_allreduce_mesh.py"), 3, fmt="tla")
