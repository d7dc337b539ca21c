"""memgym: memory tasks, memory-monoid agents and a leaderboard for memory in RL.

``import memgym`` registers the environments with Gymnasium and imports
nothing but gymnasium and numpy; the JAX parts (``memgym.memory``,
``memgym.buffers``, ``memgym.agents``, ``memgym.leaderboard`` and the
``*_jax`` environment twins) load JAX when they are imported.
"""

from memgym import envs  # noqa: F401  (registers the environments)

__version__ = "0.1.0"
