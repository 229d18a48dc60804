"""Work the paths of a program need not repeat (issue 13): the writes of a region are
found once per region, and a finished run is freed without the collector."""

from __future__ import annotations

import gc
import random
from pathlib import Path

from racecheck.cosim import simulate
from racecheck.cosim.rank import RankContext
from racecheck.cosim.simulate import _Writers
from racecheck.events import (
    HOST_OWNER,
    AccessMode,
    Event,
    EventKind,
    Region,
    SourceLocation,
    WriteIndex,
    intersect_ranges,
)
from racecheck.load import discover, load_file

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
HERE = SourceLocation(file="f.py", line=1, text="x")


def _store(rank: int, index: int, owner: int, ranges: tuple[tuple[int, int], ...]) -> Event:
    return Event(
        rank=rank,
        index=index,
        kind=EventKind.STORE,
        access=Region(memory=3, owner=owner, ranges=ranges),
        mode=AccessMode.WRITE,
        location=HERE,
    )


def test_the_writes_of_a_region_come_with_the_bytes_they_share_in_the_order_given() -> None:
    first, other_owner, disjoint, last = (
        _store(0, 0, 0, ((0, 8),)),
        _store(0, 1, 1, ((0, 8),)),
        _store(1, 0, 0, ((8, 16),)),
        _store(1, 1, 0, ((4, 6), (7, 12))),
    )
    index = WriteIndex([first, other_owner, disjoint, last])
    read = Region(memory=3, owner=0, ranges=((5, 8),))
    assert index.overlapping(read) == [(first, ((5, 8),)), (last, ((5, 6), (7, 8)))]
    assert index.overlapping(read) is index.overlapping(read)  # kept, not found again
    assert index.overlapping(Region(memory=4, owner=0, ranges=((0, 8),))) == []


def test_every_write_sharing_bytes_with_a_region_of_runs_is_found_not_one_touching_it() -> None:
    touching_before, in_gap, spanning, empty, early, late, touching_after = (
        _store(0, 0, 0, ((0, 4),)),
        _store(0, 1, 0, ((6, 8),)),
        _store(1, 0, 0, ((2, 5), (9, 11))),
        _store(1, 1, 0, ()),
        _store(2, 0, 0, ((3, 5),)),
        _store(2, 1, 0, ((9, 12),)),
        _store(2, 2, 0, ((10, 12),)),
    )
    index = WriteIndex([touching_before, in_gap, spanning, empty, early, late, touching_after])
    read = Region(memory=3, owner=0, ranges=((4, 6), (8, 10)))
    assert index.overlapping(read) == [
        (spanning, ((4, 5), (9, 10))),
        (early, ((4, 5),)),
        (late, ((9, 10),)),
    ]
    assert index.overlapping(Region(memory=3, owner=0, ranges=())) == []


def test_single_ranges_intersect_as_the_sweep_of_many_does() -> None:
    assert intersect_ranges(((0, 8),), ((4, 12),)) == ((4, 8),)
    assert intersect_ranges(((0, 8),), ((8, 12),)) == ()
    assert intersect_ranges(((3, 5),), ((0, 8),)) == ((3, 5),)
    assert intersect_ranges(((0, 8),), ((2, 3), (5, 9))) == ((2, 3), (5, 8))


def _rank_contexts() -> int:
    return sum(isinstance(thing, RankContext) for thing in gc.get_objects())


def test_a_finished_run_is_freed_as_soon_as_it_is_dropped_without_the_collector() -> None:
    (spec,) = discover(load_file(str(EXAMPLES / "08_allreduce_mesh.py")))
    gc.collect()
    before = _rank_contexts()
    gc.disable()
    try:
        execution = simulate(spec.instantiate(4))
        assert execution.trace.size > 0
        del execution
        assert _rank_contexts() == before
    finally:
        gc.enable()


def test_the_host_writers_of_a_byte_find_every_other_rank_as_the_pairwise_scan_does() -> None:
    """`_Writers` (one pass over the bytes) against the pairwise overlap test it replaced,
    on random writes of four ranks into one host tensor."""
    rng = random.Random(7)
    for _ in range(300):
        writes = []
        for n in range(rng.randint(1, 6)):
            start = rng.randrange(0, 30)
            region = Region(
                memory=3, owner=HOST_OWNER, ranges=((start, start + rng.randint(1, 6)),)
            )
            writes.append((_store(rng.randrange(4), n, HOST_OWNER, region.ranges), region))
        writers = _Writers(writes, 40)
        for rank in range(4):
            start = rng.randrange(0, 30)
            touched = Region(memory=3, owner=HOST_OWNER, ranges=((start, start + 5),))
            pairwise = [w for w, r in writes if w.rank != rank and r.overlaps(touched)]
            found = writers.other_than(rank, touched)
            assert (found is None) == (not pairwise)
            assert found is None or found in pairwise
