"""Agents: A2C, recurrent PPO and recurrent DQN over any memory model, whole runs inside ``jit``.

* :mod:`.config` — one frozen dataclass per algorithm (every field documented, a
  ``memgym train`` flag), the memory presets, and :data:`~.config.AGENTS` (the
  ``--agent`` names);
* :mod:`.trainer` — the :class:`~.trainer.Trainer` protocol (``init``, ``run``,
  ``train``: pure, jit- and vmap-able) and :class:`~.trainer.BaseTrainer`, which
  holds the run, the memory carries and the functional collector;
* :mod:`.actor_critic`, :mod:`.dqn` — the algorithms: each writes its networks,
  policy step and learning step;
* :mod:`.registry` — :data:`TRAINERS` (config type -> trainer class) and
  :func:`make_trainer`, re-exported here;
* :mod:`.host` — :class:`~.host.HostLoop`, the collector for Gymnasium vector envs;
* :mod:`.spec` — :class:`~.spec.EnvSpec`, what a trainer needs to know about an env;
* :mod:`.returns` — the discounted-return and GAE monoids, and advantages of rollouts;
* :mod:`.networks`, :mod:`.encoders`, :mod:`.metrics`, :mod:`.training` (``memgym train``).

Adding an algorithm: a config dataclass (and its ``--agent`` name in
:data:`~.config.AGENTS`) in :mod:`.config`, a :class:`~.trainer.BaseTrainer` subclass
in a module of its own, and one entry in :data:`TRAINERS`.

``import memgym.agents`` stays light; :data:`TRAINERS` and :func:`make_trainer` load
the trainers (and JAX) on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TRAINERS", "make_trainer"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from memgym.agents import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
