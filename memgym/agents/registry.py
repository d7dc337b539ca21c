"""The one map from a config type to its trainer class, and :func:`make_trainer`.

``memgym train`` (:mod:`memgym.agents.training`), the host loop
(:meth:`memgym.agents.host.HostLoop.for_config`) and the leaderboard's reference
agents all build their trainer here. A new algorithm adds its config class and
trainer class to :data:`TRAINERS` (and a command-line name to
:data:`memgym.agents.config.AGENTS`).
"""

from __future__ import annotations

from typing import Any

from memgym.agents.actor_critic import ActorCriticTrainer
from memgym.agents.config import ActorCriticConfig, DQNConfig
from memgym.agents.dqn import DQNTrainer
from memgym.agents.spec import EnvSpec
from memgym.agents.trainer import BaseTrainer
from gymnax.environments.environment import Environment

#: config type -> trainer class
TRAINERS: dict[type, type[BaseTrainer]] = {
    ActorCriticConfig: ActorCriticTrainer,
    DQNConfig: DQNTrainer,
}


def trainer_class(config: Any) -> type[BaseTrainer]:
    """The trainer class of ``config``'s type; ``TypeError`` naming the known config types otherwise."""
    try:
        return TRAINERS[type(config)]
    except KeyError:
        allowed = ", ".join(cls.__name__ for cls in TRAINERS)
        raise TypeError(
            f"no trainer for a config of type {type(config).__name__}; known config types: {allowed} "
            "(memgym.agents.registry.TRAINERS)"
        ) from None


def make_trainer(config: Any, env: Environment | EnvSpec, example_params: Any | None = None) -> BaseTrainer:
    """The trainer for ``config`` on ``env``: a functional environment (``example_params``: params to read its
    spaces from, default its default params) or an :class:`~memgym.agents.spec.EnvSpec` (host loops)."""
    return trainer_class(config)(config, env, example_params)
