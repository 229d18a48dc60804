"""`--ranks all` fallback reasons in the user's terms: each names the line, its source
and the construct, never the tracer's classes (`'Sym' object has no attribute ...`);
and a name the loop binds that is reassigned before it is read is no unbound read."""

from __future__ import annotations

from pathlib import Path

import pytest

from racecheck.allp import Answer, prove_every_p
from racecheck.load import discover, load_file

MESH = Path(__file__).resolve().parent.parent / "examples" / "08_allreduce_mesh.py"
AFTER_NRANKS = "        nranks = pld.nranks(ctx)\n"
BEFORE_OUTPUT = "        # Phase 4: the sum is this rank's output.\n"


def _probe(tmp_path: Path, anchor: str, lines: str) -> tuple[Path, int]:
    """Example 08 with `lines` after `anchor`; the line number of the first one."""
    source = MESH.read_text()
    assert anchor in source
    head = source[: source.index(anchor) + len(anchor)]
    path = tmp_path / "probe.py"
    path.write_text(source.replace(anchor, anchor + lines, 1))
    return path, head.count("\n") + 1


def _outcome(path: Path):  # type: ignore[no-untyped-def]
    (spec,) = discover(load_file(str(path)))
    return prove_every_p(spec, 2)


@pytest.mark.parametrize(
    ("lines", "construct"),
    [
        (
            "        parity = my_rank & 1\n",
            "the operator & on a value that depends on P or the rank",
        ),
        ("        bits = 1 << nranks\n", "the operator << on a value that depends on P"),
        ("        square = nranks ** 2\n", "the operator ** or pow() on a value"),
        ("        bits = nranks.bit_length()\n", "`.bit_length` of a value that depends on P"),
        ("        half = int(nranks) // 2\n", "the symbolic value P is used where Python needs"),
        ("        for k in range(nranks):\n            pass\n", "needs a concrete integer"),
        ("        pick = [0, 1, 2, 3][my_rank]\n", "the symbolic value rank is used where"),
    ],
)
def test_a_fallback_names_the_line_and_the_construct(
    tmp_path: Path, lines: str, construct: str
) -> None:
    path, line = _probe(tmp_path, AFTER_NRANKS, lines)
    outcome = _outcome(path)
    assert outcome.answer is Answer.FALLBACK
    first = lines.strip().splitlines()[0]
    assert f"probe.py:{line} (`{first}`)" in outcome.reason, outcome.reason
    assert construct in outcome.reason, outcome.reason
    assert "Sym" not in outcome.reason and "Error" not in outcome.reason


def test_a_name_reassigned_after_the_loop_before_its_read_is_not_unbound(
    tmp_path: Path,
) -> None:
    # `recv` is bound in the loop on the peer paths only, then rebound before it is read
    path, _ = _probe(
        tmp_path, BEFORE_OUTPUT, "        recv = acc\n        acc = pl.add(acc, recv)\n"
    )
    assert _outcome(path).answer is Answer.PROVED


def test_a_name_rebound_on_one_side_only_is_still_an_unbound_read(tmp_path: Path) -> None:
    lines = "        if my_rank == 0:\n            recv = acc\n        acc = pl.add(acc, recv)\n"
    path, _ = _probe(tmp_path, BEFORE_OUTPUT, lines)
    outcome = _outcome(path)
    assert outcome.answer is Answer.FALLBACK
    assert "'recv'" in outcome.reason and "it is read where" in outcome.reason
