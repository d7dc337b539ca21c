"""Recurrent PPO over any memory model, the whole run inside ``jit`` (thesis §2.2.2; Schulman et al. 2017).

Per rollout: advantages once, from the values of the policy that acted (GAE(λ) by
the advantage monoid, monoid paper App. D.1); then ``epochs`` passes of clipped-ratio
updates with value clipping over ``num_minibatches`` minibatches (value loss: ½ × the larger of the clipped
and unclipped squared errors, weighed by ``value_coef``, PPO's usual form). Minibatches are
*tapes* — whole environment streams replayed from the carries stored at the rollout
start, full BPTT (monoid paper §5, TBB) — or *segments* of ``segment_length`` steps
replayed from a fresh carry, truncated BPTT (§4, SBB). The thesis's Memory Maze PPO
(Table A.3) is :data:`memgym.agents.config.MEMORY_MAZE_PPO`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from memgym.agents.actor_critic import ActorCriticFields, ActorCriticTrainer, actor_critic_loss
from memgym.agents.returns import advantages
from memgym.agents.trainer import TrainState, Trajectory, broadcast
from memgym.buffers.rollout import replay_inputs
from memgym.validation import check_choice, check_positive, check_real

PyTree = Any


@dataclasses.dataclass(frozen=True)
class PPOConfig(ActorCriticFields):
    """Recurrent PPO: the actor-critic fields plus PPO's own (common recurrent-PPO defaults)."""

    epochs: int = 4
    """passes over each rollout"""
    num_minibatches: int = 4
    """minibatches per epoch (must divide the environments, or the segments, of a rollout)"""
    clip_eps: float = 0.1
    """ratio clipping ε"""
    value_clip: float = 1.0
    """values may move at most this far from the acting-time values"""
    batching: str = "tape"
    """minibatches: "tape" (whole environment streams replayed from stored carries, full BPTT)
    or "segment" (segment_length-step segments from a fresh carry, truncated BPTT)"""
    segment_length: int = 64
    """with batching="segment": steps per segment (must divide rollout_length)"""

    def __post_init__(self) -> None:
        check_choice("batching", self.batching, ("tape", "segment"))
        check_positive(epochs=self.epochs, num_minibatches=self.num_minibatches, segment_length=self.segment_length)
        check_real("clip_eps", self.clip_eps, 0.0, include_low=False)
        check_real("value_clip", self.value_clip, 0.0, include_low=False)
        super().__post_init__()
        if self.batching == "segment" and self.rollout_length % self.segment_length:
            raise ValueError(
                f"rollout_length={self.rollout_length} must be a multiple of segment_length={self.segment_length}"
            )
        if self.num_rows % self.num_minibatches:
            raise ValueError(
                f"num_minibatches={self.num_minibatches} must divide the {self.num_rows} "
                f"{'environments' if self.batching == 'tape' else 'segments'} of a rollout"
            )

    @property
    def gradient_steps_per_update(self) -> int:
        """Optimiser steps per update: ``epochs × num_minibatches``."""
        return self.epochs * self.num_minibatches

    @property
    def num_rows(self) -> int:
        """Rows a rollout is cut into for minibatches: its environments (tape) or its segments (segment)."""
        if self.batching == "tape":
            return self.num_envs
        return self.num_envs * self.rollout_length // self.segment_length


class PPOTrainer(ActorCriticTrainer):
    """Recurrent PPO: epochs of clipped minibatch steps on each rollout."""

    def loss(self, params: PyTree, batch: dict[str, jax.Array]):
        config = self.config
        logits, values = self.replay(params, batch["obs"], batch["start"], batch["carry"])
        dist = self.distribution(logits)
        adv = batch["advantage"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = jnp.exp(dist.log_prob(batch["action"]) - batch["log_prob"])
        clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
        policy_loss = -jnp.mean(jnp.minimum(ratio * adv, clipped * adv))
        values_clipped = batch["value"] + jnp.clip(values - batch["value"], -config.value_clip, config.value_clip)
        value_loss = 0.5 * jnp.mean(
            jnp.maximum((values - batch["target"]) ** 2, (values_clipped - batch["target"]) ** 2)
        )
        return actor_critic_loss(dist, policy_loss, value_loss, config)

    def minibatch_rows(self, state: TrainState, trajectory: Trajectory) -> dict[str, jax.Array]:
        """The rollout as ``[rows, steps]`` arrays with advantages, targets and each row's carry."""
        config = self.config
        rollout = self.rollout(state, trajectory)
        obs, start = replay_inputs(rollout)
        _, values = self.replay(state.params, obs, start, rollout.carry)
        adv, targets = advantages(rollout, values, config.gamma, config.gae_lambda)
        rows = dict(
            obs=rollout.obs, start=rollout.start, action=rollout.action, log_prob=rollout.log_prob,
            value=values[:, :-1], advantage=adv, target=targets,
        )
        if config.batching == "tape":
            return dict(rows, carry=rollout.carry)
        rows = jax.tree.map(lambda x: x.reshape((config.num_rows, config.segment_length) + x.shape[2:]), rows)
        return dict(rows, carry=broadcast(self.initialize_carry(), config.num_rows))

    def learn(self, state: TrainState, trajectory: Trajectory) -> tuple[TrainState, dict[str, jax.Array]]:
        config = self.config
        rows = self.minibatch_rows(state, trajectory)

        def minibatch(carry, index):
            params, opt_state = carry
            batch = jax.tree.map(lambda x: x[index], rows)
            grads, losses = jax.grad(self.loss, has_aux=True)(params, batch)
            return self.apply_gradients(params, opt_state, grads), losses

        def epoch(carry, key):
            order = jax.random.permutation(key, config.num_rows).reshape(config.num_minibatches, -1)
            return jax.lax.scan(minibatch, carry, order)

        key, key_epochs = jax.random.split(state.key)
        (params, opt_state), losses = jax.lax.scan(
            epoch, (state.params, state.learner), jax.random.split(key_epochs, config.epochs)
        )
        return state.replace(params=params, learner=opt_state, key=key), jax.tree.map(jnp.mean, losses)

