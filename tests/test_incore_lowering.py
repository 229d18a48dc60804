"""The builtins called inside a kernel run PyPTO's InCore lowering (docs/model.md): the
events of one rank, cell by cell and byte by byte, at sizes that change the number of
chunks, and the verdicts at those sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

import racecheck
from racecheck.cosim import simulate
from racecheck.events import EventKind, Trace
from racecheck.load import discover, load_file

FIXTURES = Path(__file__).parent / "fixtures"
INCORE = FIXTURES / "incore_builtins.py"
COLLECTIVES = FIXTURES / "builtin_collectives.py"

Step = tuple[object, ...]


def _builtin_events(path: Path, program: str, ranks: int, rank: int = 0, **args: str) -> list[Step]:
    """Rank `rank`'s events of the builtin, as ("notify", owner, cell, value), ("wait",
    cell, expected) and (kind, buffer, owner, byte ranges)."""
    spec = next(s for s in discover(load_file(str(path)), args=args) if s.name == program)
    trace: Trace = simulate(spec.instantiate(ranks)).trace
    steps: list[Step] = []
    for event in trace.events[rank]:
        if not event.label.startswith("pld.tensor."):
            continue
        if event.notify is not None:
            cell = event.notify.cell
            steps.append(("notify", cell.owner, cell.index, event.notify.value))
        elif event.wait is not None:
            steps.append(("wait", event.wait.cell.index, event.wait.expected))
        else:
            assert event.access is not None
            buffer = trace.memories[event.access.memory].name
            kind = "load" if event.kind is EventKind.LOAD else "store"
            steps.append((kind, buffer, event.access.owner, event.access.ranges))
    return steps


def _mesh_chunk(first: int, stop: int, generation: int) -> list[Step]:
    """Rank 0 of 2: reduce bytes [first, stop) with rank 1, barrier `generation`, store."""
    span = ((first, stop),)
    return [
        ("load", "data_buf", 0, span),
        ("load", "data_buf", 1, span),
        ("notify", 1, (0, 0), 1),
        ("wait", (1, 0), generation),
        ("store", "data_buf", 0, span),
    ]


@pytest.mark.parametrize(
    ("size", "dtype", "chunks"),
    [
        ("17", "pl.FP32", [(0, 68)]),  # W = 24: one chunk, g in {1, 2}
        ("4097", "pl.FP32", [(0, 16384), (16384, 16388)]),  # W = 4096: g in {1, 2, 3}
        ("8193", "pl.FP16", [(0, 16384), (16384, 16386)]),  # W = 8192 half floats
    ],
)
def test_incore_mesh_allreduce_barriers_once_per_16_kib_chunk(
    size: str, dtype: str, chunks: list[tuple[int, int]]
) -> None:
    expected: list[Step] = [("notify", 1, (0, 0), 1), ("wait", (1, 0), 1)]
    for number, (first, stop) in enumerate(chunks):
        expected += _mesh_chunk(first, stop, 2 + number)
    expected.append(("notify", 0, (1, 0), -(1 + len(chunks))))
    assert _builtin_events(INCORE, "build_allreduce", 2, size=size, dtype=dtype) == expected


def _ring_subchunk(row: int, number: int, span: tuple[int, int], reduce: bool) -> list[Step]:
    """Rank 0 of 2 on signal row `row`: subchunk `number` of the left rank's bytes `span`."""
    received = [("load", "data_buf", 1, (span,))]
    if reduce:
        received.append(("load", "data_buf", 0, (span,)))
    return [
        ("notify", 1, (row, 0), 1),
        ("wait", (row, 1), 2 * number + 1),
        *received,
        ("notify", 1, (row, 0), 1),
        ("wait", (row, 1), 2 * number + 2),
        ("store", "data_buf", 0, (span,)),
    ]


def test_incore_ring_allreduce_announces_in_its_own_column_of_each_row() -> None:
    # n = 17 on 2 ranks: segments [0, 8) and [8, 17), one subchunk each. Rank 0 adds the
    # left rank's segment 0 on row 0, then copies its segment 1 on row 1.
    expected = [
        *_ring_subchunk(0, 0, (0, 32), reduce=True),
        *_ring_subchunk(1, 0, (32, 68), reduce=False),
        ("notify", 0, (0, 1), -2),
        ("notify", 0, (1, 1), -2),
    ]
    assert _builtin_events(INCORE, "build_allreduce", 2, size="17", mode="ring") == expected


def test_incore_ring_allreduce_runs_every_rank_through_the_longest_segment() -> None:
    # n = 8193 on 2 ranks: segments [0, 4096) and [4096, 8193); the longer one needs two
    # 16 KiB subchunks, so every step runs two, and the short segment's second one is
    # inactive: it reads the own first element and stores nothing.
    inactive = [
        ("notify", 1, (0, 0), 1),
        ("wait", (0, 1), 3),
        ("load", "data_buf", 0, ((0, 4),)),
        ("notify", 1, (0, 0), 1),
        ("wait", (0, 1), 4),
    ]
    expected = [
        *_ring_subchunk(0, 0, (0, 16384), reduce=True),
        *inactive,
        *_ring_subchunk(1, 0, (16384, 32768), reduce=False),
        *_ring_subchunk(1, 1, (32768, 32772), reduce=False),
        ("notify", 0, (0, 1), -4),
        ("notify", 0, (1, 1), -4),
    ]
    assert _builtin_events(INCORE, "build_allreduce", 2, size="8193", mode="ring") == expected


def test_incore_ring_allreduce_aligns_half_float_segments_to_16_elements() -> None:
    # n = 40 FP16 on 3 ranks: floor(i*n/N) = 0, 13, 26, 40 become 0, 16, 32, 40.
    # Rank 0 stores segment 1 and 0 (reduce-scatter), then 2 and 1 (allgather).
    steps = _builtin_events(INCORE, "build_allreduce", 3, size="40", mode="ring", dtype="pl.FP16")
    stores = [step[3] for step in steps if step[0] == "store"]
    assert stores == [((32, 64),), ((0, 32),), ((64, 80),), ((32, 64),)]
    waits = [step[1:] for step in steps if step[0] == "wait"]
    assert waits == [((row, peer), g) for row in range(4) for g in (1, 2) for peer in (1, 2)]


@pytest.mark.parametrize(
    ("args", "ranks"),
    [({"size": "4097"}, "2..3"), ({"size": "8193", "mode": "ring"}, "2..3")],
)
def test_multi_chunk_incore_allreduces_are_proved_and_sum(args: dict[str, str], ranks: str) -> None:
    report = racecheck.verify(str(INCORE), ranks=ranks, programs=["build_allreduce"], args=args)
    assert {(result.verdict, result.model) for result in report.results} == {
        (racecheck.Verdict.PROVED, "allreduce-sum")
    }


_B1 = [("notify", 1, (0, 0), 1), ("wait", (1, 0), 1)]
_ROW = ((0, 32),)


@pytest.mark.parametrize(
    ("path", "program", "expected"),
    [
        (INCORE, "build_barrier", [*_B1, ("notify", 0, (1, 0), -1)]),
        (
            COLLECTIVES,
            "build_reduce_scatter",
            [
                *_B1,
                ("load", "target_buf", 0, _ROW),
                ("load", "target_buf", 1, _ROW),
                ("notify", 1, (0, 0), 1),
                ("wait", (1, 0), 2),
                ("store", "target_buf", 0, _ROW),
                ("notify", 0, (1, 0), -2),
            ],
        ),
        (  # root 1: rank 0 gets the root's data before its epilogue
            COLLECTIVES,
            "build_broadcast",
            [
                *_B1,
                ("load", "data_buf", 1, _ROW),
                ("store", "data_buf", 0, _ROW),
                ("notify", 0, (1, 0), -1),
            ],
        ),
        (
            COLLECTIVES,
            "build_allgather",
            [
                ("load", "x", -1, _ROW),
                ("store", "target_buf", 0, _ROW),
                ("load", "x", -1, _ROW),
                ("store", "target_buf", 1, _ROW),
                *_B1,
                ("notify", 0, (1, 0), -1),
            ],
        ),
        (
            INCORE,
            "build_all_to_all",
            [
                ("load", "x", -1, _ROW),
                ("store", "target_buf", 0, _ROW),
                ("load", "x", -1, ((32, 64),)),
                ("store", "target_buf", 1, _ROW),
                *_B1,
                ("notify", 0, (1, 0), -1),
            ],
        ),
    ],
)
def test_incore_collectives_follow_lower_composite_ops(
    path: Path, program: str, expected: list[Step]
) -> None:
    assert _builtin_events(path, program, 2) == expected


def test_the_root_of_an_incore_broadcast_only_synchronises() -> None:
    steps = _builtin_events(COLLECTIVES, "build_broadcast", 2, rank=1)
    assert steps == [("notify", 0, (1, 0), 1), ("wait", (0, 0), 1), ("notify", 1, (0, 0), -1)]


def test_an_incore_allgather_from_a_window_is_refused_at_its_line() -> None:
    report = racecheck.verify(str(INCORE), ranks="2", programs=["build_allgather_from_window"])
    assert [result.verdict for result in report.results] == [racecheck.Verdict.UNKNOWN]
    line = next(
        number
        for number, text in enumerate(INCORE.read_text().splitlines(), start=1)
        if "# @window-local" in text
    )
    assert report.errors[0].startswith(f"{INCORE}:{line}: error: pld.tensor.allgather in a kernel")
