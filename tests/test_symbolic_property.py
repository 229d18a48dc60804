"""Generated all_to_all_v variants with input-dependent counts: the symbolic verdict
(summaries and concolic paths, with the path budget cut to 1 so the summary decides)
agrees with brute force over every input in a small range, and every counter-model
replays as a concrete program."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from brute_force import agrees, verdict_at_two
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import racecheck.paths
from racecheck.findings import Verdict

COUNTS = (-1, 0, 1, 2, 3)  # every value each of the two count elements takes: past 2

SOURCE = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 8
MAX_ROWS = {capacity}
TABLE = {table}


def build(nr: int):
    @pl.program
    class Generated:
        @pl.function(type=pl.FunctionType.InCore)
        def exchange(
            self,
            x: pl.Tensor[[MAX_ROWS, SIZE], pl.FP32],
            send_counts: pl.Tensor[[1], pl.INT32],
            y: pl.Out[pl.Tensor[[MAX_ROWS * nr + {slack}, SIZE], pl.FP32]],
            inbox: pl.InOut[pld.DistributedTensor[[MAX_ROWS * nr, SIZE], pl.FP32]],
            counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[MAX_ROWS * nr + {slack}, SIZE], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(inbox))
            block = pl.load(x, [0, 0], [MAX_ROWS, SIZE])
            raw = {raw}
            count = {clamp}
            for dest in pl.range(nr):
                pld.tile.remote_store(block, inbox, peer=dest, offsets=[MAX_ROWS * me, 0])
                pld.system.notify(counts, peer=dest, offsets=[me, 0], value=count,
                                  op=pld.NotifyOp.Set)
                pld.system.notify(signal, peer=dest, offsets=[me, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
            for source in pl.range(nr):
                pld.system.wait(signal, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
                received = pl.read(counts, [source, 0])
                for row in pl.range(received):
                    tile = pl.load(inbox, [MAX_ROWS * source + row + {shift}, 0], [1, SIZE])
                    y = pl.store(tile, [MAX_ROWS * source + row, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def entry(
            self,
            x: pl.Tensor[[nr, MAX_ROWS, SIZE], pl.FP32],
            send_counts: pl.Tensor[[nr, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr, MAX_ROWS * nr + {slack}, SIZE], pl.FP32]],
        ):
            inbox_buf = pld.alloc_window_buffer([MAX_ROWS * nr, SIZE], dtype=pl.FP32)
            counts_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                inbox = pld.window(inbox_buf, [MAX_ROWS * nr, SIZE], dtype=pl.FP32)
                counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.exchange(x[r], send_counts[r], y[r], inbox, counts, signal, device=r)
            return y

    return Generated
"""
CLAMPS = {
    "none": "raw",
    "upper": "pl.min(raw, MAX_ROWS)",
    "both": "pl.max(pl.min(raw, MAX_ROWS), 0)",
}


def _program(tmp_path: Path, name: str, variant: dict[str, object], table: object) -> Path:
    raw = "pl.read(send_counts, [0])" if table is None else "TABLE[me]"
    text = SOURCE.format(
        capacity=variant["capacity"],
        table=table,
        slack=1 if variant["shift"] else 0,
        raw=raw,
        clamp=CLAMPS[str(variant["clamp"])],
        shift=variant["shift"],
    )
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def _concrete(tmp_path: Path, variant: dict[str, object], counts: tuple[int, int]) -> Verdict:
    path = _program(tmp_path, f"concrete_{counts[0]}_{counts[1]}", variant, list(counts))
    return verdict_at_two(path)[0]


VARIANTS = st.fixed_dictionaries(
    {
        "capacity": st.sampled_from((1, 2)),
        "clamp": st.sampled_from(tuple(CLAMPS)),
        "shift": st.sampled_from((0, 1)),
    }
)


@pytest.mark.slow
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(variant=VARIANTS)
def test_symbolic_verdict_matches_brute_force_over_the_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: dict[str, object]
) -> None:
    monkeypatch.setattr(racecheck.paths, "BUDGET", 1)
    symbolic, inputs = verdict_at_two(_program(tmp_path, "symbolic", variant, None))
    concrete = {
        counts: _concrete(tmp_path, variant, counts)
        for counts in itertools.product(COUNTS, repeat=2)
    }
    replayed = None
    if inputs:  # the counter-model replays as constants
        chosen = {index: int(value) for _, index, value in inputs}
        replayed = (chosen.get(0, 0), chosen.get(1, 0))
    agrees(symbolic, dict(concrete), replayed, complete=True)
