"""A Python `while` in a kernel: PyPTO's parser takes it as a device while loop, so it is
checked, with a note at its line saying how racecheck followed it."""

from __future__ import annotations

from pathlib import Path

import racecheck
from racecheck.findings import Verdict

MESH = Path(__file__).resolve().parent.parent / "examples" / "08_allreduce_mesh.py"
NOTIFY_LOOP = """        for peer in pl.range(nranks):
            if peer != my_rank:
                pld.system.notify(
                    signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
"""
WHILE_LOOP = """        peer = 0
        while peer < {stop}:
            if peer != my_rank:
                pld.system.notify(
                    signal, peer=peer, offsets=[my_rank, 0], value=1, op=pld.NotifyOp.AtomicAdd
                )
            peer = peer + 1
"""


def _with_while(tmp_path: Path, stop: str) -> tuple[Path, int]:
    source = MESH.read_text()
    assert NOTIFY_LOOP in source
    line = source[: source.index(NOTIFY_LOOP)].count("\n") + 2
    path = tmp_path / "while_kernel.py"
    path.write_text(source.replace(NOTIFY_LOOP, WHILE_LOOP.format(stop=stop)))
    return path, line


def test_a_while_loop_is_followed_and_noted_at_its_line(tmp_path: Path) -> None:
    path, line = _with_while(tmp_path, "nranks")
    report = racecheck.verify(str(path), ranks="2..3", jobs=1)
    assert [r.verdict for r in report.results] == [Verdict.PROVED] * 2
    (note,) = [n for n in report.results[0].notes if "while" in n]
    assert f"{path}:{line}: a Python `while` in reduce_step" in note
    plain = racecheck.verify(str(MESH), ranks="2", jobs=1)
    assert not any("while" in n for n in plain.results[0].notes)


def test_a_while_loop_that_stops_short_is_a_bug(tmp_path: Path) -> None:
    path, _ = _with_while(tmp_path, "nranks - 1")
    report = racecheck.verify(str(path), ranks="2..3", jobs=1)
    assert {r.verdict for r in report.results} == {Verdict.BUG}
