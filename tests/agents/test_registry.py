"""One registry from config type to trainer; trainers read spaces from an EnvSpec; one protocol."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import memgym  # noqa: F401  (registers the environments)
import memgym.agents
from memgym.agents.a2c import A2CConfig, A2CTrainer
from memgym.agents.dqn import DQNConfig, DQNTrainer
from memgym.agents.ppo import PPOConfig, PPOTrainer
from memgym.agents.registry import ALGORITHMS, TRAINERS, algorithm_name, make_train, make_trainer, trainer_class
from memgym.agents.spec import EnvSpec
from memgym.agents.trainer import BaseTrainer, Trainer
from memgym.envs import make_jax
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

SMALL = dict(memory="tiny-gru", num_envs=2)


def test_each_config_type_maps_to_its_trainer():
    assert ALGORITHMS == {"a2c": (A2CConfig, A2CTrainer), "ppo": (PPOConfig, PPOTrainer),
                          "dqn": (DQNConfig, DQNTrainer)}
    assert TRAINERS == {A2CConfig: A2CTrainer, PPOConfig: PPOTrainer, DQNConfig: DQNTrainer}
    assert memgym.agents.TRAINERS is TRAINERS and memgym.agents.make_trainer is make_trainer
    assert memgym.agents.ALGORITHMS is ALGORITHMS and memgym.agents.make_train is make_train
    assert (memgym.agents.A2CConfig, memgym.agents.PPOConfig, memgym.agents.DQNConfig) == (A2CConfig, PPOConfig,
                                                                                           DQNConfig)
    for name, config, cls in (("a2c", A2CConfig(**SMALL), A2CTrainer),
                              ("ppo", PPOConfig(num_minibatches=2, **SMALL), PPOTrainer),
                              ("dqn", DQNConfig(batch_size=100, **SMALL), DQNTrainer)):
        trainer = make_trainer(config, TMazeJax(), tmaze_params(5))
        assert type(trainer) is cls and trainer.config is config
        assert isinstance(trainer, BaseTrainer) and isinstance(trainer, Trainer)
        assert trainer_class(config) is cls and algorithm_name(config) == name
        train = make_train(config)  # on the JAX T-Maze by default
        assert type(train.__self__) is cls and train.__self__.spec == EnvSpec(16, np.dtype(np.float32), 4, None)
    # every command-line algorithm name has a trainer
    assert all(TRAINERS[config] is trainer for config, trainer in ALGORITHMS.values())


def test_unknown_config_is_a_clear_type_error():
    @dataclasses.dataclass(frozen=True)
    class SACConfig:
        memory: str = "gru"

    with pytest.raises(TypeError, match="SACConfig.*A2CConfig, PPOConfig, DQNConfig"):
        make_trainer(SACConfig(), TMazeJax())
    with pytest.raises(TypeError, match="SACConfig.*A2CConfig, PPOConfig, DQNConfig"):
        algorithm_name(SACConfig())


def test_spec_from_a_functional_env_and_from_gymnasium_spaces():
    from_env = EnvSpec.from_env(TMazeJax(), tmaze_params(7))
    env = gym.make("memgym/TMaze-v0", corridor_length=7)
    from_spaces = EnvSpec.from_spaces(env.observation_space, env.action_space)
    assert from_env == from_spaces == EnvSpec(16, np.dtype(np.float32), 4, None)
    image = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
                             "target": gym.spaces.Box(0.0, 1.0, (3,), np.float32)})
    assert EnvSpec.from_spaces(image, gym.spaces.Discrete(6)) == EnvSpec(8 * 8 * 3 + 3, np.dtype(np.uint8), 6, (8, 8, 3))
    for unfit in (gym.spaces.Box(-np.inf, np.inf, (2,)), gym.spaces.Box(0, 1, (2, 2)), gym.spaces.MultiBinary(3)):
        with pytest.raises(ValueError, match="Discrete or MultiDiscrete action space .* or a flat, bounded Box one"):
            EnvSpec.from_spaces(env.observation_space, unfit)
    box = EnvSpec.from_spaces(env.observation_space, gym.spaces.Box(-2.0, np.array([2.0, 1.0]), (2,)))
    assert (box.num_actions, box.action_box, box.action_nvec) == (2, ((-2.0, -2.0), (2.0, 1.0)), None)
    with pytest.raises(ValueError, match=r"\(values from 0\)"):
        EnvSpec.from_spaces(env.observation_space, gym.spaces.Discrete(3, start=1))


def test_a_multidiscrete_action_space_is_chosen_in_as_its_numbered_vectors():
    """A trainer chooses among the ``prod(nvec)`` action vectors of a MultiDiscrete space, numbered row-major, and
    hands the environment the vector (NumPy for the host loop, JAX inside jit, any batch shape)."""
    env, params = make_jax("memgym/popgym-BattleshipEasy-v0")
    spec = EnvSpec.from_env(env, params)
    assert spec == EnvSpec.from_spaces(gym.spaces.Box(0, 1, (18,), np.float32), gym.spaces.MultiDiscrete([8, 8]))
    assert (spec.num_actions, spec.action_nvec, spec.image_shape) == (64, (8, 8), None)
    assert spec.env_action(np.int64(8 * 3 + 5)).tolist() == [3, 5]
    np.testing.assert_array_equal(spec.env_action(np.arange(64).reshape(8, 8)), np.stack(np.indices((8, 8)), -1))
    batch = jax.jit(spec.env_action)(jnp.array([0, 9, 63]))
    assert batch.dtype == jnp.int32 and batch.tolist() == [[0, 0], [1, 1], [7, 7]]
    assert EnvSpec(16, np.dtype(np.float32), 4).env_action(np.int64(2)) == 2


def test_a_trainer_built_from_a_spec_has_no_env_to_step():
    trainer = make_trainer(A2CConfig(**SMALL), EnvSpec(16, np.dtype(np.float32), 4))
    assert trainer.spec.num_actions == 4
    with pytest.raises(ValueError, match="HostLoop"):
        trainer.init(None, tmaze_params(3))


def test_steps_per_update_means_steps_per_environment_in_every_config():
    a2c = A2CConfig(num_envs=4, rollout_length=32, total_steps=4 * 32 * 10, memory="tiny-gru")
    ppo = PPOConfig(num_envs=4, rollout_length=32, total_steps=4 * 32 * 10, memory="tiny-gru")
    dqn = DQNConfig(num_envs=4, steps_per_update=32, total_steps=4 * 32 * 10, batch_size=100 * 4, memory="tiny-gru")
    for config in (a2c, ppo, dqn):
        assert config.steps_per_update == 32
        assert config.env_steps_per_update == 4 * 32
        assert config.num_updates == 10


@pytest.mark.slow(seconds=16)
def test_a_new_algorithm_writes_only_its_policy_and_learning_steps():
    """A uniformly random policy that counts what it learns from: it trains functionally and in a host loop."""
    import jax
    import jax.numpy as jnp

    from memgym.agents.host import HostLoop
    from memgym.agents.networks import ActorCritic, frozen_config

    class RandomTrainer(BaseTrainer):
        def __init__(self, config, env, example_params=None):
            super().__init__(config, env, example_params)
            self.network = ActorCritic(self.memory_name, frozen_config(self.memory_config), self.spec.num_actions)

        def init_learner(self, params):
            return jnp.zeros((), jnp.int32)  # transitions seen

        def policy_step(self, params, carry, obs, start, keys):
            action = jax.random.randint(keys[0], obs.shape[:1], 0, self.spec.num_actions)
            return action, carry, {}

        def learn(self, state, trajectory):
            seen = state.learner + trajectory.steps["reward"].size
            return state.replace(learner=seen), dict(seen=seen)

        def act(self, params, carry, obs, start, key):
            return jax.random.randint(key, (), 0, self.spec.num_actions), carry

    config = A2CConfig(memory="tiny-gru", num_envs=2, rollout_length=8, total_steps=2 * 8 * 3)
    trainer = RandomTrainer(config, TMazeJax(), tmaze_params(3))
    state, metrics = jax.jit(trainer.train)(jax.random.key(0), tmaze_params(3, max_episode_steps=4))
    assert int(state.learner) == config.total_steps
    np.testing.assert_array_equal(metrics["env_steps"], [16, 32, 48])
    assert int(metrics["episodes"].sum()) >= 48 // 4
    envs = gym.make_vec("memgym/TMaze-v0", num_envs=2, vectorization_mode="sync", corridor_length=3,
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    loop = HostLoop(trainer, envs)
    assert [loop.update()["seen"] for _ in range(3)] == [16, 32, 48]
    envs.close()
