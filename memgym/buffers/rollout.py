"""On-policy rollout storage: ``[num_envs, T]`` transitions plus each stream's carry at the start.

A learner replays a rollout as one tape per environment from the stored carries
(``jax.vmap`` over environments), so the recurrent state it trains through is the
one the actor had: the carry persists across rollouts (thesis §5.1.2, A2C with 8
environments × 256 steps). The observation that follows the rollout is stored too,
so the replay can produce the bootstrap value ``V(s_T)`` in the same call
(:func:`replay_inputs`).

:func:`flatten` and :func:`stream_flags` fold ``[num_envs, T]`` into one tape of
``num_envs · T`` (monoid paper §5: "fold the batch dimension into the time
dimension"); the flags mark where each environment's stream starts and ends, so
that return/GAE monoids (:func:`flat_advantages`) never mix two streams.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from memgym.memory.monoid import ScanMethod
from memgym.memory.returns import generalized_advantage

PyTree = Any


@struct.dataclass
class Rollout:
    """Transitions of ``E`` environments over ``T`` steps (leaves ``[E, T, ...]`` unless noted).

    Attributes:
        obs: observation acted on; begin: True on an episode's first observation.
        action, reward, terminated, truncated: the transition's action and outcome.
        value, log_prob: critic value and action log-probability at acting time.
        final_value: ``V`` of the observation a *truncated* episode stopped at
            (its successor observation is the next episode's first); 0 elsewhere.
        carry: memory carry of each environment before ``obs[:, 0]`` (leaves ``[E, ...]``).
        next_obs, next_begin: ``[E, ...]``, ``[E]`` — the observation after the last step.
    """

    obs: jax.Array
    begin: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    value: jax.Array
    log_prob: jax.Array
    final_value: jax.Array
    carry: PyTree
    next_obs: jax.Array
    next_begin: jax.Array

    @property
    def shape(self) -> tuple[int, int]:
        """``(num_envs, T)``."""
        return tuple(self.begin.shape)  # type: ignore[return-value]


def replay_inputs(rollout: Rollout) -> tuple[jax.Array, jax.Array]:
    """Observations and begin flags ``[E, T + 1, ...]``: the rollout followed by ``next_obs``.

    Replaying these from ``rollout.carry`` gives the values of every observation *and*
    the bootstrap value of the one after the rollout, in a single call.
    """
    obs = jnp.concatenate([rollout.obs, rollout.next_obs[:, None]], axis=1)
    begin = jnp.concatenate([rollout.begin, rollout.next_begin[:, None]], axis=1)
    return obs, begin


def next_values(rollout: Rollout, values: jax.Array) -> jax.Array:
    """``V(s_{t+1})`` per step from replayed ``values[E, T + 1]``; truncated steps use ``final_value``."""
    expected = rollout.shape[0], rollout.shape[1] + 1
    if values.shape != expected:
        raise ValueError(f"values must have shape [E, T + 1] = {expected} (see replay_inputs), got {values.shape}")
    return jnp.where(rollout.truncated, rollout.final_value, values[:, 1:])


def advantages(
    rollout: Rollout, values: jax.Array, gamma: float, lam: float, *, method: ScanMethod = "auto"
) -> tuple[jax.Array, jax.Array]:
    """GAE advantages and value targets ``[E, T]`` (monoid paper App. D.1), one stream per environment."""
    gae = jax.vmap(lambda *a: generalized_advantage(*a, gamma, lam, method=method))
    return gae(rollout.reward, values[:, :-1], next_values(rollout, values), rollout.terminated, rollout.truncated)


def flatten(tree: PyTree) -> PyTree:
    """``[E, T, ...]`` → ``[E·T, ...]``, environment 0's stream first."""
    return jax.tree.map(lambda x: x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:]), tree)


def stream_flags(num_envs: int, length: int) -> tuple[jax.Array, jax.Array]:
    """``(stream_start, stream_end)`` flags ``[E·T]`` of a flattened rollout."""
    step = jnp.tile(jnp.arange(length), num_envs)
    return step == 0, step == length - 1


def flat_advantages(
    rollout: Rollout, values: jax.Array, gamma: float, lam: float, *, method: ScanMethod = "auto"
) -> tuple[jax.Array, jax.Array]:
    """:func:`advantages` computed as one scan over the flattened tape ``[E·T]``.

    Each stream's last step is an extra cut for the reverse scan (the reset flag of
    Thm. 3.4): there the advantage does not continue into the next stream, and the
    TD error bootstraps from ``V(s_T)`` as for a time-limit truncation.
    """
    num_envs, length = rollout.shape
    _, stream_end = stream_flags(num_envs, length)
    truncated = flatten(rollout.truncated) | (stream_end & ~flatten(rollout.terminated))
    return generalized_advantage(
        flatten(rollout.reward),
        flatten(values[:, :-1]),
        flatten(next_values(rollout, values)),
        flatten(rollout.terminated),
        truncated,
        gamma,
        lam,
        method=method,
    )
