"""TBB on episodes longer than a per-tape share of the batch: what is sampled, and what DQN learns.

memgym's TBB replay keeps one tape per environment (monoid paper §5.1) and
draws a batch of ``B`` transitions as Alg. 5 does over all of them: whole
episodes, uniformly among every tape's stored episodes, concatenated, only the
last one cut. An earlier version split the batch evenly over the ``k`` tapes
(``B // k`` transitions each, each share filled from an episode start), so no
transition at step ``B // k`` or later of an episode was ever sampled — with the
DQN defaults (``B = 1000``, 8 environments) nothing past step 125, so the turn
at the junction of a T-Maze with a corridor longer than 125 never reached the
learner. This script measures that previous split (:class:`PerTapeSplitReplay`,
kept here only as the baseline) against the replay's own sampling.

Part 1 — coverage: 8 tapes of episodes of a given length, many batches of
``B``; which step indices appear.

Part 2 — learning: DQN with FFM memory and TBB on the T-Maze, seeds trained in
one ``vmap``, with each sampler; success rate over the last fifth of training.
DQN's ε-greedy exploration does not reach the junction of a 130-cell corridor
(a random walk of 520 steps moves about 16 cells; measured: 0 successes in 200K
steps with either sampler), so the default learning comparison is the same
situation scaled down: ``B = 64`` with 8 environments (a share of 8 steps) and a
corridor of 12, whose turn comes at step 11 or later.

    python benchmarks/tbb_long_episodes.py [--corridor-length 12] [--batch-size 64] [--steps 150000] [--seeds 3]
                                           [--smoke]

``--smoke``: part 1 on episodes of 13 and 41 steps with B = 96 (a share of 12) and 5 batches, part
2 for 1,024 steps of 2 seeds on a corridor of 4 (B = 16, learning from step 256, a buffer of 1,024):
both parts in seconds plus compilation (a check that the script runs, not a measurement). Given
flags win over these.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

from memgym.agents.dqn import DQNConfig, DQNTrainer
from memgym.agents.metrics import success_over_last
from memgym.buffers.tape import TapeReplay
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params


class PerTapeSplitReplay(TapeReplay):
    """The previous TBB sampling (baseline only): ``batch_size // k`` transitions from each of the ``k`` tapes."""

    def sample_stacked(self, states, key, batch_size):
        count = states.start.shape[0]
        keys = jax.random.split(key, count)
        share = jax.vmap(lambda state, k: TapeReplay.sample_stacked(self, jax.tree.map(lambda x: x[None], state), k,
                                                                    batch_size // count))(states, keys)
        return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), share)


def filled_tapes(replay: TapeReplay, episode_length: int, tapes: int):
    """``tapes`` tapes, each full of episodes of ``episode_length`` steps whose data is the step index."""
    steps = replay.capacity
    index = jnp.arange(steps) % episode_length
    state = replay.init(jnp.zeros((), jnp.int32))
    state = replay.add(state, index, index == 0)
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (tapes,) + x.shape), state)


#: Part 1's (episode length, B) pairs besides part 2's own: episodes longer than DQN's share of B = 1000.
COVERAGE = ((131, 1000), (415, 1000))
SMOKE_COVERAGE = ((13, 96), (41, 96))


def coverage(episode_length: int, batch_size: int, tapes: int = 8, batches: int = 200) -> dict[str, dict]:
    """Per sampler: the largest sampled step index and the share of step indices ever sampled."""
    capacity = 4 * max(batch_size, episode_length)
    out = {}
    for name, replay in (("alg5", TapeReplay(capacity)), ("per-tape split", PerTapeSplitReplay(capacity))):
        states = filled_tapes(TapeReplay(capacity), episode_length, tapes)
        sample = jax.jit(lambda key: replay.sample_stacked(states, key, batch_size).data)
        seen = np.zeros(episode_length, bool)
        for i in range(batches):
            seen[np.asarray(sample(jax.random.key(i)))] = True
        out[name] = {"max_step": int(np.flatnonzero(seen).max()), "steps_seen": float(seen.mean())}
    return out


#: The DQN of part 2 (``--config`` overrides fields).
LEARNING = dict(memory="ffm", memory_config=json.dumps({"features": 32, "memory_size": 8, "context_size": 4}),
                num_envs=8, steps_per_update=4, buffer_size=16_000, learning_starts=2_000, learning_rate=1e-3,
                gamma=0.99, target_rate=0.99, epsilon_fraction=0.2, head_width=64)


def learn(corridor_length: int, batch_size: int, steps: int, seeds: int, split: bool,
          **overrides) -> tuple[np.ndarray, float]:
    """Success rates over the last fifth of training, one per seed, and the seconds it took."""
    config = DQNConfig(**{**LEARNING, "total_steps": steps, "batch_size": batch_size, **overrides})
    trainer = DQNTrainer(config, TMazeJax())
    if split:
        trainer.replay = PerTapeSplitReplay(trainer.replay.capacity)
    params = tmaze_params(corridor_length, max_episode_steps=4 * corridor_length)
    train = jax.jit(jax.vmap(trainer.train, in_axes=(0, None)))
    started = time.perf_counter()
    _, metrics = train(jax.random.split(jax.random.key(0), seeds), params)
    rates = np.asarray(success_over_last(metrics, steps // 5, config.env_steps_per_update))
    return rates, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corridor-length", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=150_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--config", type=json.loads, default={}, help="DQNConfig fields of part 2, as JSON")
    parser.add_argument("--learning-only", action="store_true", help="skip part 1")
    parser.add_argument("--batches", type=int, default=200, help="batches drawn per sampler in part 1")
    parser.add_argument("--smoke", action="store_true",
                        help="short episodes, 5 batches, 1,024 steps of 2 seeds on a corridor of 4: seconds")
    smoke = parser.parse_known_args()[0].smoke
    if smoke:
        parser.set_defaults(corridor_length=4, batch_size=16, steps=1_024, seeds=2, batches=5,
                            config={"learning_starts": 256, "buffer_size": 1_024})
    args = parser.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} CPUs, jax {jax.__version__} ({jax.devices()[0].platform}), "
          f"load {os.getloadavg()[0]:.1f}")

    if not args.learning_only:
        print(f"\nPart 1 — coverage: 8 tapes, {args.batches} batches; "
              "step indices of the episodes that appear in a batch")
        print("| episode length | B | share B // 8 | sampler | largest step sampled | step indices seen |")
        print("|---:|---:|---:|---|---:|---:|")
        for length, batch in (SMOKE_COVERAGE if smoke else COVERAGE) + ((args.corridor_length + 1, args.batch_size),):
            for name, row in coverage(length, batch, batches=args.batches).items():
                print(f"| {length} | {batch} | {batch // 8} | {name} | {row['max_step']} | {row['steps_seen']:.0%} |")

    print(f"\nPart 2 — DQN + FFM + TBB on T-Maze L = {args.corridor_length}, B = {args.batch_size}, 8 environments, "
          f"{args.steps:,} steps, {args.seeds} seeds{', ' + json.dumps(args.config) if args.config else ''}: "
          "success over the last fifth of training")
    print("| sampler | success per seed | mean | seconds |")
    print("|---|---|---:|---:|")
    for name, split in (("alg5", False), ("per-tape split", True)):
        rates, seconds = learn(args.corridor_length, args.batch_size, args.steps, args.seeds, split, **args.config)
        print(f"| {name} | {', '.join(f'{r:.2f}' for r in rates)} | {rates.mean():.2f} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
