"""Tracks are data: the POPGym RepeatPrevious board, tier rejection, separate boards, a track defined in a test."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memgym.cli import main
from memgym.leaderboard.boards import report
from memgym.leaderboard.running import runner
from memgym.leaderboard.submissions.check import check_agent
from memgym.leaderboard.tracks import POPGYM, POPGYM_REPEAT_PREVIOUS, TMAZE, TRACKS, Preset, get

pytest.importorskip("popgym")

HERE = "tests.leaderboard.test_tracks"
TINY = Preset("tiny", ("Easy", "Medium", "Hard"), seeds=1, total_steps=2048, train_window=1024, eval_episodes=8)
LAG = {"Easy": 4, "Medium": 32, "Hard": 64}  # popgym's k: repeat the suit of the card k - 1 observations back


class RepeatPreviousOracle:
    """Remembers every suit of the episode and answers with the one ``k`` cards back."""

    def __init__(self, num_envs: int, k: int):
        self.k, self.suits = k, [[] for _ in range(num_envs)]

    def act(self, obs, start):
        actions = np.zeros(len(obs), np.int64)
        for i, (o, first) in enumerate(zip(obs, start)):
            if first:
                self.suits[i] = []
            self.suits[i].append(int(np.argmax(o[:4])))  # [suit one-hot | previous action one-hot]
            if len(self.suits[i]) >= self.k:
                actions[i] = self.suits[i][-self.k]
        return actions

    def observe(self, *args):
        pass


def oracle_factory(context):
    return RepeatPreviousOracle(context.num_envs, LAG.get(context.parameter_value, 4))


def test_registry_and_contexts():
    assert set(TRACKS) == {"tmaze", "popgym-repeat-previous", "popgym", "popgym-suite", "popgym-diagnostic",
                           "popgym-control", "popgym-noisy", "popgym-game", "popgym-navigation"}
    assert get("tmaze") is TMAZE
    with pytest.raises(ValueError, match="unknown track 'maze'; choose one of tmaze, popgym-repeat-previous, popgym"):
        get("maze")
    assert POPGYM_REPEAT_PREVIOUS.tiers == ("jax", "any") == POPGYM.tiers == TMAZE.tiers
    context = POPGYM_REPEAT_PREVIOUS.context(num_envs=3, seed=5, total_steps=10, value="Hard")
    assert context.observation_space.shape == (8,) and context.action_space.n == 4
    assert (context.num_envs, context.seed, context.total_steps) == (3, 5, 10)
    assert (context.track, context.parameter, context.parameter_value) == ("popgym-repeat-previous", "difficulty", "Hard")
    assert TMAZE.context().observation_space.shape == (16,) and TMAZE.context().parameter == "corridor_length"
    with pytest.raises(ValueError, match="difficulty must be one of 'Easy', 'Medium', 'Hard', "
                                         "got difficulty='Extreme'"):
        POPGYM_REPEAT_PREVIOUS.preset("smoke", values=["Extreme"])
    assert POPGYM_REPEAT_PREVIOUS.preset().name == "standard"


def test_popgym_board_scores_normalized_return(tmp_path):
    agents = [f"{HERE}:oracle_factory", "examples.random_agent:factory"]
    store = runner.run(agents, TINY, tmp_path, track=POPGYM_REPEAT_PREVIOUS, log=lambda line: None)
    records = list(store.records())
    assert len(records) == 6 and all(r["status"] == "ok" for r in records)
    assert {p.parent.name for p in tmp_path.rglob("seed0.json")} == {"Easy", "Medium", "Hard"}
    for r in records:
        assert r["difficulty"] in LAG and "corridor_length" not in r
        assert r["preset"]["difficulties"] == ["Easy", "Medium", "Hard"] and r["preset"]["max_episode_steps"] is None
        assert r["train"]["steps"] == TINY.total_steps and r["train"]["window_episodes"] > 0
        assert sum(e for e, _ in r["train"]["curve"]) == r["train"]["episodes"]
        assert r["train"]["normalized_return_sum"] == pytest.approx(sum(s for _, s in r["train"]["curve"]))
        assert r["eval"]["episodes"] == 8 and -1 <= r["eval"]["normalized_return"] <= 1
    by_agent = {(r["agent"], r["difficulty"]): r for r in records}
    for difficulty in LAG:
        oracle = by_agent[(f"{HERE}:oracle_factory", difficulty)]
        assert oracle["eval"]["normalized_return"] == 1.0 and oracle["train"]["normalized_return"] == 1.0
        assert oracle["eval"]["mean_length"] == {"Easy": 51, "Medium": 103, "Hard": 155}[difficulty]
    written = report.write_report(tmp_path, tmp_path / "site", track=POPGYM_REPEAT_PREVIOUS)
    board = json.loads(written["json"].read_text())
    first, second = board["entries"]
    assert first["agent"].endswith("oracle_factory") and first["eval"]["score"] == 1.0
    assert second["agent"] == "examples.random_agent:factory" and -0.7 < second["eval"]["score"] < -0.3
    assert first["eval"]["longest_solved"] is None  # no "solved" threshold on this track
    text = written["markdown"].read_text()
    assert text.startswith("# memgym POPGym RepeatPrevious leaderboard")
    assert "| rank | agent | score | cells | IQM | train score | Easy | Medium | Hard | repeats | flags |" in text
    assert {p.name for p in written.values()} >= {"success_by_length.png", "learning_curves.png", "index.html"}


#: the POPGym RepeatPrevious track as it was before its tasks were written in JAX: host environments only
HOST_ONLY = dataclasses.replace(POPGYM_REPEAT_PREVIOUS, name="popgym-repeat-previous-host", jax_env=None,
                                jax_params=None, episode_limit=None, per_value_env=False)


@pytest.mark.slow
def test_jax_agents_are_rejected_where_there_is_no_jax_env(tmp_path):
    with pytest.raises(ValueError, match="is a JAX-tier agent, but track 'popgym-repeat-previous-host' runs "
                                         "any-framework agents only"):
        runner.run(["examples.jax_agent:factory"], TINY, tmp_path, track=HOST_ONLY, log=lambda _: None)
    assert not any(tmp_path.iterdir())
    (build, passed, why), = check_agent("examples.jax_agent:factory", track=HOST_ONLY)
    assert not passed and "runs any-framework agents only" in why
    assert all(ok for _, ok, _ in check_agent("examples.random_agent:factory", track=HOST_ONLY))
    # a reference agent on the host loop passes too: its act-only checks get a budget of 0 (evaluated at once)
    results = check_agent("a2c-tiny-gru", track=HOST_ONLY)
    assert len(results) == 4 and all(ok for _, ok, _ in results), results
    # on the track with the tasks in JAX, the same agent is a JAX-tier agent and passes the JAX tier's checks
    results = check_agent("a2c-tiny-gru", track=POPGYM_REPEAT_PREVIOUS, budget=4096)
    assert len(results) > 4 and all(ok for _, ok, _ in results), results


def test_a_track_whose_extra_is_missing_is_refused_before_anything_is_stored(tmp_path):
    """As a user without popgym installed sees it: the command names the extra and the store stays empty."""
    code = ("import sys; sys.modules['popgym'] = None; from memgym.cli import main; "
            f"sys.exit(main(['leaderboard', 'run', '--track', 'popgym-repeat-previous', '--agent', 'a2c-tiny-gru', "
            f"'--results', {str(tmp_path / 'results')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "track 'popgym-repeat-previous' cannot run here: popgym is not installed" in done.stderr
    assert 'pip install "memgym[popgym]"' in done.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("*.json"))


def test_tracks_never_share_a_results_directory(tmp_path):
    easy = dataclasses.replace(TINY, values=("Easy",), eval_episodes=1)
    runner.run(["examples.random_agent:factory"], easy, tmp_path, track=POPGYM_REPEAT_PREVIOUS, log=lambda _: None)
    tmaze = Preset("tiny", (2,), seeds=1, total_steps=256, train_window=128, eval_episodes=1, max_episode_steps=20)
    with pytest.raises(ValueError, match="is not a result of track 'tmaze'"):
        runner.run(["examples.random_agent:factory"], tmaze, tmp_path, log=lambda _: None)
    with pytest.raises(ValueError, match="is not a result of track 'tmaze'"):
        report.write_report(tmp_path)


def test_popgym_tracks_never_share_a_results_directory(tmp_path, capsys):
    """As a user sees it: one POPGym track's records are not another's, even for a task both have (a task's
    evaluation seeds depend on its place in its track)."""
    run = ["leaderboard", "run", "--agent", "examples.random_agent:factory", "--preset", "smoke", "--values",
           "HigherLowerEasy", "--seeds", "1", "--steps", "512", "--eval-episodes", "1", "--results", str(tmp_path)]
    assert main([*run, "--track", "popgym-game"]) == 0
    assert json.loads(next(tmp_path.rglob("seed0.json")).read_text())["track"] == "popgym-game"
    capsys.readouterr()
    assert main([*run, "--track", "popgym-suite"]) == 2
    assert "is not a result of track 'popgym-suite' (it is of track 'popgym-game')" in capsys.readouterr().err
    assert main(["leaderboard", "show", "--results", str(tmp_path)]) == 2  # --track left at its default, tmaze
    assert "pass --track popgym-game if this folder holds that track's results" in capsys.readouterr().err
    for record in tmp_path.rglob("seed0.json"):  # as records were written before they named their track
        record.write_text(json.dumps({k: v for k, v in json.loads(record.read_text()).items() if k != "track"}))
    assert main(["leaderboard", "show", "--track", "popgym-control", "--results", str(tmp_path)]) == 2
    assert "(its task 'HigherLowerEasy' is not one of the track's)" in capsys.readouterr().err


def test_a_new_track_is_a_new_entry(tmp_path):
    """A track defined here, registered nowhere: POPGym RepeatFirst across two difficulties."""
    from memgym.envs import popgym

    repeat_first = dataclasses.replace(
        POPGYM_REPEAT_PREVIOUS, name="popgym-repeat-first", title="POPGym RepeatFirst",
        make_env=lambda difficulty, limit: popgym.make(f"RepeatFirst{difficulty}"),
        presets={"tiny": dataclasses.replace(TINY, values=("Easy", "Medium"))}, default_preset="tiny",
        tuning_preset=None,
    )
    runner.run(["examples.random_agent:factory"], repeat_first.preset(), tmp_path, track=repeat_first,
               log=lambda _: None)
    board = report.build_board(repeat_first.store(tmp_path), repeat_first)
    (entry,) = board["entries"]
    assert set(entry["eval"]["per_length"]) == {"Easy", "Medium"} and -0.8 < entry["eval"]["score"] < -0.2


@pytest.mark.slow
def test_cli_runs_the_popgym_track_on_its_own_board(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parents[2]))  # `examples` stays importable from tmp_path
    monkeypatch.chdir(tmp_path)  # the default results directory of the track lands here
    assert main(["leaderboard", "run", "--track", "popgym-repeat-previous", "--agent", "examples.random_agent:factory",
                 "--preset", "smoke", "--values", "Easy,Hard", "--seeds", "1", "--steps", "2048",
                 "--eval-episodes", "8"]) == 0
    out = capsys.readouterr().out
    assert "memgym leaderboard (POPGym RepeatPrevious): preset smoke+custom, difficulties ['Easy', 'Hard']" in out
    assert "# memgym POPGym RepeatPrevious leaderboard" in out and "| Easy | Hard |" in out
    results = tmp_path / "leaderboard-results-popgym-repeat-previous"
    assert (results / "LEADERBOARD.md").exists() and not (tmp_path / "leaderboard-results").exists()
    assert main(["leaderboard", "show", "--track", "popgym-repeat-previous"]) == 0
    assert "examples.random_agent:factory" in capsys.readouterr().out
    # reference agents train on the task in JAX (JAX tier); on a track without a functional env (below) they
    # train through the host loop (any-framework tier), the memoryless control too (its carry is empty:
    # evaluation must not read the batch size from it)
    assert main(["leaderboard", "run", "--track", "popgym-repeat-previous", "--agent", "a2c-tiny-gru",
                 "--agent", "a2c-tiny-mlp", "--preset", "smoke", "--values", "Easy", "--seeds", "1",
                 "--steps", "2048", "--eval-episodes", "8"]) == 0
    capsys.readouterr()
    records = {r["agent"]: r for r in POPGYM_REPEAT_PREVIOUS.records(POPGYM_REPEAT_PREVIOUS.store(results))}
    budget = POPGYM_REPEAT_PREVIOUS.preset("smoke", values=["Easy"], seeds=1, total_steps=2048, eval_episodes=8)
    host = runner.run(["a2c-tiny-gru", "a2c-tiny-mlp"], budget, tmp_path / "host", track=HOST_ONLY,
                      log=lambda line: None)
    host_records = {r["agent"]: r for r in host.records()}
    for tier, kept in (("jax", records), ("any", host_records)):
        for agent, memory in (("a2c-tiny-gru", "tiny-gru"), ("a2c-tiny-mlp", "tiny-mlp")):
            record = kept[agent]
            assert record["status"] == "ok" and record["tier"] == tier, record.get("reason")
            assert record["train"]["steps"] == 2048 and record["eval"]["episodes"] == 8
            assert record["agent_info"]["config"]["total_steps"] == 2048
            assert record["agent_info"]["config"]["memory"] == memory
    assert main(["leaderboard", "run", "--track", "popgym-repeat-previous", "--agent", "a2c-tiny-gru",
                 "--values", "Extreme"]) == 2
    assert "difficulty must be one of 'Easy', 'Medium', 'Hard', got difficulty='Extreme'" in capsys.readouterr().err
