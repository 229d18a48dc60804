"""Generated token-routing exchanges whose peers, offsets and counts come from the input
(a destination read per token, a slot counter bumped per route, the counts published
and used as the receiver's loop bounds): the symbolic verdict (concolic paths with the
budget cut to 1, so the summary of the route branches decides) agrees with brute
force over every routing in a small range at P = 2, and a counter-model replays. A
peer read from the input is outside the summary (pinned: `unknown` past the budget),
so there only "never proved wrongly" and the replay are held."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from brute_force import agrees, verdict_at_two
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import racecheck.paths
from racecheck.findings import Verdict

# the destinations each token's element takes, by rank: rank 0's one past each end
ROUTES = ((-1, 0, 1), (0, 1))
TOKENS = 2

SOURCE = """
import pypto.language as pl
import pypto.language.distributed as pld

SIZE = 8
TOKENS = {tokens}
LANE = {lane}
TABLE = {table}


def build(nr: int):
    @pl.program
    class Generated:
        @pl.function(type=pl.FunctionType.InCore)
        def route(
            self,
            x: pl.Tensor[[TOKENS, SIZE], pl.FP32],
            dests: pl.Tensor[[TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr * LANE, SIZE], pl.FP32]],
            recv: pl.InOut[pld.DistributedTensor[[nr * LANE, SIZE], pl.FP32]],
            counts: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
            signal: pl.InOut[pld.DistributedTensor[[nr, 1], pl.INT32]],
        ) -> pl.Tensor[[nr * LANE, SIZE], pl.FP32]:
            me = pld.rank(pld.get_comm_ctx(recv))
            for dest in pl.range(nr):
                slot = 0
                for t in pl.range(TOKENS):
                    raw = {raw}
                    target = {clamp}
                    if target == dest:
                        row = pl.load(x, [t, 0], [1, SIZE])
                        pld.tile.remote_store(row, recv, peer={peer},
                                              offsets=[me * LANE + slot, 0])
                        slot = slot + 1
                pld.system.notify(counts, peer=dest, offsets=[me, 0], value=slot,
                                  op=pld.NotifyOp.Set)
                pld.system.notify(signal, peer=dest, offsets=[me, 0], value=1,
                                  op=pld.NotifyOp.AtomicAdd)
            for source in pl.range(nr):
                pld.system.wait(signal, offsets=[source, 0], expected=1, cmp=pld.WaitCmp.Ge)
                n = pl.read(counts, [source, 0])
                for s in pl.range(n):
                    tile = pl.load(recv, [source * LANE + s, 0], [1, SIZE])
                    y = pl.store(tile, [source * LANE + s, 0], y)
            return y

        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def entry(
            self,
            x: pl.Tensor[[nr, TOKENS, SIZE], pl.FP32],
            dests: pl.Tensor[[nr, TOKENS, 1], pl.INT32],
            y: pl.Out[pl.Tensor[[nr, nr * LANE, SIZE], pl.FP32]],
        ):
            recv_buf = pld.alloc_window_buffer([nr * LANE, SIZE], dtype=pl.FP32)
            counts_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            signal_buf = pld.alloc_window_buffer([nr, 1], dtype=pl.INT32)
            for r in pl.range(pld.world_size()):
                recv = pld.window(recv_buf, [nr * LANE, SIZE], dtype=pl.FP32)
                counts = pld.window(counts_buf, [nr, 1], dtype=pl.INT32)
                signal = pld.window(signal_buf, [nr, 1], dtype=pl.INT32)
                self.route(x[r], dests[r], y[r], recv, counts, signal, device=r)
            return y

    return Generated
"""
CLAMPS = {
    "none": "raw",
    "upper": "pl.min(raw, nr - 1)",
    "both": "pl.max(pl.min(raw, nr - 1), 0)",
}
PEERS = {
    "dest": "dest",  # the loop's destination: a constant peer
    "target": "target",  # the routed value itself: a peer read from the input
}


def _program(tmp_path: Path, name: str, variant: dict[str, object], table: object) -> Path:
    raw = "pl.read(dests, [t, 0])" if table is None else "TABLE[me][t]"
    text = SOURCE.format(
        tokens=TOKENS,
        lane=variant["lane"],
        table=table,
        raw=raw,
        clamp=CLAMPS[str(variant["clamp"])],
        peer=PEERS[str(variant["peer"])],
    )
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


Routing = tuple[tuple[int, ...], ...]


def _concrete(tmp_path: Path, variant: dict[str, object], routing: Routing) -> Verdict:
    name = "concrete_" + "_".join(str(d + 1) for rank in routing for d in rank)
    return verdict_at_two(_program(tmp_path, name, variant, [list(rank) for rank in routing]))[0]


VARIANTS = st.fixed_dictionaries(
    {
        "lane": st.sampled_from((1, 2)),  # 1: two tokens to one rank overflow its lane
        "clamp": st.sampled_from(tuple(CLAMPS)),
        "peer": st.sampled_from(tuple(PEERS)),
    }
)


@pytest.mark.slow
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(variant=VARIANTS)
@example(variant={"lane": 2, "clamp": "both", "peer": "dest"})  # proved for every routing
@example(variant={"lane": 1, "clamp": "both", "peer": "dest"})  # a lane one route small
@example(variant={"lane": 2, "clamp": "none", "peer": "target"})  # a peer from the input
def test_symbolic_verdict_matches_brute_force_over_the_routings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variant: dict[str, object]
) -> None:
    monkeypatch.setattr(racecheck.paths, "BUDGET", 1)
    symbolic, inputs = verdict_at_two(_program(tmp_path, "symbolic", variant, None))
    routings = [
        (first, second)
        for first in itertools.product(ROUTES[0], repeat=TOKENS)
        for second in itertools.product(ROUTES[1], repeat=TOKENS)
    ]
    concrete = {routing: _concrete(tmp_path, variant, routing) for routing in routings}
    replayed = None
    if inputs:  # the counter-model replays as constants
        chosen = {index: int(value) for _, index, value in inputs}
        flat = [chosen.get(index, 0) for index in range(2 * TOKENS)]
        replayed = (tuple(flat[:TOKENS]), tuple(flat[TOKENS:]))
    # a peer read from the input is pinned, not summarised: outside the fragment
    agrees(symbolic, dict(concrete), replayed, complete=variant["peer"] == "dest")
