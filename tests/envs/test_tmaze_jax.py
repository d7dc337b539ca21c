"""The pure-JAX T-Maze twin: functional API, vmapping over corridor lengths, parity with Gymnasium;
the episode statistics wrapper and stateful wrappers of :mod:`memgym.envs.functional` on it.

The tests step environments as memgym's own code does, through :mod:`memgym.envs.gymnax_compat`
(six values under gymnax 1.0 and 0.0.9 alike); the installed gymnax's own contract is checked by
``test_step_and_step_env_follow_the_installed_gymnax``."""

from __future__ import annotations

import dataclasses
import functools

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnax.environments import spaces as gymnax_spaces
from hypothesis import given, settings
from hypothesis import strategies as st

import memgym  # noqa: F401
from memgym.envs import gymnax_compat
from memgym.envs.functional import EpisodeStatistics, StatefulWrapper, track_episodes
from memgym.envs.tmaze import TMazeEnv
from memgym.envs.tmaze_jax import TMazeJax, make_gymnasium_tmaze, tmaze_params

ENV = TMazeJax()
STATS_ENV = EpisodeStatistics(ENV)



def six_values(env, method=gymnax_compat.step):
    """``env``'s auto-resetting step (or, with ``gymnax_compat.step_env``, one transition without reset) as
    six values like Gymnasium's step, jitted: ``(key, state, action, params) -> (obs, state, reward,
    terminated, truncated, info)``."""
    return jax.jit(functools.partial(method, env))


STEP = six_values(ENV)
STEP_ENV = six_values(ENV, gymnax_compat.step_env)

RESET = jax.jit(ENV.reset)


def test_check_env_on_the_adapter():
    check_env(gym.make("memgym/TMazeJax-v0", corridor_length=6, render_mode="ansi").unwrapped, skip_render_check=False)


def test_adapter_renders_like_the_gymnasium_env():
    adapter = make_gymnasium_tmaze(corridor_length=9, render_mode="rgb_array")
    adapter.reset(seed=0)
    goal = int(adapter.state.goal)
    native = TMazeEnv(corridor_length=9, render_mode="rgb_array")
    native.reset(seed=0, options={"goal": goal})
    np.testing.assert_array_equal(adapter.render(), native.render())
    with pytest.raises(ValueError, match="render_mode"):
        make_gymnasium_tmaze(corridor_length=9, render_mode="human")


def _run_jax(length: int, actions: np.ndarray, seed: int, max_steps: int = 1000):
    """Step the twin (no auto-reset) until the episode ends or the actions run out."""
    params = tmaze_params(corridor_length=length, max_episode_steps=max_steps)
    key = jax.random.key(seed)
    key, k = jax.random.split(key)
    obs, state = RESET(k, params)
    out = dict(obs=[np.asarray(obs)], position=[0], reward=[], terminated=[], truncated=[], success=[])
    for action in actions:
        key, k = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = STEP_ENV(k, state, action, params)
        out["obs"].append(np.asarray(obs))
        out["position"].append(int(state.position))
        out["reward"].append(np.float32(reward))
        out["terminated"].append(bool(terminated))
        out["truncated"].append(bool(truncated))
        out["success"].append(bool(info["success"]))
        if terminated or truncated:
            break
    return out, int(state.goal)


def _run_gym(length: int, actions, goal: int, max_steps: int = 1000):
    env = TMazeEnv(corridor_length=length, max_episode_steps=max_steps)
    obs, _ = env.reset(seed=0, options={"goal": goal})
    out = dict(obs=[obs], position=[0], reward=[], terminated=[], truncated=[], success=[])
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(int(action))
        out["obs"].append(obs)
        out["position"].append(env.position)
        out["reward"].append(np.float32(reward))
        out["terminated"].append(terminated)
        out["truncated"].append(truncated)
        out["success"].append(info["success"])
        if terminated or truncated:
            break
    return out


@settings(max_examples=40, deadline=None)
@given(
    length=st.integers(1, 256),
    seed=st.integers(0, 2**16),
    max_steps=st.integers(1, 80),
    data=st.data(),
)
def test_parity_with_gymnasium_version(length, seed, max_steps, data):
    """Same cue + same actions ⇒ same positions, gray codes, cue bits, rewards, flags, success."""
    # Bias actions towards 'up' so that long corridors are actually traversed.
    actions = np.array(
        data.draw(st.lists(st.sampled_from([0, 0, 0, 0, 1, 2, 3]), min_size=1, max_size=80)), dtype=np.int32
    )
    jax_out, goal = _run_jax(length, actions, seed, max_steps)
    gym_out = _run_gym(length, actions, goal, max_steps)
    for field in ("position", "reward", "terminated", "truncated", "success"):
        assert jax_out[field] == gym_out[field], field
    for a, b in zip(jax_out["obs"], gym_out["obs"], strict=True):
        np.testing.assert_array_equal(a[:10], b[:10])  # cue + gray code (distractors are random)


def test_parity_on_full_optimal_and_wrong_episodes():
    for length in (1, 2, 120, 200, 256):
        for turn_offset in (0, 1):
            _, goal = _run_jax(length, np.array([], np.int32), seed=length)
            actions = np.array([0] * (length - 1) + [2 + (goal ^ turn_offset)], dtype=np.int32)
            jax_out, _ = _run_jax(length, actions, seed=length)
            gym_out = _run_gym(length, actions, goal)
            assert jax_out["success"][-1] == (turn_offset == 0) == gym_out["success"][-1]
            assert jax_out["reward"] == gym_out["reward"]


def _rollout(params, key, policy: str, steps: int):
    """Auto-reset rollout of a batch of envs (``params`` batched) with episode statistics, inside one jit."""
    n = params.corridor_length.shape[0]

    @jax.jit
    def run(key):
        keys = jax.random.split(key, n)
        obs, state = jax.vmap(STATS_ENV.reset)(keys, params)

        def body(carry, key):
            obs, state, goal_memory = carry
            goal_memory = jnp.where(state.inner.time == 0, obs[:, 0].astype(jnp.int32), goal_memory)
            at_junction = state.inner.position == params.corridor_length - 1
            turn = 2 + (goal_memory if policy == "optimal" else 1 - goal_memory)
            action = jnp.where(at_junction, turn, 0)
            obs, state, reward, term, trunc, info = jax.vmap(six_values(STATS_ENV))(
                jax.random.split(key, n), state, action, params
            )
            return (obs, state, goal_memory), (reward, info)

        _, (rewards, infos) = jax.lax.scan(body, (obs, state, jnp.zeros(n, jnp.int32)), jax.random.split(key, steps))
        return rewards, infos

    return run(key)


@pytest.mark.slow(seconds=13)
def test_vmap_over_mixed_lengths_matches_per_length_runs_and_reports_episode_stats():
    lengths = np.array([1, 5, 120, 200, 37])
    params = tmaze_params(corridor_length=lengths)
    rewards, infos = _rollout(params, jax.random.key(0), "optimal", 450)
    done = np.asarray(infos["done"])
    for i, length in enumerate(lengths):
        # Same env alone gives the same stream (optimal actions do not depend on noise).
        single_rewards, single_infos = _rollout(tmaze_params(corridor_length=lengths[i : i + 1]), jax.random.key(0), "optimal", 450)
        np.testing.assert_array_equal(np.asarray(single_rewards)[:, 0], np.asarray(rewards)[:, i])
        # Episode statistics: every finished episode is a success of length L with the optimal return.
        finished = done[:, i]
        assert finished.sum() == 450 // length
        assert np.asarray(infos["success"])[finished, i].all()
        np.testing.assert_array_equal(np.asarray(infos["episode_length"])[finished, i], length)
        np.testing.assert_allclose(np.asarray(infos["episode_return"])[finished, i], 4 - 0.1 * (length - 1), atol=1e-4)
        assert not np.asarray(infos["success"])[~finished, i].any()


def test_wrong_policy_never_succeeds_and_timeouts_are_failures():
    params = tmaze_params(corridor_length=np.array([3, 50]))
    _, infos = _rollout(params, jax.random.key(1), "wrong", 200)
    assert np.asarray(infos["done"]).sum() > 0 and not np.asarray(infos["success"]).any()
    params = tmaze_params(corridor_length=np.array([100, 100]), max_episode_steps=np.array([10, 10]))
    rewards, infos = _rollout(params, jax.random.key(2), "optimal", 35)
    done = np.asarray(infos["done"])
    assert done.sum() == 2 * 3 and not np.asarray(infos["success"]).any()
    np.testing.assert_array_equal(np.asarray(infos["episode_length"])[done], 10)


def test_auto_reset_starts_a_fresh_episode_with_a_visible_cue():
    params = tmaze_params(corridor_length=2)
    key = jax.random.key(3)
    obs, state = ENV.reset(key, params)
    obs, state, reward, term, trunc, info = STEP(key, state, 0, params)
    assert not term and int(state.position) == 1 and float(obs[:2].sum()) == 0.0
    obs, state, reward, term, trunc, info = STEP(key, state, 2, params)
    assert term and int(state.position) == 0 and int(state.time) == 0 and float(obs[:2].sum()) == 1.0
    assert float(info["final_observation"][:2].sum()) == 0.0 and info["final_observation"][2:10].tolist() == [0] * 7 + [1]


def test_step_and_step_env_follow_the_installed_gymnax():
    """The environments' own ``step``/``step_env`` return what the installed gymnax expects — 1.0: six values
    (``step_env``: five, the time limit left to ``is_truncated``); 0.0.9: five, ``done = terminated | truncated``
    fourth, the flags and the final observation in ``info`` — and memgym's six values agree with them."""
    params = tmaze_params(corridor_length=2, max_episode_steps=3)
    for env in (ENV, STATS_ENV):
        key = jax.random.key(4)
        _, state = env.reset(key, params)
        script = [(1, None), (1, None), (1, "truncated"), (0, None), ("turn", "terminated")]  # a timeout, then a win
        for t, (action, end) in enumerate(script):
            key = jax.random.fold_in(key, t)
            tmaze_state = getattr(state, "inner", state)
            action = 2 + int(tmaze_state.goal) if action == "turn" else action
            obs, after, reward, terminated, truncated, info = gymnax_compat.step(env, key, state, action, params)
            assert (bool(terminated), bool(truncated)) == (end == "terminated", end == "truncated")
            assert int(getattr(after, "inner", after).time) == (0 if end else t % 3 + 1)  # auto-reset on either
            assert float(info["final_observation"][:2].sum()) == 0.0  # the cue shows in the first observation only
            if end:  # the next episode's first observation, with its cue; the finished one's last in info
                assert float(obs[:2].sum()) == 1.0
            else:
                np.testing.assert_array_equal(info["final_observation"], obs)
            native = env.step(key, state, action, params)
            native_one = env.step_env(key, state, action, params)
            assert len(native_one) == 5 and float(native_one[2]) == float(reward)
            if gymnax_compat.FIVE_VALUE_STEP:
                assert len(native) == 5 and bool(native[3]) == bool(native_one[3]) == (end is not None)
                for name, flag in (("terminated", terminated), ("truncated", truncated)):
                    assert bool(native[4][name]) == bool(native_one[4][name]) == bool(flag)
                np.testing.assert_array_equal(native_one[4]["final_observation"], native_one[0])
            else:
                assert len(native) == 6 and (bool(native[3]), bool(native[4])) == (bool(terminated), bool(truncated))
                assert bool(native_one[3]) == bool(terminated)
                assert not set(native_one[4]) & set(gymnax_compat.STEP_INFO_KEYS)  # step adds them, not step_env
            np.testing.assert_array_equal(native[0], obs)
            for a, b in zip(jax.tree.leaves(native[1]), jax.tree.leaves(after), strict=True):
                np.testing.assert_array_equal(a, b)
            state = after


def test_distractors_are_fair_and_same_key_same_stream():
    params = tmaze_params(corridor_length=jnp.full((4096,), 200))
    keys = jax.random.split(jax.random.key(0), 4096)
    obs, state = jax.vmap(ENV.reset)(keys, params)
    obs2, _, *_ = jax.vmap(STEP)(keys, state, jnp.zeros(4096, jnp.int32), params)
    distractors = np.asarray(obs2[:, 10:])
    assert np.all(np.abs(distractors.mean(axis=0) - 0.5) < 0.03)
    assert abs(np.asarray(state.goal).mean() - 0.5) < 0.03
    assert np.any(distractors != np.asarray(obs[:, 10:]), axis=1).mean() > 0.9
    again, _ = jax.vmap(ENV.reset)(keys, params)
    np.testing.assert_array_equal(np.asarray(obs), np.asarray(again))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(corridor_length=0), "corridor_length"),
        (dict(corridor_length=np.array([120, 300])), "corridor_length"),
        (dict(corridor_length=12.5), "corridor_length"),
        (dict(corridor_length=10, num_distractors=-2), "num_distractors"),
        (dict(corridor_length=10, max_episode_steps=0), "max_episode_steps"),
    ],
)
def test_bad_params_are_rejected(kwargs, name):
    with pytest.raises(ValueError, match=name):
        tmaze_params(**kwargs)


def test_adapter_rejects_bad_actions():
    env = make_gymnasium_tmaze(corridor_length=4)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        env.step(7)


def test_tmaze_keeps_no_episode_statistics():
    params = tmaze_params(2)
    obs, state = RESET(jax.random.key(0), params)
    assert set(vars(state)) == {"time", "position", "goal", "terminated"}
    *_, info = STEP_ENV(jax.random.key(1), state, 0, params)
    assert set(info) == {"success"}


def test_episode_statistics_count_returns_and_lengths_across_auto_resets():
    """Random actions on a short maze (terminations and time-limit truncations) against a hand count."""
    params = tmaze_params(3, max_episode_steps=5)
    step = six_values(STATS_ENV)
    inner_step = STEP
    obs, state = STATS_ENV.reset(jax.random.key(0), params)
    inner_obs, inner_state = ENV.reset(jax.random.key(0), params)
    np.testing.assert_array_equal(obs, inner_obs)
    rng = np.random.default_rng(0)
    running_return, running_length, finished, truncations = 0.0, 0, [], 0
    for t in range(200):
        action = jnp.asarray(rng.choice([0, 0, 2, 3]))
        key = jax.random.key(t + 1)
        obs, state, reward, terminated, truncated, info = step(key, state, action, params)
        # the wrapper passes keys through: the inner environment alone behaves the same
        inner_obs, inner_state, inner_reward, *_ = inner_step(key, inner_state, action, params)
        np.testing.assert_array_equal(obs, inner_obs)
        assert float(reward) == float(inner_reward) and int(state.inner.position) == int(inner_state.position)
        running_return += float(reward)
        running_length += 1
        done = bool(terminated) or bool(truncated)
        assert bool(info["done"]) == done
        assert int(info["episode_length"]) == running_length
        assert float(info["episode_return"]) == pytest.approx(running_return, abs=1e-5)
        assert bool(info["success"]) == (bool(terminated) and float(reward) > 0)
        if done:
            finished.append((running_return, running_length))
            truncations += bool(truncated)
            running_return, running_length = 0.0, 0
        # the running statistics restart with every episode, while the inner env auto-resets
        assert int(state.episode_length) == running_length and int(state.inner.time) == running_length
        assert float(state.episode_return) == pytest.approx(running_return, abs=1e-5)
    assert len(finished) > 10 and 0 < truncations < len(finished)


def test_episode_statistics_wrap_once_and_pass_spaces_through():
    wrapped = EpisodeStatistics(EpisodeStatistics(ENV))
    assert wrapped.inner is ENV
    params = tmaze_params(4)
    as_gym = gymnax_spaces.gymnax_space_to_gym_space
    assert as_gym(wrapped.observation_space(params)) == as_gym(ENV.observation_space(params))
    assert as_gym(wrapped.action_space(params)) == as_gym(ENV.action_space(params)) == gym.spaces.Discrete(4)
    assert wrapped.num_actions == 4 and wrapped.name == ENV.name
    assert wrapped.default_params.corridor_length == ENV.default_params.corridor_length


def test_track_episodes_on_numpy_arrays_as_on_jax_arrays():
    args = (np.array([1.5, -0.5]), np.array([3, 1]), np.array([0.5, 2.0]), np.array([True, False]),
            np.array([False, False]), np.array([True, False]))
    stats, ret, length = track_episodes(*args)
    assert isinstance(ret, np.ndarray) and isinstance(stats["done"], np.ndarray)
    np.testing.assert_array_equal(stats["episode_return"], [2.0, 1.5])
    np.testing.assert_array_equal(stats["episode_length"], [4, 2])
    np.testing.assert_array_equal(ret, [0.0, 1.5])
    np.testing.assert_array_equal(length, [0, 2])
    jax_stats, jax_ret, jax_length = jax.jit(track_episodes)(*map(jnp.asarray, args))
    for name in stats:
        np.testing.assert_array_equal(jax_stats[name], stats[name])
    np.testing.assert_array_equal(jax_ret, ret)
    np.testing.assert_array_equal(jax_length, length)


class _Counted(StatefulWrapper):
    """Counts finished episodes across episodes (the docstring's example of a stateful wrapper)."""

    def init(self, inner, params):
        return _CountedState(inner, jnp.zeros((), jnp.int32))

    def update(self, state, action, reward, terminated, truncated, info, params):
        return _CountedState(state.inner, state.episodes + (terminated | truncated)), info


@dataclasses.dataclass(frozen=True)
class _CountedState:
    inner: object
    episodes: jax.Array


jax.tree_util.register_dataclass(_CountedState, data_fields=["inner", "episodes"], meta_fields=[])


def test_stateful_wrappers_nest_and_only_the_innermost_env_resets():
    env = EpisodeStatistics(_Counted(ENV))
    params = tmaze_params(2, max_episode_steps=3)
    step = six_values(env)
    _, state = env.reset(jax.random.key(0), params)
    episodes = 0
    for t in range(30):
        _, state, _, _, _, info = step(jax.random.key(t), state, jnp.asarray(t % 4), params)
        episodes += bool(info["done"])
        assert int(state.inner.episodes) == episodes  # the inner wrapper's count survives every auto-reset
    assert episodes > 3
