"""The TBB-vs-SBB study (monoid paper §6): its agents, presets, gradient analysis, and the command end to end."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.experiments import tbb_vs_sbb

pytest.importorskip("popgym")


def test_agent_specs_round_trip_and_bad_specs_are_refused():
    from memgym.leaderboard.protocol import load_factory

    spec = tbb_vs_sbb.agent_spec("small", "ffm", 10)
    assert spec == "memgym.experiments.tbb_vs_sbb:dqn[size=small,model=ffm,segment_length=10]"
    assert tbb_vs_sbb.parse_agent(spec) == ("small", "ffm", 10)
    paper = tbb_vs_sbb.agent_spec("paper", "linear_attention_monoid", None)
    assert tbb_vs_sbb.parse_agent(paper) == ("paper", "linear_attention_monoid", None)
    assert load_factory(spec).__name__ == "small_ffm_sbb10"  # the harness loads it like any spec with options
    bad_specs = {
        "memgym.experiments.tbb_vs_sbb:dqn[segment_length=0]": "segment_length must be a positive integer",
        "memgym.experiments.tbb_vs_sbb:dqn[size=huge]": "size must be one of 'paper', 'small'",
        "memgym.experiments.tbb_vs_sbb:dqn[model=gru]": "model must be one of 'ffm'",
        "memgym.experiments.tbb_vs_sbb:dqn[batching=tape]": r"unknown option\(s\) \['batching'\]",
        "memgym.experiments.tbb_vs_sbb:small_ffm_tbb": "not an agent of the study",
    }
    for bad, message in bad_specs.items():
        with pytest.raises(ValueError, match=message):
            tbb_vs_sbb.parse_agent(bad)


def test_agents_share_hyperparameters_and_differ_only_in_batching():
    tbb = tbb_vs_sbb.dqn_config("small", "ffm", None, num_envs=8, total_steps=10_000)
    sbb = tbb_vs_sbb.dqn_config("small", "ffm", 10, num_envs=8, total_steps=10_000)
    assert (tbb.batching, sbb.batching, sbb.segment_length) == ("tape", "segment", 10)
    differing = {f for f in tbb.__dataclass_fields__ if getattr(tbb, f) != getattr(sbb, f)}
    assert differing == {"batching", "segment_length"}


@pytest.mark.parametrize("size", sorted(tbb_vs_sbb.SIZES))
def test_every_agent_of_every_size_builds(size):
    """Each (model, batching) of a size is a valid config and a JAX-tier agent of the study's track (an
    any-framework one, the host loop, on a copy of the track without its JAX env)."""
    import dataclasses

    from memgym.leaderboard.protocol import tier

    host_only = dataclasses.replace(tbb_vs_sbb.TRACK, jax_env=None, jax_params=None, episode_limit=None,
                                    per_value_env=False)
    for track, kind in ((tbb_vs_sbb.TRACK, "jax"), (host_only, "any")):
        context = track.context(num_envs=8, seed=0, total_steps=20_000, value="RepeatPrevious")
        for model in tbb_vs_sbb.MODELS:
            for length in (None, *tbb_vs_sbb.SEGMENT_LENGTHS):
                options = dict(size=size, model=model, **({} if length is None else dict(segment_length=length)))
                agent = tbb_vs_sbb.dqn.with_options(**options)(context)
                config = agent.config if kind == "jax" else agent.trainer.config
                assert tier(agent) == kind and config.batching == ("tape" if length is None else "segment")


def test_presets_check_their_grid():
    smoke = tbb_vs_sbb.make_study("smoke")
    assert smoke.name == "smoke" and smoke.agents()[0].endswith("dqn[size=small,model=ffm]")
    paper = tbb_vs_sbb.STUDIES["paper"]
    assert paper.budget.seeds == 10 and paper.segment_lengths == (10, 20, 50, 100)
    assert set(paper.budget.values) == set(tbb_vs_sbb.TASKS) and paper.models == tbb_vs_sbb.MODELS
    assert len(paper.agents()) == 4 * 5
    custom = tbb_vs_sbb.make_study("smoke", segment_lengths=[20])
    assert custom.name == "smoke+custom" and custom.budget.name == "smoke+custom"
    with pytest.raises(ValueError, match="segment_lengths: 7 must be a positive divisor of the batch size 200"):
        tbb_vs_sbb.make_study("smoke", segment_lengths=[7])
    with pytest.raises(ValueError, match="models: 'gru' is not one of"):
        tbb_vs_sbb.make_study("smoke", models=["gru"])
    with pytest.raises(ValueError, match="task must be one of"):
        tbb_vs_sbb.make_study("smoke", tasks=["Pong"])
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        tbb_vs_sbb.make_study("huge")


def _trainer(memory: str, memory_config: dict):
    from memgym.agents.dqn import DQNConfig
    from memgym.agents.dqn import DQNTrainer
    from memgym.agents.spec import EnvSpec
    from gymnasium import spaces

    spec = EnvSpec.from_spaces(spaces.Box(0.0, 1.0, (5,), np.float32), spaces.Discrete(3))
    trainer = DQNTrainer(DQNConfig(memory=memory, memory_config=json.dumps(memory_config), head_width=16), spec)
    return trainer, trainer.init_params(jax.random.key(0))


@pytest.mark.slow
def test_observation_sensitivity_is_the_gradient_of_the_last_q_value():
    """eq. 36 against central finite differences; a memoryless Q depends on the last observation only."""
    obs = np.asarray(jax.random.uniform(jax.random.key(1), (12, 5)), np.float64)
    trainer, params = _trainer("ffm", {"features": 8, "memory_size": 4, "context_size": 2})
    sensitivity = tbb_vs_sbb.observation_sensitivity(trainer, params, obs)
    assert sensitivity.shape == (12,) and np.all(sensitivity[:-1] > 0)

    start = jnp.zeros(12, bool).at[0].set(True)

    def last_q(x):
        q, _ = trainer.network.apply(params, jnp.asarray(x, jnp.float32), start, trainer.initialize_carry())
        return float(q[-1, int(jnp.argmax(q[-1]))])

    for i in (0, 5, 11):
        numeric = 0.0
        for feature in range(5):
            up, down = obs.copy(), obs.copy()
            up[i, feature] += 1e-2
            down[i, feature] -= 1e-2
            numeric += abs(last_q(up) - last_q(down)) / 2e-2
        np.testing.assert_allclose(sensitivity[i], numeric, rtol=0.05, atol=1e-5)

    trainer, params = _trainer("mlp", {"features": 8})
    memoryless = tbb_vs_sbb.observation_sensitivity(trainer, params, obs)
    assert np.all(memoryless[:-1] == 0) and memoryless[-1] > 0


def test_figure_six_curves_average_each_bins_return_over_seeds():
    """A record's curve bin is [episodes, return sum]; the study's curve is the mean over seeds of each bin's
    mean return, with a bootstrap interval around it, at the bin's middle step; a bin where a seed finished no
    episode is left out."""
    assert tbb_vs_sbb.training_curve([[4, 2.0], [0, 0.0], [2, -1.0]]) == [0.5, None, -0.5]
    curves = [[0.5, None, -0.5, 1.0], [0.25, 0.0, -0.25, 1.0]]
    summary = tbb_vs_sbb.curve_summary(curves, steps=400)
    assert summary["steps"] == [50, 250, 350]
    assert summary["mean"] == [0.375, -0.375, 1.0]
    assert all(low <= mean <= high for low, mean, high in zip(summary["ci_low"], summary["mean"], summary["ci_high"]))
    assert summary["ci_low"][2] == summary["ci_high"][2] == 1.0


@pytest.mark.slow(seconds=93)
def test_the_command_runs_resumes_and_reports(tmp_path, capsys):
    """The documented command, on a tiny grid: records for every cell, the report, then a resume that trains nothing."""
    from memgym.cli import main

    results, out = tmp_path / "results", tmp_path / "report"
    argv = ["experiment", "tbb-vs-sbb", "run", "--tasks", "RepeatPrevious", "--seeds", "2", "--steps", "1200",
            "--eval-episodes", "8", "--results", str(results), "--out", str(out)]
    assert main(argv) == 0
    records = sorted(results.glob("*/*/seed*.json"))
    assert len(records) == 4  # TBB and SBB L=10, two seeds
    for path in records:
        record = json.loads(path.read_text())
        assert record["status"] == "ok" and record["task"] == "RepeatPrevious" and record["eval"]["episodes"] == 8
        assert -1.0 <= record["eval"]["normalized_return"] <= 1.0 and record["tier"] == "jax"
    report = (out / "REPORT.md").read_text()
    assert "| RepeatPrevious | ffm |" in report and "SBB L=10" in report and "Table 1" in report
    assert (out / "returns.png").exists() and (out / "sensitivity.png").exists() and (out / "curves.png").exists()
    study = json.loads((out / "study.json").read_text())
    assert {(c["batching"], c["n"]) for c in study["cells"]} == {("tbb", 2), ("sbb10", 2)}
    shares = [np.asarray(s["share"]) for s in study["sensitivity"]]
    assert len(shares) == 2 and all(abs(s.sum() - 1.0) < 1e-4 and np.all(s >= 0) for s in shares)

    stamps = {p: os.stat(p).st_mtime_ns for p in list(records) + list((results / "sensitivity").glob("*.json"))}
    capsys.readouterr()
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "all 2 seeds stored, skipping" in printed and "sensitivity: " in printed and "training" not in printed
    assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps
    assert sorted(results.glob("*/*/seed*.json")) == records

    (results / "sensitivity" / "broken.json").write_text("{not json")
    assert main(["experiment", "tbb-vs-sbb", "report", "--results", str(results), "--out", str(out)]) == 0
    assert "Unreadable sensitivity results (kept, not used)" in (out / "REPORT.md").read_text()
    assert (results / "sensitivity" / "broken.json").read_text() == "{not json"


def test_the_command_names_bad_arguments(tmp_path, capsys):
    from memgym.cli import main

    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert main(["experiment", "tbb-vs-sbb", "run", "--results", str(not_a_dir)]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err
    assert main(["experiment", "tbb-vs-sbb", "run", "--models", "gru", "--results", str(tmp_path / "r")]) == 2
    assert "models: 'gru'" in capsys.readouterr().err
    assert main(["experiment", "tbb-vs-sbb", "report", "--results", str(tmp_path / "none")]) == 2
    assert "run `memgym experiment tbb-vs-sbb run` first" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["experiment", "tbb-vs-sbb", "run", "--segment-lengths", "ten"])
    assert "--segment-lengths" in capsys.readouterr().err
