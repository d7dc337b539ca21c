"""The wrapped POPGym tasks (memgym.envs.popgym) against upstream popgym 1.0.7.

popgym is an optional extra, so the whole module is skipped without it.
"""

from __future__ import annotations

import itertools
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
    return gym.make(popgym_env_id(name), **kwargs).unwrapped


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
    registered = {env_id for env_id in gym.registry if env_id.startswith("memgym/popgym-")}
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
    with pytest.raises(ValueError, match="prev_action"):
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
    with pytest.raises(ValueError, match="action"):
        env.step(bad)
    obs, *_ = env.step(env.action_space.sample())  # the episode goes on
    assert obs in env.observation_space


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
    with pytest.raises(ValueError, match="render_mode"):
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
# The fast observation encoders (precomputed rows) against the reference encoding


def all_values(space: spaces.Space) -> list:
    """Every value of a small all-discrete space (an independent enumeration)."""
    if isinstance(space, spaces.Discrete):
        return [int(space.start) + i for i in range(int(space.n))]
    if isinstance(space, spaces.MultiDiscrete):
        ranges = [range(s, s + n) for s, n in zip(space.start.tolist(), space.nvec.tolist())]
        return [np.array(combo, dtype=space.dtype) for combo in itertools.product(*ranges)]
    assert isinstance(space, spaces.Tuple)
    return [tuple(combo) for combo in itertools.product(*(all_values(sub) for sub in space.spaces))]


def cardinality(space: spaces.Space) -> float:
    """Number of values of a discrete space (inf for Box and the like)."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return math.prod(space.nvec.reshape(-1).tolist())
    if isinstance(space, spaces.Tuple):
        return math.prod(cardinality(sub) for sub in space.spaces)
    return math.inf


def some_values(space: spaces.Space, count: int = 40) -> list:
    """All values of a small discrete space, else ``count`` samples."""
    if cardinality(space) <= 2000 and not (isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim > 1):
        return all_values(space)
    space.seed(0)
    return [space.sample() for _ in range(count)]


def assert_encoders_match_reference(obs_space, action_space, expected_kind=None):
    """Every (observation, action) pair -- or a sample of them -- encodes exactly as
    ``spaces.flatten`` does, after reset (zero action slot) and after a step."""
    for with_action in (True, False):
        size, low, high, encode_reset, encode_step, kind = popgym_module._observation_encoders(
            obs_space, action_space if with_action else None
        )
        if expected_kind is not None and with_action:
            assert kind == expected_kind
        check = popgym_module._action_checker(action_space)
        box = spaces.Box(low, high, (size,), np.float32)
        for obs in some_values(obs_space):
            flat_obs = spaces.flatten(obs_space, obs).astype(np.float32)
            zeros = np.zeros(spaces.flatdim(action_space) if with_action else 0, np.float32)
            first = encode_reset(obs)
            np.testing.assert_array_equal(first, np.concatenate([flat_obs, zeros]))
            assert first.dtype == np.float32 and first.flags.writeable and first in box
            for action in some_values(action_space, 5):
                out = encode_step(obs, check(action))
                expected = flat_obs
                if with_action:
                    expected = np.concatenate([flat_obs, spaces.flatten(action_space, action).astype(np.float32)])
                np.testing.assert_array_equal(out, expected)
                out[:] = 7.0  # a fresh array each call: writing it changes no later output
            np.testing.assert_array_equal(encode_reset(obs), first)


@pytest.mark.parametrize(
    "name",
    ["RepeatFirstEasy", "RepeatPreviousHard", "AutoencodeHard", "CountRecallHard", "MultiarmedBanditHard",
     "HigherLowerEasy", "BattleshipMedium", "MineSweeperHard", "ConcentrationEasy", "PositionOnlyCartPoleEasy",
     "NoisyPositionOnlyPendulumEasy"],
)
def test_fast_encoders_equal_reference_encoding_of_every_value(name):
    raw = getattr(popgym_envs, name)()
    assert_encoders_match_reference(raw.observation_space, raw.action_space)


@pytest.mark.parametrize(
    "obs_space, action_space, kind",
    [
        (spaces.Discrete(5, start=-2), spaces.Discrete(3, start=1), "table"),
        (spaces.MultiDiscrete([3, 4], start=[1, -1]), spaces.MultiDiscrete([2, 3, 2], start=[0, 5, -1]), "table"),
        (spaces.Tuple((spaces.Discrete(2, start=3), spaces.Discrete(3))), spaces.Discrete(4), "table"),
        (spaces.Tuple((spaces.Discrete(2), spaces.MultiDiscrete([2, 3]))), spaces.Discrete(2, start=5), "table"),
        (spaces.MultiDiscrete([3] * 20), spaces.Discrete(6), "action table"),
        (spaces.Box(-1, 1, (3,), np.float32), spaces.MultiDiscrete([2, 2]), "action table"),
        (spaces.Tuple((spaces.Discrete(3), spaces.Box(0, 1, (2,), np.float32))), spaces.Discrete(2), "action table"),
        (spaces.MultiBinary(4), spaces.Box(-2, 2, (2,), np.float32), "zeros"),
        (spaces.Discrete(3), spaces.Box(-2, 2, (1,), np.float32), "zeros"),
        (spaces.Box(-1, 1, (2, 2), np.float32), spaces.MultiDiscrete([[2, 2], [2, 2]]), "zeros"),
        (spaces.Discrete(5000), spaces.Discrete(3), "action table"),
    ],
)
def test_every_encoding_strategy_equals_reference(obs_space, action_space, kind):
    assert_encoders_match_reference(obs_space, action_space, kind)


def test_table_encoders_take_numpy_integer_observations():
    _, _, _, encode_reset, encode_step, kind = popgym_module._observation_encoders(
        spaces.Discrete(4), spaces.Discrete(4)
    )
    assert kind == "table"
    np.testing.assert_array_equal(encode_step(np.int64(2), 3), encode_step(2, 3))
    np.testing.assert_array_equal(encode_reset(np.int32(1)), encode_reset(1))


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
    assert env.unwrapped.name == "RepeatFirstEasy" and env.observation_space.shape == (4,)
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
