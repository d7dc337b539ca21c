"""The Gymnasium wrapper over upstream Memory Maze (memgym.envs.memory_maze).

Needs the optional ``memory-maze`` extra (memory-maze, dm-control, MuJoCo) and a
headless OpenGL library; skipped without the packages. Memory Maze is slow on a
CPU (≈ 25 steps/s, 1–3 s per reset, 1.5–3 s per seeded rebuild), so the tests
share a few environments (Gymnasium's ``check_env`` on every size is in test_registered_envs.py).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

# Building and rendering mazes (dm_control, MuJoCo) takes seconds to minutes per test: the slow tier.
pytestmark = pytest.mark.slow

pytest.importorskip("dm_control", reason="needs the memory-maze extra")
pytest.importorskip("labmaze", reason="needs the memory-maze extra")
# Not importorskip("memory_maze"): its __init__ imports the legacy gym package and fails
# without it, which is why memgym loads memory_maze.tasks around it. Look it up only.
if importlib.util.find_spec("memory_maze") is None:
    pytest.skip("needs the memory-maze extra", allow_module_level=True)

import dm_env  # noqa: E402
import gymnasium as gym  # noqa: E402

import memgym  # noqa: E402,F401
from memgym.envs import memory_maze as mm  # noqa: E402
from memgym.envs.memory_maze import EPISODE_STEPS, SIZES, MemoryMazeEnv, memory_maze_env_id  # noqa: E402


@pytest.fixture(scope="module")
def env():
    """One 9x9 env shared by the tests that only need some episode to look at."""
    env = MemoryMazeEnv("9x9", render_mode="rgb_array")
    yield env
    env.close()


def assert_valid_observation(obs: dict) -> None:
    assert set(obs) == {"image", "target_color"}
    assert obs["image"].shape == (64, 64, 3) and obs["image"].dtype == np.uint8
    assert obs["target_color"].shape == (3,) and obs["target_color"].dtype == np.float32
    assert ((obs["target_color"] >= 0) & (obs["target_color"] <= 1)).all()


def test_registered_ids_with_upstream_time_limits(monkeypatch):
    ids = mm.register_memory_maze_envs()
    assert ids == [f"memgym/MemoryMaze-{size}-v0" for size in SIZES]
    assert set(ids) <= set(memgym.envs.registered_ids())
    # Read upstream's own arguments (maze size, targets, time limit in seconds) by
    # intercepting the private builder the public task functions call: cheap, no MuJoCo.
    tasks = mm.load_memory_maze_tasks()
    monkeypatch.setattr(tasks, "_memory_maze", lambda *args, **kwargs: args)
    for size in SIZES:
        maze_size, _, time_limit_s = getattr(tasks, f"memory_maze_{size}")()
        assert f"{maze_size}x{maze_size}" == size
        upstream_steps = round(time_limit_s * tasks.DEFAULT_CONTROL_FREQ)
        assert EPISODE_STEPS[size] == upstream_steps
        assert gym.spec(memory_maze_env_id(size)).max_episode_steps == upstream_steps


def test_importing_memgym_loads_no_simulator():
    code = (
        "import sys, memgym, gymnasium as gym\n"
        "assert 'memgym/MemoryMaze-9x9-v0' in gym.registry\n"
        "print(sorted(m for m in ('memory_maze', 'dm_control', 'mujoco') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# Gymnasium's check_env on every Memory Maze size and declared render mode: tests/envs/test_registered_envs.py.


def test_observations_actions_and_render(env):
    assert env.action_space == gym.spaces.Discrete(6)
    obs, info = env.reset(seed=0)
    assert info == {}
    assert_valid_observation(obs)
    assert obs in env.observation_space
    np.testing.assert_array_equal(env.render(), obs["image"])
    for action in range(6):
        obs, reward, terminated, truncated, info = env.step(np.int64(action))
        assert_valid_observation(obs)
        assert isinstance(reward, float) and reward in (0.0, 1.0)
        assert terminated is False and truncated is False
    np.testing.assert_array_equal(env.render(), obs["image"])
    # The target colour is also drawn as the image's border (upstream's default).
    border = obs["image"][0, 0].astype(np.float64)
    np.testing.assert_allclose(border, np.floor(obs["target_color"] * 255 * 0.7), atol=1)


def test_invalid_arguments(env):
    with pytest.raises(ValueError, match="size"):
        MemoryMazeEnv("8x8")
    with pytest.raises(ValueError, match="render_mode"):
        MemoryMazeEnv("9x9", render_mode="human")
    fresh = MemoryMazeEnv("9x9")
    with pytest.raises(RuntimeError, match="reset"):
        fresh.step(0)
    for seed in (-1, 2**32, 1.5):
        with pytest.raises(ValueError, match="seed"):
            fresh.reset(seed=seed)
    with pytest.raises(ValueError, match="options"):
        fresh.reset(options={"goal": 1})
    env.reset()
    for action in (-1, 6, 1.0):
        with pytest.raises(ValueError, match="action"):
            env.step(action)


def test_seeded_resets_are_deterministic_and_match_upstream(env):
    actions = [1, 1, 4, 2, 5, 3, 1, 0]

    def rollout(e: MemoryMazeEnv, seed: int):
        obs, _ = e.reset(seed=seed)
        frames = [obs]
        for action in actions:
            frames.append(e.step(action)[0])
        return frames

    first = rollout(env, 3)
    other_instance = MemoryMazeEnv("9x9")
    try:
        again = rollout(other_instance, 3)
    finally:
        other_instance.close()
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a["image"], b["image"])
        np.testing.assert_array_equal(a["target_color"], b["target_color"])
    assert env.task_seed == 3
    # reset(seed=s) gives exactly the first episode of upstream memory_maze_9x9(seed=s).
    upstream = mm.load_memory_maze_tasks().memory_maze_9x9(seed=3)
    try:
        timestep = upstream.reset()
        np.testing.assert_array_equal(timestep.observation["image"], first[0]["image"])
        np.testing.assert_allclose(timestep.observation["target_color"], first[0]["target_color"], rtol=1e-6)
    finally:
        upstream.close()
    other, _ = env.reset(seed=4)
    assert not np.array_equal(other["image"], first[0]["image"])


@pytest.mark.slow
def test_unshown_textures_compile_as_one_pixel_and_every_frame_matches_upstream():
    """The wrapper compiles only the textures an episode shows (mm.UnusedTextures): across episodes that
    draw different wall textures, every image, target colour and reward equals raw upstream's under the
    same seed and actions, while the compiled model holds a fraction of upstream's texture bytes."""
    rng = np.random.default_rng(1)
    actions = [int(a) for a in rng.integers(0, mm.NUM_ACTIONS, 40)]
    wrapped = MemoryMazeEnv("9x9")
    upstream = mm.load_memory_maze_tasks().memory_maze_9x9(seed=11)
    try:
        for episode in range(3):
            obs, _ = wrapped.reset(seed=11) if episode == 0 else wrapped.reset()
            timestep = upstream.reset()
            np.testing.assert_array_equal(obs["image"], timestep.observation["image"])
            for action in actions:
                obs, reward, *_ = wrapped.step(action)
                timestep = upstream.step(action)
                np.testing.assert_array_equal(obs["image"], timestep.observation["image"])
                np.testing.assert_array_equal(obs["target_color"], np.float32(timestep.observation["target_color"]))
                assert reward == float(timestep.reward)
            ours, theirs = wrapped.task.physics.model, upstream.physics.model
            assert ours.ntex == theirs.ntex  # same texture ids: the unshown ones are one pixel, not removed
            assert ours.tex_data.nbytes < 0.3 * theirs.tex_data.nbytes, (ours.tex_data.nbytes, theirs.tex_data.nbytes)
    finally:
        wrapped.close()
        upstream.close()


def test_upstream_time_limit_truncates(env):
    env.reset(seed=1)
    # Shorten upstream's own limit (composer.Environment._time_limit, in simulated
    # seconds) to 5 control steps: the same code path that ends every real episode.
    from dm_control import composer

    composer_env = env.task
    while not isinstance(composer_env, composer.Environment):  # unwrap upstream's dm_env wrappers
        composer_env = composer_env.env
    composer_env._time_limit = 5 / mm.CONTROL_FREQUENCY_HZ - 1e-3
    flags = [env.step(1)[2:4] for _ in range(5)]
    assert flags == [(False, False)] * 4 + [(False, True)]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


class _FakeTask:
    """A dm_env stand-in whose next step ends the episode with discount 0."""

    def __init__(self):
        self.observation = {"image": np.zeros((64, 64, 3), np.uint8), "target_color": np.ones(3)}

    def reset(self):
        return dm_env.restart(self.observation)

    def step(self, action):
        return dm_env.termination(reward=1.0, observation=self.observation)

    def close(self):
        pass


def test_discount_zero_is_terminated():
    env = MemoryMazeEnv("9x9")
    env._task, env._task_seed = _FakeTask(), 0
    env.reset()
    _, reward, terminated, truncated, _ = env.step(0)
    assert (reward, terminated, truncated) == (1.0, True, False)


def test_gl_backend_choice(monkeypatch):
    probes = []

    def fake_probe(works: set[str]):
        def probe(backend):
            probes.append(backend)
            return backend in works, "" if backend in works else f"{backend} missing"

        return probe

    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setattr(mm, "_probe_gl_backend", fake_probe(set()))
    assert mm.select_mujoco_gl() == "osmesa" and probes == []  # a user's choice is kept
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.delitem(sys.modules, "dm_control._render", raising=False)  # as before dm_control loads
    monkeypatch.setattr(mm, "_probe_gl_backend", fake_probe({"osmesa"}))
    assert mm.select_mujoco_gl() == "osmesa" and probes == ["egl", "osmesa"]
    assert mm.os.environ["MUJOCO_GL"] == "osmesa"
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.setattr(mm, "_probe_gl_backend", fake_probe(set()))
    with pytest.raises(RuntimeError, match="libegl1.*libosmesa6"):
        mm.select_mujoco_gl()


# Extended: the image encoder trains through the host loop in CI in the LSTM preset's run below; this repeats it with
# PPO and DQN.
@pytest.mark.slow(seconds=59)
@pytest.mark.extended
def test_host_loops_train_ppo_and_dqn_with_the_image_encoder():
    """PPO and DQN (TBB) host loops on Memory Maze: the ResNet encoder (thesis §5.2.2) is built and trained."""
    import jax

    from memgym.agents.dqn import DQNConfig
    from memgym.agents.host import HostLoop
    from memgym.agents.ppo import PPOConfig

    envs = gym.make_vec("memgym/MemoryMaze-9x9-v0", num_envs=2, vectorization_mode="sync",
                        vector_kwargs=dict(autoreset_mode=gym.vector.AutoresetMode.SAME_STEP))
    try:
        ppo = PPOConfig(memory="tiny-gru", num_envs=2, rollout_length=8, total_steps=16, epochs=1, num_minibatches=2)
        dqn = DQNConfig(memory="ffm", memory_config='{"features": 32, "memory_size": 8, "context_size": 4}',
                        num_envs=2, steps_per_update=8, batch_size=16, buffer_size=64, learning_starts=8,
                        total_steps=32)
        for config in (ppo, dqn):
            loop = HostLoop.for_config(config, envs, seed=0)
            assert loop.trainer.spec.image_shape == (64, 64, 3)
            assert loop.state.obs.dtype == np.uint8 and loop.state.obs.shape == (2, 64 * 64 * 3 + 3)
            before = loop.state.params["params"]["encoder"]["resnet"]
            metrics = [loop.update() for _ in range(2)]
            assert metrics[-1]["env_steps"] == 2 * 2 * config.steps_per_update
            losses = [v for m in metrics for k, v in m.items() if "loss" in k]
            assert losses and np.isfinite(losses).all()
            after = loop.state.params["params"]["encoder"]["resnet"]
            moved = jax.tree.map(lambda a, b: float(np.abs(np.asarray(a) - np.asarray(b)).max()), before, after)
            assert max(jax.tree.leaves(moved)) > 0, f"{type(loop.trainer).__name__} did not update the image encoder"
    finally:
        envs.close()


def test_every_memory_maze_preset_is_a_valid_config():
    """The five thesis Memory Maze presets (Tables A.3, A.4) resolve to PPO configs of their models; the GTrXLs
    differ only in their window, so one of them trains below."""
    from memgym.agents.config import TRAIN_PRESETS, resolve_memory
    from memgym.agents.ppo import PPOConfig

    assert sorted(TRAIN_PRESETS) == ["memory-maze-arelit", "memory-maze-gtrxl-128", "memory-maze-gtrxl-256",
                                     "memory-maze-gtrxl-64", "memory-maze-lstm"]
    for name, (algorithm, env, fields) in TRAIN_PRESETS.items():
        assert (algorithm, env) == ("ppo", "memgym/MemoryMaze-11x11-v0")
        assert PPOConfig(**fields).memory == name
    assert [resolve_memory(f"memory-maze-gtrxl-{m}")[1]["memory_size"] for m in (64, 128, 256)] == [64, 128, 256]


# GTrXL-256's run (the same command and trainer, another model family, 100 s of compiling) is an extended test.
@pytest.mark.parametrize("preset", ["memory-maze-lstm", pytest.param("memory-maze-gtrxl-256", marks=pytest.mark.extended)])
@pytest.mark.slow(seconds=59)
def test_train_presets_run_on_a_small_memory_maze(preset, tmp_path):
    """The thesis Memory Maze presets of each model family train two PPO updates from the command line, at the
    thesis model sizes, with fewer and shorter environment streams."""
    import csv
    import json

    from memgym.cli import main

    out = tmp_path / "run"
    assert main(["train", "--preset", preset, "--env", "memgym/MemoryMaze-9x9-v0", "--num-envs", "2",
                 "--rollout-length", "4", "--segment-length", "2", "--steps", "16", "--out", str(out)]) == 0
    run = json.loads((out / "run.json").read_text())
    config = run["config"]
    assert (config["memory"], run["kind"], config["epochs"], config["max_grad_norm"]) == (preset, "PPOConfig", 1, 4.0)
    rows = list(csv.DictReader(open(out / "metrics.csv")))
    assert [int(r["env_steps"]) for r in rows] == [8, 16]
    assert all(np.isfinite(float(r[k])) for r in rows for k in ("policy_loss", "value_loss", "entropy"))


#: The guide's CPU-sized Memory Maze command (docs/guide.md): this test runs it (the README's own test, which runs
#: the README and the guide, leaves it here).
README_COMMAND_PREFIX = "memgym train --preset memory-maze-arelit"


def readme_memory_maze_command() -> list[str]:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "guide.md").read_text()
    lines = [line.strip() for line in readme.splitlines() if line.strip().startswith(README_COMMAND_PREFIX)]
    assert len(lines) == 1, lines
    return lines[0].split()


@pytest.mark.slow(seconds=200)
@pytest.mark.extended  # minutes of compiling the thesis AReLiT; the presets' CI run: the test above
def test_the_guides_cpu_sized_run_end_to_end(tmp_path, capsys):
    """The guide's CPU-sized Memory Maze run, as the guide types it (`memgym train --preset memory-maze-arelit`:
    11x11, the thesis AReLiT): the memory figures of its build, the time split, the metrics and the plot."""
    import re

    from memgym.cli import main

    argv = readme_memory_maze_command()[1:]
    out = tmp_path / argv[argv.index("--out") + 1]
    argv[argv.index("--out") + 1] = str(out)
    assert main(argv) == 0
    printed = capsys.readouterr().out
    envs = int(argv[argv.index("--num-envs") + 1])
    assert re.search(rf"building {envs} x memgym/MemoryMaze-11x11-v0: about [\d.]+ GiB of the [\d.]+ GiB available",
                     printed), printed
    assert re.search(r"\(env \d+ s  acting \d+ s  learning \d+ s\)", printed), printed
    assert (out / "metrics.csv").exists() and (out / "learning_curve.png").exists()


@pytest.mark.slow(seconds=20)
def test_the_guides_preset_refuses_what_cannot_fit_before_building_it(tmp_path, capsys):
    """The guide's preset asked for 100,000 environments is refused before any is built: both memory figures, the
    flag and the largest number that fits; no run directory left."""
    import re

    from memgym.cli import main

    refused = tmp_path / "refused"
    assert main(["train", "--preset", "memory-maze-arelit", "--num-envs", "100000", "--steps", "2e7",
                 "--out", str(refused)]) == 2
    message = capsys.readouterr().err
    assert "--num-envs 100000: 100000 x memgym/MemoryMaze-11x11-v0 need about" in message, message
    assert re.search(r"but this machine has [\d.]+ GiB of memory available", message), message
    assert re.search(r"the largest --num-envs that fits is \d+", message), message
    assert not refused.exists()


def test_each_build_refuses_when_memory_has_run_out(monkeypatch):
    """The safety net wherever Memory Maze envs are built in bulk (make_vec, vector env workers): a build
    that would not fit in the memory left is refused with the figures, before it starts."""
    first = MemoryMazeEnv("9x9")
    second = MemoryMazeEnv("9x9")
    try:
        first.reset(seed=0)
        monkeypatch.setattr(mm, "available_bytes", lambda: 2**20)  # 1 MiB left
        with pytest.raises(mm.NotEnoughMemory, match=r"Memory Maze 9x9 environment number \d+ of this process "
                                                      r"needs about [\d.]+ GiB .* has 0.00 GiB of memory available"):
            second.reset(seed=1)
        assert second.task is None
    finally:
        first.close()
        second.close()
