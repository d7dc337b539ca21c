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

import gymnasium as gym

from memgym.envs.memory_maze import register_memory_maze_envs
from memgym.envs.popgym import register_popgym_envs
from memgym.envs.tmaze import TMazeEnv

__all__ = ["TMazeEnv", "register_envs", "registered_ids"]

_SPECS: dict[str, dict] = {
    # The time limit is part of the T-Maze spec (a timeout is a failure), so the env
    # enforces it itself; Gymnasium adds no TimeLimit wrapper unless asked to.
    "memgym/TMaze-v0": dict(entry_point="memgym.envs.tmaze:TMazeEnv"),
    "memgym/TMazeJax-v0": dict(entry_point="memgym.envs.tmaze_jax:make_gymnasium_tmaze"),
}


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


register_envs()
