"""`[tool.racecheck]` in pyproject.toml: per-file settings read by the CLI and the API,
layered under what the caller gives, validated in the words of the flags; and the
demands that make "matches no model" and a `--ranks all` fallback fail."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

import racecheck
from racecheck.cli import main
from racecheck.config import Settings, find_config, options_of, settings_for
from racecheck.errors import UsageError
from racecheck.findings import Verdict

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MESH = EXAMPLES / "08_allreduce_mesh.py"
DOUBLED = EXAMPLES / "290_allreduce_mesh_doubled_matches_no_model.py"


def _repository(tmp_path: Path, table: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "kernels"\n\n' + table, encoding="utf-8"
    )
    folder = tmp_path / "collectives"
    folder.mkdir()
    shutil.copy(MESH, folder / "allreduce_mesh.py")
    shutil.copy(DOUBLED, folder / "allreduce_doubled.py")
    return tmp_path


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


PER_FILE = """
[tool.racecheck]
ranks = "2..3"
jobs = 1

[[tool.racecheck.files]]
path = "collectives/*.py"
expect = "allreduce-sum"

[[tool.racecheck.files]]
path = "collectives/allreduce_mesh.py"
ranks = [2]
"""


def test_file_tables_lay_over_the_defaults_in_order(tmp_path: Path) -> None:
    root = _repository(tmp_path, PER_FILE)
    config = find_config(root / "collectives" / "allreduce_mesh.py")
    assert config is not None and config.source == (root / "pyproject.toml").resolve()
    mesh = config.settings_for(root / "collectives" / "allreduce_mesh.py")
    assert (mesh.ranks, mesh.expect, mesh.jobs) == ((2,), "allreduce-sum", 1)
    doubled = config.settings_for(root / "collectives" / "allreduce_doubled.py")
    assert (doubled.ranks, doubled.expect) == ("2..3", "allreduce-sum")
    assert [path.name for path in config.paths()] == ["allreduce_doubled.py", "allreduce_mesh.py"]


def test_the_cli_checks_each_file_with_its_own_settings(tmp_path: Path) -> None:
    root = _repository(tmp_path, PER_FILE)
    code, out, _ = _run("verify", str(root / "collectives" / "allreduce_mesh.py"))
    assert code == 0 and "P=2  proved" in out and "P=3" not in out
    code, out, _ = _run("verify", str(root / "collectives" / "allreduce_doubled.py"))
    assert code == 1 and "wrong result" in out and "P=3" in out


def test_flags_win_over_the_configuration_and_no_config_ignores_it(tmp_path: Path) -> None:
    root = _repository(tmp_path, PER_FILE)
    doubled = str(root / "collectives" / "allreduce_doubled.py")
    code, out, _ = _run("verify", doubled, "--ranks", "2")
    assert code == 1 and "P=2  bug" in out and "P=3" not in out
    code, out, _ = _run("verify", doubled, "--ranks", "2", "--no-config")
    assert code == 0 and "matches no model" in out


def test_the_api_reads_the_configuration(tmp_path: Path) -> None:
    root = _repository(tmp_path, PER_FILE)
    doubled = str(root / "collectives" / "allreduce_doubled.py")
    assert racecheck.verify(doubled).exit_code == 1
    assert racecheck.verify(doubled, config=False, ranks="2", jobs=1).exit_code == 0
    with pytest.raises(AssertionError, match="wrong result"):
        racecheck.assert_proved(doubled)


def test_a_golden_file_is_found_beside_pyproject(tmp_path: Path) -> None:
    root = _repository(
        tmp_path,
        '[tool.racecheck]\nranks = "2"\njobs = 1\nexpect = "goldens.py:doubled_last"\n',
    )
    (root / "goldens.py").write_text(
        "def doubled_last(inputs):\n"
        "    import numpy as np\n"
        "    return np.stack([2 * inputs[(r + 1) % len(inputs)] for r in range(len(inputs))])\n",
        encoding="utf-8",
    )
    settings = settings_for(root / "collectives" / "allreduce_doubled.py", Settings())
    assert settings.expect == f"{root.resolve() / 'goldens.py'}:doubled_last"


def test_wrong_numbers_pass_by_default_and_fail_with_require_model(tmp_path: Path) -> None:
    plain = racecheck.verify(str(DOUBLED), ranks="2..3", jobs=1)
    assert plain.exit_code == 0 and {r.model for r in plain.results} == {None}
    required = racecheck.verify(str(DOUBLED), ranks="2..3", jobs=1, require_model=True)
    assert required.exit_code == 2
    assert {r.verdict for r in required.results} == {Verdict.UNKNOWN}
    assert "match no golden model" in required.results[0].message
    code, out, _ = _run("verify", str(DOUBLED), "--ranks", "2", "--require-model")
    assert code == 2 and "require_model is set" in out
    root = _repository(tmp_path, '[tool.racecheck]\nranks = "2"\nrequire_model = true\n')
    assert racecheck.verify(str(root / "collectives" / "allreduce_doubled.py")).exit_code == 2
    assert racecheck.verify(str(root / "collectives" / "allreduce_mesh.py")).exit_code == 0


def _falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every all-P proof ends in a fallback, as for a construct outside its fragment."""
    import racecheck.allp as allp

    def fallback(spec: object, low: int, **_: object) -> allp.EveryPOutcome:
        return allp.EveryPOutcome(answer=allp.Answer.FALLBACK, low=low, reason="a probe")

    monkeypatch.setattr(allp, "prove_every_p", fallback)


def test_require_every_p_fails_a_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    assert racecheck.verify(str(MESH), ranks="all", jobs=1).results[0].every_p is not None
    _falls_back(monkeypatch)
    quiet = racecheck.verify(str(MESH), ranks="all", fallback="2..3", jobs=1)
    assert quiet.exit_code == 0 and "not proved for every P" in quiet.results[0].notes[0]
    strict = racecheck.verify(str(MESH), ranks="all", fallback="2..3", jobs=1, require_every_p=True)
    assert strict.exit_code == 2
    assert [r.verdict for r in strict.results] == [Verdict.UNKNOWN] * 2
    assert "require_every_p is set" in strict.results[0].message
    with pytest.raises(AssertionError, match="require_every_p"):
        racecheck.assert_proved(str(MESH), ranks="all", fallback="2", jobs=1, require_every_p=True)
    code, out, _ = _run(
        "verify", str(MESH), "--ranks", "all", "--fallback", "2", "--require-every-p"
    )
    assert code == 2 and "unknown" in out
    buggy = EXAMPLES / "09_allreduce_mesh_bug_no_barrier.py"
    found = racecheck.verify(str(buggy), ranks="all", fallback="2", jobs=1, require_every_p=True)
    assert found.exit_code == 1  # a bug at the fallback P is still a bug


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ("[tool.racecheck]\nrepeats = 2\n", "unknown key 'repeats'"),
        ("[tool.racecheck]\nrepeat = 0\n", "repeat 0: must be a whole number of at least 1"),
        ('[tool.racecheck]\nranks = "x"\n', "ranks 'x': 'x' is not a rank count"),
        ('[tool.racecheck]\nrequire_model = "yes"\n', "expected true or false"),
        ("[[tool.racecheck.files]]\nexpect = 'allgather'\n", 'needs path = "GLOB"'),
        ('[tool.racecheck]\nargs = ["a"]\n', "a table of NAME = VALUE"),
        (
            '[[tool.racecheck.files]]\npath = "collectives/*.py"\nexpect = "allreduce-sun"\n',
            "[[tool.racecheck.files]] #1 expect = 'allreduce-sun': unknown golden model",
        ),
        ('[tool.racecheck]\nexpect = "shift+x"\n', "expect = 'shift+x': unknown golden model"),
        ('[tool.racecheck]\nexpect = "gold.py:f"\n', "expect = 'gold.py:f': no such file"),
        ('[tool.racecheck]\nexpect = "gold:f-g"\n', "write file.py:function or module:function"),
    ],
)
def test_a_bad_configuration_is_one_line_naming_pyproject(
    tmp_path: Path, table: str, says: str
) -> None:
    root = _repository(tmp_path, table)
    code, _, err = _run("verify", str(root / "collectives" / "allreduce_mesh.py"))
    assert code == 2 and says in err and "pyproject.toml" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("flag", "text", "keyword", "value"),
    [
        ("--repeat", "0", "repeat", 0),
        ("--seed", "-1", "seed", -1),
        ("--jobs", "0", "jobs", 0),
        ("--timeout", "0", "timeout", 0),
        ("--ranks", "0", "ranks", "0"),
        ("--engine", "z3", "engine", "z3"),
        ("--runtime-order", "old", "runtime_order", "old"),
    ],
)
def test_the_cli_and_the_api_reject_a_value_in_the_same_words(
    flag: str, text: str, keyword: str, value: object
) -> None:
    with pytest.raises(UsageError) as raised:
        racecheck.verify(str(MESH), **{keyword: value})  # type: ignore[arg-type]
    code, _, err = _run("verify", str(MESH), flag, text)
    assert code == 2
    assert err.strip().endswith(raised.value.message), (err, raised.value.message)


def test_argv_and_assumptions_reach_the_options(tmp_path: Path) -> None:
    root = _repository(
        tmp_path,
        '[[tool.racecheck.files]]\npath = "collectives/*"\nargv = ["-d", "0,1"]\n'
        'assumptions = ["n >= 1"]\n',
    )
    config = find_config(root)
    assert config is not None
    settings = config.settings_for(root / "collectives" / "allreduce_mesh.py")
    assert (settings.argv, settings.assumptions) == (("-d", "0,1"), ("n >= 1",))
    options = options_of(settings)
    assert (options.argv, options.assume) == (("-d", "0,1"), ("n >= 1",))


def test_export_seed_draws_the_inputs_as_verify_seed_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import racecheck.cosim.simulator as cosim  # every run goes through Simulator

    seeds: list[int] = []
    traced = cosim.simulate

    def recording(instance: object, **options: object) -> object:
        seeds.append(options["seed"])  # type: ignore[arg-type]
        return traced(instance, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(cosim, "simulate", recording)
    code, out, _ = _run("export", str(MESH), "--ranks", "2", "--seed", "7")
    assert code == 0 and "proctype" in out
    assert seeds == [7]


def test_a_configured_fallback_serves_ranks_all_only(tmp_path: Path) -> None:
    root = _repository(tmp_path, '[tool.racecheck]\nfallback = "2..3"\njobs = 1\n')
    mesh = str(root / "collectives" / "allreduce_mesh.py")
    assert [r.ranks for r in racecheck.verify(mesh, ranks="2").results] == [2]
    code, _, err = _run("verify", mesh, "--ranks", "2", "--fallback", "2..3")
    assert code == 2 and "fallback goes with ranks all" in err
    options = options_of(settings_for(mesh, Settings(ranks="all")))
    assert options.every_p is not None and options.every_p.fallback == (2, 3)
