"""The trainer protocol and the base every algorithm builds on: init/run/train, the carry and the collector.

A trainer turns a config and a gymnax environment into pure ``init(key, env_params)``,
``run(state, env_params, num_updates)`` and ``train(key, env_params)``, so
``jax.jit(jax.vmap(trainer.train))`` trains many seeds and corridor lengths in one call;
it also acts one stream at a time (``initialize_carry()``, ``act(params, carry, obs, start,
key)``). :class:`BaseTrainer` implements all of that and the functional collector; an
algorithm writes its policy step and learning step. How the two collectors (this one
and :class:`memgym.agents.host.HostLoop`) record the same steps: docs/internals.md.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments.environment import Environment

from memgym.agents.config import resolve_memory
from memgym.agents.metrics import episode_sums
from memgym.agents.spec import EnvSpec
from memgym.envs import gymnax_compat
from memgym.envs.functional import EpisodeStatistics
from memgym.memory.batching import any_in_batch

PyTree = Any

#: Fields every per-step record has (``[E, T, ...]`` in a :class:`Trajectory`).
RECORD_FIELDS = ("obs", "start", "action", "reward", "terminated", "truncated", "next_obs")


@struct.dataclass
class TrainState:
    """Everything a run carries from one update to the next (environment leaves are ``[E, ...]``).

    Attributes:
        params: parameters of the network the policy acts with.
        learner: what the algorithm's learning step carries besides them (A2C/PPO:
            the optimiser state; DQN: target parameters, optimiser state, replays).
        wrapped_env_state: state of the stepped environment,
            :class:`~memgym.envs.functional.EpisodeStatisticsState` around the state of
            the environment the trainer was given; None in a host loop (the vector env
            holds its state).
        obs, start: the observation each environment acts on next, and whether it
            is an episode's first.
        carry: each environment's memory carry before ``obs``.
        key: PRNG key of the run.
        update: updates done.
    """

    params: PyTree
    learner: PyTree
    wrapped_env_state: PyTree
    obs: jax.Array
    start: jax.Array
    carry: PyTree
    key: jax.Array
    update: jax.Array

    @property
    def env_state(self) -> PyTree:
        """The state of the environment the trainer was given (inside the episode statistics), or None."""
        return None if self.wrapped_env_state is None else self.wrapped_env_state.inner


@struct.dataclass
class Trajectory:
    """What a collector hands the learning step.

    Attributes:
        steps: per-step records, ``[E, T, ...]`` (:data:`RECORD_FIELDS` plus the algorithm's).
        carry: each environment's memory carry before ``steps["obs"][:, 0]`` (leaves ``[E, ...]``).

    The observation after the last step is the state's ``obs``/``start`` after collection.
    """

    steps: dict[str, jax.Array]
    carry: PyTree


@runtime_checkable
class Trainer(Protocol):
    """What every trainer offers (see the module docstring); :class:`BaseTrainer` implements it."""

    config: Any
    spec: EnvSpec

    def init(self, key: jax.Array, env_params: Any) -> TrainState: ...

    def run(self, state: TrainState, env_params: Any, num_updates: int) -> tuple[TrainState, dict[str, jax.Array]]: ...

    def train(self, key: jax.Array, env_params: Any) -> tuple[TrainState, dict[str, jax.Array]]: ...

    def initialize_carry(self) -> PyTree: ...

    def act(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array, key: jax.Array): ...


def broadcast(tree: PyTree, n: int) -> PyTree:
    """``n`` copies of every leaf of ``tree`` along a new leading axis."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), tree)


class BaseTrainer:
    """Init/run/train, the memory carries and the functional collector, for any algorithm (module docstring).

    Args:
        config: the algorithm's config (``num_envs``, ``steps_per_update``, ``num_updates``,
            ``memory``, ``memory_config`` are read here).
        env: a gymnax environment to train on (it is wrapped in
            :class:`~memgym.envs.functional.EpisodeStatistics`, once: an env that is one
            already is not wrapped again), or only an
            :class:`~memgym.agents.spec.EnvSpec` for a trainer driven by a host loop.
        example_params: params of ``env`` to read its spaces from (default: its default
            params); the trainer is not bound to them.

    Subclasses set ``self.network`` (a flax module with ``initialize_carry()`` and
    ``apply(params, obs[T, O], start[T], carry)``) in ``__init__``.
    """

    #: PRNG keys :meth:`policy_step` draws per step.
    action_keys: int = 1

    def __init__(self, config: Any, env: Environment | EnvSpec, example_params: Any | None = None):
        self.config = config
        if isinstance(env, EnvSpec):
            self.env, self.spec = None, env
        else:
            self.env = EpisodeStatistics(env)
            self.spec = EnvSpec.from_env(env, example_params)
        self.memory_name, self.memory_config = resolve_memory(config.memory, config.memory_config)
        self.network: Any = None

    # --- what an algorithm writes ---------------------------------------------------------------

    def init_learner(self, params: PyTree) -> PyTree:
        """The learning state of a fresh run with network parameters ``params``."""
        raise NotImplementedError

    def acting(self, state: TrainState) -> tuple[PyTree, dict[str, jax.Array]]:
        """What :meth:`policy_step` acts with during the next update, and metrics describing it."""
        return state.params, {}

    def policy_step(self, acting: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array,
                    keys: list[jax.Array]) -> tuple[jax.Array, PyTree, dict[str, jax.Array]]:
        """Act in every environment (``carry``, ``obs``, ``start`` are ``[E, ...]``) with :attr:`action_keys` keys.

        Returns ``(action[E], next carry, record fields [E, ...] to store for learning)``.
        """
        raise NotImplementedError

    def bootstrap(self, acting: PyTree, carry: PyTree, obs: jax.Array) -> dict[str, jax.Array]:
        """Record fields ``[E]`` from the observation each episode stopped at, given the carry after acting.

        They are kept where a time limit truncated the episode and zero on every other
        step (a host loop calls this only when some episode was truncated). Default: none.
        """
        return {}

    def bootstrap_where_cut(self, acting: PyTree, carry: PyTree, obs: jax.Array, cut: jax.Array) -> dict[str, jax.Array]:
        """:meth:`bootstrap`'s fields where ``cut`` (a time limit ended the episode), zero elsewhere.

        The network runs only on steps where some episode was cut: a ``lax.cond`` on
        :func:`any_in_batch`, whose predicate stays one scalar when the collector is
        vmapped (over seeds, corridor lengths), so the branch is a real branch and not a
        ``select`` that would run the network on every step.
        """
        shapes = jax.eval_shape(self.bootstrap, acting, carry, obs)

        def compute(operands):
            return {k: jnp.where(cut, v, 0.0) for k, v in self.bootstrap(*operands).items()}

        def skip(operands):
            return {k: jnp.zeros(v.shape, v.dtype) for k, v in shapes.items()}

        if not shapes:
            return {}
        return jax.lax.cond(any_in_batch(cut), compute, skip, (acting, carry, obs))

    def learn(self, state: TrainState, trajectory: Trajectory) -> tuple[TrainState, dict[str, jax.Array]]:
        """The learning step on a collected trajectory (``state.update`` already counts this update)."""
        raise NotImplementedError

    def act(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array, key: jax.Array):
        """The evaluation policy of one stream, one step: ``(action, carry)`` (vmap for a batch)."""
        raise NotImplementedError

    # --- the network ------------------------------------------------------------------------------

    def initialize_carry(self) -> PyTree:
        """The memory carry of one stream before its first observation."""
        return self.network.initialize_carry()

    def init_params(self, key: jax.Array) -> PyTree:
        obs = jnp.zeros((1, self.spec.obs_size), self.spec.obs_dtype)
        return self.network.init(key, obs, jnp.ones(1, bool), self.initialize_carry())

    # --- a run ------------------------------------------------------------------------------------

    def env_steps(self, update: jax.Array) -> jax.Array:
        """Environment steps (over all environments) after ``update`` updates."""
        return update * self.config.env_steps_per_update

    def init(self, key: jax.Array, env_params: Any) -> TrainState:
        """A fresh run: parameters, learning state, ``num_envs`` reset environments, fresh carries."""
        reset = jax.vmap(self._functional_env().reset, in_axes=(0, None))
        key, key_params, key_reset = jax.random.split(key, 3)
        obs, env_state = reset(jax.random.split(key_reset, self.config.num_envs), env_params)
        return self.state_after_reset(key, key_params, obs, env_state)

    def state_after_reset(self, key: jax.Array, key_params: jax.Array, obs: jax.Array, env_state: PyTree = None) -> TrainState:
        """The state of a fresh run whose environments were reset to ``obs`` (and ``env_state``)."""
        params = self.init_params(key_params)
        num_envs = self.config.num_envs
        return TrainState(
            params=params,
            learner=self.init_learner(params),
            wrapped_env_state=env_state,
            obs=obs,
            start=jnp.ones(num_envs, bool),
            carry=broadcast(self.initialize_carry(), num_envs),
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    def step_keys(self, key: jax.Array) -> tuple[jax.Array, list[jax.Array], jax.Array]:
        """One step's keys: ``(next run key, policy keys, environment key)``."""
        key, *policy_keys, key_env = jax.random.split(key, 2 + self.action_keys)
        return key, policy_keys, key_env

    def collect(self, state: TrainState, env_params: Any,
                acting: PyTree) -> tuple[TrainState, Trajectory, dict[str, jax.Array]]:
        """``config.steps_per_update`` steps of every environment (a ``lax.scan``): the functional collector.

        Returns the state after them, the :class:`Trajectory` and the summed statistics
        of the episodes that finished (:func:`~memgym.agents.metrics.episode_sums`).
        """
        num_envs = self.config.num_envs
        step = jax.vmap(functools.partial(gymnax_compat.step, self._functional_env()), in_axes=(0, 0, 0, None))

        def one_step(runner, _):
            env_state, obs, start, carry, key = runner
            key, policy_keys, key_env = self.step_keys(key)
            action, next_carry, fields = self.policy_step(acting, carry, obs, start, policy_keys)
            next_obs, env_state, reward, terminated, truncated, info = step(
                jax.random.split(key_env, num_envs), env_state, self.spec.env_action(action), env_params
            )
            fields.update(self.bootstrap_where_cut(acting, next_carry, info["final_observation"], truncated & ~terminated))
            record = dict(obs=obs, start=start, action=action, reward=reward, terminated=terminated,
                          truncated=truncated, next_obs=info["final_observation"], **fields)
            return (env_state, next_obs, terminated | truncated, next_carry, key), (record, episode_sums(info))

        runner = (state.wrapped_env_state, state.obs, state.start, state.carry, state.key)
        (env_state, obs, start, carry, key), (steps, stats) = jax.lax.scan(
            one_step, runner, None, self.config.steps_per_update
        )
        steps = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), steps)  # [T, E] -> [E, T]
        trajectory = Trajectory(steps=steps, carry=state.carry)
        state = state.replace(wrapped_env_state=env_state, obs=obs, start=start, carry=carry, key=key)
        return state, trajectory, jax.tree.map(jnp.sum, stats)

    def learn_update(self, state: TrainState, trajectory: Trajectory) -> tuple[TrainState, dict[str, jax.Array]]:
        """Count the update and run :meth:`learn`; its metrics plus ``env_steps`` (the host loop calls this too)."""
        state = state.replace(update=state.update + 1)
        state, metrics = self.learn(state, trajectory)
        return state, dict(metrics, env_steps=self.env_steps(state.update))

    def update(self, state: TrainState, env_params: Any) -> tuple[TrainState, dict[str, jax.Array]]:
        """Collect ``steps_per_update`` steps per environment, then learn; this update's metrics."""
        acting, acting_metrics = self.acting(state)
        state, trajectory, stats = self.collect(state, env_params, acting)
        state, metrics = self.learn_update(state, trajectory)
        return state, dict(stats, **acting_metrics, **metrics)

    def run(self, state: TrainState, env_params: Any, num_updates: int) -> tuple[TrainState, dict[str, jax.Array]]:
        """``num_updates`` updates (a ``lax.scan``); metrics stacked ``[num_updates]``.

        Pure: jit it with ``num_updates`` static (``jax.jit(trainer.run, static_argnums=2)``).
        """
        return jax.lax.scan(lambda s, _: self.update(s, env_params), state, None, num_updates)

    def train(self, key: jax.Array, env_params: Any) -> tuple[TrainState, dict[str, jax.Array]]:
        """The whole run, ``config.num_updates`` updates: pure, so it jits and vmaps."""
        return self.run(self.init(key, env_params), env_params, self.config.num_updates)

    def _functional_env(self) -> Environment:
        if self.env is None:
            raise ValueError(
                f"this {type(self).__name__} was built from an EnvSpec, without an environment to step: "
                "train it with memgym.agents.host.HostLoop, or build it from a gymnax environment"
            )
        return self.env
