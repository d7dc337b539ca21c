"""The Gymnasium T-Maze against the spec (thesis §5.1.1; spec in docs/architecture.md)."""

from __future__ import annotations

import math
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import memgym  # noqa: F401
from memgym.envs.tmaze import TMazeEnv, gray_code, gray_code_bits


def run_policy(env: TMazeEnv, policy, seed: int, goal: int | None = None):
    """Play one episode; ``policy(obs, env) -> action``. Returns (observations, rewards, last info, terminated, truncated)."""
    obs, _ = env.reset(seed=seed, options=None if goal is None else {"goal": goal})
    observations, rewards = [obs], []
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(observations, env))
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return observations, rewards, info, terminated, truncated


def optimal(observations, env):
    goal = 1 if observations[0][0] == 1.0 else 0
    return 2 + goal if env.position == env.corridor_length - 1 else 0


def wrong_turn(observations, env):
    goal = 1 if observations[0][0] == 1.0 else 0
    return 2 + (1 - goal) if env.position == env.corridor_length - 1 else 0


def test_check_env_passes():
    check_env(gym.make("memgym/TMaze-v0", corridor_length=7, render_mode="ansi").unwrapped, skip_render_check=False)
    check_env(gym.make("memgym/TMaze-v0", corridor_length=200).unwrapped)


def test_registered_and_make_vec_work_after_import():
    env = gym.make("memgym/TMaze-v0", corridor_length=200)
    assert env.unwrapped.corridor_length == 200
    assert env.observation_space.shape == (16,)
    envs = gym.make_vec("memgym/TMaze-v0", num_envs=4, corridor_length=3)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 16)
    for _ in range(2):
        obs, reward, terminated, truncated, info = envs.step(np.zeros(4, dtype=np.int64))
    np.testing.assert_allclose(reward, -0.1)
    obs, reward, terminated, truncated, info = envs.step(np.full(4, 2))
    assert terminated.all() and info["success"].dtype == bool
    envs.close()


def test_import_memgym_does_not_import_jax():
    code = "import sys, memgym, memgym.envs, gymnasium; gymnasium.make('memgym/TMaze-v0'); print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("bits", [1, 2, 3, 8, 10])
def test_gray_code_is_a_bijection_with_single_bit_neighbours(bits):
    positions = np.arange(2**bits)
    codes = gray_code(positions)
    assert sorted(codes.tolist()) == positions.tolist()
    table = gray_code_bits(positions, bits)
    assert table.shape == (2**bits, bits) and set(np.unique(table)) <= {0.0, 1.0}
    assert len({row.tobytes() for row in table}) == 2**bits
    np.testing.assert_array_equal(np.abs(np.diff(table, axis=0)).sum(axis=1), 1)
    # MSB first: the code of 2**(bits-1) (gray 11000...) starts with a one.
    assert table[2 ** (bits - 1)][0] == 1.0 and table[1][-1] == 1.0


def test_observation_layout_and_cue_only_first():
    env = TMazeEnv(corridor_length=10)
    for goal, cue in ((0, [0.0, 1.0]), (1, [1.0, 0.0])):
        observations, *_ = run_policy(env, optimal, seed=3, goal=goal)
        assert observations[0].dtype == np.float32 and observations[0].shape == (16,)
        np.testing.assert_array_equal(observations[0][:2], cue)
        for obs in observations[1:]:
            np.testing.assert_array_equal(obs[:2], [0.0, 0.0])
        # gray code of the position: 0 at the start, then positions 1..9 while walking up
        for position, obs in enumerate(observations[:10]):
            np.testing.assert_array_equal(obs[2:10], gray_code_bits(position, 8))


@pytest.mark.parametrize("length", list(range(1, 257)))
def test_optimal_policy_succeeds_with_optimal_return(length):
    env = TMazeEnv(corridor_length=length)
    for seed in (0, 1):
        _, rewards, info, terminated, truncated = run_policy(env, optimal, seed=seed)
        assert terminated and not truncated and info["success"] is True
        assert len(rewards) == length  # L-1 moves up, then one turn
        assert math.isclose(sum(rewards), 4 - 0.1 * (length - 1), rel_tol=0, abs_tol=1e-9)


@pytest.mark.parametrize("length", [1, 2, 50, 200])
def test_wrong_turn_always_fails(length):
    env = TMazeEnv(corridor_length=length)
    for seed in range(5):
        _, rewards, info, terminated, _ = run_policy(env, wrong_turn, seed=seed)
        assert terminated and info["success"] is False and rewards[-1] == -1.0


def test_walls_bump_and_clamp():
    env = TMazeEnv(corridor_length=3)
    env.reset(seed=0)
    for action, position in ((1, 0), (2, 0), (3, 0), (0, 1), (2, 1), (0, 2), (0, 2), (1, 1), (0, 2)):
        _, reward, terminated, truncated, _ = env.step(action)
        assert (env.position, reward, terminated, truncated) == (position, -0.1, False, False)


def test_timeout_truncates_and_counts_as_failure():
    env = TMazeEnv(corridor_length=10, max_episode_steps=5)
    _, rewards, info, terminated, truncated = run_policy(env, lambda o, e: 0, seed=0)
    assert truncated and not terminated and info["success"] is False and len(rewards) == 5
    # A turn on the last allowed step terminates (and is not also a truncation).
    env = TMazeEnv(corridor_length=3, max_episode_steps=3)
    _, rewards, info, terminated, truncated = run_policy(env, optimal, seed=0)
    assert terminated and not truncated and info["success"]
    # The limit given to gymnasium.make(..., max_episode_steps=N) ends episodes as failures too.
    wrapped = gym.make("memgym/TMaze-v0", corridor_length=10, max_episode_steps=4)
    wrapped.reset(seed=0)
    for _ in range(4):
        _, _, terminated, truncated, info = wrapped.step(0)
    assert truncated and not terminated and info["success"] is False


def wrapper_chain(env: gym.Env) -> list[str]:
    names = []
    while isinstance(env, gym.Wrapper):
        names.append(type(env).__name__)
        env = env.env
    return names


def test_time_limit_given_to_gymnasium_make_is_the_envs_own():
    """One owner: gymnasium.make's max_episode_steps becomes the T-Maze's limit, with no TimeLimit over it."""
    env = gym.make("memgym/TMaze-v0", corridor_length=10, max_episode_steps=200)
    assert "TimeLimit" not in wrapper_chain(env) and env.unwrapped.max_episode_steps == 200
    assert env.spec.kwargs["max_episode_steps"] == 200
    rebuilt = gym.make(env.spec)  # the spec rebuilds the same env
    assert rebuilt.unwrapped.max_episode_steps == 200 and "TimeLimit" not in wrapper_chain(rebuilt)
    # a limit above the default: the env runs past its default of 1,000 steps
    long = gym.make("memgym/TMaze-v0", corridor_length=10, max_episode_steps=1500)
    long.reset(seed=0)
    for step in range(1, 1501):
        _, _, terminated, truncated, _ = long.step(1)
        if terminated or truncated:
            break
    assert step == 1500 and truncated and not terminated
    assert gym.make("memgym/TMaze-v0").unwrapped.max_episode_steps == 1000
    assert gym.make("memgym/TMaze-v0", max_episode_steps=-1).unwrapped.max_episode_steps == 1000  # Gymnasium's "none"
    vector = gym.make_vec("memgym/TMaze-v0", num_envs=2, max_episode_steps=9)
    assert [e.unwrapped.max_episode_steps for e in vector.envs] == [9, 9]
    with pytest.raises(ValueError, match="max_episode_steps"):
        gym.make("memgym/TMaze-v0", max_episode_steps=True)


def test_distractors_are_fair_and_fresh():
    env = TMazeEnv(corridor_length=200, num_distractors=6)
    env.reset(seed=0)
    rows = np.array([env.step(1)[0][10:] for _ in range(20_000)])
    assert rows.shape == (20_000, 6)
    assert np.all(np.abs(rows.mean(axis=0) - 0.5) < 0.02)
    changed = np.any(rows[1:] != rows[:-1], axis=1).mean()
    assert abs(changed - (1 - 0.5**6)) < 0.02


@pytest.mark.parametrize("num_distractors", [0, 1, 40])
def test_num_distractors_sets_observation_size(num_distractors):
    env = TMazeEnv(corridor_length=4, num_distractors=num_distractors, gray_bits=3)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2 + 3 + num_distractors,) == env.observation_space.shape


def test_same_seed_same_episode_different_seed_differs():
    def episode(seed):
        env = TMazeEnv(corridor_length=30)
        actions = np.random.default_rng(seed).integers(0, 4, 300)
        obs, _ = env.reset(seed=seed)
        out = [obs]
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(int(action))
            out.append(np.append(obs, [reward, terminated, truncated, info["success"]]))
            if terminated or truncated:
                out.append(env.reset()[0])
        return np.concatenate(out)

    np.testing.assert_array_equal(episode(5), episode(5))
    assert not np.array_equal(episode(5), episode(6))


def test_goal_is_uniform_over_resets():
    env = TMazeEnv(corridor_length=2)
    env.reset(seed=0)
    goals = []
    for _ in range(4000):
        env.reset()
        goals.append(env.goal)
    assert abs(np.mean(goals) - 0.5) < 0.03


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(corridor_length=0), "corridor_length"),
        (dict(corridor_length=257), "corridor_length"),
        (dict(corridor_length=9, gray_bits=3), "corridor_length"),
        (dict(corridor_length=12.0), "corridor_length"),
        (dict(corridor_length="12"), "corridor_length"),
        (dict(num_distractors=-1), "num_distractors"),
        (dict(max_episode_steps=0), "max_episode_steps"),
        (dict(gray_bits=0), "gray_bits"),
        (dict(render_mode="human"), "render_mode"),
    ],
)
def test_bad_configuration_is_rejected_with_a_clear_message(kwargs, name):
    with pytest.raises(ValueError, match=name) as error:
        TMazeEnv(**kwargs)
    assert repr(next(iter(kwargs.values()))) in str(error.value) or str(next(iter(kwargs.values()))) in str(error.value)


@pytest.mark.parametrize("action", [-1, 4, 1.0, "up", None])
def test_bad_action_is_rejected(action):
    env = TMazeEnv(corridor_length=5)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action must be an integer in \[0, 3\]"):
        env.step(action)


def test_bad_goal_option_is_rejected():
    with pytest.raises(ValueError, match="goal"):
        TMazeEnv(corridor_length=5).reset(seed=0, options={"goal": 2})


def test_render_ansi_and_rgb():
    env = TMazeEnv(corridor_length=5, render_mode="ansi")
    env.reset(seed=0, options={"goal": 1})
    text = env.render()
    assert "A" in text and "cue: right" in text and "step 0" in text and "[R]*" in text
    env.step(0)
    text = env.render()
    assert "cue: hidden" in text and "position 1/4" in text and "*" not in text
    env = TMazeEnv(corridor_length=200, render_mode="rgb_array")
    env.reset(seed=0, options={"goal": 0})
    image = env.render()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert image.shape[0] <= 64 and image.shape[1] <= 600
    green = np.all(image == (40, 200, 60), axis=-1)
    assert green[: image.shape[0] // 3].any() and not green[2 * image.shape[0] // 3 :].any()  # left arm lit


@settings(max_examples=50, deadline=None)
@given(length=st.integers(1, 256), actions=st.lists(st.integers(0, 3), max_size=300))
def test_position_always_in_corridor(length, actions):
    env = TMazeEnv(corridor_length=length, max_episode_steps=1000)
    env.reset(seed=0)
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        assert 0 <= env.position < length
        assert reward in (-0.1, 4.0, -1.0) and terminated == (reward != -0.1)
        if terminated:
            env.reset()
