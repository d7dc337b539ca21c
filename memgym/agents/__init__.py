"""Agents: A2C, recurrent PPO and recurrent DQN over any memory model, whole runs inside ``jit``.

One module per algorithm — :mod:`.a2c`, :mod:`.ppo`, :mod:`.dqn` — each with its config
(a frozen dataclass; every field is a ``memgym train`` flag) and its trainer (loss and
learning step). They share :mod:`.trainer` (the :class:`~.trainer.Trainer` protocol:
``init``, ``run``, ``train``, pure, jit- and vmap-able; the functional collector),
:mod:`.host` (the collector for Gymnasium vector envs), :mod:`.actor_critic` (what A2C
and PPO share), :mod:`.config` (memory presets, :func:`~.config.resolve_memory`),
:mod:`.returns` (the return and GAE monoids), :mod:`.networks`, :mod:`.encoders`.
:mod:`.registry` names the algorithms (:data:`ALGORITHMS`); :mod:`.run` is ``memgym train``.

``import memgym.agents`` stays light: the names below load the trainers (and JAX) on first use.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "ALGORITHMS": "registry", "TRAINERS": "registry", "make_trainer": "registry", "make_train": "registry",
    "A2CConfig": "a2c", "PPOConfig": "ppo", "DQNConfig": "dqn",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        import importlib

        return getattr(importlib.import_module(f"memgym.agents.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
