"""popgym 1.0.7's memory tasks written in JAX as gymnax environments, step for step with popgym's NumPy ones.

- :mod:`memgym.envs.popgym_jax.common`: what every task shares (the previous action appended to the
  observation, the episode's return and its normalisation);
- :mod:`memgym.envs.popgym_jax.cards`: the card tasks (Repeat First, Repeat Previous, Count Recall,
  Autoencode, Higher/Lower, Concentration);
- :mod:`memgym.envs.popgym_jax.cartpole`: the partially observed CartPoles (position only, velocity
  only, noisy position only);
- :mod:`memgym.envs.popgym_jax.pendulum`: the partially observed Pendulums (position only, noisy position
  only);
- :mod:`memgym.envs.popgym_jax.games`: the multi-armed bandit, Battleship and MineSweeper;
- :mod:`memgym.envs.popgym_jax.labyrinth`: the Labyrinths (Escape, Explore), their mazes drawn as mazelib's
  Hunt-and-Kill draws them (mazelib itself is not needed);
- :mod:`memgym.envs.popgym_jax.registration`: their ids. Each task ``<Name>`` (popgym's class name,
  e.g. ``RepeatPreviousEasy``) is the gymnax environment ``memgym/popgym-<Name>-v0``
  (``memgym.envs.make_jax``; after that, ``gymnax.make`` under gymnax 1.0) — the id of its NumPy
  version in Gymnasium — and ``gymnasium.make("memgym/popgym-<Name>Jax-v0")`` /
  ``gymnasium.make_vec(..., num_envs=N)`` give it through Gymnasium (one jitted ``vmap`` for the
  vector env).

Each module's docstring lists its deviations from popgym; the parity tests drive popgym and the JAX task
in lockstep (``tests/envs/test_popgym_jax_*.py``). This package's ``__init__`` imports nothing of JAX.
"""

from __future__ import annotations

DIFFICULTIES = ("Easy", "Medium", "Hard")

#: the module of each popgym task family written here
FAMILIES: dict[str, tuple[str, ...]] = {
    "memgym.envs.popgym_jax.cards": ("RepeatFirst", "RepeatPrevious", "CountRecall", "Autoencode", "HigherLower",
                                     "Concentration"),
    "memgym.envs.popgym_jax.cartpole": ("PositionOnlyCartPole", "VelocityOnlyCartPole", "NoisyPositionOnlyCartPole"),
    "memgym.envs.popgym_jax.pendulum": ("PositionOnlyPendulum", "NoisyPositionOnlyPendulum"),
    "memgym.envs.popgym_jax.games": ("MultiarmedBandit", "Battleship", "MineSweeper"),
    "memgym.envs.popgym_jax.labyrinth": ("LabyrinthEscape", "LabyrinthExplore"),
}


def task_names() -> list[str]:
    """popgym's class names of every task here, e.g. ``"RepeatPreviousEasy"``."""
    return [family + level for families in FAMILIES.values() for family in families for level in DIFFICULTIES]


def jax_id(name: str) -> str:
    """The gymnax id of task ``name``: the id of its NumPy version in Gymnasium."""
    return f"memgym/popgym-{name}-v0"


def gymnasium_id(name: str) -> str:
    """The Gymnasium id of task ``name`` in JAX (``Jax`` after the name, as ``memgym/TMazeJax-v0``)."""
    return f"memgym/popgym-{name}Jax-v0"
