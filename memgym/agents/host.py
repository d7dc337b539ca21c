"""The host loop: any trainer's jitted policy and learning steps on a Gymnasium vector env.

For environments that are not written in JAX (POPGym, Memory Maze, any user
env) the environment steps on the host while acting (the trainer's policy step,
jitted, once per vector step) and learning (the trainer's jitted
:meth:`~memgym.agents.trainer.BaseTrainer.learn_update`) stay compiled.
:class:`HostLoop` is the one host collector: it records every step exactly like
the functional collector (:meth:`~memgym.agents.trainer.BaseTrainer.collect`) —
the same record fields, the same random keys per step (so the same actions for
the same environment outcomes) — and keeps episode statistics with the same
helper as :class:`~memgym.envs.functional.EpisodeStatistics`
(:func:`~memgym.envs.functional.track_episodes`), so every algorithm trains on
both without code of its own. The vector env must use
``AutoresetMode.SAME_STEP`` (the observation returned with an episode's end is
already the next episode's first one, the finished episode's last observation
is in ``info["final_obs"]``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from memgym.agents.metrics import episode_sums
from memgym.agents.spec import EnvSpec, ObservationLayout
from memgym.agents.trainer import BaseTrainer, Trajectory
from memgym.envs.functional import track_episodes


class HostLoop:
    """Trains ``trainer`` on ``envs`` (``config.num_envs`` sub-environments); :meth:`update` runs one update.

    ``trainer`` may be built from an :class:`~memgym.agents.spec.EnvSpec` of the envs'
    spaces (:meth:`for_config` does that) or from any functional environment with the
    same observation layout and actions.
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
        self.layout = ObservationLayout(envs.single_observation_space)

        def policy(acting, carry, obs, begin, key):
            key, policy_keys, _ = trainer.step_keys(key)  # the vector env draws its own randomness
            action, carry, fields = trainer.policy_step(acting, carry, obs, begin, policy_keys)
            return key, action, carry, fields

        def bootstrap(acting, carry, obs, cut):
            return {k: jnp.where(cut, v, 0.0) for k, v in trainer.bootstrap(acting, carry, obs).items()}

        self._policy = jax.jit(policy)
        self._bootstrap = jax.jit(bootstrap)
        self._learn = jax.jit(trainer.learn_update)
        key, key_params, _ = jax.random.split(jax.random.key(seed), 3)  # as Trainer.init; envs reset themselves
        obs, _ = envs.reset(seed=seed)
        self.state = trainer.start(key, key_params, jnp.asarray(self.layout.flatten(obs)))
        self.episode_return = np.zeros(config.num_envs)
        self.episode_length = np.zeros(config.num_envs, int)
        self._no_bootstrap: dict[str, np.ndarray] | None = None  # bootstrap fields of a step without truncations

    @classmethod
    def for_config(cls, config: Any, envs: gym.vector.VectorEnv, seed: int = 0) -> HostLoop:
        """A host loop with the trainer of ``config`` (:func:`memgym.agents.registry.make_trainer`) for ``envs``."""
        from memgym.agents.registry import make_trainer

        spec = EnvSpec.from_spaces(envs.single_observation_space, envs.single_action_space)
        return cls(make_trainer(config, spec), envs, seed=seed)

    def collect(self, acting: Any) -> tuple[Trajectory, dict[str, Any]]:
        """``config.steps_per_update`` vector steps: the trajectory (as the functional collector's) and the
        summed statistics of the episodes that finished."""
        trainer, state = self.trainer, self.state
        num_envs = trainer.config.num_envs
        records: list[dict[str, np.ndarray]] = []
        stats: dict[str, Any] = dict(episodes=0, successes=0, return_sum=0.0, length_sum=0)
        obs, begin, carry, key = state.obs, state.begin, state.carry, state.key
        for _ in range(trainer.config.steps_per_update):
            key, action, next_carry, fields = self._policy(acting, carry, obs, begin, key)
            next_obs, reward, terminated, truncated, info = self.envs.step(np.asarray(action))
            done = terminated | truncated
            flat_next = self.layout.flatten(next_obs)
            final_obs = flat_next.copy()  # the true next observation, also where an episode ended
            for i in np.flatnonzero(done):
                final_obs[i] = self.layout.flatten_one(info["final_obs"][i])
            cut = truncated & ~terminated
            if cut.any():
                fields.update(self._bootstrap(acting, next_carry, jnp.asarray(final_obs), jnp.asarray(cut)))
            else:  # the same fields, all zero, without a network call
                if self._no_bootstrap is None:
                    shapes = jax.eval_shape(trainer.bootstrap, acting, next_carry, jnp.asarray(final_obs))
                    self._no_bootstrap = {k: np.zeros(s.shape, s.dtype) for k, s in shapes.items()}
                fields.update(self._no_bootstrap)
            success = info.get("final_info", {}).get("success", np.zeros(num_envs, bool))
            episode, self.episode_return, self.episode_length = track_episodes(
                self.episode_return, self.episode_length, reward, terminated, truncated, np.asarray(success, bool)
            )
            for name, total in episode_sums(episode).items():
                stats[name] += total.item()
            records.append(dict(obs=obs, begin=begin, action=action, reward=reward, terminated=terminated,
                                truncated=truncated, next_obs=final_obs, **fields))
            obs, begin, carry = jnp.asarray(flat_next), jnp.asarray(done), next_carry
        steps = {name: jnp.asarray(np.stack([np.asarray(r[name]) for r in records], axis=1))  # [E, T]
                 for name in records[0]}
        steps["reward"] = steps["reward"].astype(jnp.float32)
        self.state = state.replace(obs=obs, begin=begin, carry=carry, key=key)
        return Trajectory(steps=steps, carry=state.carry), stats

    def update(self) -> dict[str, Any]:
        """One update: collect on the host, then the trainer's jitted learning step; this update's metrics."""
        acting, acting_metrics = self.trainer.acting(self.state)
        trajectory, stats = self.collect(acting)
        self.state, metrics = self._learn(self.state, trajectory)
        metrics = {k: float(v) for k, v in {**acting_metrics, **metrics}.items()}
        metrics["env_steps"] = int(metrics["env_steps"])
        return dict(stats, **metrics)
