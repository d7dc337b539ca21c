"""memorax's own recurrent PPO on memgym's T-Maze (``pip install "memgym[jax]" memorax gymnax==0.0.9``: memorax 1.0
steps gymnax environments with gymnax 0.0.9's five values, which memgym's environments follow under 0.0.9).

memorax (a JAX library of memory-based RL algorithms) trains on gymnax environments; memgym's JAX T-Maze is one,
so memorax's ``PPO`` takes it as it takes gymnax's own: the env and its params go into the algorithm, a frozen
dataclass that memorax passes to ``jax.jit`` as a static argument (memgym's params hash, as gymnax's do). The
model is memorax's: an MLP feature extractor and a GRU torso, actor and critic heads.

    python examples/memorax_ppo.py --corridor-length 4 --steps 200000
"""

from __future__ import annotations

import argparse

import flax.linen as nn
import jax
import numpy as np
import optax
from memorax.algorithms import PPO, PPOConfig
from memorax.networks import MLP, RNN, FeatureExtractor, Network, heads

from memgym.envs import make_jax
from memgym.envs.tmaze import SUCCESS_REWARD


def make_agent(corridor_length: int, num_envs: int = 8, num_steps: int = 32, learning_rate: float = 3e-3) -> PPO:
    """memorax's PPO with a GRU on the T-Maze of ``corridor_length`` (episodes of at most 4 L steps)."""
    env, env_params = make_jax("memgym/TMaze-v0", corridor_length=corridor_length)
    env_params = env_params.replace(max_steps_in_episode=4 * corridor_length)
    config = PPOConfig(name="PPO-GRU", num_envs=num_envs, num_eval_envs=16, num_steps=num_steps, gamma=0.99,
                       gae_lambda=0.95, num_minibatches=4, update_epochs=4, normalize_advantage=True,
                       clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5)
    features = FeatureExtractor(observation_extractor=MLP(features=(64,)))
    actor = Network(features, RNN(cell=nn.GRUCell(features=64)), heads.Categorical(env.action_space(env_params).n))
    critic = Network(features, RNN(cell=nn.GRUCell(features=64)), heads.VNetwork())
    optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(learning_rate, eps=1e-5))
    return PPO(config, env, env_params, actor, critic, optimizer, optimizer)


def success_rate(rewards: jax.Array, dones: jax.Array) -> float:
    """Correct turns (reward +4) over finished episodes (turns and timeouts)."""
    finished = int(np.asarray(dones).sum())
    return float(np.asarray(rewards == SUCCESS_REWARD).sum()) / max(1, finished)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corridor-length", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200_000, help="environment steps of training")
    args = parser.parse_args(argv)
    agent = make_agent(args.corridor_length)
    key, state = agent.init(jax.random.key(0))
    steps = 4 * args.corridor_length * 8  # each of memorax's 16 evaluation envs: several episodes
    key, transitions = agent.evaluate(key, state, num_steps=steps)
    before = success_rate(transitions.reward, transitions.done)
    key, state, _ = agent.train(key, state, num_steps=args.steps)
    key, transitions = agent.evaluate(key, state, num_steps=steps)
    after = success_rate(transitions.reward, transitions.done)
    print(f"memorax PPO on T-Maze L={args.corridor_length}: evaluation success {before:.2f} before, {after:.2f} "
          f"after {args.steps:,} steps")


if __name__ == "__main__":
    main()
