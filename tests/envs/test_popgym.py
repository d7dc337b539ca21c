"""The wrapped POPGym tasks (memgym.envs.popgym) against upstream popgym 1.0.7.

popgym is an optional extra, so the whole module is skipped without it.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

popgym_envs = pytest.importorskip("popgym.envs")

import memgym  # noqa: E402,F401  (registers the environments)
import memgym.envs.popgym as popgym_module  # noqa: E402
from memgym.envs.popgym import (  # noqa: E402
    DIFFICULTIES,
    LABYRINTH_TASKS,
    POPGYM_TASKS,
    PopGymEnv,
    popgym_env_id,
    popgym_env_names,
)

NAMES = popgym_env_names()
EASY = [task + "Easy" for task in POPGYM_TASKS]


def make(name: str, **kwargs) -> PopGymEnv:
    """The registered env as ``gymnasium.make`` builds it, less the passive checker (``check_env`` does more)."""
    env = gym.make(popgym_env_id(name), disable_env_checker=True, **kwargs)
    assert isinstance(env, PopGymEnv)
    return env


def flat_reference(raw_env, obs, action) -> np.ndarray:
    """Independent oracle for the observation layout: gymnasium's own ``spaces.flatten``
    (one-hot Discrete / MultiDiscrete, flattened Box, concatenated Tuple)."""
    parts = [spaces.flatten(raw_env.observation_space, obs).astype(np.float32)]
    if action is None:
        parts.append(np.zeros(spaces.flatdim(raw_env.action_space), np.float32))
    else:
        parts.append(spaces.flatten(raw_env.action_space, action).astype(np.float32))
    return np.concatenate(parts)


def play_episode(env: PopGymEnv, policy, seed: int | None = None):
    """Play one episode; ``policy(first_obs, obs) -> action``. Returns (observations, rewards, infos)."""
    first, _ = env.reset(seed=seed)
    observations, rewards, infos = [first], [], []
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(first, observations[-1]))
        observations.append(obs)
        rewards.append(reward)
        infos.append(info)
        if terminated or truncated:
            return observations, rewards, infos


# ---------------------------------------------------------------------------------------
# Registration


def test_every_task_and_difficulty_is_registered():
    expected = {f"memgym/popgym-{task}{level}-v0" for task in POPGYM_TASKS for level in DIFFICULTIES}
    assert len(expected) == 42
    # (the tasks written in JAX have Gymnasium ids of their own, memgym/popgym-<Name>Jax-v0: test_popgym_jax_*)
    registered = {env_id for env_id in gym.registry if env_id.startswith("memgym/popgym-")
                  and not env_id.endswith("Jax-v0")}
    labyrinth = {f"memgym/popgym-{task}{level}-v0" for task in LABYRINTH_TASKS for level in DIFFICULTIES}
    has_mazelib = hasattr(popgym_envs, "LabyrinthEscapeEasy")
    assert registered == (expected | labyrinth if has_mazelib else expected)
    # memgym wraps exactly the classes popgym registers itself.
    assert {cls.__name__ for cls in popgym_envs.ALL} == {name for name in NAMES}


def test_import_memgym_registers_popgym_without_importing_it():
    code = (
        "import sys, gymnasium, memgym; "
        "assert 'memgym/popgym-RepeatFirstEasy-v0' in gymnasium.registry; "
        "print('popgym' in sys.modules, 'jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


# ---------------------------------------------------------------------------------------
# Gymnasium conformance


@pytest.mark.parametrize("name", NAMES)
def test_check_env_passes(name):
    with warnings.catch_warnings():
        # Upstream spaces draw two kinds of advisory warnings (Pendulum's Box(-2, 2) action
        # space, VelocityOnlyCartPole's infinite bounds) and the Labyrinth classes a
        # DeprecationWarning; none is an error.
        warnings.simplefilter("ignore")
        for prev_action in (True, False):
            check_env(make(name, prev_action=prev_action))


@pytest.mark.parametrize("name", ["CountRecallEasy", "MultiarmedBanditEasy"])
def test_wrapper_fixes_upstream_shared_info_dicts(name):
    raw = getattr(popgym_envs, name)()
    _, raw_reset_info = raw.reset(seed=0)
    _, _, _, _, raw_step_info = raw.step(raw.action_space.sample())
    assert any(raw_reset_info[key] is raw_step_info[key] for key in raw_reset_info.keys() & raw_step_info.keys())
    env = make(name)
    _, reset_info = env.reset(seed=0)
    _, _, _, _, step_info = env.step(env.action_space.sample())
    for key in reset_info.keys() & step_info.keys():
        assert reset_info[key] is not step_info[key]
        before = np.array(reset_info[key], copy=True)
        env.step(env.action_space.sample())
        np.testing.assert_array_equal(reset_info[key], before)


def test_make_vec():
    envs = gym.make_vec(popgym_env_id("RepeatFirstEasy"), num_envs=3)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (3, 8) and obs.dtype == np.float32
    obs, reward, terminated, truncated, _ = envs.step(np.zeros(3, dtype=np.int64))
    assert obs.shape == (3, 8) and reward.shape == (3,)
    envs.close()


# ---------------------------------------------------------------------------------------
# Observation layout, previous action, seeding


@pytest.mark.parametrize("name", EASY)
def test_observation_is_gymnasium_flatten_of_upstream_with_same_seed(name):
    """Wrapped and raw env, same seed and actions: the wrapped observation equals
    ``spaces.flatten`` of the raw one plus the flattened previous action (zeros at reset)."""
    env, raw = make(name), getattr(popgym_envs, name)()
    assert env.observation_space.shape == (
        spaces.flatdim(raw.observation_space) + spaces.flatdim(raw.action_space),
    )
    raw.action_space.seed(3)
    obs, _ = env.reset(seed=7)
    raw_obs, _ = raw.reset(seed=7)
    np.testing.assert_array_equal(obs, flat_reference(raw, raw_obs, None))
    for _ in range(60):
        action = raw.action_space.sample()
        obs, reward, terminated, truncated, _ = env.step(action)
        raw_obs, raw_reward, raw_terminated, raw_truncated, _ = raw.step(action)
        np.testing.assert_array_equal(obs, flat_reference(raw, raw_obs, action))
        assert obs in env.observation_space
        assert (reward, terminated, truncated) == (float(raw_reward), raw_terminated, raw_truncated)
        if terminated or truncated:
            obs, _ = env.reset(seed=11)
            raw_obs, _ = raw.reset(seed=11)
            np.testing.assert_array_equal(obs, flat_reference(raw, raw_obs, None))


@pytest.mark.parametrize("name", ["RepeatFirstEasy", "AutoencodeEasy", "CountRecallHard", "BattleshipEasy",
                                  "MineSweeperMedium", "NoisyPositionOnlyPendulumEasy"])
def test_prev_action_flag_shapes(name):
    raw = getattr(popgym_envs, name)()
    obs_dim, act_dim = spaces.flatdim(raw.observation_space), spaces.flatdim(raw.action_space)
    with_action, without = make(name, prev_action=True), make(name, prev_action=False)
    assert with_action.observation_space.shape == (obs_dim + act_dim,)
    assert without.observation_space.shape == (obs_dim,)
    obs, _ = with_action.reset(seed=0)
    bare, _ = without.reset(seed=0)
    assert obs.shape == (obs_dim + act_dim,) and bare.shape == (obs_dim,)
    np.testing.assert_array_equal(obs[obs_dim:], 0.0)  # no action yet
    np.testing.assert_array_equal(obs[:obs_dim], bare)
    action = raw.action_space.sample()
    obs, *_ = with_action.step(action)
    bare, *_ = without.step(action)
    np.testing.assert_array_equal(obs[obs_dim:], spaces.flatten(raw.action_space, action))
    np.testing.assert_array_equal(obs[:obs_dim], bare)


def test_prev_action_defaults_to_true_and_rejects_non_bools():
    assert make("RepeatFirstEasy").prev_action is True
    with pytest.raises(ValueError, match="prev_action must be True or False, got prev_action=1"):
        make("RepeatFirstEasy", prev_action=1)


@pytest.mark.parametrize("name", EASY)
def test_same_seed_same_observation_sequence(name):
    def rollout(seed: int) -> list[np.ndarray]:
        env = make(name)
        env.action_space.seed(0)
        observations = [env.reset(seed=seed)[0]]
        for _ in range(80):  # crosses episode ends in the short tasks; later resets are unseeded
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            observations += [obs, np.float32([reward])]
            if terminated or truncated:
                observations.append(env.reset()[0])
        return observations

    first, second = rollout(5), rollout(5)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_one_random_generator_the_upstream_one():
    env = make("RepeatFirstEasy")
    env.reset(seed=1)
    assert env.np_random is env.popgym_env.np_random
    assert env.np_random_seed == 1


def test_wrappers_around_the_upstream_env_and_the_spec_rebuilds_it():
    env = gym.make(popgym_env_id("CountRecallEasy"), prev_action=False)
    assert type(env.unwrapped) is popgym_envs.CountRecallEasy
    assert env.unwrapped is env.get_wrapper_attr("popgym_env")
    again = gym.make(env.spec)
    assert str(again) == str(env) and again.observation_space == env.observation_space


# ---------------------------------------------------------------------------------------
# Returns (the analytic facts of RepeatFirst, popgym/envs/repeat_first.py)


@pytest.mark.parametrize("level, decks", [("Easy", 1), ("Medium", 8), ("Hard", 16)])
def test_repeat_first_perfect_policy_returns_exactly_one(level, decks):
    """A 52n-card deck: reset deals the first card, each step deals one more and the
    episode terminates when one card is left, so an episode has 52n - 1 steps (51 on
    Easy), each rewarded +1/(52n - 1) for repeating the first card's suit."""
    env = make("RepeatFirst" + level)
    first_suit = lambda first, obs: int(np.argmax(first[:4]))  # noqa: E731
    observations, rewards, infos = play_episode(env, first_suit, seed=0)
    steps = 52 * decks - 1
    assert len(rewards) == steps and rewards == [1 / steps] * steps
    assert infos[-1]["episode_return"] == 1.0 and infos[-1]["normalized_return"] == 1.0
    assert infos[-1]["episode_length"] == steps
    assert all("normalized_return" not in info for info in infos[:-1])


def test_repeat_first_random_policy_mean_return_is_minus_half():
    """A uniform action is right with probability 1/4 whatever the card, so each of the 51
    steps scores +1/51 w.p. 1/4 and -1/51 w.p. 3/4: return = (2K - 51)/51 with
    K ~ Binomial(51, 1/4), mean -0.5, variance 4 * 51 * (3/16) / 51**2 = 0.75/51
    (sd 0.121). Over 400 episodes the standard error of the mean is 0.0061; the tolerance
    0.025 is 4.1 standard errors (a wrong result for a random seed has odds ~ 1e-4)."""
    env = make("RepeatFirstEasy")
    rng = np.random.default_rng(2024)
    returns = []
    for episode in range(400):
        _, rewards, infos = play_episode(env, lambda first, obs: int(rng.integers(4)), seed=episode)
        returns.append(infos[-1]["episode_return"])
        correct = round((infos[-1]["episode_return"] * 51 + 51) / 2)
        assert math.isclose(infos[-1]["episode_return"], (2 * correct - 51) / 51, abs_tol=1e-12)
    returns = np.array(returns)
    standard_error = math.sqrt(0.75 / 51 / len(returns))
    assert abs(returns.mean() + 0.5) < 0.025
    assert 4 * standard_error < 0.025
    assert returns.std() == pytest.approx(math.sqrt(0.75 / 51), rel=0.15)


@pytest.mark.parametrize("name", EASY)
def test_normalized_return_is_the_clipped_episode_return(name):
    env = make(name)
    env.action_space.seed(0)
    for episode in range(2):
        _, rewards, infos = play_episode(env, lambda first, obs: env.action_space.sample(), seed=episode)
        info = infos[-1]
        assert info["episode_length"] == len(rewards)
        assert info["episode_return"] == math.fsum(rewards)
        assert -1.0 <= info["normalized_return"] <= 1.0
        assert info["normalized_return"] == min(1.0, max(-1.0, info["episode_return"]))


def test_battleship_all_misses_is_below_minus_one_and_clipped():
    """popgym's Battleship scores a miss -1/(L - 12) (L = 64 cells on Easy), so 64 misses
    return -64/52: the one task whose return can leave [-1, 1]."""
    env = make("BattleshipEasy")
    env.reset(seed=0)
    water = np.argwhere(env.popgym_env.board == 0)[0]
    rewards, info = [], {}
    while "normalized_return" not in info:
        _, reward, terminated, truncated, info = env.step(water.astype(np.int64))
        rewards.append(reward)
    assert len(rewards) == 64 and truncated and not terminated
    assert info["episode_return"] == pytest.approx(-64 / 52)
    assert info["normalized_return"] == -1.0


# ---------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    "name, bad",
    [
        ("RepeatFirstEasy", 4),
        ("RepeatFirstEasy", -1),
        ("RepeatFirstEasy", 1.0),
        ("RepeatFirstEasy", True),
        ("BattleshipEasy", np.array([8, 0])),
        ("BattleshipEasy", np.array([1, 2, 3])),
        ("BattleshipEasy", np.array([1.0, 2.0])),
        ("NoisyPositionOnlyPendulumEasy", np.array([2.5], np.float32)),
        ("NoisyPositionOnlyPendulumEasy", np.array([np.nan], np.float32)),
        ("NoisyPositionOnlyPendulumEasy", np.array([[0.0]], np.float32)),
    ],
)
def test_invalid_actions_raise_before_reaching_popgym(name, bad):
    env = make(name)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action") as error:
        env.step(bad)
    message = str(error.value)  # the argument, what is allowed and the value given
    assert message.startswith("action must be ") and f"got action={bad!r}" in message
    assert ("[0, 3]" if name.startswith("RepeatFirst") else "[7, 7]" if name.startswith("Battleship")
            else "[-2.0] to [2.0]") in message
    obs, *_ = env.step(env.action_space.sample())  # the episode goes on
    assert obs in env.observation_space


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True])
def test_invalid_seeds_raise(seed):
    env = make("RepeatFirstEasy")
    with pytest.raises(ValueError, match=rf"seed must be an integer >= 0 \(or None\), got seed={seed!r}"):
        env.reset(seed=seed)
    env.reset(seed=np.int64(3))  # numpy integers are integers
    assert env.np_random_seed == 3


def test_valid_action_forms():
    env = make("RepeatFirstEasy")
    env.reset(seed=0)
    for action in (0, np.int64(1), np.array(2), np.uint8(3)):
        env.step(action)
    battleship = make("BattleshipEasy")
    battleship.reset(seed=0)
    battleship.step([1, 2])
    battleship.step((3, 4))


def test_step_before_reset_and_after_the_end_raise():
    env = make("RepeatFirstEasy")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    play_episode(env, lambda first, obs: 0, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="RepeatFirstEasy"):
        PopGymEnv("NoSuchTask")
    with pytest.raises(ValueError, match="render_mode must be one of None, got render_mode='human'"):
        PopGymEnv("RepeatFirstEasy", render_mode="human")
    with pytest.raises(TypeError, match="env"):
        PopGymEnv(42)


def test_custom_upstream_instance():
    env = PopGymEnv(popgym_envs.RepeatPrevious(num_decks=2, k=8), prev_action=False)
    assert env.name == "RepeatPrevious" and env.observation_space.shape == (4,)
    _, rewards, infos = play_episode(env, lambda first, obs: 0, seed=0)
    assert len(rewards) == 103 and sum(r != 0 for r in rewards) == 104 - 8
    assert -1.0 <= infos[-1]["normalized_return"] <= 1.0


# ---------------------------------------------------------------------------------------
# Other upstream spaces (a custom env): the same layout for every kind of space


class SampledEnv(gym.Env):
    """Observations drawn from ``observation_space`` (the last one kept in ``last``)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space):
        self.observation_space, self.action_space = observation_space, action_space

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        self.last = self.observation_space.sample()
        return self.last, {}

    def step(self, action):
        self.last = self.observation_space.sample()
        return self.last, 0.0, False, False, {}


@pytest.mark.parametrize(
    "obs_space, action_space",
    [
        (spaces.Discrete(5, start=-2), spaces.Discrete(3, start=1)),
        (spaces.MultiDiscrete([3, 4], start=[1, -1]), spaces.MultiDiscrete([2, 3, 2], start=[0, 5, -1])),
        (spaces.Tuple((spaces.Discrete(2, start=3), spaces.Discrete(3))), spaces.Discrete(4)),
        (spaces.Tuple((spaces.Discrete(2), spaces.MultiDiscrete([2, 3]))), spaces.Discrete(2, start=5)),
        (spaces.MultiDiscrete([3] * 20), spaces.Discrete(6)),
        (spaces.Box(-1, 1, (3,), np.float32), spaces.MultiDiscrete([2, 2])),
        (spaces.Tuple((spaces.Discrete(3), spaces.Box(0, 1, (2,), np.float32))), spaces.Discrete(2)),
        (spaces.MultiBinary(4), spaces.Box(-2, 2, (2,), np.float32)),
        (spaces.Discrete(3), spaces.Box(-2, 2, (1,), np.float32)),
        (spaces.Box(-1, 1, (2, 2), np.float32), spaces.MultiDiscrete([[2, 2], [2, 2]])),
        (spaces.Discrete(5000), spaces.Discrete(3)),
    ],
)
@pytest.mark.filterwarnings("ignore:.*precision lowered by casting to float32")  # a mixed Tuple flattens to float64
def test_every_kind_of_space_is_flattened_like_gymnasium(obs_space, action_space):
    """Each observation is ``spaces.flatten`` of the upstream one plus the flattened previous
    action (zeros after reset), a fresh float32 array inside the observation space."""
    for prev_action in (True, False):
        raw = SampledEnv(obs_space, action_space)
        env = PopGymEnv(raw, prev_action=prev_action)
        obs, _ = env.reset(seed=0)
        expected = flat_reference(raw, raw.last, None)
        np.testing.assert_array_equal(obs, expected if prev_action else expected[: spaces.flatdim(obs_space)])
        action_space.seed(1)
        for _ in range(20):
            action = action_space.sample()
            previous = obs
            obs, *_ = env.step(action)
            expected = flat_reference(raw, raw.last, action)
            np.testing.assert_array_equal(obs, expected if prev_action else expected[: spaces.flatdim(obs_space)])
            assert obs.dtype == np.float32 and obs.flags.writeable and obs in env.observation_space
            assert not np.shares_memory(obs, previous)


def test_discrete_action_forms_give_the_same_results():
    """int, numpy integer and 0-d array actions: the same observations, rewards and ends."""
    results = []
    for form in (int, np.int64, np.array):
        env = make("MultiarmedBanditEasy")
        env.reset(seed=3)
        results.append([env.step(form(a))[:4] for a in [0, 3, 9, 3, 1]])
    for result in results[1:]:
        for (obs, *rest), (first_obs, *first_rest) in zip(result, results[0], strict=True):
            np.testing.assert_array_equal(obs, first_obs)
            assert rest == first_rest


# ---------------------------------------------------------------------------------------
# popgym.make: a helpful error for unknown task names


def test_make_helper_accepts_names_and_ids():
    env = popgym_module.make("RepeatFirstEasy", prev_action=False)
    assert env.get_wrapper_attr("name") == "RepeatFirstEasy" and env.observation_space.shape == (4,)
    env = popgym_module.make(popgym_env_id("CountRecallMedium"))
    assert env.spec.id == popgym_env_id("CountRecallMedium")


@pytest.mark.parametrize(
    "name, hint",
    [
        ("Foo", None),
        ("RepeatFirst", "'RepeatFirstEasy' / 'RepeatFirstMedium' / 'RepeatFirstHard'"),
        ("RepeatFristEasy", "'RepeatFirstEasy'"),
        ("memgym/popgym-CountRecalEasy-v0", "'CountRecallEasy'"),
    ],
)
def test_make_helper_lists_valid_names_for_unknown_tasks(name, hint):
    with pytest.raises(ValueError) as error:
        popgym_module.make(name)
    message = str(error.value)
    assert repr(name) in message and "families: RepeatFirst, RepeatPrevious" in message
    assert "Easy, Medium, Hard" in message and "MineSweeper" in message
    if hint is None:
        assert "did you mean" not in message
    else:
        assert f"did you mean {hint}" in message or hint in message
    # gymnasium's own error for the same id names no valid task
    with pytest.raises(gym.error.Error):
        gym.make(name if name.startswith("memgym/") else popgym_env_id(name))
