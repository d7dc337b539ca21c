"""What A2C and PPO share: the actor-critic config fields, network, policy and rollout replay.

:class:`ActorCriticFields` holds the fields both algorithms read; each algorithm's
config (:class:`~memgym.agents.a2c.A2CConfig`, :class:`~memgym.agents.ppo.PPOConfig`)
adds only its own. :class:`ActorCriticTrainer` acts (sample from the actor, record
the critic's value and the action's log-probability), bootstraps truncated episodes
and replays a rollout from the carries stored at its start; the algorithms write
only their loss and learning step (:mod:`memgym.agents.a2c`, :mod:`memgym.agents.ppo`).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import distrax
import jax
import jax.numpy as jnp
import optax
from gymnax.environments.environment import Environment

from memgym import memory as memory_lib
from memgym.agents.config import Schedule, resolve_memory
from memgym.agents.networks import ActorCritic, frozen_config, replay_in_chunks
from memgym.agents.spec import EnvSpec
from memgym.agents.trainer import BaseTrainer, TrainState, Trajectory
from memgym.buffers.rollout import Rollout
from memgym.deprecation import forward
from memgym.validation import check_flag, check_int, check_positive, check_real

PyTree = Any


@dataclasses.dataclass(frozen=True)
class ActorCriticFields(Schedule):
    """The fields A2C and PPO share; defaults are the thesis T-Maze A2C setup (§5.1.2, Table A.1).

    8 environments × 256-step rollouts, γ 0.99, GAE λ 0.95, value coefficient 0.5,
    actor/critic heads 2 × 128 tanh.
    """

    memory: str = "arelit"
    """memory model: a MEMORY_PRESETS name (e.g. arelit, gtrxl-256, tiny-gru) or a memgym.memory model name"""
    memory_config: str = ""
    """JSON object of memory model options overriding the preset's, e.g. '{"features": 64}'"""
    total_steps: int = 1_000_000
    """environment steps of the whole run, over all environments"""
    num_envs: int = 8
    """environments stepped in parallel"""
    rollout_length: int = 256
    """environment steps per environment in one rollout, i.e. per update (= steps_per_update)"""
    learning_rate: float = 1e-4
    """Adam learning rate (the initial one when anneal_lr)"""
    anneal_lr: bool = False
    """decay the learning rate linearly from learning_rate to 0 over the run's gradient steps (PureJaxRL's
    and CleanRL's ANNEAL_LR); keeps a solved policy from drifting late in a long run (docs/collapse_study.md)"""
    entropy_coef: float = 1e-3
    """weight of the entropy bonus in the loss"""
    value_coef: float = 0.5
    """weight of the critic's squared TD(λ) error in the loss"""
    gamma: float = 0.99
    """discount factor γ"""
    gae_lambda: float = 0.95
    """GAE λ"""
    max_grad_norm: float = 0.5
    """gradients are clipped to this global norm"""
    head_width: int = 128
    """width of the actor and critic heads' hidden layers"""
    head_layers: int = 1
    """hidden tanh layers of the actor and critic heads (thesis §5.1.2: one, "a 2-layer neural network" with "the
    hidden layer" of 128, as the thesis authors' code has it)"""
    policy_gain: float = 0.01
    """gain of the orthogonal initialisation of the policy logits: 0.01 starts from a near-uniform policy; the thesis
    authors' code uses √2 (1.4142…), which starts each seed from a peaked policy of its own, one that can walk a
    long T-Maze corridor to its junction (docs/reproduction.md: a uniform policy never reaches L = 128)"""
    bootstrap_truncated: bool = True
    """on a time-limit truncation bootstrap from the value of the cut-off observation
    (else treat it as terminal)"""
    replay_chunk_size: int = 0
    """replay a rollout for the gradient in checkpointed pieces of at most this many steps, recomputing each piece in
    the backward pass: the memory of the replay's activations falls to one piece's for one more forward pass (same
    outputs; docs/train_speed.md); 0: the whole rollout at once"""

    def __post_init__(self) -> None:
        check_positive(total_steps=self.total_steps, num_envs=self.num_envs, rollout_length=self.rollout_length,
                       head_width=self.head_width, head_layers=self.head_layers)
        check_real("learning_rate", self.learning_rate, 0.0, include_low=False)
        check_real("max_grad_norm", self.max_grad_norm, 0.0, include_low=False)
        check_real("gamma", self.gamma, 0.0, 1.0)
        check_real("gae_lambda", self.gae_lambda, 0.0, 1.0)
        check_real("entropy_coef", self.entropy_coef, 0.0)
        check_real("value_coef", self.value_coef, 0.0)
        check_real("policy_gain", self.policy_gain, 0.0, include_low=False)
        check_flag(bootstrap_truncated=self.bootstrap_truncated, anneal_lr=self.anneal_lr)
        check_int("replay_chunk_size", self.replay_chunk_size, 0, why="0 replays the whole rollout at once")
        self.check_schedule()
        resolve_memory(self.memory, self.memory_config)

    @property
    def steps_per_update(self) -> int:
        """Environment steps per environment in one update: the rollout length."""
        return self.rollout_length

    @property
    def gradient_steps_per_update(self) -> int:
        """Optimiser steps per update (A2C: one)."""
        return 1

    def learning_rate_schedule(self) -> float | optax.Schedule:
        """``learning_rate``, or with ``anneal_lr`` its linear decay to 0 over ``num_updates × gradient_steps_per_update``
        optimiser steps."""
        if not self.anneal_lr:
            return self.learning_rate
        return optax.linear_schedule(self.learning_rate, 0.0, self.num_updates * self.gradient_steps_per_update)


class ActorCriticTrainer(BaseTrainer):
    """Acting, bootstrapping and replay of an actor-critic; ``state.learner`` is the optimiser state."""

    def __init__(self, config: ActorCriticFields, env: Environment | EnvSpec, example_params: Any | None = None):
        super().__init__(config, env, example_params)
        self.network = ActorCritic(
            self.memory_name, frozen_config(self.memory_config), self.spec.num_actions, config.head_width,
            config.head_layers, self.spec.image_shape, config.policy_gain, self.spec.action_box is not None,
        )
        model = memory_lib.model_class(self.memory_name)
        if config.replay_chunk_size and not getattr(model, "carry_passes_gradients", True):
            raise ValueError(
                f"replay_chunk_size={config.replay_chunk_size} cannot be used with {model.__name__}: its carry enters "
                "a call without gradients, so a replay cut into pieces would not pass gradients from one piece to "
                "the one before it (a different update than the whole replay's); use replay_chunk_size=0"
            )
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate_schedule(), eps=1e-5)
        )

    def init_learner(self, params: PyTree) -> PyTree:
        return self.optimizer.init(params)

    def distribution(self, head: jax.Array) -> distrax.Distribution:
        """The policy of the actor's output ``head``: categorical over the logits, or, for a ``Box`` action space,
        a Gaussian with independent entries (``head`` is ``[mean | log_std]``)."""
        if self.spec.action_box is None:
            return distrax.Categorical(logits=head)
        mean, log_std = jnp.split(head, 2, axis=-1)
        return distrax.MultivariateNormalDiag(mean, jnp.exp(log_std))

    def heads(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array):
        """One stream, one step: ``(actor output, value, carry)`` (vmap it, then take :meth:`distribution`: a
        distribution built under ``vmap`` would keep its tracers)."""
        logits, value, carry = self.network.apply(params, obs[None], jnp.asarray(start, bool)[None], carry)
        return logits[0], value[0], carry

    def policy(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array):
        """One stream, one step: ``(policy distribution, value, carry)``."""
        head, value, carry = self.heads(params, carry, obs, start)
        return self.distribution(head), value, carry

    def act(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array, key: jax.Array):
        """Sample an action for one stream: ``(action, carry)`` (vmap for a batch), as the environment takes it
        (:meth:`~memgym.agents.spec.EnvSpec.env_action`)."""
        dist, _, carry = self.policy(params, carry, obs, start)
        return self.spec.env_action(dist.sample(seed=key)), carry

    def policy_step(self, params, carry, obs, start, keys):
        """Sample from the actor; record the critic's ``value`` and the action's ``log_prob``."""
        head, value, carry = jax.vmap(self.heads, in_axes=(None, 0, 0, 0))(params, carry, obs, start)
        dist = self.distribution(head)
        action = dist.sample(seed=keys[0])
        return action, carry, dict(value=value, log_prob=dist.log_prob(action))

    def bootstrap(self, params, carry, obs):
        """``final_value``: the critic's value of the observation a time limit cut the episode at."""
        if not self.config.bootstrap_truncated:  # treat a time limit like a terminal state
            return dict(final_value=jnp.zeros(obs.shape[0]))
        _, value, _ = jax.vmap(self.heads, in_axes=(None, 0, 0, 0))(params, carry, obs, jnp.zeros(obs.shape[0], bool))
        return dict(final_value=value)

    def replay(self, params: PyTree, obs: jax.Array, start: jax.Array, carry: PyTree):
        """Logits and values of ``[N, T]`` streams replayed from ``carry[N]`` (in checkpointed pieces of
        ``replay_chunk_size`` steps when it is set and shorter than the tape)."""

        def one_stream(obs, start, carry):
            logits, value, carry = self.network.apply(params, obs, start, carry)
            return (logits, value), carry

        chunk = self.config.replay_chunk_size
        if chunk and chunk < obs.shape[1]:
            return jax.vmap(lambda o, s, c: replay_in_chunks(one_stream, o, s, c, chunk))(obs, start, carry)
        return jax.vmap(lambda o, s, c: one_stream(o, s, c)[0])(obs, start, carry)

    def apply_gradients(self, params: PyTree, opt_state: PyTree, grads: PyTree) -> tuple[PyTree, PyTree]:
        """One optimiser step: clipped Adam."""
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def rollout(self, state: TrainState, trajectory: Trajectory) -> Rollout:
        """The :class:`~memgym.buffers.rollout.Rollout` of a trajectory collected up to ``state``."""
        steps = trajectory.steps
        return Rollout(
            **{name: steps[name] for name in ("obs", "start", "action", "reward", "terminated", "truncated",
                                              "value", "log_prob", "final_value")},
            carry=trajectory.carry, next_obs=state.obs, next_start=state.start,
        )


def actor_critic_loss(dist: distrax.Distribution, policy_loss: jax.Array, value_loss: jax.Array, config: ActorCriticFields):
    """``policy + value_coef · value − entropy_coef · entropy`` and its parts (A2C's and PPO's loss shape)."""
    entropy = jnp.mean(dist.entropy())
    loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
    return loss, dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy)


__getattr__ = forward(__name__, {
    "ActorCriticConfig": ("A2CConfig (memgym.agents.a2c) or PPOConfig (memgym.agents.ppo)",
                          lambda: importlib.import_module("memgym.agents.registry").actor_critic_config),
    "make_train": "memgym.agents.make_train",
})
