"""Recurrent double DQN with a dueling head, TBB or SBB replay, the whole run inside ``jit``.

The update is monoid paper §5.3, Algorithm 1 (TBB) / Algorithm 2 (SBB), with the
usual refinements: double Q-learning (van Hasselt et al. 2016: the online network
picks the next action, the target network values it), a dueling head
(:class:`~memgym.agents.networks.DuelingQNetwork`), the Huber loss, and Polyak
target averaging ``φ ← β φ + (1 − β) θ`` with ``β = config.target_rate``::

    y_j = r_j + γ (1 − terminated_j) Q_φ(s'_j, argmax_a Q_θ(s'_j, a))
    θ  ← Adam step on  Σ_j m_j · huber(Q_θ(s_j, a_j) − y_j) / Σ_j m_j

(``m_j`` is the SBB padding mask, eq. 25; it is all ones for TBB.)

**Markov states.** ``s_t = M(o_0 … o_t)`` is the memory's summary of the episode so
far and ``s'_t = M(o_0 … o_t, o'_t)`` that summary after also seeing the next
observation ``o'_t`` (``next_obs``, the true one even where the episode ended,
``info["final_obs"]``). Alg. 1 writes ``s' ← M_φ(T_1 … T_B)``; running ``M`` over
the ``next_obs`` column alone with the same begin flags would give
``M(o'_0 … o'_t) = M(o_1 … o_{t+1})``, which drops each episode's first
observation (in the T-Maze, the cue). Within an episode ``o'_t = o_{t+1}``, so the
stream ``o_0, o'_0, o'_1, …, o'_{n−1}`` is the episode's complete observation
sequence and its memory outputs are ``s_0, s'_0, s'_1, …``: position ``k + 1`` of
that stream is ``s'_k`` and, for ``k + 1 < n``, also ``s_{k+1}``.
:func:`markov_tape` lays every episode fragment of a batch out this way (its first
observation, then the ``next_obs`` of each of its transitions) in a tape of static
length ``2B`` (at most ``B`` fragments, each adding one slot; the unused tail is
padding after everything real, which a causal memory never reads back). One pass
of a network over that tape from a fresh carry gives both ``Q(s_t)`` and
``Q(s'_t)``; the online pass supplies ``Q_θ(s_t, a_t)`` (with gradient) and the
double-DQN argmax, the target pass ``Q_φ(s'_t, ·)``. A fragment is a stored
episode (TBB: whole episodes, the last possibly cut) or a segment's run of one
episode (SBB: a segment that starts mid-episode starts from a fresh carry, the
truncated BPTT that defines SBB).

**Collection.** ``num_envs`` environments act ε-greedily with the online network,
one step at a time (``T = 1``), carrying their memory across updates (begin flags
reset it). ε falls linearly from ``epsilon_start`` to ``epsilon_end`` over
``epsilon_fraction · total_steps`` environment steps. Each update collects
``steps_per_update`` steps per environment, appends them (``obs, action, reward,
next_obs, terminated`` with begin flags) to that environment's own replay — one
:class:`~memgym.buffers.tape.TapeReplay` per environment (§5.1, "one D, I per
worker") of ``buffer_size // num_envs`` transitions, or one
:class:`~memgym.buffers.segment.SegmentReplay` of ``(buffer_size // num_envs) //
segment_length`` rows — and, once ``learning_starts`` environment steps are done,
takes one gradient step on ``batch_size`` sampled transitions.

Sampling: TBB draws ``batch_size // num_envs`` transitions from each tape
(:meth:`~memgym.buffers.tape.TapeReplay.sample_tapes`) and treats the concatenation
as one tape. SBB draws ``batch_size // segment_length`` segments uniformly from the
union of every environment's rows (eq. 26–27 stack all segments into one
dataset), so it only needs ``segment_length`` to divide ``batch_size``.

``DQNTrainer(config, env)`` gives ``init``, ``update``, ``run`` and ``train`` like
:class:`~memgym.agents.actor_critic.ActorCriticTrainer`; ``train`` is pure, so
``jax.jit(jax.vmap(trainer.train))`` trains many seeds and corridor lengths at once.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from memgym.agents.metrics import episode_stats
from memgym.agents.config import DQNConfig, resolve_memory
from memgym.agents.networks import DuelingQNetwork, frozen_config
from memgym.buffers import make_replay
from memgym.buffers.tape import Batch
from memgym.envs.functional import FunctionalEnv

PyTree = Any


@struct.dataclass
class DQNRunnerState:
    """Everything a DQN run carries between updates (environment and replay leaves are ``[E, ...]``)."""

    params: PyTree
    target_params: PyTree
    opt_state: PyTree
    replay: PyTree
    env_state: PyTree
    obs: jax.Array
    begin: jax.Array
    carry: PyTree
    key: jax.Array
    update: jax.Array


def markov_tape(obs: jax.Array, next_obs: jax.Array, begin: jax.Array):
    """Lay a tape of ``n`` transitions out so one memory pass yields ``s_t`` and ``s'_t``.

    Every episode fragment (a run of transitions starting at a begin flag, or at
    position 0) becomes ``o_first, o'_0, o'_1, …`` (see the module docstring).

    Args:
        obs, next_obs: ``[n, ...]`` observations and next observations.
        begin: ``[n]`` episode-start flags (position 0 is treated as a start).

    Returns:
        ``(tape_obs[2n, ...], tape_begin[2n], state_index[n], next_index[n])``: run the
        memory over ``tape_obs`` with ``tape_begin`` from a fresh carry; its output at
        ``state_index[t]`` is ``s_t`` and at ``next_index[t]`` is ``s'_t``.
    """
    n = begin.shape[0]
    start = jnp.asarray(begin, bool).at[0].set(True)
    fragments = jnp.cumsum(start)  # fragments begun at or before t
    next_index = jnp.arange(n) + fragments  # o'_t sits after t + 1 earlier slots of its fragment
    state_index = next_index - 1
    first = jnp.where(start, state_index, 2 * n)  # slot of each fragment's first observation
    tape_obs = jnp.zeros((2 * n,) + obs.shape[1:], obs.dtype)
    tape_obs = tape_obs.at[next_index].set(next_obs).at[first].set(obs, mode="drop")
    used = n + fragments[-1]
    tape_begin = jnp.zeros(2 * n, bool).at[first].set(True, mode="drop") | (jnp.arange(2 * n) >= used)
    return tape_obs, tape_begin, state_index, next_index


class DQNTrainer:
    """Recurrent double DQN on a :class:`~memgym.envs.functional.FunctionalEnv` (see module docstring)."""

    def __init__(self, config: DQNConfig, env: FunctionalEnv, example_params: Any | None = None):
        self.config = config
        self.env = env
        params = env.default_params() if example_params is None else example_params
        space = env.observation_space(params)
        self.obs_size, self.obs_dtype = int(space.shape[0]), np.dtype(space.dtype)
        self.image_shape = getattr(env, "image_shape", None)  # set by host loops for image observations
        self.num_actions = int(env.action_space(params).n)
        name, memory_config = resolve_memory(config.memory, config.memory_config)
        self.network = DuelingQNetwork(
            name, frozen_config(memory_config), self.num_actions, config.head_width, self.image_shape
        )
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate)
        )
        self.replay = make_replay(config.batching, config.buffer_size // config.num_envs, config.segment_length)
        self._run = jax.jit(self._scan_updates, static_argnums=2)

    # --- acting ---------------------------------------------------------------------------

    def initialize_carry(self) -> PyTree:
        """The memory carry of one stream before its first observation."""
        return self.network.initialize_carry()

    def init_params(self, key: jax.Array) -> PyTree:
        obs = jnp.zeros((1, self.obs_size), self.obs_dtype)
        return self.network.init(key, obs, jnp.ones(1, bool), self.initialize_carry())

    def q_values(self, params: PyTree, carry: PyTree, obs: jax.Array, begin: jax.Array):
        """One stream, one step: ``(q[A], carry)``."""
        q, carry = self.network.apply(params, obs[None], jnp.asarray(begin, bool)[None], carry)
        return q[0], carry

    def act(self, params: PyTree, carry: PyTree, obs: jax.Array, begin: jax.Array, key: jax.Array | None = None):
        """Greedy action of one stream (evaluation): ``(action, carry)``; ``key`` is unused."""
        q, carry = self.q_values(params, carry, obs, begin)
        return jnp.argmax(q), carry

    def epsilon(self, env_steps: jax.Array) -> jax.Array:
        """Linear ε schedule over ``epsilon_fraction · total_steps`` environment steps."""
        config = self.config
        progress = jnp.clip(env_steps / (config.epsilon_fraction * config.total_steps), 0.0, 1.0)
        return config.epsilon_start + progress * (config.epsilon_end - config.epsilon_start)

    # --- training -------------------------------------------------------------------------

    def _example_transition(self) -> dict[str, jax.Array]:
        obs = jnp.zeros(self.obs_size, self.obs_dtype)
        return dict(
            obs=obs, action=jnp.zeros((), jnp.int32), reward=jnp.zeros((), jnp.float32),
            next_obs=obs, terminated=jnp.zeros((), bool),
        )

    def init(self, key: jax.Array, env_params: Any) -> DQNRunnerState:
        num_envs = self.config.num_envs
        key, key_params, key_reset = jax.random.split(key, 3)
        params = self.init_params(key_params)
        obs, env_state = jax.vmap(self.env.reset, in_axes=(0, None))(jax.random.split(key_reset, num_envs), env_params)
        carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_envs,) + x.shape), self.initialize_carry())
        replay = jax.vmap(lambda _: self.replay.init(self._example_transition()))(jnp.arange(num_envs))
        return DQNRunnerState(
            params=params,
            target_params=params,
            opt_state=self.optimizer.init(params),
            replay=replay,
            env_state=env_state,
            obs=obs,
            begin=jnp.ones(num_envs, bool),
            carry=carry,
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    def env_steps(self, update: jax.Array) -> jax.Array:
        """Environment steps (over all environments) after ``update`` updates."""
        return update * (self.config.num_envs * self.config.steps_per_update)

    def collect(self, state: DQNRunnerState, env_params: Any) -> tuple[DQNRunnerState, dict[str, jax.Array]]:
        """``steps_per_update`` ε-greedy steps of every environment, appended to their replays."""
        num_envs = self.config.num_envs
        q_values = jax.vmap(self.q_values, in_axes=(None, 0, 0, 0))
        step = jax.vmap(self.env.step, in_axes=(0, 0, 0, None))
        epsilon = self.epsilon(self.env_steps(state.update))

        def one_step(runner, _):
            env_state, obs, begin, carry, key = runner
            key, key_explore, key_random, key_env = jax.random.split(key, 4)
            q, next_carry = q_values(state.params, carry, obs, begin)
            explore = jax.random.uniform(key_explore, (num_envs,)) < epsilon
            random_action = jax.random.randint(key_random, (num_envs,), 0, self.num_actions)
            action = jnp.where(explore, random_action, jnp.argmax(q, axis=-1)).astype(jnp.int32)
            next_obs, env_state, reward, terminated, truncated, info = step(
                jax.random.split(key_env, num_envs), env_state, action, env_params
            )
            transition = dict(
                obs=obs, action=action, reward=reward, next_obs=info["final_obs"], terminated=terminated
            )
            runner = (env_state, next_obs, terminated | truncated, next_carry, key)
            return runner, (transition, begin, episode_stats(info))

        start = (state.env_state, state.obs, state.begin, state.carry, state.key)
        (env_state, obs, begin, carry, key), (steps, begins, stats) = jax.lax.scan(
            one_step, start, None, self.config.steps_per_update
        )
        swap = lambda x: jnp.swapaxes(x, 0, 1)  # [T, E] -> [E, T]
        replay = jax.vmap(self.replay.add)(state.replay, jax.tree.map(swap, steps), swap(begins))
        state = state.replace(env_state=env_state, obs=obs, begin=begin, carry=carry, key=key, replay=replay)
        return state, dict(jax.tree.map(jnp.sum, stats), epsilon=epsilon)

    def can_learn(self, state: DQNRunnerState) -> jax.Array:
        """Past ``learning_starts`` environment steps, with something stored in every replay."""
        ready = jnp.all(jax.vmap(self.replay.can_sample)(state.replay))
        return (self.env_steps(state.update) >= self.config.learning_starts) & ready

    def sample(self, replay: PyTree, key: jax.Array) -> Batch:
        """A train batch: TBB ``[B]`` (one tape), SBB ``[B // L, L]`` segments."""
        config = self.config
        if config.batching == "tape":
            return self.replay.sample_tapes(replay, key, config.batch_size)
        # SBB: segments uniformly over every environment's stored rows (SegmentReplay.sample
        # draws from rows 0 … min(rows_used, capacity) − 1 of one replay; here of all of them).
        rows = jnp.minimum(replay.rows_used, self.replay.capacity)  # [E]
        ends = jnp.cumsum(rows)
        drawn = jax.random.randint(key, (config.batch_size // config.segment_length,), 0, jnp.maximum(ends[-1], 1))
        env = jnp.searchsorted(ends, drawn, side="right")
        row = drawn - (ends[env] - rows[env])
        take = lambda x: x[env, row]
        return Batch(data=jax.tree.map(take, replay.data), begin=take(replay.begin), mask=take(replay.mask))

    def markov_q(self, params: PyTree, obs: jax.Array, next_obs: jax.Array, begin: jax.Array):
        """``(Q(s_t)[n, A], Q(s'_t)[n, A])`` of one tape, replayed from a fresh carry (:func:`markov_tape`)."""
        tape_obs, tape_begin, state_index, next_index = markov_tape(obs, next_obs, begin)
        q, _ = self.network.apply(params, tape_obs, tape_begin, self.initialize_carry())
        return q[state_index], q[next_index]

    def td_errors(self, params: PyTree, target_params: PyTree, data: dict[str, jax.Array], begin: jax.Array):
        """TD errors ``Q_θ(s_t, a_t) − y_t`` and ``Q_θ(s_t, a_t)`` of one tape (double DQN target)."""
        q, q_next_online = self.markov_q(params, data["obs"], data["next_obs"], begin)
        _, q_next_target = self.markov_q(target_params, data["obs"], data["next_obs"], begin)
        q_taken = jnp.take_along_axis(q, data["action"][:, None], axis=-1)[:, 0]
        next_action = jnp.argmax(jax.lax.stop_gradient(q_next_online), axis=-1)
        next_value = jnp.take_along_axis(q_next_target, next_action[:, None], axis=-1)[:, 0]
        not_terminal = 1.0 - data["terminated"].astype(jnp.float32)
        target = data["reward"] + self.config.gamma * not_terminal * next_value
        return q_taken - jax.lax.stop_gradient(target), q_taken

    def loss(self, params: PyTree, target_params: PyTree, batch: Batch):
        """Masked mean Huber loss over a batch (Alg. 1 for TBB; Alg. 2, vmapped over segments, for SBB)."""
        td_errors = self.td_errors
        if self.config.batching == "segment":
            td_errors = jax.vmap(td_errors, in_axes=(None, None, 0, 0))
        td, q_taken = td_errors(params, target_params, batch.data, batch.begin)
        weight = batch.mask.astype(jnp.float32)
        count = jnp.maximum(weight.sum(), 1.0)
        loss = jnp.sum(weight * optax.huber_loss(td, delta=1.0)) / count
        return loss, dict(q_mean=jnp.sum(weight * q_taken) / count)

    def learn(self, state: DQNRunnerState, key: jax.Array) -> tuple[DQNRunnerState, dict[str, jax.Array]]:
        """One gradient step on a sampled batch, then the Polyak target update."""
        batch = self.sample(state.replay, key)
        (loss, aux), grads = jax.value_and_grad(self.loss, has_aux=True)(state.params, state.target_params, batch)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        beta = self.config.target_rate
        target_params = jax.tree.map(lambda t, p: beta * t + (1.0 - beta) * p, state.target_params, params)
        state = state.replace(params=params, target_params=target_params, opt_state=opt_state)
        return state, dict(loss=loss, **aux)

    def update(self, state: DQNRunnerState, env_params: Any) -> tuple[DQNRunnerState, dict[str, jax.Array]]:
        """Collect ``steps_per_update`` steps per environment, then learn if past ``learning_starts``."""
        state, stats = self.collect(state, env_params)
        state = state.replace(update=state.update + 1)
        key, key_sample = jax.random.split(state.key)
        state = state.replace(key=key)
        learning = self.can_learn(state)
        state, losses = jax.lax.cond(
            learning,
            lambda s: self.learn(s, key_sample),
            lambda s: (s, dict(loss=jnp.zeros(()), q_mean=jnp.zeros(()))),
            state,
        )
        return state, dict(stats, **losses, learning=learning, env_steps=self.env_steps(state.update))

    def run(self, state: DQNRunnerState, env_params: Any, num_updates: int):
        """``num_updates`` updates (a ``lax.scan``); metrics stacked ``[num_updates]``. Jitted."""
        return self._run(state, env_params, num_updates)

    def _scan_updates(self, state: DQNRunnerState, env_params: Any, num_updates: int):
        return jax.lax.scan(lambda s, _: self.update(s, env_params), state, None, num_updates)

    def train(self, key: jax.Array, env_params: Any) -> tuple[DQNRunnerState, dict[str, jax.Array]]:
        """The whole run, ``config.num_updates`` updates: pure, so it jits and vmaps."""
        return self._scan_updates(self.init(key, env_params), env_params, self.config.num_updates)


def make_train(config: DQNConfig, env: FunctionalEnv | None = None):
    """``train(key, env_params) -> (DQNRunnerState, metrics)`` for ``config``.

    ``env`` defaults to the pure-JAX T-Maze; ``jax.jit(jax.vmap(train))`` over keys and
    stacked env params (e.g. different corridor lengths) trains every cell in one call.
    """
    if env is None:
        from memgym.envs.tmaze_jax import TMazeJax

        env = TMazeJax()
    return DQNTrainer(config, env).train
