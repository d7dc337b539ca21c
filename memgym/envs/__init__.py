"""memgym environments, registered with Gymnasium under the ``memgym/`` namespace.

Importing this package needs only gymnasium and numpy. The pure-JAX twins
(:mod:`memgym.envs.tmaze_jax`) import JAX themselves, and their registered
Gymnasium adapters load lazily, so ``gymnasium.make("memgym/TMaze-v0")``
never imports JAX.

When the optional ``popgym`` package is installed (``pip install "memgym[popgym]"``),
its tasks are registered too, as ``memgym/popgym-<ClassName>-v0``
(:mod:`memgym.envs.popgym`); registering them only looks popgym up, it imports
it when such an env is made. Likewise with the ``memory-maze`` extra, the four
Memory Maze sizes are registered as ``memgym/MemoryMaze-<size>-v0``
(:mod:`memgym.envs.memory_maze`); dm_control and MuJoCo load only when one is made.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

import gymnasium as gym

from memgym.envs import popgym_jax
from memgym.envs.memory_maze import register_memory_maze_envs
from memgym.envs.popgym import register_popgym_envs
from memgym.envs.tmaze import TMazeEnv
from memgym.extras import missing

__all__ = ["JAX_ENVS", "TMazeEnv", "make_jax", "register_envs", "registered_ids"]

_SPECS: dict[str, dict] = {
    # The time limit is part of the T-Maze spec (a timeout is a failure), so the env enforces it
    # itself: gymnasium.make's max_episode_steps becomes the env's own limit (tmaze.own_time_limit).
    "memgym/TMaze-v0": dict(entry_point="memgym.envs.tmaze:TMazeEnv", additional_wrappers=(
        gym.envs.registration.WrapperSpec("OwnTimeLimit", "memgym.envs.tmaze:own_time_limit", {}),)),
    "memgym/TMazeJax-v0": dict(entry_point="memgym.envs.tmaze_jax:make_gymnasium_tmaze",
                               vector_entry_point="memgym.envs.tmaze_jax:make_gymnasium_tmaze_vector"),
}

#: gymnax ids of memgym's pure-JAX environments -> the module that defines (and registers) them
JAX_ENVS: dict[str, str] = {"memgym/TMaze-v0": "memgym.envs.tmaze_jax",
                            **{popgym_jax.jax_id(name): "memgym.envs.popgym_jax.registration"
                               for name in popgym_jax.task_names()}}
# The POPGym tasks in JAX through Gymnasium: memgym/popgym-<Name>Jax-v0, single and vector (one vmapped task).
_SPECS |= {popgym_jax.gymnasium_id(name): dict(
    entry_point="memgym.envs.popgym_jax.registration:make_gymnasium",
    vector_entry_point="memgym.envs.popgym_jax.registration:make_gymnasium_vector", kwargs={"name": name},
    order_enforce=False) for name in popgym_jax.task_names()}


def register_envs() -> None:
    """Register memgym's environments with Gymnasium (idempotent; runs on import).

    The popgym and Memory Maze tasks are registered only when their packages are installed.
    """
    for env_id, spec in _SPECS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, **spec)
    register_popgym_envs()
    register_memory_maze_envs()


def registered_ids() -> list[str]:
    """Ids of every registered ``memgym/`` environment."""
    return sorted(env_id for env_id in gym.registry if env_id.startswith("memgym/"))


def make_jax(env_id: str = "memgym/TMaze-v0", **config: Any) -> tuple[Any, Any]:
    """A memgym environment as a gymnax environment: ``(env, env_params)``, like ``gymnax.make``.

    ``config`` takes the same arguments as ``gymnasium.make(env_id, ...)`` (T-Maze:
    ``corridor_length``, ``num_distractors``, ``gray_bits``, ``max_episode_steps``; the params
    hold the time limit as gymnax's ``max_steps_in_episode``). JAX and gymnax are imported here
    (``pip install "memgym[jax]"``). Under gymnax 1.0 the environment is registered with gymnax then,
    so ``gymnax.make(env_id)`` works after the first ``make_jax`` (or ``import memgym.envs.tmaze_jax``);
    gymnax 0.0.9 has no registry of others' environments, so there ``make_jax`` is the way in
    (:mod:`memgym.envs.gymnax_compat`).
    """
    if env_id not in JAX_ENVS:
        if env_id == "memgym/TMazeJax-v0":
            hint = "that is the Gymnasium adapter's id; the gymnax environment is 'memgym/TMaze-v0'"
        elif isinstance(env_id, str) and env_id in gym.registry:
            hint = f"{env_id} is a Gymnasium environment without a JAX version (gymnasium.make)"
        else:
            close = difflib.get_close_matches(str(env_id), sorted(set(JAX_ENVS) | set(registered_ids())), n=3)
            hint = "unknown environment id" + (f" (close: {', '.join(close)})" if close else "")
        raise ValueError(f"env_id={env_id!r}: {hint}; JAX environments: {', '.join(JAX_ENVS)}")
    try:
        importlib.import_module(JAX_ENVS[env_id])
        from memgym.envs import gymnax_compat
    except ModuleNotFoundError as error:
        raise missing("memgym's JAX environments", "jax", error) from error
    return gymnax_compat.make(env_id, **config)


register_envs()
