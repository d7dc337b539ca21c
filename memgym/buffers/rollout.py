"""On-policy rollout storage: ``[num_envs, T]`` transitions plus each stream's carry at the start.

A learner replays a rollout as one tape per environment from the stored carries
(``jax.vmap`` over environments), so the recurrent state it trains through is the
one the actor had: the carry persists across rollouts (thesis §5.1.2, A2C with 8
environments × 256 steps). The observation that follows the rollout is stored too,
so the replay can produce the bootstrap value ``V(s_T)`` in the same call
(:func:`replay_inputs`).

This module only stores transitions; the advantages are computed in
:mod:`memgym.agents.returns`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

PyTree = Any


@struct.dataclass
class Rollout:
    """Transitions of ``E`` environments over ``T`` steps (leaves ``[E, T, ...]`` unless noted).

    Attributes:
        obs: observation acted on; start: True on an episode's first observation.
        action, reward, terminated, truncated: the transition's action and outcome.
        value, log_prob: critic value and action log-probability at acting time.
        final_value: ``V`` of the observation a *truncated* episode stopped at
            (its successor observation is the next episode's first); 0 elsewhere.
        carry: memory carry of each environment before ``obs[:, 0]`` (leaves ``[E, ...]``).
        next_obs, next_start: ``[E, ...]``, ``[E]`` — the observation after the last step.
    """

    obs: jax.Array
    start: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    value: jax.Array
    log_prob: jax.Array
    final_value: jax.Array
    carry: PyTree
    next_obs: jax.Array
    next_start: jax.Array

    @property
    def shape(self) -> tuple[int, int]:
        """``(num_envs, T)``."""
        return tuple(self.start.shape)  # type: ignore[return-value]


def replay_inputs(rollout: Rollout) -> tuple[jax.Array, jax.Array]:
    """Observations and start flags ``[E, T + 1, ...]``: the rollout followed by ``next_obs``.

    Replaying these from ``rollout.carry`` gives the values of every observation *and*
    the bootstrap value of the one after the rollout, in a single call.
    """
    obs = jnp.concatenate([rollout.obs, rollout.next_obs[:, None]], axis=1)
    start = jnp.concatenate([rollout.start, rollout.next_start[:, None]], axis=1)
    return obs, start

