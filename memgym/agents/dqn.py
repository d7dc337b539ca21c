"""Recurrent double DQN with a dueling head, TBB or SBB replay, the whole run inside ``jit``.

Monoid paper §5.3, Algorithm 1 (TBB) / Algorithm 2 (SBB), with double Q-learning
(van Hasselt et al. 2016), a dueling head, the Huber loss and Polyak target averaging
``φ ← β φ + (1 − β) θ``. One memory pass over a :func:`markov_tape` gives both
``Q(s_t)`` and ``Q(s'_t)`` without dropping an episode's first observation. Each
environment keeps its own replay (§5.1: "one D, I per worker"); a batch draws from all
of them. The derivation, the collection schedule and the sampling: docs/internals.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct
from gymnax.environments.environment import Environment

from memgym.agents.config import Schedule, resolve_memory
from memgym.agents.networks import DuelingQNetwork, frozen_config
from memgym.agents.spec import EnvSpec
from memgym.agents.trainer import BaseTrainer, TrainState, Trajectory
from memgym.buffers import make_replay
from memgym.buffers.tape import Batch
from memgym.validation import check_choice, check_int, check_positive, check_real

PyTree = Any

@dataclasses.dataclass(frozen=True)
class DQNConfig(Schedule):
    """Double DQN with a dueling head over a memory model, TBB or SBB replay (monoid paper §5.3, Alg. 1–2)."""

    memory: str = "ffm"
    """memory model: a MEMORY_PRESETS name (e.g. arelit, gtrxl-256, tiny-gru) or a memgym.memory model name"""
    memory_config: str = ""
    """JSON object of memory model options overriding the preset's, e.g. '{"features": 64}'"""
    total_steps: int = 200_000
    """environment steps of the whole run, over all environments"""
    num_envs: int = 8
    """environments stepped in parallel, each with its own replay"""
    steps_per_update: int = 1
    """environment steps per environment between gradient updates"""
    batching: str = "tape"
    """replay: "tape" (TBB: whole episodes concatenated, full BPTT) or "segment"
    (SBB: zero-padded segments of segment_length)"""
    segment_length: int = 20
    """SBB: transitions per stored segment"""
    batch_size: int = 1000
    """transitions per gradient update (SBB: batch_size // segment_length segments)"""
    buffer_size: int = 100_000
    """replay capacity in transitions, split evenly across the environments' replays"""
    learning_starts: int = 5_000
    """environment steps (over all environments) before the first gradient update"""
    learning_rate: float = 1e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor γ"""
    target_rate: float = 0.995
    """Polyak β of the target network: target ← β·target + (1 − β)·online after every update"""
    epsilon_start: float = 1.0
    """ε of ε-greedy exploration at the start"""
    epsilon_end: float = 0.05
    """ε after annealing"""
    epsilon_fraction: float = 0.2
    """fraction of total_steps over which ε falls linearly from epsilon_start to epsilon_end"""
    max_grad_norm: float = 10.0
    """gradients are clipped to this global norm"""
    head_width: int = 128
    """width of the dueling value and advantage heads"""

    def __post_init__(self) -> None:
        check_choice("batching", self.batching, ("tape", "segment"))
        check_positive(total_steps=self.total_steps, num_envs=self.num_envs, steps_per_update=self.steps_per_update,
                       segment_length=self.segment_length, batch_size=self.batch_size, buffer_size=self.buffer_size,
                       head_width=self.head_width)
        check_int("learning_starts", self.learning_starts, low=0)
        check_real("learning_rate", self.learning_rate, 0.0, include_low=False)
        check_real("max_grad_norm", self.max_grad_norm, 0.0, include_low=False)
        check_real("epsilon_fraction", self.epsilon_fraction, 0.0, include_low=False)
        for name in ("gamma", "target_rate", "epsilon_start", "epsilon_end"):
            check_real(name, getattr(self, name), 0.0, 1.0)
        self.check_schedule()
        # Each environment keeps its own replay (a tape, or rows of segments); a batch draws from all of them.
        if self.batching == "segment" and self.batch_size % self.segment_length:
            raise ValueError(
                f"batch_size={self.batch_size} must be a multiple of segment_length={self.segment_length}"
            )
        per_env = self.buffer_size // self.num_envs
        if per_env < self.steps_per_update:
            raise ValueError(
                f"buffer_size={self.buffer_size} is too small for num_envs={self.num_envs} × "
                f"steps_per_update={self.steps_per_update}"
            )
        if self.batching == "segment" and per_env // self.segment_length < self.steps_per_update:
            raise ValueError(
                f"buffer_size={self.buffer_size} is too small: each of the num_envs={self.num_envs} environments "
                f"needs at least steps_per_update={self.steps_per_update} rows of segment_length={self.segment_length}"
            )
        resolve_memory(self.memory, self.memory_config)


#: Fields of a stored transition (with its start flag beside it).
TRANSITION_FIELDS = ("obs", "action", "reward", "next_obs", "terminated")


@struct.dataclass
class DQNLearner:
    """What DQN's learning step carries besides the online parameters (replay leaves are ``[E, ...]``)."""

    target_params: PyTree
    opt_state: PyTree
    replay: PyTree


def epsilon_greedy(keys: list[jax.Array], q: jax.Array, epsilon: jax.Array) -> jax.Array:
    """Actions ``[E]`` from Q values ``[E, A]``: uniformly random with probability ε, else greedy.

    ``keys`` are two PRNG keys: whether to explore, and the random action.
    """
    key_explore, key_random = keys
    num_envs, num_actions = q.shape
    explore = jax.random.uniform(key_explore, (num_envs,)) < epsilon
    random_action = jax.random.randint(key_random, (num_envs,), 0, num_actions)
    return jnp.where(explore, random_action, jnp.argmax(q, axis=-1)).astype(jnp.int32)


def markov_tape(obs: jax.Array, next_obs: jax.Array, start: jax.Array):
    """Lay a tape of ``n`` transitions out so one memory pass yields ``s_t`` and ``s'_t``.

    Every episode fragment (a run of transitions starting at a start flag, or at
    position 0) becomes ``o_first, o'_0, o'_1, …`` (docs/internals.md).

    Args:
        obs, next_obs: ``[n, ...]`` observations and next observations.
        start: ``[n]`` episode-start flags (position 0 is treated as a start).

    Returns:
        ``(tape_obs[2n, ...], tape_start[2n], state_index[n], next_index[n])``: run the
        memory over ``tape_obs`` with ``tape_start`` from a fresh carry; its output at
        ``state_index[t]`` is ``s_t`` and at ``next_index[t]`` is ``s'_t``.
    """
    n = start.shape[0]
    start = jnp.asarray(start, bool).at[0].set(True)
    fragments = jnp.cumsum(start)  # fragments begun at or before t
    next_index = jnp.arange(n) + fragments  # o'_t sits after t + 1 earlier slots of its fragment
    state_index = next_index - 1
    first = jnp.where(start, state_index, 2 * n)  # slot of each fragment's first observation
    tape_obs = jnp.zeros((2 * n,) + obs.shape[1:], obs.dtype)
    tape_obs = tape_obs.at[next_index].set(next_obs).at[first].set(obs, mode="drop")
    used = n + fragments[-1]
    tape_start = jnp.zeros(2 * n, bool).at[first].set(True, mode="drop") | (jnp.arange(2 * n) >= used)
    return tape_obs, tape_start, state_index, next_index


class DQNTrainer(BaseTrainer):
    """Recurrent double DQN (module docstring; docs/internals.md). ``state.learner`` is a :class:`DQNLearner`."""

    action_keys = 2  # explore or not, the random action

    def __init__(self, config: DQNConfig, env: Environment | EnvSpec, example_params: Any | None = None):
        super().__init__(config, env, example_params)
        if self.spec.action_box is not None:
            raise ValueError(f"DQN chooses among discrete actions; this environment's actions are real vectors (a Box "
                             f"with bounds {self.spec.action_box}): train it with A2C or PPO")
        self.network = DuelingQNetwork(
            self.memory_name, frozen_config(self.memory_config), self.spec.num_actions, config.head_width,
            self.spec.image_shape,
        )
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate)
        )
        self.replay = make_replay(config.batching, config.buffer_size // config.num_envs, config.segment_length)

    # --- acting ---------------------------------------------------------------------------

    def q_values(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array):
        """One stream, one step: ``(q[A], carry)``."""
        q, carry = self.network.apply(params, obs[None], jnp.asarray(start, bool)[None], carry)
        return q[0], carry

    def act(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array, key: jax.Array | None = None):
        """Greedy action of one stream (evaluation), as the environment takes it: ``(action, carry)``; ``key`` is
        unused."""
        q, carry = self.q_values(params, carry, obs, start)
        return self.spec.env_action(jnp.argmax(q)), carry

    def epsilon(self, env_steps: jax.Array) -> jax.Array:
        """Linear ε schedule over ``epsilon_fraction · total_steps`` environment steps."""
        config = self.config
        progress = jnp.clip(env_steps / (config.epsilon_fraction * config.total_steps), 0.0, 1.0)
        return config.epsilon_start + progress * (config.epsilon_end - config.epsilon_start)

    def acting(self, state: TrainState):
        """The online parameters and this update's ε (also reported as the metric ``epsilon``)."""
        epsilon = self.epsilon(self.env_steps(state.update))
        return (state.params, epsilon), dict(epsilon=epsilon)

    def policy_step(self, acting, carry, obs, start, keys):
        """ε-greedy on the online network's Q values; nothing extra to record."""
        params, epsilon = acting
        q, carry = jax.vmap(self.q_values, in_axes=(None, 0, 0, 0))(params, carry, obs, start)
        return epsilon_greedy(keys, q, epsilon), carry, {}

    # --- learning -------------------------------------------------------------------------

    def _example_transition(self) -> dict[str, jax.Array]:
        obs = jnp.zeros(self.spec.obs_size, self.spec.obs_dtype)
        return dict(
            obs=obs, action=jnp.zeros((), jnp.int32), reward=jnp.zeros((), jnp.float32),
            next_obs=obs, terminated=jnp.zeros((), bool),
        )

    def init_learner(self, params: PyTree) -> DQNLearner:
        replay = jax.vmap(lambda _: self.replay.init(self._example_transition()))(jnp.arange(self.config.num_envs))
        return DQNLearner(target_params=params, opt_state=self.optimizer.init(params), replay=replay)

    def can_learn(self, state: TrainState) -> jax.Array:
        """Past ``learning_starts`` environment steps, with something stored in every replay."""
        ready = jnp.all(jax.vmap(self.replay.can_sample)(state.learner.replay))
        return (self.env_steps(state.update) >= self.config.learning_starts) & ready

    def markov_q(self, params: PyTree, obs: jax.Array, next_obs: jax.Array, start: jax.Array):
        """``(Q(s_t)[n, A], Q(s'_t)[n, A])`` of one tape, replayed from a fresh carry (:func:`markov_tape`)."""
        tape_obs, tape_start, state_index, next_index = markov_tape(obs, next_obs, start)
        q, _ = self.network.apply(params, tape_obs, tape_start, self.initialize_carry())
        return q[state_index], q[next_index]

    def td_errors(self, params: PyTree, target_params: PyTree, data: dict[str, jax.Array], start: jax.Array):
        """TD errors ``Q_θ(s_t, a_t) − y_t`` and ``Q_θ(s_t, a_t)`` of one tape (double DQN target)."""
        q, q_next_online = self.markov_q(params, data["obs"], data["next_obs"], start)
        _, q_next_target = self.markov_q(target_params, data["obs"], data["next_obs"], start)
        q_taken = jnp.take_along_axis(q, data["action"][:, None], axis=-1)[:, 0]
        next_action = jnp.argmax(jax.lax.stop_gradient(q_next_online), axis=-1)
        next_value = jnp.take_along_axis(q_next_target, next_action[:, None], axis=-1)[:, 0]
        not_terminal = 1.0 - data["terminated"].astype(jnp.float32)
        target = data["reward"] + self.config.gamma * not_terminal * next_value
        return q_taken - jax.lax.stop_gradient(target), q_taken

    def loss(self, params: PyTree, target_params: PyTree, batch: Batch):
        """Masked Huber loss over a batch, averaged over its slots (Alg. 1 for TBB; Alg. 2, vmapped over
        segments, for SBB).

        Alg. 2 minimises ``m_{j,k} · |Q_θ(s_{j,k}, a_{j,k}) − ŷ_{j,k}|`` over every slot ``(j, k)`` of the
        batch, padding included, so the loss is divided by the batch's slots (``B``), not by its real
        transitions: as the paper says of SBB (Sec. 4), an update with less padding changes the weights
        more than one that is mostly padding. A TBB tape has no padding (its mask is all True), so there
        both divisions are the same. The ``q_mean`` diagnostic averages over real transitions only.
        """
        td_errors = self.td_errors
        if self.config.batching == "segment":
            td_errors = jax.vmap(td_errors, in_axes=(None, None, 0, 0))
        td, q_taken = td_errors(params, target_params, batch.data, batch.start)
        weight = batch.mask.astype(jnp.float32)
        loss = jnp.sum(weight * optax.huber_loss(td, delta=1.0)) / weight.size
        return loss, dict(q_mean=jnp.sum(weight * q_taken) / jnp.maximum(weight.sum(), 1.0))

    def gradient_step(self, state: TrainState, key: jax.Array) -> tuple[TrainState, dict[str, jax.Array]]:
        """One gradient step on a sampled batch (TBB ``[B]``, SBB ``[B // L, L]``), then the Polyak target update."""
        learner = state.learner
        batch = self.replay.sample_stacked(learner.replay, key, self.config.batch_size)
        (loss, aux), grads = jax.value_and_grad(self.loss, has_aux=True)(state.params, learner.target_params, batch)
        updates, opt_state = self.optimizer.update(grads, learner.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        beta = self.config.target_rate
        target_params = jax.tree.map(lambda t, p: beta * t + (1.0 - beta) * p, learner.target_params, params)
        state = state.replace(params=params, learner=learner.replace(target_params=target_params, opt_state=opt_state))
        return state, dict(loss=loss, **aux)

    def learn(self, state: TrainState, trajectory: Trajectory) -> tuple[TrainState, dict[str, jax.Array]]:
        """Append the steps to the replays, then one gradient step if past ``learning_starts``."""
        steps = trajectory.steps
        transitions = {name: steps[name] for name in TRANSITION_FIELDS}
        replay = jax.vmap(self.replay.add)(state.learner.replay, transitions, steps["start"])
        key, key_sample = jax.random.split(state.key)
        state = state.replace(key=key, learner=state.learner.replace(replay=replay))
        learning = self.can_learn(state)
        state, losses = jax.lax.cond(
            learning,
            lambda s: self.gradient_step(s, key_sample),
            lambda s: (s, dict(loss=jnp.zeros(()), q_mean=jnp.zeros(()))),
            state,
        )
        return state, dict(losses, learning=learning)

