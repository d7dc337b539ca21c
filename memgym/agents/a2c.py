"""A2C over any memory model, the whole run inside ``jit`` (thesis §2.2.1, §5.1.2, Table A.1).

One gradient step per rollout of ``num_envs × rollout_length`` steps. The loss is the
policy gradient with GAE(λ) advantages (the advantage monoid, monoid paper App. D.1)
+ ``value_coef`` × the mean squared TD(λ) error − ``entropy_coef`` × the entropy: Table A.1's
"value loss coefficient" 0.5 weighs the mean squared error itself, as the thesis authors' A2C
does (PPO keeps the ½ of its own convention, :mod:`memgym.agents.ppo`). The
memory carry persists across rollouts: the learner replays each rollout from the
carries stored at its start (:class:`~memgym.buffers.rollout.Rollout`).
``jax.jit(jax.vmap(memgym.agents.make_train(config)))`` trains many seeds and corridor
lengths in one compiled call.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from memgym.agents.actor_critic import ActorCriticFields, ActorCriticTrainer, actor_critic_loss
from memgym.agents.returns import advantages
from memgym.agents.trainer import TrainState, Trajectory
from memgym.buffers.rollout import Rollout, replay_inputs

PyTree = Any


@dataclasses.dataclass(frozen=True)
class A2CConfig(ActorCriticFields):
    """A2C: the actor-critic fields (:class:`~memgym.agents.actor_critic.ActorCriticFields`) and nothing else."""


class A2CTrainer(ActorCriticTrainer):
    """A2C: one gradient step on each rollout."""

    def loss(self, params: PyTree, rollout: Rollout):
        config = self.config
        obs, start = replay_inputs(rollout)
        logits, values = self.replay(params, obs, start, rollout.carry)
        adv, targets = advantages(rollout, jax.lax.stop_gradient(values), config.gamma, config.gae_lambda)
        dist = self.distribution(logits[:, :-1])
        policy_loss = -jnp.mean(dist.log_prob(rollout.action) * adv)
        value_loss = jnp.mean((values[:, :-1] - targets) ** 2)
        return actor_critic_loss(dist, policy_loss, value_loss, config)

    def learn(self, state: TrainState, trajectory: Trajectory) -> tuple[TrainState, dict[str, jax.Array]]:
        grads, losses = jax.grad(self.loss, has_aux=True)(state.params, self.rollout(state, trajectory))
        params, opt_state = self.apply_gradients(state.params, state.learner, grads)
        return state.replace(params=params, learner=opt_state), losses

