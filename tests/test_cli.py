"""The ``memgym`` command."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from memgym.cli import main, play_tmaze, read_keys


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memgym.cli", *args], input=stdin, capture_output=True, text=True, timeout=120
    )


def test_envs_lists_registered_envs_with_spaces(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "memgym/TMaze-v0" in out and "memgym/TMazeJax-v0" in out
    assert "Box(0.0, 1.0, (16,), float32)" in out and "Discrete(4)" in out


def test_read_keys_parses_wasd_arrows_and_quits():
    keys = list(read_keys(io.StringIO("w\x1b[Ax\x1b[Bsad\x1b[C\x1b[Dq w")))
    assert keys == ["w", "\x1b[A", "\x1b[B", "s", "a", "d", "\x1b[C", "\x1b[D", "quit"]
    assert list(read_keys(io.StringIO("ww"))) == ["w", "w", "quit"]  # end of input quits
    assert list(read_keys(io.StringIO("\x03w"))) == ["quit"]  # Ctrl-C


def test_play_wins_and_loses_episodes():
    out = io.StringIO()
    # corridor of 3: two ups reach the junction; then try both turns over two episodes
    episodes, successes = play_tmaze(3, seed=0, keys=read_keys(io.StringIO("wwa" + "wwd" + "q")), write=out.write)
    assert episodes == 2 and successes == 1
    text = out.getvalue()
    assert "correct turn!" in text and "wrong turn" in text and "Bye: 1/2" in text


def test_play_command_end_of_input_and_bad_length():
    done = run_cli("play", "tmaze", "--corridor-length", "4", "--seed", "1", stdin="www")
    assert done.returncode == 0 and "Bye: 0/0" in done.stdout
    bad = run_cli("play", "tmaze", "--corridor-length", "300")
    assert bad.returncode == 2 and ("corridor_length must be an integer in [1, 256] (2**gray_bits positions with "
                                    "gray_bits=8), got corridor_length=300") in bad.stderr
    bad = run_cli("play", "tmaze", "--corridor-length", "0")
    assert bad.returncode == 2
    assert "argument --corridor-length: --corridor-length must be a positive integer, got corridor_length=0" in bad.stderr


def test_demo_scripted_policy_always_succeeds(capsys):
    assert main(["demo", "--corridor-length", "15", "--episodes", "20"]) == 0
    out = capsys.readouterr().out
    scripted = next(line for line in out.splitlines() if line.startswith("scripted"))
    assert scripted.split()[1] == "1.00" and scripted.split()[2] == "2.60"  # 4 - 0.1 * 14


def test_leaderboard_list_and_bad_arguments(capsys, tmp_path):
    assert main(["leaderboard", "list"]) == 0
    out = capsys.readouterr().out
    assert "a2c-tiny-gru" in out and "track tmaze (T-Maze; jax and any tier" in out
    assert "track popgym-repeat-previous (POPGym RepeatPrevious; jax and any tier" in out
    assert "track popgym (POPGym (the monoid paper's four tasks); jax and any tier" in out
    for name in ("popgym-suite", "popgym-diagnostic", "popgym-control", "popgym-noisy", "popgym-game",
                 "popgym-navigation"):  # the whole POPGym suite and its groups
        assert f"track {name} (POPGym (" in out
    assert "LabyrinthExploreEasy" in out and "PositionOnlyPendulumEasy" in out
    assert "thesis           corridor lengths [120, 140, 160, 180, 200], 50 seeds, 10,000,000 steps" in out
    assert "tune             corridor lengths [120, 140, 160, 180, 200], 5 seeds, 5,000,000 steps" in out
    bad = run_cli("leaderboard", "run", "--agent", "a2c-tiny-gru", "--seeds", "0")
    assert bad.returncode == 2 and "seeds must be a positive integer, got seeds=0" in bad.stderr
    results = str(tmp_path / "r")
    bad = run_cli("leaderboard", "run", "--agent", "a2c-tiny-gru", "--corridor-lengths", "4,0", "--results", results)
    assert bad.returncode == 2 and ("corridor_length must be an integer in [1, 256] (2**gray_bits positions with "
                                    "gray_bits=8), got corridor_length=0") in bad.stderr
    bad = run_cli("leaderboard", "run", "--agent", "a2c-tiny-gru", "--track", "maze", "--results", results)
    assert bad.returncode == 2 and "unknown track 'maze'; choose one of tmaze, popgym-repeat-previous, popgym" in bad.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.slow(seconds=11)
def test_an_interrupt_or_an_unusable_file_ends_a_command_with_a_sentence(capsys, monkeypatch, tmp_path):
    from memgym.leaderboard.boards import report
    from memgym.leaderboard.running import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run", interrupted)
    argv = ["leaderboard", "run", "--agent", "a2c-tiny-mlp", "--preset", "smoke", "--results", str(tmp_path / "r")]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "memgym leaderboard: interrupted (the cells that finished are stored; the same command resumes" in err
    assert "Traceback" not in err

    def read_only(*args, **kwargs):
        raise OSError(30, "Read-only file system", str(tmp_path / "out"))

    monkeypatch.setattr(report, "write_report", read_only)
    (tmp_path / "r").mkdir()
    assert main(["leaderboard", "report", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == f"memgym leaderboard: Read-only file system ({tmp_path / 'out'})\n"


def test_train_presets_are_thesis_table_a3_and_a4_and_flags_override_them():
    from memgym.agents.a2c import A2CConfig
    from memgym.agents.config import resolve_memory
    from memgym.agents.ppo import PPOConfig
    from memgym.cli import build_parser, train_setup

    def setup(*argv: str):
        return train_setup(build_parser().parse_args(["train", *argv]))

    config, env = setup("--preset", "memory-maze-arelit")
    assert env == "memgym/MemoryMaze-11x11-v0"  # the thesis's sweep env (Appendix A.2)
    # Table A.3: 1 epoch, 32 workers × 2 envs, rollout 200, sequences of 100, batch 3200, clip 0.1, value clip 1,
    # gradient norm 4, value coefficient 0.5, γ 0.99, λ 0.95.
    assert type(config) is PPOConfig and (config.epochs, config.num_envs, config.rollout_length) == (1, 64, 200)
    assert (config.batching, config.segment_length) == ("segment", 100)
    segments = config.num_envs * config.rollout_length // config.segment_length
    assert segments // config.num_minibatches * config.segment_length == 3200
    assert (config.clip_eps, config.value_clip, config.max_grad_norm, config.value_coef) == (0.1, 1.0, 4.0, 0.5)
    assert (config.gamma, config.gae_lambda, config.total_steps) == (0.99, 0.95, 100_000_000)
    assert config.learning_rate in (2.5e-3, 2.5e-4, 2.5e-5) and config.entropy_coef in (0.03, 0.003, 0.0003)
    # Table A.4.
    assert resolve_memory(config.memory) == ("arelit", dict(features=256, num_layers=4, num_heads=8, head_dim=64,
                                                             eta=4, r=7))
    assert resolve_memory(setup("--preset", "memory-maze-lstm")[0].memory) == ("lstm", dict(features=768))
    for m in (64, 128, 256):
        name, options = resolve_memory(setup("--preset", f"memory-maze-gtrxl-{m}")[0].memory)
        assert name == "gtrxl" and options == dict(features=256, num_layers=4, num_heads=8, head_dim=64, memory_size=m)
    config, env = setup("--preset", "memory-maze-lstm", "--env", "memgym/MemoryMaze-15x15-v0", "--num-envs", "2",
                        "--steps", "1e3", "--learning-rate", "0.0025")
    assert (env, config.num_envs, config.total_steps, config.learning_rate) == (
        "memgym/MemoryMaze-15x15-v0", 2, 1000, 0.0025)
    assert config.epochs == 1 and config.memory == "memory-maze-lstm"
    config, env = setup()
    assert type(config) is A2CConfig
    assert (config.memory, config.total_steps, env) == ("arelit", 1_000_000, "memgym/TMaze-v0")
    bad = run_cli("train", "--preset", "memory-maze-arelit", "--algorithm", "a2c")
    assert bad.returncode == 2
    assert "--preset memory-maze-arelit trains --algorithm ppo, not --algorithm a2c" in bad.stderr


def test_train_agent_flag_still_works_with_a_deprecation_message(capsys):
    """memgym 0.1's ``memgym train --agent NAME`` is ``--algorithm NAME``, with a message on stderr."""
    from memgym.agents.dqn import DQNConfig
    from memgym.agents.ppo import PPOConfig
    from memgym.cli import build_parser, main, train_setup

    def setup(*argv: str):
        return train_setup(build_parser().parse_args(["train", *argv]))

    config, _ = setup("--agent", "ppo", "--memory", "tiny-gru", "--num-minibatches", "2")
    assert type(config) is PPOConfig and config.num_minibatches == 2
    assert config == setup("--algorithm", "ppo", "--memory", "tiny-gru", "--num-minibatches", "2")[0]
    err = capsys.readouterr().err
    assert "--agent is deprecated (it stops working in memgym 0.3): use --algorithm ppo" in err
    assert err.count("deprecated") == 1  # --algorithm alone prints nothing
    config, _ = setup("--agent", "dqn", "--algorithm", "dqn")
    assert type(config) is DQNConfig
    assert main(["train", "--agent", "dqn", "--algorithm", "a2c"]) == 2
    assert "--agent dqn and --algorithm a2c disagree" in capsys.readouterr().err
