"""``memgym leaderboard tune`` (thesis Appendix A.1) and agent specs with options, from the command line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym.cli import main
from memgym.leaderboard import tracks
from memgym.leaderboard.boards import tuning
from memgym.leaderboard.protocol import canonical_spec, load_factory, parse_spec, same_agent


def test_spec_options_parse_and_reach_the_config():
    assert parse_spec("a2c-tiny-gru") == ("a2c-tiny-gru", {})
    assert parse_spec("a2c-tiny-gru[learning_rate=1e-3, entropy_coef=0.01,memory=tiny-lstm]") == (
        "a2c-tiny-gru", {"learning_rate": 1e-3, "entropy_coef": 0.01, "memory": "tiny-lstm"})
    config = load_factory("a2c-tiny-gru[learning_rate=0.002,memory=tiny-lstm]")(tracks.TMAZE.context()).config
    assert (config.learning_rate, config.memory, config.rollout_length) == (0.002, "tiny-lstm", 32)


def test_one_spelling_per_agent():
    assert canonical_spec("a2c-tiny-gru[]") == "a2c-tiny-gru"
    for spelling in ("0.1", "0.10", "1e-1", " 1.0e-1 "):
        assert canonical_spec(f"x[learning_rate={spelling}]") == "x[learning_rate=0.1]"
    assert canonical_spec("x[ memory = tiny-lstm ,learning_rate=5e-4]") == "x[memory=tiny-lstm,learning_rate=0.0005]"
    assert canonical_spec('x[memory="tiny-lstm"]') == "x[memory=tiny-lstm]"
    assert canonical_spec('x[memory_config="{\\"frequencies\\": \\"authors\\"}"]') == (
        'x[memory_config="{\\"frequencies\\": \\"authors\\"}"]')  # a string that reads as JSON stays quoted
    assert canonical_spec("x[n=2]") != canonical_spec("x[n=2.0]") != canonical_spec("x[n=true]")
    assert canonical_spec("x[eps=.5,n=+2]") == "x[eps=0.5,n=2]"  # numbers in Python's spelling are numbers
    assert canonical_spec('x[name=".5"]') == 'x[name=".5"]'  # a string that reads as a number stays quoted
    assert same_agent("x[learning_rate=1e-3,entropy_coef=0.01]", "x[entropy_coef=1e-2,learning_rate=0.001]")
    assert not same_agent("x[learning_rate=1e-3]", "x[learning_rate=1e-3,entropy_coef=0.01]")
    assert not same_agent("x[n=1]", "x[n=true]") and not same_agent("x[n=1]", "y[n=1]")


_values = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
                    st.none(), st.text(st.characters(blacklist_characters=",[]", blacklist_categories=("Cs",)),
                                       min_size=1).map(str.strip).filter(bool))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), _values, max_size=4))
def test_the_canonical_spelling_reads_back_as_the_same_options_and_is_its_own(options):
    from memgym.leaderboard.protocol import format_spec

    spec = format_spec("agent", options)
    assert parse_spec(spec) == ("agent", options)
    assert canonical_spec(spec) == spec and same_agent(spec, format_spec("agent", dict(reversed(options.items()))))


@pytest.mark.slow(seconds=30)
def test_an_agent_spelled_another_way_resumes_its_stored_cells_on_one_row(tmp_path, capsys):
    results = tmp_path / "r"
    argv = ["leaderboard", "run", "--preset", "smoke", "--values", "4", "--seeds", "1", "--steps", "2048",
            "--no-policies", "--results", str(results)]
    assert main(argv + ["--agent", "a2c-tiny-mlp[entropy_coef=1e-2,learning_rate=1e-3]"]) == 0
    stored = "a2c-tiny-mlp[entropy_coef=0.01,learning_rate=0.001]"
    assert f"is stored as '{stored}'" in capsys.readouterr().out
    assert main(argv + ["--agent", "a2c-tiny-mlp[learning_rate=0.0010,entropy_coef=0.01]",
                        "--agent", "a2c-tiny-mlp[entropy_coef=0.01,learning_rate=0.001]"]) == 0
    out = capsys.readouterr().out
    assert f"is stored as '{stored}'" in out and "is named twice; it runs once" in out
    assert "its seed stored, skipping" in out and "training for" not in out
    board = json.loads((results / "board.json").read_text())
    assert [e["spec"] for e in board["entries"]] == [stored]


@pytest.mark.parametrize("spec, message", [
    ("a2c-tiny-gru[lr=1]", "unknown option(s) ['lr'] for A2CConfig; allowed: memory, memory_config, total_steps"),
    ("a2c-tiny-gru[learning_rate=-1]", "learning_rate must be a number in (0, inf], got learning_rate=-1"),
    ("a2c-tiny-gru[x]", "option 'x' is not key=value"),
    ("a2c-tiny-gru[a=1,a=2]", "option 'a' is given twice"),
    ("a2c-tiny-gru[a=1]]", "options go in one pair of brackets at the end"),
    ("memgym.leaderboard.protocol:tier[a=1]", "takes no options (its factory has no with_options method)"),
])
def test_bad_spec_options_are_refused_with_the_reason(spec, message):
    with pytest.raises(ValueError) as error:
        load_factory(spec)
    assert message in str(error.value) and repr(spec) in str(error.value)


def test_grid_specs_cover_the_grid_and_refuse_a_fixed_option():
    specs = tuning.grid_specs("a2c-arelit[rollout_length=64]", {"learning_rate": [1e-3, 1e-4], "entropy_coef": [0.1]})
    assert specs == ["a2c-arelit[rollout_length=64,learning_rate=0.001,entropy_coef=0.1]",
                     "a2c-arelit[rollout_length=64,learning_rate=0.0001,entropy_coef=0.1]"]
    assert len(tuning.grid_specs("a2c-arelit", tuning.THESIS_GRID)) == 25  # Table A.1: 5 × 5
    with pytest.raises(ValueError, match=r"already fixes \['learning_rate'\]"):
        tuning.grid_specs("a2c-arelit[learning_rate=1e-3]", {"learning_rate": [1e-4]})


@pytest.mark.slow
def test_tune_command_runs_the_grid_through_the_store_and_selects_by_training_success(tmp_path, capsys):
    results = tmp_path / "tuning"
    argv = ["leaderboard", "tune", "--agent", "a2c-tiny-gru", "--preset", "smoke", "--values", "4", "--seeds", "2",
            "--steps", "4096", "--learning-rates", "1e-3,1e-5", "--entropy-coefs", "1e-2", "--seeds-per-batch", "1",
            "--results", str(results)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "L=4 seeds [1]: training" in out  # each configuration's seeds one at a time (--seeds-per-batch 1)
    written = json.loads((results / "tuning-a2c-tiny-gru.json").read_text())
    assert written["grid"] == {"learning_rate": [1e-3, 1e-5], "entropy_coef": [1e-2]}
    assert written["preset"]["seeds"] == 2 and written["preset"]["total_steps"] == 4096
    # The selection is the best mean training success over every stored cell of a configuration.
    records = list(tracks.TMAZE.records(tracks.TMAZE.store(results)))
    assert len(records) == 4 and all(r["status"] == "ok" and r["batch"] == 1 for r in records)
    mean = {}
    for spec in {r["agent"] for r in records}:
        cells = [r["train"]["success_rate"] for r in records if r["agent"] == spec]
        mean[spec] = sum(cells) / len(cells)
    best = max(mean, key=mean.get)
    assert written["selected"]["spec"] == best
    assert written["selected"]["train_score"] == pytest.approx(mean[best])
    assert [c["spec"] for c in written["ranked"]] == sorted(mean, key=lambda s: -mean[s])
    assert f"selected: {best}" in out and "| 1 | " in out
    # A second run resumes: nothing is trained again, nothing stored is touched.
    stored = sorted(p.stat().st_mtime_ns for p in results.rglob("*.json") if not p.name.startswith("tuning-"))
    assert main(argv) == 0
    assert "all 2 seeds stored, skipping" in capsys.readouterr().out
    assert sorted(p.stat().st_mtime_ns for p in results.rglob("*.json") if not p.name.startswith("tuning-")) == stored
    assert not list(results.glob("tuning-a2c-tiny-gru.*.json"))  # the same sweep again: its selection rewritten
    # A sweep of another grid into the same folder selects from its own configurations; the earlier selection is
    # moved aside, not overwritten.
    assert main(["1e-5" if a == "1e-3,1e-5" else a for a in argv]) == 0
    assert "kept as tuning-a2c-tiny-gru.1.json" in capsys.readouterr().out
    assert json.loads((results / "tuning-a2c-tiny-gru.1.json").read_text()) == written
    assert json.loads((results / "tuning-a2c-tiny-gru.json").read_text())["grid"]["learning_rate"] == [1e-5]


@pytest.mark.slow
def test_tune_ranks_only_configurations_with_every_cell(tmp_path):
    budget = tracks.TMAZE.preset("smoke", values=[4], seeds=1, total_steps=2048)
    specs = tuning.grid_specs("a2c-tiny-gru", {"learning_rate": [1e-3, 1e-4]})
    from memgym.leaderboard.running import runner

    runner.run(specs[:1], budget, tmp_path, log=lambda _: None)  # the second configuration never ran
    outcome = tuning.select(tmp_path, specs, budget)
    assert [c["spec"] for c in outcome["ranked"]] == specs[:1] and outcome["selected"]["spec"] == specs[0]
    bigger = tracks.TMAZE.preset("smoke", values=[4], seeds=2, total_steps=2048)  # now seed 1 is missing
    assert tuning.select(tmp_path, specs, bigger)["selected"] is None


@pytest.mark.slow
def test_a_selection_scores_its_budgets_values_alone(tmp_path):
    """A store holds a preset's cells at values a sweep's budget leaves out (a preset that gained a value, or
    ``--values``): the selection counts and scores the budget's cells only."""
    from memgym.leaderboard.running import runner

    both = tracks.TMAZE.preset("smoke", values=[4, 8], seeds=1, total_steps=2048)
    runner.run(["a2c-tiny-gru"], both, tmp_path, log=lambda _: None)
    records = {r["corridor_length"]: r for r in tracks.TMAZE.records(tracks.TMAZE.store(tmp_path))}
    for value in (4, 8):
        one = tracks.TMAZE.preset("smoke", values=[value], seeds=1, total_steps=2048)
        selected = tuning.select(tmp_path, ["a2c-tiny-gru"], one)["selected"]
        assert selected["cells"] == {"planned": 1, "ok": 1, "failed": 0, "missing": 0}
        assert selected["train_score"] == pytest.approx(records[value]["train"]["success_rate"])
    assert tuning.select(tmp_path, ["a2c-tiny-gru"], both)["selected"]["cells"]["planned"] == 2


@pytest.mark.slow(seconds=10)
def test_commands_refuse_bad_options_before_anything_is_written(tmp_path):
    import subprocess
    import sys

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "memgym.cli", *args], capture_output=True, text=True, timeout=120)

    results = tmp_path / "r"
    bad = cli("leaderboard", "run", "--agent", "a2c-tiny-gru[lr=1]", "--preset", "smoke", "--results", str(results))
    assert bad.returncode == 2 and "unknown option(s) ['lr'] for A2CConfig" in bad.stderr
    bad = cli("leaderboard", "tune", "--agent", "a2c-tiny-gru[learning_rate=1e-3]", "--preset", "smoke",
              "--results", str(results))
    assert bad.returncode == 2 and "already fixes ['learning_rate'], which the grid sweeps" in bad.stderr
    bad = cli("leaderboard", "tune", "--agent", "a2c-tiny-gru", "--learning-rates", "1e-3,-1", "--results",
              str(results))
    assert bad.returncode == 2 and "expected comma-separated positive numbers, got '1e-3,-1'" in bad.stderr
    bad = cli("leaderboard", "tune", "--agent", "a2c-tiny-gru", "--learning-rates", "1e-3,0.001", "--results",
              str(results))
    assert bad.returncode == 2 and "'1e-3,0.001' names 0.001 twice" in bad.stderr
    assert not results.exists()


def test_a_preset_numbers_its_seeds_from_first_seed_and_stores_seeds_from_0_as_before():
    budget = tracks.TMAZE.preset("smoke", seeds=3, first_seed=100)
    assert list(budget.seed_range) == [100, 101, 102] and budget.name == "smoke+custom"
    assert tracks.TMAZE.budget_record(budget)["first_seed"] == 100
    assert tracks.TMAZE.budget_from_record(tracks.TMAZE.budget_record(budget)) == budget
    plain = tracks.TMAZE.preset("smoke")
    assert list(plain.seed_range) == [0, 1] and "first_seed" not in tracks.TMAZE.budget_record(plain)
    with pytest.raises(ValueError, match="first_seed"):
        tracks.TMAZE.preset("smoke", first_seed=-1)


@pytest.mark.slow
def test_first_seed_trains_and_scores_the_seeds_it_names(tmp_path, capsys):
    """``--first-seed``: the cells are seeds FIRST …, stored, counted and resumed as such; the board plans them."""
    results = tmp_path / "r"
    argv = ["leaderboard", "run", "--agent", "a2c-tiny-mlp", "--preset", "smoke", "--values", "4", "--seeds", "2",
            "--first-seed", "7", "--steps", "2048", "--eval-episodes", "8", "--results", str(results)]
    assert main(argv) == 0
    assert "2 seeds (7-8)" in capsys.readouterr().out
    records = list(tracks.TMAZE.records(tracks.TMAZE.store(results)))
    assert sorted(r["seed"] for r in records) == [7, 8] and all(r["status"] == "ok" for r in records)
    assert all(r["preset"]["first_seed"] == 7 for r in records)
    board = json.loads((results / "board.json").read_text())
    [entry] = board["entries"]
    assert entry["cells"]["planned"] == 2 and entry["cells"]["ok"] == 2 and entry["complete"]
    assert main(argv) == 0
    assert "all 2 seeds stored, skipping" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main([*argv[:-2], "--first-seed", "-1", "--results", str(tmp_path / "other")])
    assert refused.value.code == 2 and not (tmp_path / "other").exists()
    assert "--first-seed must be an integer >= 0, got first_seed=-1" in capsys.readouterr().err


@pytest.mark.slow(seconds=14)
def test_seeds_per_batch_trains_a_values_seeds_in_smaller_batches_of_the_same_board(tmp_path, capsys):
    """``--seeds-per-batch 1``: each seed of a value is its own batch (its record says so, for a verification to
    re-train it alike), the cells are the preset's, and a run without the flag finds them stored."""
    results = tmp_path / "r"
    argv = ["leaderboard", "run", "--agent", "a2c-tiny-mlp", "--preset", "smoke", "--values", "4", "--seeds", "3",
            "--steps", "2048", "--eval-episodes", "8", "--results", str(results)]
    assert main([*argv, "--seeds-per-batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "L=4 seeds [0, 1]: training" in out and "L=4 seeds [2]: training" in out
    records = sorted(tracks.TMAZE.records(tracks.TMAZE.store(results)), key=lambda r: r["seed"])
    assert [(r["seed"], r["batch"], r["vmapped"], r["status"]) for r in records] == [
        (0, 2, True, "ok"), (1, 2, True, "ok"), (2, 1, False, "ok")]  # a lone cell trains unbatched (OverCells)
    [entry] = json.loads((results / "board.json").read_text())["entries"]
    assert entry["cells"]["planned"] == 3 and entry["cells"]["ok"] == 3 and entry["complete"]
    assert main(argv) == 0
    assert "all 3 seeds stored, skipping" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main([*argv[:-2], "--seeds-per-batch", "0", "--results", str(tmp_path / "other")])
    assert refused.value.code == 2 and not (tmp_path / "other").exists()
    assert "--seeds-per-batch must be a positive integer, got seeds_per_batch=0" in capsys.readouterr().err


def test_a_verification_retrains_a_cell_in_a_batch_of_the_size_and_form_its_record_names():
    from memgym.leaderboard.submissions.verification import trained_batch

    budget = tracks.TMAZE.presets["smoke"]  # 2 seeds
    assert [trained_batch(record, budget) for record in ({"batch": 1, "vmapped": False}, {"batch": 2, "vmapped": True},
                                                         {})] == [(1, False), (2, True), (2, True)]
    # a lone cell of a record made before lone cells trained unbatched: vmapped, as it was
    assert trained_batch({"batch": 1}, budget) == (1, True)
    assert [trained_batch({"batch": 1, "vmapped": junk}, budget) for junk in (None, 0, "false", [])] == [(1, True)] * 4
    # a batch the budget cannot have held (the whole grid on several devices, or nonsense): the budget's seeds
    assert [trained_batch({"batch": size}, budget)[0] for size in (6, 0, 1.5, "1", True)] == [2] * 5


@pytest.mark.slow(seconds=40)
def test_tune_on_a_popgym_track_sweeps_its_own_tuning_preset_by_default(tmp_path, capsys):
    """``tune`` without ``--preset`` takes the track's tuning preset (here with fewer steps): the T-Maze's is
    ``tune``; a POPGym track has no such preset, and its sweep is ``cpu-tune`` (the ``cpu`` board's tasks on seed
    100, past the board's seeds)."""
    results = tmp_path / "tuning"
    assert main(["leaderboard", "tune", "--track", "popgym-repeat-previous", "--agent", "ppo-cpu-gru",
                 "--steps", "2048", "--eval-episodes", "4", "--learning-rates", "1e-3", "--entropy-coefs", "1e-2",
                 "--results", str(results)]) == 0
    written = json.loads((results / "tuning-ppo-cpu-gru.json").read_text())
    assert written["preset"]["name"] == "cpu-tune+custom" and written["preset"]["first_seed"] == 100
    assert written["selected"]["spec"] == "ppo-cpu-gru[learning_rate=0.001,entropy_coef=0.01]"
    assert [r["seed"] for r in tracks.POPGYM_REPEAT_PREVIOUS.records(tracks.POPGYM_REPEAT_PREVIOUS.store(results))] == [100]
