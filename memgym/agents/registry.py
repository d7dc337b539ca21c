"""The algorithms by name: config class and trainer class, and :func:`make_trainer` / :func:`make_train`.

``memgym train --algorithm NAME``, the host loop and the leaderboard's reference
agents build their trainer here. A new algorithm is a module with its config and
trainer (like :mod:`memgym.agents.a2c`) and one entry in :data:`ALGORITHMS`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gymnax.environments.environment import Environment

from memgym.agents.a2c import A2CConfig, A2CTrainer
from memgym.agents.dqn import DQNConfig, DQNTrainer
from memgym.agents.ppo import PPOConfig, PPOTrainer
from memgym.agents.spec import EnvSpec
from memgym.agents.trainer import BaseTrainer

#: name -> (config class, trainer class)
ALGORITHMS: dict[str, tuple[type, type[BaseTrainer]]] = {
    "a2c": (A2CConfig, A2CTrainer),
    "ppo": (PPOConfig, PPOTrainer),
    "dqn": (DQNConfig, DQNTrainer),
}

#: config class -> trainer class
TRAINERS: dict[type, type[BaseTrainer]] = {config: trainer for config, trainer in ALGORITHMS.values()}


def algorithm_name(config: Any) -> str:
    """The :data:`ALGORITHMS` name of ``config``'s type (``"a2c"``, ``"ppo"``, ``"dqn"``)."""
    trainer_class(config)
    return next(name for name, (cls, _) in ALGORITHMS.items() if cls is type(config))


def trainer_class(config: Any) -> type[BaseTrainer]:
    """The trainer class of ``config``'s type; ``TypeError`` naming the known config types otherwise."""
    try:
        return TRAINERS[type(config)]
    except KeyError:
        allowed = ", ".join(cls.__name__ for cls in TRAINERS)
        raise TypeError(
            f"no trainer for a config of type {type(config).__name__}; known config types: {allowed} "
            "(memgym.agents.registry.ALGORITHMS)"
        ) from None


def make_trainer(config: Any, env: Environment | EnvSpec, example_params: Any | None = None) -> BaseTrainer:
    """The trainer for ``config`` on ``env``: a gymnax environment (``example_params``: params to read its
    spaces from, default its default params) or an :class:`~memgym.agents.spec.EnvSpec` (host loops)."""
    return trainer_class(config)(config, env, example_params)


def make_train(config: Any, env: Environment | None = None):
    """``train(key, env_params) -> (TrainState, metrics)`` of ``config``'s algorithm; ``env`` defaults to the
    JAX T-Maze. ``jax.jit(jax.vmap(train))`` over keys and env params trains every cell in one compiled call."""
    if env is None:
        from memgym.envs.tmaze_jax import TMazeJax

        env = TMazeJax()
    return make_trainer(config, env).train


def actor_critic_config(algorithm: str = "a2c", **fields: Any) -> Any:
    """memgym 0.1's ``ActorCriticConfig(algorithm=..., ...)``: the :class:`A2CConfig` or :class:`PPOConfig`."""
    configs = {"a2c": A2CConfig, "ppo": PPOConfig}
    if algorithm not in configs:
        raise ValueError(f"algorithm must be 'a2c' or 'ppo', got algorithm={algorithm!r}")
    if algorithm == "a2c":  # 0.1 accepted PPO's fields for A2C and ignored them
        a2c_fields = {field.name for field in dataclasses.fields(A2CConfig)}
        fields = {name: value for name, value in fields.items() if name in a2c_fields}
    return configs[algorithm](**fields)
