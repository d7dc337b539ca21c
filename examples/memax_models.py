"""memax's memory models in memgym's A2C on the T-Maze (``pip install "memgym[agents,memax]"``).

Each of memax's models named here (the monoid paper authors' library: DeltaNet, Gated DeltaNet, S6, MGU) is a
memgym memory model (``tiny-deltanet`` … presets, or ``memax:<name>`` with ``memory_config``), trained by the same
A2C trainer as memgym's own models, seeds vmapped in one compiled call.

    python examples/memax_models.py --corridor-length 8 --steps 200000
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from memgym.agents.a2c import A2CConfig
from memgym.agents.registry import make_trainer
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

MODELS = ("tiny-deltanet", "tiny-gdn", "tiny-s6", "tiny-mgu")


def train(memory: str, corridor_length: int, steps: int, seeds: int) -> float:
    """Training success over the last fifth of the run, over ``seeds`` seeds trained together."""
    config = A2CConfig(memory=memory, total_steps=steps, rollout_length=32, learning_rate=1e-3, entropy_coef=1e-3)
    params = tmaze_params(corridor_length, max_episode_steps=4 * corridor_length)
    trainer = make_trainer(config, TMazeJax(), params)
    batch = tmaze_params(np.full(seeds, corridor_length), max_episode_steps=np.full(seeds, 4 * corridor_length))
    _, metrics = jax.jit(jax.vmap(trainer.train))(jax.random.split(jax.random.key(0), seeds), batch)
    episodes, successes = np.asarray(metrics["episodes"]), np.asarray(metrics["successes"])
    last = slice(-max(1, episodes.shape[1] // 5), None)
    return float(successes[:, last].sum() / max(1, episodes[:, last].sum()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corridor-length", type=int, default=8)
    parser.add_argument("--steps", type=int, default=200_000, help="environment steps per seed")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args(argv)
    for memory in args.models.split(","):
        rate = train(memory, args.corridor_length, args.steps, args.seeds)
        print(f"{memory:14s} T-Maze L={args.corridor_length}: success {rate:.2f} over the last fifth of the run")


if __name__ == "__main__":
    main()
