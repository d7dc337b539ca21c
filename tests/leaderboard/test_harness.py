"""The harness end to end: both tiers, harness-owned counting, resume, conformance checks."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.envs.tmaze_jax import TMazeJax, tmaze_params
from memgym.leaderboard import report, runner
from memgym.leaderboard.check import check_agent
from memgym.leaderboard.protocol import agent_id, load_factory, tier
from memgym.leaderboard.scoring import ScoredEnv, ScoredParams, counters

TINY = dict(corridor_lengths=(2, 3), seeds=2, total_steps=4096, train_window=1024, eval_episodes=8,
            max_episode_steps=20)


def test_scored_env_counts_what_the_env_reports():
    env = ScoredEnv(TMazeJax())
    params = ScoredParams(tmaze_params(3, max_episode_steps=10), jnp.asarray(20, jnp.int32))
    obs, state = env.reset(jax.random.key(0), params)
    rng = np.random.default_rng(0)
    episodes = successes = window_episodes = 0
    step = jax.jit(env.step)
    for t in range(60):
        obs, state, _, _, _, info = step(jax.random.key(t + 1), state, jnp.asarray(rng.integers(4)), params)
        episodes += bool(info["done"])
        successes += bool(info["done"] & info["success"])
        window_episodes += bool(info["done"]) and t >= 20
    got = counters(state)
    assert got["steps"] == 60 and got["episodes"] == episodes > 0
    assert got["successes"] == successes and got["window_episodes"] == window_episodes


def test_load_factory_errors_and_tiers():
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        load_factory("no_such_module:factory")
    with pytest.raises(ValueError, match="has no attribute 'nope'"):
        load_factory("memgym.leaderboard.reference:nope")
    with pytest.raises(ValueError, match="not a 'package.module:factory' string nor a registered agent"):
        load_factory("not-an-agent")
    assert load_factory("a2c-tiny-gru") is load_factory("memgym.leaderboard.reference:a2c_tiny_gru")
    with pytest.raises(TypeError, match="neither a JAX-tier agent"):
        tier(object())
    assert agent_id("examples.numpy_agent:factory") == "examples.numpy_agent_factory"


@pytest.mark.parametrize("spec", ["a2c-tiny-gru", "examples.numpy_agent:factory"])
def test_run_scores_stores_and_resumes(tmp_path, spec):
    budget = runner.Preset("tiny", **TINY)
    lines: list[str] = []
    store = runner.run([spec], budget, tmp_path, log=lines.append)
    records = list(store.records())
    assert sorted((r["corridor_length"], r["seed"]) for r in records) == [(2, 0), (2, 1), (3, 0), (3, 1)]
    for r in records:
        assert r["train"]["steps"] == budget.total_steps
        assert 0 < r["train"]["window_episodes"] <= r["train"]["episodes"]
        assert 0.0 <= r["eval"]["success_rate"] <= 1.0 and r["eval"]["episodes"] == 8
        assert r["provenance"]["memgym"]
    before = {p: p.read_text() for p in tmp_path.rglob("seed*.json")}
    lines.clear()
    runner.run([spec], budget, tmp_path, log=lines.append)  # resume: nothing left to do
    assert all("skipping" in line for line in lines)
    assert {p: p.read_text() for p in tmp_path.rglob("seed*.json")} == before
    with pytest.raises(ValueError, match="different budget"):  # another budget never reuses these cells
        runner.run([spec], runner.Preset("tiny", **{**TINY, "total_steps": 8192}), tmp_path, log=lines.append)
    written = report.write_report(tmp_path)
    board = json.loads(written["json"].read_text())
    assert board["entries"][0]["agent"] == spec
    assert "| 1 |" in written["markdown"].read_text()


def test_same_seed_same_result(tmp_path):
    budget = runner.Preset("tiny", **{**TINY, "corridor_lengths": (2,), "seeds": 1})
    a = list(runner.run(["a2c-tiny-gru"], budget, tmp_path / "a", log=lambda _: None).records())[0]
    b = list(runner.run(["a2c-tiny-gru"], budget, tmp_path / "b", log=lambda _: None).records())[0]
    assert a["train"] == b["train"] and a["eval"] == b["eval"]


def test_presets_and_bad_input():
    assert runner.PRESETS["thesis"].corridor_lengths == (120, 140, 160, 180, 200)
    assert runner.PRESETS["thesis"].total_steps == 10_000_000
    assert runner.preset("smoke", total_steps=5000).train_window == 1000
    assert runner.preset("smoke", total_steps=5000).name == "smoke+custom"
    assert runner.preset("smoke", seeds=runner.PRESETS["smoke"].seeds).name == "smoke"
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        runner.preset("huge")
    with pytest.raises(ValueError, match="seeds must be a positive integer"):
        runner.preset("smoke", seeds=0)
    with pytest.raises(ValueError, match="corridor_length"):
        runner.preset("smoke", corridor_lengths=[0])


class ForgetfulAgent:
    """Any-framework agent that returns actions of the wrong shape."""

    def act(self, obs, begin):
        return np.zeros(len(obs) + 1, np.int64)

    def observe(self, *args):
        pass


def forgetful_factory(context):
    return ForgetfulAgent()


def test_check_explains_failures():
    results = check_agent("tests.leaderboard.test_harness:forgetful_factory")
    failed = [(name, why) for name, ok, why in results if not ok]
    assert failed and "shape (2,)" in failed[0][1]
    assert all(ok for _, ok, _ in check_agent("examples.numpy_agent:factory"))


def test_jax_example_submission_passes_the_check():
    results = check_agent("examples.jax_agent:factory", budget=4096)
    assert all(ok for _, ok, _ in results), [r for r in results if not r[1]]
