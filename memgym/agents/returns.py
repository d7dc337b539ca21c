"""Discounted return and generalised advantage estimation as resettable monoids.

Monoid paper, Thm. 3.3 (discounted return) and App. D.1 (GAE): both are
first-order linear recurrences in the return-to-go direction,

    G_t = r_t + γ G_{t+1}                      (discounted return)
    A_t = δ_t + γλ A_{t+1},  δ_t = r_t + γ V(s_{t+1}) − V(s_t)   (GAE)

i.e. ``X_t = b_t + a_t X_{t+1}``. The element ``(a, b)`` stands for the affine
map ``X ↦ b + a X``; composing maps, ``(a, b) • (a', b') = (a a', b + a b')``,
is associative with identity ``(1, 0)``. A reverse resettable scan
(:func:`memgym.memory.monoid.scan_monoid` with ``reverse=True``, Thm. 3.4)
computes every ``X_t`` of a tape at once; the reset flag is set on the *last*
step of each episode so no value flows backwards across an episode boundary.

Episode ends, following the usual bootstrapping rules:

* ``terminated_t``: the next state is terminal, its value is 0:
  ``G_t = r_t`` and ``δ_t = r_t − V(s_t)``.
* ``truncated_t`` (time limit, not terminal): bootstrap from the value of the
  observation the episode was cut at, ``next_value[t] = V(s_{t+1})``:
  ``G_t = r_t + γ V(s_{t+1})``, ``δ_t = r_t + γ V(s_{t+1}) − V(s_t)``.
* the tape ends mid-episode: the same bootstrap from ``next_value[T-1]``
  (for GAE the advantage beyond the tape is 0).

All inputs are ``[T]`` arrays of one stream; ``jax.vmap`` adds environments.

On a :class:`~memgym.buffers.rollout.Rollout` (``[E, T]`` transitions, the
values replayed from its stored carries), :func:`advantages` computes GAE per
environment, with the bootstrap values of :func:`next_values`.

These are reinforcement-learning computations, so they live with the agents;
:mod:`memgym.buffers` only stores transitions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from memgym.buffers.rollout import Rollout
from memgym.memory.monoid import Monoid, ScanMethod, scan_monoid
from memgym.validation import check_real

#: ``(a, b) • (a', b') = (a a', b + a b')`` — composition of affine maps ``X ↦ b + a X``.
AFFINE_MONOID = Monoid(
    op=lambda left, right: (left[0] * right[0], left[1] + left[0] * right[1]),
    identity=lambda like: (jnp.ones_like(like[0]), jnp.zeros_like(like[1])),
)


def _check_unit_interval(name: str, value: float) -> None:
    """A Python number must be in [0, 1]; a traced one (a vmapped sweep) is the caller's to check."""
    if isinstance(value, (int, float)):
        check_real(name, value, 0.0, 1.0)


def _check_tape(**arrays: jax.Array) -> int:
    shapes = {name: jnp.shape(a) for name, a in arrays.items()}
    lengths = {s for s in shapes.values()}
    if len(lengths) != 1 or len(next(iter(lengths))) != 1:
        raise ValueError(f"every input must be a [T] array of the same T, got shapes {shapes}")
    return next(iter(lengths))[0]


def discounted_return(
    reward: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    next_value: jax.Array,
    gamma: float,
    *,
    method: ScanMethod = "auto",
) -> jax.Array:
    """Discounted return-to-go ``G_t`` of every step of a tape (Thm. 3.3).

    Args:
        reward: ``[T]`` reward of each transition.
        terminated: ``[T]`` bool, the transition ended the episode in a terminal state.
        truncated: ``[T]`` bool, the transition ended the episode by a time limit.
        next_value: ``[T]`` critic value of the observation after each transition
            (only read where the episode was truncated and at the tape's last step).
        gamma: discount factor in [0, 1].
        method: scan method, see :func:`~memgym.memory.monoid.scan_monoid`.

    Returns:
        ``[T]`` returns ``G_t``.
    """
    _check_unit_interval("gamma", gamma)
    _check_tape(reward=reward, terminated=terminated, truncated=truncated, next_value=next_value)
    reward = jnp.asarray(reward, jnp.float32)
    terminated = jnp.asarray(terminated, bool)
    done = terminated | jnp.asarray(truncated, bool)
    bootstrap = jnp.where(terminated, 0.0, gamma * jnp.asarray(next_value, jnp.float32))
    # An episode's last step is the constant map X ↦ r + γ V_next (or r): slope 0, and the
    # reset flag cuts it off from the next episode.
    a = jnp.where(done, 0.0, jnp.asarray(gamma, jnp.float32))
    b = jnp.where(done, reward + bootstrap, reward)
    # Beyond the tape: the constant map to V(s_T) bootstraps an unfinished episode.
    carry = (jnp.zeros((), jnp.float32), jnp.asarray(next_value[-1], jnp.float32))
    (_, returns), _ = scan_monoid(AFFINE_MONOID, (a, b), done, carry, reverse=True, method=method)
    return returns


def generalized_advantage(
    reward: jax.Array,
    value: jax.Array,
    next_value: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    gamma: float,
    lam: float,
    *,
    method: ScanMethod = "auto",
) -> tuple[jax.Array, jax.Array]:
    """GAE(γ, λ) advantages of every step of a tape (monoid paper App. D.1; Schulman et al. 2016).

    Args:
        reward: ``[T]`` rewards.
        value: ``[T]`` critic values ``V(s_t)`` of the observations acted on.
        next_value: ``[T]`` critic values ``V(s_{t+1})`` of the next observations
            (for a truncated step: of the observation the episode was cut at).
        terminated, truncated: ``[T]`` bool episode-end flags of each transition.
        gamma: discount in [0, 1]; lam: GAE λ in [0, 1].
        method: scan method, see :func:`~memgym.memory.monoid.scan_monoid`.

    Returns:
        ``(advantages[T], value_targets[T])`` with ``value_targets = advantages + value``.
    """
    _check_unit_interval("gamma", gamma)
    _check_unit_interval("lam", lam)
    _check_tape(reward=reward, value=value, next_value=next_value, terminated=terminated, truncated=truncated)
    value = jnp.asarray(value, jnp.float32)
    terminated = jnp.asarray(terminated, bool)
    done = terminated | jnp.asarray(truncated, bool)
    bootstrap = jnp.where(terminated, 0.0, gamma * jnp.asarray(next_value, jnp.float32))
    delta = jnp.asarray(reward, jnp.float32) + bootstrap - value
    a = jnp.where(done, 0.0, jnp.asarray(gamma * lam, jnp.float32))
    carry = (jnp.zeros((), jnp.float32), jnp.zeros((), jnp.float32))
    (_, advantages), _ = scan_monoid(AFFINE_MONOID, (a, delta), done, carry, reverse=True, method=method)
    return advantages, advantages + value


# --- on rollouts ------------------------------------------------------------------------------


def next_values(rollout: Rollout, values: jax.Array) -> jax.Array:
    """``V(s_{t+1})`` per step from replayed ``values[E, T + 1]``; truncated steps use ``final_value``."""
    expected = rollout.shape[0], rollout.shape[1] + 1
    if values.shape != expected:
        raise ValueError(f"values must have shape [E, T + 1] = {expected} (see replay_inputs), got {values.shape}")
    return jnp.where(rollout.truncated, rollout.final_value, values[:, 1:])


def advantages(
    rollout: Rollout, values: jax.Array, gamma: float, lam: float, *, method: ScanMethod = "auto"
) -> tuple[jax.Array, jax.Array]:
    """GAE advantages and value targets ``[E, T]`` (monoid paper App. D.1), one stream per environment.

    ``values[E, T + 1]`` are the critic's values of the rollout's observations followed by
    the one after it (:func:`~memgym.buffers.rollout.replay_inputs`).
    """
    gae = jax.vmap(lambda *a: generalized_advantage(*a, gamma, lam, method=method))
    return gae(rollout.reward, values[:, :-1], next_values(rollout, values), rollout.terminated, rollout.truncated)
