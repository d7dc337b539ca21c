"""A host loop: the jitted act/learn functions of :class:`ActorCriticTrainer` on a Gymnasium vector env.

For environments that are not written in JAX (POPGym, Memory Maze, any user
env) the environment steps on the host while acting (one jitted, vmapped policy
step per vector step) and learning (the trainer's jitted ``learn`` on a
:class:`~memgym.buffers.rollout.Rollout`) stay compiled. The rollout is built
exactly like the pure-JAX collector builds it, so the same update code trains on
both. The vector env must use ``AutoresetMode.SAME_STEP`` (the observation
returned with an episode's end is already the next episode's first one, the
finished episode's last observation is in ``info["final_obs"]``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from memgym.agents.actor_critic import ActorCriticTrainer, RunnerState
from memgym.buffers.rollout import Rollout
from memgym.envs.functional import FunctionalEnv


class ObservationLayout:
    """How a host loop stores observations of ``space``: one flat vector of ``size`` entries of ``dtype`` each.

    * a 1-D ``Box`` is kept as it is, cast to float32;
    * a ``Dict`` with an ``"image"`` part (``Box`` of ``uint8``, ``(H, W, C)``) and
      other ``Box`` parts bounded in [0, 1] (e.g. Memory Maze's ``target_color``)
      becomes a ``uint8`` vector: the image bytes, then the other parts in key
      order, each scaled by 255 and rounded. One byte per entry keeps rollouts and
      replay buffers of images small;
      :class:`~memgym.agents.encoders.ObservationEncoder` (given
      :attr:`image_shape`) turns it back into an image and a vector.
    """

    def __init__(self, space: gym.Space):
        if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
            self.size, self.dtype, self.image_shape, self.keys = int(space.shape[0]), np.dtype(np.float32), None, None
            return
        if not isinstance(space, gym.spaces.Dict) or "image" not in space.spaces:
            raise ValueError(
                f"host loops need a flat Box observation space or a Dict with an 'image' part, got {space}"
            )
        image = space["image"]
        if not isinstance(image, gym.spaces.Box) or image.dtype != np.uint8 or len(image.shape) != 3:
            raise ValueError(f"observation part 'image' must be a uint8 Box of shape (H, W, C), got {image}")
        others = sorted(k for k in space.spaces if k != "image")
        for key in others:
            part = space[key]
            if (not isinstance(part, gym.spaces.Box) or not np.all(part.low >= 0.0)
                    or not np.all(part.high <= 1.0)):
                raise ValueError(f"observation part {key!r} must be a Box bounded in [0, 1] to be stored as bytes, "
                                 f"got {part}")
        self.image_shape = tuple(int(n) for n in image.shape)
        self.keys = ("image", *others)
        self.dtype = np.dtype(np.uint8)
        self.size = int(np.prod(self.image_shape)) + sum(int(np.prod(space[k].shape)) for k in others)

    @property
    def space(self) -> gym.spaces.Box:
        """The flat space of stored observations."""
        if self.keys is None:
            return gym.spaces.Box(-np.inf, np.inf, (self.size,), np.float32)
        return gym.spaces.Box(0, 255, (self.size,), np.uint8)

    def flatten(self, obs: Any) -> np.ndarray:
        """A batch of observations (``[N, ...]`` arrays, a dict of them for ``Dict``) -> ``[N, size]``."""
        if self.keys is None:
            return np.asarray(obs, np.float32)
        n = len(obs["image"])
        parts = [np.asarray(obs["image"], np.uint8).reshape(n, -1)]
        parts += [np.rint(np.asarray(obs[k], np.float64).reshape(n, -1) * 255.0).astype(np.uint8)
                  for k in self.keys[1:]]
        return np.concatenate(parts, axis=1)

    def flatten_one(self, obs: Any) -> np.ndarray:
        """One observation -> ``[size]``."""
        if self.keys is None:
            return np.asarray(obs, np.float32)
        return self.flatten({k: np.asarray(obs[k])[None] for k in self.keys})[0]


class GymnasiumSpaces(FunctionalEnv):
    """Only the spaces of a Gymnasium env: enough to build a trainer's networks for a host loop.

    Observations are described by their :class:`ObservationLayout`; ``image_shape``
    tells the trainer's network to put an image encoder in front of the memory.
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space):
        self.layout = ObservationLayout(observation_space)
        self.image_shape = self.layout.image_shape
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"host loops need a Discrete action space, got {action_space}")
        self._action_space = action_space

    def default_params(self, **overrides: Any) -> None:
        return None

    def observation_space(self, params: Any) -> gym.Space:
        return self.layout.space

    def action_space(self, params: Any) -> gym.Space:
        return self._action_space


def trainer_for(config: Any, envs: gym.vector.VectorEnv):
    """An :class:`ActorCriticTrainer` or :class:`~memgym.agents.dqn.DQNTrainer` for ``envs``' spaces."""
    from memgym.agents.config import DQNConfig

    spaces = GymnasiumSpaces(envs.single_observation_space, envs.single_action_space)
    if isinstance(config, DQNConfig):
        from memgym.agents.dqn import DQNTrainer

        return DQNTrainer(config, spaces)
    return ActorCriticTrainer(config, spaces)


def _check_envs(trainer: Any, envs: gym.vector.VectorEnv) -> ObservationLayout:
    """The observation layout of ``envs`` after checking that they suit ``trainer``."""
    config = trainer.config
    if envs.num_envs != config.num_envs:
        raise ValueError(f"envs has {envs.num_envs} sub-environments but config.num_envs={config.num_envs}")
    if envs.metadata.get("autoreset_mode") != gym.vector.AutoresetMode.SAME_STEP:
        raise ValueError("envs must be built with autoreset_mode=gym.vector.AutoresetMode.SAME_STEP")
    layout = ObservationLayout(envs.single_observation_space)
    if layout.size != trainer.obs_size or layout.image_shape != trainer.image_shape:
        raise ValueError(
            f"envs' observations ({layout.size} entries, image {layout.image_shape}) do not match the trainer's "
            f"({trainer.obs_size} entries, image {trainer.image_shape}); build the trainer with trainer_for(config, envs)"
        )
    return layout


class HostLoop:
    """Trains an :class:`ActorCriticTrainer` on ``envs`` (``config.num_envs`` sub-environments)."""

    def __init__(self, trainer: ActorCriticTrainer, envs: gym.vector.VectorEnv, seed: int = 0):
        config = trainer.config
        self.layout = _check_envs(trainer, envs)
        self.trainer, self.envs = trainer, envs
        policy = jax.vmap(trainer.policy, in_axes=(None, 0, 0, 0))

        def act(params, carry, obs, begin, key):
            dist, value, carry = policy(params, carry, obs, begin)
            action = dist.sample(seed=key)
            return action, dist.log_prob(action), value, carry

        self._act = jax.jit(act)
        self._value = jax.jit(lambda params, carry, obs: policy(params, carry, obs, jnp.zeros(obs.shape[0], bool))[1])
        self._learn = jax.jit(trainer.learn)
        key = jax.random.key(seed)
        key, key_params = jax.random.split(key)
        params = trainer.init_params(key_params)
        carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (config.num_envs,) + x.shape), trainer.initialize_carry())
        obs, _ = envs.reset(seed=seed)
        self.state = RunnerState(params, trainer.optimizer.init(params), None, jnp.asarray(self.layout.flatten(obs)),
                                 jnp.ones(config.num_envs, bool), carry, key, jnp.zeros((), jnp.int32))

    def update(self) -> dict[str, Any]:
        """One rollout on the host, one jitted learning step; returns this update's metrics."""
        config, state = self.trainer.config, self.state
        steps: dict[str, list] = {k: [] for k in ("obs", "begin", "action", "reward", "terminated", "truncated",
                                                   "value", "log_prob", "final_value")}
        stats = dict(episodes=0, successes=0, return_sum=0.0, length_sum=0)
        returns = getattr(self, "_returns", np.zeros(config.num_envs))
        lengths = getattr(self, "_lengths", np.zeros(config.num_envs, int))
        obs, begin, carry, key = state.obs, state.begin, state.carry, state.key
        start_carry = carry
        for _ in range(config.rollout_length):
            key, key_act = jax.random.split(key)
            action, log_prob, value, carry = self._act(state.params, carry, obs, begin, key_act)
            next_obs, reward, terminated, truncated, info = self.envs.step(np.asarray(action))
            done = terminated | truncated
            flat_next = self.layout.flatten(next_obs)
            final_value = np.zeros(config.num_envs, np.float32)
            cut = truncated & ~terminated
            if cut.any() and config.bootstrap_truncated:
                final_obs = flat_next.copy()
                for i in np.flatnonzero(cut):
                    final_obs[i] = self.layout.flatten_one(info["final_obs"][i])
                final_value = np.where(cut, np.asarray(self._value(state.params, carry, jnp.asarray(final_obs))), 0.0)
            returns += reward
            lengths += 1
            for i in np.flatnonzero(done):
                stats["episodes"] += 1
                stats["successes"] += bool(info.get("final_info", {}).get("success", np.zeros(len(done)))[i])
                stats["return_sum"] += float(returns[i])
                stats["length_sum"] += int(lengths[i])
            returns[done], lengths[done] = 0.0, 0
            for name, value_ in (("obs", obs), ("begin", begin), ("action", action), ("reward", reward),
                                 ("terminated", terminated), ("truncated", truncated), ("value", value),
                                 ("log_prob", log_prob), ("final_value", final_value)):
                steps[name].append(np.asarray(value_))
            obs, begin = jnp.asarray(flat_next), jnp.asarray(done)
        self._returns, self._lengths = returns, lengths
        arrays = {k: jnp.asarray(np.stack(v, axis=1)) for k, v in steps.items()}  # [E, T]
        arrays["reward"] = arrays["reward"].astype(jnp.float32)
        rollout = Rollout(**arrays, carry=start_carry, next_obs=obs, next_begin=begin)
        state = state.replace(obs=obs, begin=begin, carry=carry, key=key)
        state, losses = self._learn(state, rollout)
        self.state = state.replace(update=state.update + 1)
        env_steps = int(self.state.update) * config.steps_per_update
        return dict(stats, **{k: float(v) for k, v in losses.items()}, env_steps=env_steps)


class DQNHostLoop:
    """Trains a :class:`~memgym.agents.dqn.DQNTrainer` on ``envs`` with its jitted replay, learn and act.

    Each update takes ``config.steps_per_update`` ε-greedy vector steps on the host, appends
    them to the per-environment replays (TBB tapes or SBB segments) and, once past
    ``learning_starts``, takes one jitted gradient step (monoid paper Alg. 1 / 2).
    """

    def __init__(self, trainer: Any, envs: gym.vector.VectorEnv, seed: int = 0):
        from memgym.agents.dqn import DQNRunnerState

        config = trainer.config
        self.layout = _check_envs(trainer, envs)
        self.trainer, self.envs = trainer, envs
        q_values = jax.vmap(trainer.q_values, in_axes=(None, 0, 0, 0))

        def act(params, carry, obs, begin, key, epsilon):
            q, carry = q_values(params, carry, obs, begin)
            key_explore, key_random = jax.random.split(key)
            explore = jax.random.uniform(key_explore, (obs.shape[0],)) < epsilon
            random_action = jax.random.randint(key_random, (obs.shape[0],), 0, trainer.num_actions)
            return jnp.where(explore, random_action, jnp.argmax(q, axis=-1)).astype(jnp.int32), carry

        self._act = jax.jit(act)
        self._add = jax.jit(jax.vmap(trainer.replay.add))
        self._learn = jax.jit(trainer.learn)
        self._can_learn = jax.jit(trainer.can_learn)
        key, key_params = jax.random.split(jax.random.key(seed))
        params = trainer.init_params(key_params)
        obs, _ = envs.reset(seed=seed)
        num_envs = config.num_envs
        self.state = DQNRunnerState(
            params=params, target_params=params, opt_state=trainer.optimizer.init(params),
            replay=jax.vmap(lambda _: trainer.replay.init(trainer._example_transition()))(jnp.arange(num_envs)),
            env_state=None, obs=jnp.asarray(self.layout.flatten(obs)), begin=jnp.ones(num_envs, bool),
            carry=jax.tree.map(lambda x: jnp.broadcast_to(x, (num_envs,) + x.shape), trainer.initialize_carry()),
            key=key, update=jnp.zeros((), jnp.int32),
        )
        self._returns = np.zeros(num_envs)
        self._lengths = np.zeros(num_envs, int)

    def update(self) -> dict[str, Any]:
        trainer, config, state = self.trainer, self.trainer.config, self.state
        epsilon = trainer.epsilon(trainer.env_steps(state.update))
        stats = dict(episodes=0, successes=0, return_sum=0.0, length_sum=0)
        steps: dict[str, list] = {k: [] for k in ("obs", "action", "reward", "next_obs", "terminated", "begin")}
        obs, begin, carry, key = state.obs, state.begin, state.carry, state.key
        for _ in range(config.steps_per_update):
            key, key_act = jax.random.split(key)
            action, carry = self._act(state.params, carry, obs, begin, key_act, epsilon)
            next_obs, reward, terminated, truncated, info = self.envs.step(np.asarray(action))
            done = terminated | truncated
            flat_next = self.layout.flatten(next_obs)
            final_obs = flat_next.copy()
            self._returns += reward
            self._lengths += 1
            for i in np.flatnonzero(done):
                final_obs[i] = self.layout.flatten_one(info["final_obs"][i])
                stats["episodes"] += 1
                stats["successes"] += bool(info.get("final_info", {}).get("success", np.zeros(len(done)))[i])
                stats["return_sum"] += float(self._returns[i])
                stats["length_sum"] += int(self._lengths[i])
            self._returns[done], self._lengths[done] = 0.0, 0
            for name, value in (("obs", obs), ("action", action), ("reward", reward), ("next_obs", final_obs),
                                ("terminated", terminated), ("begin", begin)):
                steps[name].append(np.asarray(value))
            obs, begin = jnp.asarray(flat_next), jnp.asarray(done)
        arrays = {k: jnp.asarray(np.stack(v, axis=1)) for k, v in steps.items()}  # [E, T]
        begins = arrays.pop("begin")
        arrays["reward"] = arrays["reward"].astype(jnp.float32)
        replay = self._add(state.replay, arrays, begins)
        state = state.replace(replay=replay, obs=obs, begin=begin, carry=carry, key=key, update=state.update + 1)
        losses = dict(loss=0.0, q_mean=0.0)
        if bool(self._can_learn(state)):
            key, key_sample = jax.random.split(state.key)
            state, out = self._learn(state.replace(key=key), key_sample)
            losses = {k: float(v) for k, v in out.items()}
        self.state = state
        return dict(stats, **losses, epsilon=float(epsilon), env_steps=int(trainer.env_steps(state.update)))
