"""The JAX T-Maze through Gymnasium's own surface: ``gymnasium.make_vec`` (the native vmapped vector
env), the async modes, and pickling / deep-copying the single-env adapter."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import textwrap
import time

import gymnasium as gym
import numpy as np
import pytest

import memgym  # noqa: F401  (registers the ids)
from memgym.envs.tmaze import gray_code_bits

UP, LEFT, RIGHT = 0, 2, 3


def test_make_vec_gives_one_vmapped_env_not_n_copies():
    envs = gym.make_vec("memgym/TMazeJax-v0", num_envs=64, corridor_length=5)
    assert type(envs).__name__ == "GymnasiumVectorAdapter" and envs.num_envs == 64
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.SAME_STEP
    assert envs.single_observation_space == gym.spaces.Box(0.0, 1.0, (16,), np.float32)
    assert envs.single_action_space == gym.spaces.Discrete(4)
    obs, _ = envs.reset(seed=3)
    assert obs.shape == (64, 16) and obs.dtype == np.float32
    again, _ = envs.reset(seed=3)
    np.testing.assert_array_equal(obs[:, :10], again[:, :10])  # same seed, same cues and positions
    sync = gym.make_vec("memgym/TMazeJax-v0", num_envs=2, vectorization_mode="sync", corridor_length=5)
    assert isinstance(sync, gym.vector.SyncVectorEnv)  # the other modes stay available


def test_an_optimal_policy_wins_every_episode_and_a_timeout_is_reported():
    length, limit, n = 6, 12, 32
    envs = gym.make_vec("memgym/TMazeJax-v0", num_envs=n, corridor_length=length, max_episode_steps=limit)
    obs, _ = envs.reset(seed=0)
    turn = np.where(obs[:, 0] == 1, RIGHT, LEFT)  # cue 10: reward on the right
    for step in range(length - 1):
        obs, reward, terminated, truncated, info = envs.step(np.full(n, UP))
        np.testing.assert_array_equal(obs[:, 2:10], np.tile(gray_code_bits(step + 1, 8), (n, 1)))
        assert not terminated.any() and not truncated.any() and not obs[:, :2].any()  # the cue is gone
        np.testing.assert_allclose(reward, -0.1)
    obs, reward, terminated, truncated, info = envs.step(turn)
    assert terminated.all() and not truncated.any() and info["success"].all()
    np.testing.assert_allclose(reward, 4.0)
    assert info["_final_obs"].all() and (info["final_obs"][:, 2:10] == gray_code_bits(length - 1, 8)).all()
    assert (obs[:, :2].sum(1) == 1).all()  # auto-reset in the same step: a fresh cue
    for _ in range(limit):  # bump the bottom wall until the time limit
        obs, reward, terminated, truncated, info = envs.step(np.full(n, 1))
    assert truncated.all() and not terminated.any() and not info["success"].any()


def test_the_vector_env_pickles_mid_episode():
    envs = gym.make_vec("memgym/TMazeJax-v0", num_envs=3, corridor_length=8)
    envs.reset(seed=2)
    envs.step(np.zeros(3, int))
    twin = pickle.loads(pickle.dumps(envs))
    for actions in ([0, 0, 0], [1, 2, 0], [3, 3, 3]):
        expected, got = envs.step(np.array(actions)), twin.step(np.array(actions))
        for a, b in zip(expected[:4], got[:4]):
            np.testing.assert_array_equal(a, b)


def test_bad_actions_seeds_and_render_modes_are_refused_by_name():
    envs = gym.make_vec("memgym/TMazeJax-v0", num_envs=4)
    with pytest.raises(RuntimeError, match="reset"):
        envs.step(np.zeros(4, int))
    envs.reset(seed=0)
    for bad in (np.zeros(3, int), np.array([0, 1, 2, 4]), np.array([0.5, 0, 0, 0])):
        with pytest.raises(ValueError, match="actions"):
            envs.step(bad)
    for seed in ([1, 2], 1.5, "x", [0, 1, 2, -1]):
        with pytest.raises(ValueError, match="seed"):
            envs.reset(seed=seed)
    with pytest.raises(ValueError, match="corridor_length must be one integer"):
        gym.make_vec("memgym/TMazeJax-v0", num_envs=2, corridor_length=[2, 4])
    with pytest.raises(ValueError, match="max_episode_steps"):
        gym.make_vec("memgym/TMazeJax-v0", num_envs=2, max_steps_in_episode=9)
    with pytest.raises(ValueError, match="num_envs"):
        gym.make_vec("memgym/TMazeJax-v0", num_envs=0)
    with pytest.raises(ValueError, match="render"):
        gym.make_vec("memgym/TMazeJax-v0", num_envs=2, render_mode="rgb_array")


def test_async_with_fork_fails_at_once_with_the_way_out():
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="spawn"):
        gym.make_vec("memgym/TMazeJax-v0", num_envs=2, vectorization_mode="async",
                     vector_kwargs={"context": "fork"})
    assert time.perf_counter() - start < 30


@pytest.mark.slow
def test_async_with_spawn_works():
    code = textwrap.dedent("""
        import gymnasium as gym, numpy as np, memgym
        envs = gym.make_vec("memgym/TMazeJax-v0", num_envs=2, vectorization_mode="async",
                            vector_kwargs={"context": "spawn"}, corridor_length=3)
        obs, _ = envs.reset(seed=0)
        obs, reward, *_ = envs.step(np.zeros(2, int))
        print(obs.shape, np.round(reward, 6).tolist())
        envs.close()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(2, 16) [-0.1, -0.1]"


@pytest.mark.parametrize("clone", [lambda env: pickle.loads(pickle.dumps(env)), copy.deepcopy])
def test_the_adapter_pickles_and_deep_copies_mid_episode(clone):
    env = gym.make("memgym/TMazeJax-v0", corridor_length=8)
    env.reset(seed=5)
    for _ in range(3):
        env.step(UP)
    twin = clone(env)
    for action in (UP, UP, 1, LEFT):
        expected, got = env.step(action), twin.step(action)
        np.testing.assert_array_equal(expected[0], got[0])  # distractors too: the key was carried over
        assert expected[1:4] == got[1:4]
    fresh = clone(gym.make("memgym/TMazeJax-v0", corridor_length=8))  # never reset: still refuses to step
    with pytest.raises((RuntimeError, gym.error.ResetNeeded), match="reset"):
        fresh.step(UP)
