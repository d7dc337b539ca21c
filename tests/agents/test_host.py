"""The host loop trains any trainer on a Gymnasium vector env, recording what the functional collector records."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import memgym  # noqa: F401  (registers the environments)
from memgym.agents.a2c import A2CConfig, A2CTrainer
from memgym.agents.dqn import DQNConfig
from memgym.agents.host import HostLoop
from memgym.agents.ppo import PPOConfig
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params


def vector_env(num_envs: int, autoreset=gym.vector.AutoresetMode.SAME_STEP):
    return gym.make_vec("memgym/TMaze-v0", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": autoreset}, corridor_length=3, max_episode_steps=8)


@pytest.mark.slow
def test_host_loop_counts_episodes_and_learns_the_short_maze():
    # 240 updates: with the thesis's heads (one hidden layer) seeds 0-2 pass 0.9 after 160-180 and end at 0.99
    config = A2CConfig(memory="tiny-gru", num_envs=8, rollout_length=32, total_steps=8 * 32 * 240,
                       learning_rate=1e-3, entropy_coef=1e-2)
    loop = HostLoop(A2CTrainer(config, TMazeJax(), example_params=tmaze_params(3)), vector_env(8), seed=0)
    history = [loop.update() for _ in range(config.num_updates)]
    assert history[-1]["env_steps"] == config.total_steps
    assert all(np.isfinite(h["policy_loss"]) for h in history)
    episodes = sum(h["episodes"] for h in history[-20:])
    assert episodes > 0 and sum(h["successes"] for h in history[-20:]) / episodes > 0.9


def test_host_loop_rejects_mismatched_envs():
    config = A2CConfig(memory="tiny-gru", num_envs=8)
    trainer = A2CTrainer(config, TMazeJax())
    with pytest.raises(ValueError, match="config.num_envs=8"):
        HostLoop(trainer, vector_env(4))
    with pytest.raises(ValueError, match="SAME_STEP"):
        HostLoop(trainer, vector_env(8, gym.vector.AutoresetMode.NEXT_STEP))


# Extended: the host loop learning the short maze runs in CI with A2C (the test above); this repeats it with DQN.
@pytest.mark.slow(seconds=35)
@pytest.mark.extended
def test_dqn_host_loop_learns_the_short_maze():
    from memgym.agents.dqn import DQNTrainer

    config = DQNConfig(memory="gru", memory_config='{"features": 32}', num_envs=8, total_steps=12_000,
                       batch_size=128, buffer_size=8_000, learning_starts=1_000, learning_rate=1e-3,
                       target_rate=0.99, epsilon_fraction=0.3)
    loop = HostLoop(DQNTrainer(config, TMazeJax(), example_params=tmaze_params(3)), vector_env(8), seed=0)
    history = [loop.update() for _ in range(config.num_updates)]
    assert history[-1]["env_steps"] == config.total_steps and history[-1]["loss"] > 0
    tail = history[-config.num_updates // 5:]
    episodes = sum(h["episodes"] for h in tail)
    assert episodes > 0 and sum(h["successes"] for h in tail) / episodes > 0.8


@pytest.mark.parametrize("kind", ["ppo", "dqn"])
@pytest.mark.slow
def test_host_loops_train_on_popgym(kind):
    pytest.importorskip("popgym")

    envs = gym.make_vec("memgym/popgym-RepeatPreviousEasy-v0", num_envs=4, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    if kind == "ppo":
        config = PPOConfig(memory="ffm", memory_config='{"features": 16, "memory_size": 8, "context_size": 4}',
                           num_envs=4, rollout_length=16, total_steps=4 * 16 * 3, num_minibatches=2)
    else:
        config = DQNConfig(memory="lru", memory_config='{"features": 16, "state_size": 8}', num_envs=4,
                           total_steps=4 * 40, batch_size=32, buffer_size=400, learning_starts=64)
    loop = HostLoop.for_config(config, envs)
    history = [loop.update() for _ in range(config.num_updates)]
    assert history[-1]["env_steps"] == config.total_steps
    assert all(np.isfinite(v) for h in history for k, v in h.items() if "loss" in k)
    assert history[-1]["loss" if kind == "dqn" else "policy_loss"] != 0.0  # a gradient step happened


class DeterministicTMaze(TMazeJax):
    """T-Maze whose goal is always left: with no distractors it draws no randomness at all, so the
    functional collector and a host loop over its Gymnasium adapter see the same environment."""

    def reset_env(self, key, params):
        _, state = super().reset_env(key, params)
        state = dataclasses.replace(state, goal=jnp.zeros((), jnp.int32))
        return self._observation(state, jnp.zeros(params.num_distractors, jnp.int32), params), state


@pytest.mark.parametrize("kind", ["a2c", "dqn"])
@pytest.mark.slow
def test_functional_and_host_collectors_record_the_same_steps(kind):
    """Same seed, same environment: both collectors draw the same keys, act the same and record the same."""
    from memgym.agents.registry import make_trainer
    from memgym.envs.functional import GymnasiumAdapter

    env = DeterministicTMaze()
    params = tmaze_params(3, num_distractors=0, max_episode_steps=5)  # terminations and truncations
    if kind == "a2c":
        config = A2CConfig(memory="tiny-gru", num_envs=4, rollout_length=24, total_steps=4 * 24, entropy_coef=1e-2)
    else:
        config = DQNConfig(memory="tiny-gru", num_envs=4, steps_per_update=24, total_steps=4 * 24, batch_size=32,
                           buffer_size=400, learning_starts=0, epsilon_start=0.5)
    trainer = make_trainer(config, env, params)
    state = trainer.init(jax.random.key(7), params)
    acting, _ = trainer.acting(state)
    after, trajectory, stats = jax.jit(trainer.collect)(state, params, acting)

    envs = gym.vector.SyncVectorEnv([lambda: GymnasiumAdapter(env, params)] * config.num_envs,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    loop = HostLoop(trainer, envs, seed=7)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(loop.state.params)):
        np.testing.assert_array_equal(a, b)
    host_trajectory, host_stats = loop.collect(trainer.acting(loop.state)[0])

    steps, host_steps = trajectory.steps, host_trajectory.steps
    assert sorted(steps) == sorted(host_steps)
    assert {"obs", "start", "action", "reward", "terminated", "truncated", "next_obs"} <= set(steps)
    assert np.asarray(steps["truncated"]).any() and np.asarray(steps["terminated"]).any()
    for name in steps:
        assert steps[name].shape == host_steps[name].shape and steps[name].dtype == host_steps[name].dtype, name
        np.testing.assert_allclose(np.asarray(steps[name], float), np.asarray(host_steps[name], float),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    assert {k: float(v) for k, v in stats.items()} == pytest.approx(host_stats)
    np.testing.assert_array_equal(after.obs, loop.state.obs)
    np.testing.assert_array_equal(jax.random.key_data(after.key), jax.random.key_data(loop.state.key))
    envs.close()


@pytest.mark.slow(seconds=28)
def test_host_agent_speaks_the_any_framework_protocol_and_evaluates_greedily():
    """Driven through act/observe only: it learns every steps_per_update steps, then, once total_steps are
    spent, acts with the trainer's evaluation policy (greedy Q for DQN) on every stream's own carry."""
    from memgym.agents.host import HostAgent
    from memgym.agents.trainer import broadcast

    envs = vector_env(4)
    config = DQNConfig(memory="tiny-gru", num_envs=4, steps_per_update=2, total_steps=4 * 2 * 10, batch_size=16,
                       buffer_size=400, learning_starts=16)
    agent = HostAgent.for_config(config, envs.single_observation_space, envs.single_action_space, seed=3,
                                 total_steps=config.total_steps)
    obs, _ = envs.reset(seed=0)
    start = np.ones(4, bool)
    updates = []
    while not agent.evaluating:
        action = agent.act(obs, start)
        assert action.shape == (4,) and envs.single_action_space.contains(int(action[0]))
        obs, reward, terminated, truncated, info = envs.step(action)
        done = terminated | truncated
        final = obs.copy()
        final[done] = np.stack([info["final_obs"][i] for i in np.flatnonzero(done)]) if done.any() else final[done]
        metrics = agent.observe(action, reward, final, terminated, truncated)
        if metrics is not None:
            updates.append(metrics)
        start = done
    assert len(updates) == 10 and updates[-1]["env_steps"] == config.total_steps and updates[-1]["loss"] > 0
    assert agent.observe(action, reward, final, terminated, truncated) is None  # evaluation: nothing recorded

    trainer, params = agent.trainer, agent.state.params
    carry = broadcast(trainer.initialize_carry(), 3)
    obs3, start3 = obs[:3].astype(np.float32), np.ones(3, bool)
    for _ in range(3):
        expected, carry = jax.vmap(trainer.act, in_axes=(None, 0, 0, 0, None))(
            params, carry, jnp.asarray(obs3), jnp.asarray(start3), jax.random.key(0))
        np.testing.assert_array_equal(agent.act(obs3, start3), expected)  # a batch of 3 streams: its own carry
        start3 = np.zeros(3, bool)
    envs.close()


def test_host_agent_refuses_act_and_observe_out_of_turn():
    from memgym.agents.host import HostAgent

    envs = vector_env(2)
    config = DQNConfig(memory="tiny-gru", num_envs=2, total_steps=100, batch_size=8, buffer_size=100)
    agent = HostAgent.for_config(config, envs.single_observation_space, envs.single_action_space)
    obs, _ = envs.reset(seed=0)
    with pytest.raises(RuntimeError, match="observe was called without act"):
        agent.observe(np.zeros(2, int), np.zeros(2), obs, np.zeros(2, bool), np.zeros(2, bool))
    agent.act(obs, np.ones(2, bool))
    with pytest.raises(RuntimeError, match="act was called twice"):
        agent.act(obs, np.ones(2, bool))
    envs.close()
