"""Every registered ``memgym/`` environment passes Gymnasium's own checker, as a user would run it."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from memgym.envs import registered_ids

# Building a Memory Maze (dm_control, MuJoCo) and rendering it for every declared mode takes about a minute: the
# smallest in the slow tier; the larger sizes (the same wrapper around upstream's own sizes) in the extended one.
# The POPGym tasks in JAX compile for each id: Easy in the fast tier, every difficulty in the slow one.
def _tier(env_id: str):
    if "MemoryMaze" in env_id:
        return pytest.param(env_id, marks=[pytest.mark.slow(seconds=60)] + (
            [] if "9x9" in env_id else [pytest.mark.extended]))
    if env_id.endswith("Jax-v0") and "Easy" not in env_id:
        return pytest.param(env_id, marks=pytest.mark.slow)
    return env_id


IDS = [_tier(env_id) for env_id in registered_ids()]


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_passes_on_every_registered_env(env_id):
    env = gym.make(env_id)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Gymnasium's advice to check the unwrapped env: that is what runs here
            check_env(env.unwrapped)  # renders every mode the env declares, each through env.spec.make
    finally:
        env.close()
    modes = env.unwrapped.metadata.get("render_modes", [])
    for mode in modes:  # a declared mode is one the registered env accepts
        gym.make(env_id, render_mode=mode).close()
