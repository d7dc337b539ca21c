"""Host-side training: any trainer, jitted, on environments that step outside JAX.

For environments that are not written in JAX (POPGym, Memory Maze, any user
env) the environment steps on the host while acting (the trainer's policy step,
jitted, once per vector step) and learning (the trainer's jitted
:meth:`~memgym.agents.trainer.BaseTrainer.learn_update`) stay compiled.

* :class:`HostAgent` is a trainer behind the leaderboard's any-framework
  protocol (``act(obs, start)`` / ``observe(action, reward, next_obs,
  terminated, truncated)``, see :mod:`memgym.leaderboard.protocol`): whoever
  steps the environments calls it, and it learns every ``steps_per_update``
  steps. It records every step exactly like the functional collector
  (:meth:`~memgym.agents.trainer.BaseTrainer.collect`) — the same record fields,
  the same random keys per step (so the same actions for the same environment
  outcomes) — so every algorithm trains on it without code of its own. After
  ``total_steps`` training steps it acts with the trainer's evaluation policy
  (:meth:`~memgym.agents.trainer.BaseTrainer.act`, e.g. greedy for DQN).
* :class:`HostLoop` steps a Gymnasium vector env for a :class:`HostAgent` and
  keeps episode statistics with the same helper as
  :class:`~memgym.envs.functional.EpisodeStatistics`
  (:func:`~memgym.envs.functional.track_episodes`). The vector env must use
  ``AutoresetMode.SAME_STEP`` (the observation returned with an episode's end is
  already the next episode's first one, the finished episode's last observation
  is in ``info["final_obs"]``).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from memgym.agents.metrics import episode_sums
from memgym.agents.spec import EnvSpec, ObservationLayout
from memgym.agents.trainer import BaseTrainer, Trajectory, broadcast
from memgym.envs.functional import track_episodes


class HostAgent:
    """``trainer`` as an any-framework agent for ``config.num_envs`` host environments (module docstring).

    Args:
        trainer: any trainer; built from the environments' :class:`~memgym.agents.spec.EnvSpec`
            (:meth:`for_config`) or from a functional env with the same observation layout.
        observation_space: of one environment (how observations are flattened for the network).
        seed: seeds the parameters and the policy's randomness.
        total_steps: environment steps (over all environments) of training, after which
            :meth:`act` uses the evaluation policy; None: always the training policy.

    ``state`` (a :class:`~memgym.agents.trainer.TrainState`) exists from the first
    :meth:`act` (or :meth:`start`) on.
    """

    def __init__(self, trainer: BaseTrainer, observation_space: gym.Space, seed: int = 0,
                 total_steps: int | None = None):
        self.trainer, self.total_steps = trainer, total_steps
        self.layout = ObservationLayout(observation_space)
        self.num_envs = trainer.config.num_envs

        def policy(acting, carry, obs, start, key):
            key, policy_keys, _ = trainer.step_keys(key)  # the host env draws its own randomness
            action, carry, fields = trainer.policy_step(acting, carry, obs, start, policy_keys)
            return key, action, carry, fields

        def evaluate(params, carry, obs, start, key):
            keys = jax.random.split(key, obs.shape[0] + 1)
            action, carry = jax.vmap(trainer.act, in_axes=(None, 0, 0, 0, 0))(params, carry, obs, start, keys[1:])
            return keys[0], action, carry

        self._policy = jax.jit(policy)
        self._bootstrap = jax.jit(trainer.bootstrap_where_cut)
        self._evaluate = jax.jit(evaluate)
        self._learn = jax.jit(trainer.learn_update)
        self._seed = seed
        self.state = None
        self.steps = 0  # training steps observed, over all environments
        self._records: list[dict[str, np.ndarray]] = []
        self._acting: Any = None
        self._acting_metrics: dict[str, Any] = {}
        self._segment_carry: Any = None
        self._pending: tuple | None = None  # (obs, start, action, fields, next carry) of the step acted on
        self._eval: tuple | None = None  # (batch size, carry, key) of the evaluation policy

    @classmethod
    def for_config(cls, config: Any, observation_space: gym.Space, action_space: gym.Space, seed: int = 0,
                   total_steps: int | None = None) -> HostAgent:
        """The agent of ``config`` (:func:`memgym.agents.registry.make_trainer`) for environments with these spaces."""
        from memgym.agents.registry import make_trainer

        spec = EnvSpec.from_spaces(observation_space, action_space)
        return cls(make_trainer(config, spec), observation_space, seed=seed, total_steps=total_steps)

    @property
    def config(self) -> Any:
        """The trainer's config (a leaderboard record shows it)."""
        return self.trainer.config

    @property
    def evaluating(self) -> bool:
        """Whether the training budget is spent (:meth:`act` then uses the evaluation policy)."""
        return self.total_steps is not None and self.steps >= self.total_steps

    def new_run(self, obs: Any) -> None:
        """A fresh run whose environments were reset to ``obs`` (``[num_envs, ...]``)."""
        key, key_params, _ = jax.random.split(jax.random.key(self._seed), 3)  # as Trainer.init
        self.state = self.trainer.state_after_reset(key, key_params, jnp.asarray(self.layout.flatten(obs)))

    # --- the any-framework protocol ------------------------------------------------------------------

    def act(self, obs: Any, start: np.ndarray) -> np.ndarray:
        """Actions ``[N]`` (``[N, len(nvec)]`` for a ``MultiDiscrete`` space) for observations ``[N, ...]``
        (``start``: an episode's first observation)."""
        # NumPy into the jitted policy: an eager jnp.asarray per step cost a fifth of a POPGym training step
        flat, start = self.layout.flatten(obs), np.asarray(start, bool)
        if self.state is None:
            self.new_run(obs)
        if self.evaluating:
            # the batch size is kept beside the carry: a memoryless model's carry has no leaf to read it from
            if self._eval is None or self._eval[0] != flat.shape[0]:
                self._eval = (flat.shape[0], broadcast(self.trainer.initialize_carry(), flat.shape[0]),
                              jax.random.key(self._seed + 1))
            size, carry, key = self._eval
            key, action, carry = self._evaluate(self.state.params, carry, flat, start, key)
            self._eval = (size, carry, key)
            return np.asarray(action)
        return self.trainer.spec.env_action(np.asarray(self.step(flat, start)))

    def observe(self, action: Any, reward: Any, next_obs: Any, terminated: Any, truncated: Any) -> dict | None:
        """Record the step (``next_obs``: the true next observation, the last one where an episode ended)
        and learn once ``steps_per_update`` steps are recorded; that update's metrics, else None."""
        if self.evaluating:
            return None
        self.record(reward, self.layout.flatten(next_obs), terminated, truncated)
        if len(self._records) < self.trainer.config.steps_per_update:
            return None
        return self.learn()

    # --- the pieces ------------------------------------------------------------------------------------

    def step(self, obs: np.ndarray, start: np.ndarray) -> jax.Array:
        """The training policy on flattened ``obs``; the step waits for :meth:`record`."""
        if self._pending is not None:
            raise RuntimeError("act was called twice without observe in between")
        state = self.state
        if not self._records:  # a new segment: act with this update's acting parameters
            if self._acting is None:
                self._acting, self._acting_metrics = self.trainer.acting(state)
            self._segment_carry = state.carry
        key, action, next_carry, fields = self._policy(self._acting, state.carry, obs, start, state.key)
        self.state = state.replace(obs=obs, start=start, key=key)
        self._pending = (obs, start, action, fields, next_carry)
        return action

    def record(self, reward: Any, next_obs: np.ndarray, terminated: Any, truncated: Any) -> None:
        """Store the pending step with its outcome (``next_obs`` flattened, the true next observation)."""
        if self._pending is None:
            raise RuntimeError("observe was called without act before it")
        obs, start, action, fields, next_carry = self._pending
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        fields = dict(fields, **self._bootstrap(self._acting, next_carry, next_obs, truncated & ~terminated))
        self._records.append(dict(obs=obs, start=start, action=action, reward=np.asarray(reward),
                                  terminated=terminated, truncated=truncated, next_obs=next_obs, **fields))
        self.state = self.state.replace(carry=next_carry)
        self._pending = None
        self.steps += self.num_envs

    def trajectory(self) -> Trajectory:
        """The recorded segment as the functional collector's :class:`Trajectory` (``[E, T]``); clears it."""
        steps = {name: jnp.asarray(np.stack([np.asarray(r[name]) for r in self._records], axis=1))
                 for name in self._records[0]}
        steps["reward"] = steps["reward"].astype(jnp.float32)
        self._records = []
        return Trajectory(steps=steps, carry=self._segment_carry)

    def learn(self) -> dict[str, Any]:
        """The trainer's learning step on the recorded segment; its metrics as Python numbers."""
        acting_metrics = self._acting_metrics
        self.state, metrics = self._learn(self.state, self.trajectory())
        self._acting, self._acting_metrics = None, {}
        metrics = {k: float(v) for k, v in {**acting_metrics, **metrics}.items()}
        metrics["env_steps"] = int(metrics["env_steps"])
        return metrics


class HostLoop:
    """Trains ``trainer`` on ``envs`` (``config.num_envs`` sub-environments); :meth:`update` runs one update.

    ``trainer`` may be built from an :class:`~memgym.agents.spec.EnvSpec` of the envs'
    spaces (:meth:`for_config` does that) or from any functional environment with the
    same observation layout and actions. ``agent`` is its :class:`HostAgent`.
    """

    def __init__(self, trainer: BaseTrainer, envs: gym.vector.VectorEnv, seed: int = 0):
        config = trainer.config
        if envs.num_envs != config.num_envs:
            raise ValueError(f"envs has {envs.num_envs} sub-environments but config.num_envs={config.num_envs}")
        if envs.metadata.get("autoreset_mode") != gym.vector.AutoresetMode.SAME_STEP:
            raise ValueError("envs must be built with autoreset_mode=gym.vector.AutoresetMode.SAME_STEP")
        spec = EnvSpec.from_spaces(envs.single_observation_space, envs.single_action_space)
        if spec != trainer.spec:
            raise ValueError(f"envs' spec {spec} does not match the trainer's {trainer.spec}; "
                             "build the trainer with HostLoop.for_config(config, envs)")
        self.trainer, self.envs = trainer, envs
        self.agent = HostAgent(trainer, envs.single_observation_space, seed=seed)
        self._obs, _ = envs.reset(seed=seed)  # the envs reset themselves
        self.agent.new_run(self._obs)
        self.episode_return = np.zeros(config.num_envs)
        self.episode_length = np.zeros(config.num_envs, int)
        #: Wall-clock seconds of this loop's updates so far: stepping the envs, acting (the policy and
        #: recording each step) and learning (the trainer's update, compilation included).
        self.seconds = dict(env=0.0, acting=0.0, learning=0.0)

    @classmethod
    def for_config(cls, config: Any, envs: gym.vector.VectorEnv, seed: int = 0) -> HostLoop:
        """A host loop with the trainer of ``config`` (:func:`memgym.agents.registry.make_trainer`) for ``envs``."""
        from memgym.agents.registry import make_trainer

        spec = EnvSpec.from_spaces(envs.single_observation_space, envs.single_action_space)
        return cls(make_trainer(config, spec), envs, seed=seed)

    @property
    def state(self):
        """The run's :class:`~memgym.agents.trainer.TrainState` (settable, e.g. to resume from a checkpoint)."""
        return self.agent.state

    @state.setter
    def state(self, state) -> None:
        self.agent.state = state

    def collect(self, acting: Any) -> tuple[Trajectory, dict[str, Any]]:
        """``config.steps_per_update`` vector steps acting with ``acting``: the trajectory (as the functional
        collector's) and the summed statistics of the episodes that finished."""
        self.agent._acting = acting
        stats = self._steps()
        return self.agent.trajectory(), stats

    def update(self) -> dict[str, Any]:
        """One update: collect on the host, then the trainer's jitted learning step; this update's metrics."""
        stats = self._steps()
        started = time.perf_counter()
        metrics = self.agent.learn()
        self.seconds["learning"] += time.perf_counter() - started
        return dict(stats, **metrics)

    def _steps(self) -> dict[str, Any]:
        """Step the envs ``steps_per_update`` times with the agent recording; the finished episodes' sums."""
        agent, layout, num_envs = self.agent, self.agent.layout, self.trainer.config.num_envs
        stats: dict[str, Any] = dict(episodes=0, successes=0, return_sum=0.0, length_sum=0)
        start = np.asarray(agent.state.start)
        env_seconds, clock = 0.0, time.perf_counter()
        for _ in range(self.trainer.config.steps_per_update):
            action = self.trainer.spec.env_action(np.asarray(agent.step(layout.flatten(self._obs), start)))
            stepped = time.perf_counter()
            self._obs, reward, terminated, truncated, info = self.envs.step(action)
            env_seconds += time.perf_counter() - stepped
            done = terminated | truncated
            final_obs = layout.flatten(self._obs).copy()  # the true next observation, also where an episode ended
            for i in np.flatnonzero(done):
                final_obs[i] = layout.flatten_one(info["final_obs"][i])
            agent.record(reward, final_obs, terminated, truncated)
            success = info.get("final_info", {}).get("success", np.zeros(num_envs, bool))
            episode, self.episode_return, self.episode_length = track_episodes(
                self.episode_return, self.episode_length, reward, terminated, truncated, np.asarray(success, bool)
            )
            for name, total in episode_sums(episode).items():
                stats[name] += total.item()
            start = done
        agent.state = agent.state.replace(obs=layout.flatten(self._obs), start=start)
        self.seconds["env"] += env_seconds
        self.seconds["acting"] += time.perf_counter() - clock - env_seconds
        return stats
