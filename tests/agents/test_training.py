"""``memgym train``: CSV log, checkpoints, resume after an interruption, never reusing a run directory."""

from __future__ import annotations

import csv

import jax
import numpy as np
import pytest

from memgym.agents.a2c import A2CConfig
from memgym.agents.checkpoints import load_checkpoint, save_checkpoint
from memgym.agents.run import train_tmaze
from memgym.cli import main

CONFIG = A2CConfig(memory="tiny-gru", num_envs=4, rollout_length=16, total_steps=4 * 16 * 6)


class Interrupt(Exception):
    pass


@pytest.mark.slow
def test_interrupted_run_resumes_to_the_same_result(tmp_path):
    whole = train_tmaze(CONFIG, tmp_path / "whole", corridor_length=3, max_episode_steps=20, seeds=2, chunks=3,
                        log=lambda _: None)

    calls = []

    def stop_after_first_chunk(line):
        calls.append(line)
        raise Interrupt

    with pytest.raises(Interrupt):
        train_tmaze(CONFIG, tmp_path / "cut", corridor_length=3, max_episode_steps=20, seeds=2, chunks=3,
                    log=stop_after_first_chunk)
    with pytest.raises(ValueError, match="already holds a training run"):
        train_tmaze(CONFIG, tmp_path / "cut", corridor_length=3, max_episode_steps=20, seeds=2, chunks=3)
    with pytest.raises(ValueError, match="different settings"):
        train_tmaze(CONFIG, tmp_path / "cut", corridor_length=4, max_episode_steps=20, seeds=2, resume=True)
    train_tmaze(CONFIG, tmp_path / "cut", corridor_length=3, max_episode_steps=20, seeds=2, chunks=3, resume=True,
                log=lambda _: None)

    rows = list(csv.DictReader(open(tmp_path / "cut" / "metrics.csv")))
    assert sorted((int(r["seed"]), int(r["update"])) for r in rows) == [(s, u) for s in (0, 1) for u in range(1, 7)]
    assert rows == list(csv.DictReader(open(whole / "metrics.csv")))
    like = np.load(whole / "checkpoint.npz")
    assert int(like["update"]) == 6
    a = [like[k] for k in like.files if k != "update"]
    b = np.load(tmp_path / "cut" / "checkpoint.npz")
    for x, y in zip(a, [b[k] for k in b.files if k != "update"]):
        np.testing.assert_array_equal(x, y)


def test_checkpoint_round_trip_keeps_keys(tmp_path):
    state = {"key": jax.random.key(3), "w": jax.numpy.arange(3.0)}
    save_checkpoint(tmp_path / "c.npz", state, 7)
    restored, update = load_checkpoint(tmp_path / "c.npz", state)
    assert update == 7
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]), jax.random.key_data(state["key"]))


@pytest.mark.slow
def test_cli_train(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--algorithm", "a2c", "--memory", "tiny-gru", "--corridor-length", "3", "--steps", "512",
            "--num-envs", "4", "--rollout-length", "16", "--max-episode-steps", "20", "--out", str(out)]
    assert main(args) == 0
    assert (out / "metrics.csv").exists() and (out / "learning_curve.png").exists()
    assert "100.0%" in capsys.readouterr().out
    assert main(args) == 2  # a run directory is never reused without --resume
    assert "--resume" in capsys.readouterr().err
    assert main(["train", "--algorithm", "dqn", "--clip-eps", "0.2", "--out", str(tmp_path / "x")]) == 2
    assert "--clip-eps does not apply to --algorithm dqn" in capsys.readouterr().err
    assert main(["train", "--algorithm", "a2c", "--epochs", "2", "--out", str(tmp_path / "x")]) == 2
    assert "--epochs does not apply to --algorithm a2c" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_cli_train_default_run_folders_are_new_and_never_collide(tmp_path, monkeypatch, capsys):
    """Without --out each run gets its own folder (CleanRL's naming), so README commands typed in order
    do not collide; --resume without --out is refused (it would have nothing to continue)."""
    monkeypatch.chdir(tmp_path)
    args = ["train", "--algorithm", "a2c", "--memory", "tiny-gru", "--corridor-length", "3", "--steps", "512",
            "--num-envs", "4", "--rollout-length", "16", "--max-episode-steps", "20"]
    assert main(args) == 0 and main(args) == 0
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all(name.startswith("TMaze-v0__a2c__tiny-gru__") for name in runs)
    assert all((tmp_path / "runs" / name / "metrics.csv").exists() for name in runs)
    capsys.readouterr()
    assert main([*args, "--resume"]) == 2
    assert "--resume continues the run in --out" in capsys.readouterr().err
    assert len(list((tmp_path / "runs").iterdir())) == 2


def test_success_over_last_window():
    from memgym.agents.metrics import success_over_last

    metrics = {"episodes": np.array([[4, 4, 2, 2], [1, 0, 0, 0]]), "successes": np.array([[0, 0, 1, 2], [1, 0, 0, 0]])}
    np.testing.assert_allclose(success_over_last(metrics, 150, 100), [3 / 4, 0.0])  # rounds up to 2 updates
    np.testing.assert_allclose(success_over_last(metrics, 10**9, 100), [3 / 12, 1.0])


@pytest.mark.slow(seconds=45)
def test_tensorboard_logs_when_installed(tmp_path):
    pytest.importorskip("tensorboardX")
    out = train_tmaze(CONFIG, tmp_path / "tb", corridor_length=3, max_episode_steps=20, seeds=1, chunks=2,
                      log=lambda _: None)
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))


@pytest.mark.slow(seconds=37)
def test_cli_train_on_a_gymnasium_env_through_the_host_loop(tmp_path, capsys):
    pytest.importorskip("popgym")

    out = tmp_path / "popgym"
    args = ["train", "--algorithm", "ppo", "--memory", "tiny-gru", "--env", "memgym/popgym-RepeatFirstEasy-v0",
            "--steps", "256", "--num-envs", "2", "--rollout-length", "32", "--num-minibatches", "2",
            "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "100.0%" in printed and "mean return" in printed
    with open(out / "metrics.csv") as file:
        rows = list(csv.DictReader(file))
    assert [int(r["update"]) for r in rows] == [1, 2, 3, 4]
    assert int(rows[-1]["env_steps"]) == 256
    assert sum(int(r["episodes"]) for r in rows) >= 4  # RepeatFirst Easy episodes are 52 steps
    assert (out / "checkpoint.npz").exists() and (out / "learning_curve.png").exists()
    # Resuming a finished run restores its update count and trains no further.
    assert main(args + ["--resume"]) == 0
    assert "resuming" in capsys.readouterr().out
    with open(out / "metrics.csv") as file:
        assert len(list(csv.DictReader(file))) == 4
    assert main(["train", "--env", "memgym/NoSuchEnv-v0", "--out", str(tmp_path / "y")]) == 2
    assert "not a registered Gymnasium environment" in capsys.readouterr().err


def test_every_config_field_is_documented_and_train_help_shows_it(capsys):
    import dataclasses

    from memgym.agents.config import field_docs
    from memgym.agents.registry import ALGORITHMS

    for cls, _ in ALGORITHMS.values():
        docs = field_docs(cls)
        assert sorted(docs) == sorted(f.name for f in dataclasses.fields(cls)), cls.__name__
        assert all(docs.values())
    with pytest.raises(SystemExit):
        main(["train", "-h"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Polyak β of the target network" in text  # DQNConfig.target_rate's docstring
    assert "environment steps per environment in one rollout" in text  # A2CConfig/PPOConfig.rollout_length's
    assert "passes over each rollout" in text  # PPOConfig.epochs'
