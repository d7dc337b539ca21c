"""Learning tests: small budgets, real learning, and a memoryless control that shows memory matters.

* A2C + AReLiT solves the T-Maze with corridor length 10 (success ≥ 0.95 at the end of training) in at
  least two of three seeds;
* A2C + the memoryless ``mlp`` with the same budget stays near chance (0.5): the cue is
  only visible on the first step, so without memory the turn is a coin flip;
* PPO improves on the T-Maze with corridor length 5;
* DQN with tape replay (TBB) and a monoid memory (FFM) learns POPGym's Repeat First (Easy)
  through the host loop (skipped when popgym is not installed; an extended test: CI runs TBB DQN learning
  the T-Maze, below);
* TBB DQN learns a T-Maze whose turn lies past a per-tape share of the batch.

Success and returns are the trainers' own per-update episode statistics, over the last
fifth of training (:func:`memgym.agents.metrics.success_over_last`). Every budget here
was tuned on a 2-core CPU; the seeds are fixed.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from memgym.agents import make_train
from memgym.agents.a2c import A2CConfig
from memgym.agents.dqn import DQNConfig
from memgym.agents.ppo import PPOConfig
from memgym.agents.metrics import success_over_last
from memgym.envs.tmaze_jax import tmaze_params

# A2C on the T-Maze with corridor length 10 (the junction is 9 steps from the cue).
CORRIDOR = 10
MAX_EPISODE_STEPS = 40
A2C_BUDGET = dict(num_envs=16, rollout_length=32, total_steps=500_000, learning_rate=1e-3, entropy_coef=1e-2)
# A small AReLiT: width 64, one layer, 2 heads × 32, η = 4, r = 1 (the thesis uses 128, 4 layers, 4 × 64).
SMALL_ARELIT = dict(features=64, num_layers=1, num_heads=2, head_dim=32, eta=4, r=1)


def tmaze_trainer(config: A2CConfig | PPOConfig, corridor_length: int):
    """``seed -> training metrics`` on the T-Maze: one jitted training function, compiled once for every seed."""
    params = tmaze_params(corridor_length, max_episode_steps=MAX_EPISODE_STEPS)
    train = jax.jit(make_train(config))

    def metrics_of(seed: int) -> dict[str, np.ndarray]:
        _, metrics = train(jax.random.key(seed), params)
        return {k: np.asarray(v) for k, v in metrics.items()}

    return metrics_of


def train_tmaze(config: A2CConfig | PPOConfig, corridor_length: int, seed: int = 0) -> dict[str, np.ndarray]:
    return tmaze_trainer(config, corridor_length)(seed)


def final_success(metrics: dict[str, np.ndarray], config: A2CConfig | PPOConfig, fraction: float = 0.2) -> float:
    """Success rate over the last ``fraction`` of the run's environment steps."""
    window = int(fraction * config.total_steps)
    return float(success_over_last(metrics, window, config.env_steps_per_update))


@pytest.mark.slow(seconds=150)
def test_a2c_with_arelit_solves_tmaze_corridor_10_in_most_seeds():
    """Two seeds of three at least, with room for a slow one.

    Seeds differ in when they first hold the cue, and which seed is slow moves with the CPU's instruction
    set. Under the suite's compiler flags on a 2-core Intel Xeon, seeds 1-9 hold it from 80-140K steps
    (one from 260K) and seed 0 from about 360K, where it had stayed at chance in a run of 300K. The budget
    (500K steps, the rate over the last 100K) leaves room for all ten; asking two of three for it leaves
    room for a seed slower still. Seeds 1 and 2 run first: where both learn, seed 0 (the slow one here)
    cannot change the outcome and is not run.
    """
    config = A2CConfig(memory="arelit", memory_config=json.dumps(SMALL_ARELIT), **A2C_BUDGET)
    tail = config.num_updates // 5
    successes, train = [], tmaze_trainer(config, CORRIDOR)
    for seed in (1, 2, 0):
        metrics = train(seed)
        assert np.all(np.isfinite(metrics["policy_loss"]))
        assert metrics["episodes"][-tail:].sum() > 1000  # the rate is measured over many episodes
        successes.append(final_success(metrics, config))
        learned = sum(s >= 0.95 for s in successes)
        if learned == 2:
            break  # the third seed cannot change the outcome
    assert learned >= 2, successes


@pytest.mark.slow(seconds=38)
def test_a2c_without_memory_stays_near_chance_on_tmaze_corridor_10():
    """Same budget, memoryless ``mlp``: it learns to walk to the junction, but not which way to turn."""
    config = A2CConfig(memory="mlp", memory_config=json.dumps({"features": 64}), **A2C_BUDGET)
    metrics = train_tmaze(config, CORRIDOR)
    tail = config.num_updates // 5
    assert metrics["episodes"][-tail:].sum() > 1000
    success = final_success(metrics, config)
    assert 0.35 <= success <= 0.65, success


@pytest.mark.slow
def test_ppo_improves_on_tmaze_corridor_5():
    config = PPOConfig(memory="tiny-gru", num_envs=8, rollout_length=32, total_steps=60_000, learning_rate=3e-3,
                       entropy_coef=1e-2, epochs=2, num_minibatches=2)
    metrics = train_tmaze(config, 5)
    assert np.all(np.isfinite(metrics["policy_loss"]))
    start = metrics["successes"][:5].sum() / max(metrics["episodes"][:5].sum(), 1)  # first 1,280 steps
    end = final_success(metrics, config)
    assert end >= 0.9 and end >= start + 0.3, (start, end)


@pytest.mark.slow(seconds=86)
@pytest.mark.extended  # DQN's host loop (extended) on another model; CI: TBB DQN learns the T-Maze, below
def test_dqn_with_tape_replay_and_ffm_learns_repeat_first():
    """Repeat First (Easy): say the suit of the episode's first card at each of its 51 steps.

    Every step scores ±1/51, so a random policy returns −0.5 on average and a perfect one 1.0;
    only a memory of the first observation does better than −0.5. Rewards do not depend on
    later steps, so a short discount (γ = 0.5) suffices and speeds up learning. TBB batches are
    whole episodes (monoid paper Alg. 5), so the memory must hold the first card for all 51
    steps: a 32-slot FFM does (an 8-slot one learned only when batches held episode beginnings).
    """
    pytest.importorskip("popgym")
    import gymnasium as gym

    import memgym  # noqa: F401  (registers the environments)
    from memgym.agents.host import HostLoop

    config = DQNConfig(
        memory="ffm", memory_config=json.dumps({"features": 32, "memory_size": 32, "context_size": 4}),
        batching="tape", num_envs=8, steps_per_update=1, total_steps=24_000, batch_size=256, buffer_size=16_000,
        learning_starts=1_000, learning_rate=3e-3, gamma=0.5, target_rate=0.95, epsilon_fraction=0.3,
        head_width=64,
    )
    envs = gym.make_vec("memgym/popgym-RepeatFirstEasy-v0", num_envs=config.num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    try:
        loop = HostLoop.for_config(config, envs, seed=0)
        history = [loop.update() for _ in range(config.num_updates)]
    finally:
        envs.close()
    assert history[-1]["env_steps"] == config.total_steps

    def mean_return(part):
        episodes = sum(h["episodes"] for h in part)
        assert episodes >= 40, episodes
        return sum(h["return_sum"] for h in part) / episodes

    fifth = config.num_updates // 5
    start, end = mean_return(history[:fifth]), mean_return(history[-fifth:])
    assert start < -0.3, start  # ε ≈ 1 at first: about the random policy's −0.5
    assert end >= 0.3, (start, end)  # far above random (−0.5); the ε = 0.05 ceiling is ≈ 0.93


@pytest.mark.slow
def test_tbb_dqn_learns_a_tmaze_whose_turn_lies_past_a_per_tape_share_of_the_batch():
    """The T-Maze's only informative reward is the turn at the junction, at step L − 1 = 11 or later.
    With 8 environments and B = 64, an even split of the batch over the 8 tapes (8 steps each, from
    an episode start) never samples it, and DQN stays at 0.10 success over these seeds
    (benchmarks/tbb_long_episodes.py); Alg. 5 over all tapes samples whole episodes and reaches 0.79."""
    from memgym.agents.dqn import DQNTrainer
    from memgym.envs.tmaze_jax import TMazeJax

    config = DQNConfig(memory="ffm", memory_config=json.dumps({"features": 32, "memory_size": 8, "context_size": 4}),
                       num_envs=8, steps_per_update=4, total_steps=150_000, batch_size=64, buffer_size=16_000,
                       learning_starts=2_000, learning_rate=1e-3, gamma=0.99, target_rate=0.99,
                       epsilon_fraction=0.2, head_width=64)
    trainer = DQNTrainer(config, TMazeJax())
    params = tmaze_params(12, max_episode_steps=48)
    _, metrics = jax.jit(jax.vmap(trainer.train, in_axes=(0, None)))(jax.random.split(jax.random.key(0), 3), params)
    success = success_over_last(metrics, config.total_steps // 5, config.env_steps_per_update)
    assert success.mean() > 0.4, success
