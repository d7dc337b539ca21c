"""The POPGym tasks in JAX by id, from the user's side: ``make_jax`` / ``gymnax.make`` with the id of the task's
NumPy version, and ``gymnasium.make`` / ``make_vec`` with ``memgym/popgym-<Name>Jax-v0``."""

from __future__ import annotations

import gymnasium as gym
import gymnax
import jax
import numpy as np
import pytest

import memgym  # noqa: F401  (registers the environments)
from memgym.envs import JAX_ENVS, gymnax_compat, make_jax, registered_ids
from memgym.envs.popgym_jax import gymnasium_id, jax_id, task_names


def test_every_task_has_a_gymnax_id_and_a_gymnasium_id():
    names = task_names()
    assert {"RepeatFirstEasy", "RepeatPreviousHard", "CountRecallMedium", "PositionOnlyCartPoleEasy"} <= set(names)
    assert len(names) % 3 == 0
    assert {jax_id(name) for name in names} <= set(JAX_ENVS)
    assert {gymnasium_id(name) for name in names} <= set(registered_ids())


@pytest.mark.parametrize("name", ["RepeatFirstEasy", "RepeatPreviousMedium", "CountRecallHard",
                                  "PositionOnlyCartPoleEasy"])
def test_make_jax_and_gymnasium_give_the_same_task(name):
    env, params = make_jax(jax_id(name))
    assert type(env).__name__ == name
    obs, state = jax.jit(env.reset)(jax.random.key(0), params)
    adapter = gym.make(gymnasium_id(name))
    first, _ = adapter.reset(seed=0)
    assert first.shape == obs.shape == env.observation_space(params).shape and first.dtype == np.float32
    assert adapter.observation_space.contains(first) and adapter.action_space == gym.spaces.Discrete(
        env.action_space(params).n)
    vector = gym.make_vec(gymnasium_id(name), num_envs=8)
    batch, _ = vector.reset(seed=1)
    assert batch.shape == (8, *obs.shape)
    total = 0.0
    for _ in range(60):  # past an Easy episode's end: the vector env resets itself
        batch, reward, terminated, truncated, info = vector.step(vector.action_space.sample())
        total += float(np.sum(reward))
    assert np.isfinite(total)
    if not gymnax_compat.FIVE_VALUE_STEP:  # gymnax 1.0 knows it now (0.0.9 has no registry of others' envs)
        assert type(gymnax.make(jax_id(name))[0]).__name__ == name


def test_unknown_names_are_refused_with_the_allowed_ones():
    with pytest.raises(ValueError, match=r"env_id='memgym/popgym-RepeatPreviousExtreme-v0': unknown environment id"):
        make_jax("memgym/popgym-RepeatPreviousExtreme-v0")
    from memgym.envs.popgym_jax.registration import task_class

    with pytest.raises(ValueError, match="name='Battleship' is not a POPGym task written in JAX; allowed: RepeatFirstEasy"):
        task_class("Battleship")
