"""How much of the T-Maze's cue reaches the junction's policy at initialisation, per model and corridor length.

A2C learns to use the cue only through the gradient of the junction's turn with respect to the cue, seen
L steps earlier (thesis §5.1: the cue is in the first observation alone). Before any update that gradient is
the derivative of the junction's logit gap (up − down) with respect to the cue bits of the first observation,
along the walk a policy takes once it walks: the cue, then straight down the corridor. Where a model's state
shrinks what it stored by a factor each step (a gated decay, eq. 3.5's (1 − β) ⊗ (1 − γ), AReLiT's
(1 − β), a GRU's update gate), the derivative falls geometrically with L; where it adds without forgetting
(linear attention) or attends over a window (GTrXL, up to the window's length), it does not. The
derivative is taken in forward mode (``jax.jvp``), so no difference of two nearly equal logits hides a small
signal; float32 still flushes what falls under about 1e-38 to 0.

Printed: per model (a registered agent's network, at initialisation, one per seed) and corridor length, the
median over seeds of |∂ gap / ∂ cue| and the fraction of seeds with a signal above 1e-6 of the shortest
corridor's median, then the per-step factor the signal shrinks by (the geometric mean over the lengths), and
the fraction of seeds whose initial policy drifts down the longest corridor (:func:`forward_drift`): a cue
reaches the learner only from seeds that walk to the junction.
Nothing is trained; each (model, length) is one compiled, vmapped forward pass::

    python benchmarks/cue_signal.py                       # the long board's compact models, L = 4 … 256
    python benchmarks/cue_signal.py --agents a2c-arelit a2c-gru --lengths 4,120,200 --seeds 8   # thesis size
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

COMPACT = ("a2c-long-mlp", "a2c-long-lstm", "a2c-long-gru", "a2c-long-linear-attention", "a2c-long-arelit",
           "a2c-long-relit", "a2c-long-relit-convex", "a2c-long-gtrxl-128")
LENGTHS = (4, 16, 64, 128, 200, 256)
UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3  # the T-Maze's actions (memgym.envs.tmaze)
DRIFT = 0.1  # drifting forward from the start: 100 cells in 1000 steps, where a lazy random walk covers about 22
FLOOR = 1e-6  # a signal below this fraction of the shortest corridor's is counted as gone


def trainer_of(spec: str):
    """The trainer (its ``network`` and ``init_params``) that a registered agent builds for the JAX T-Maze."""
    from memgym.agents.registry import make_trainer
    from memgym.envs.tmaze_jax import TMazeJax
    from memgym.leaderboard.protocol import load_factory
    from memgym.leaderboard.tracks import TMAZE

    agent = load_factory(spec)(TMAZE.context(num_envs=1, seed=0, total_steps=1_000_000))
    return make_trainer(agent.config, TMazeJax())


def walk(length: int, key: jax.Array) -> jax.Array:
    """The observations ``[length, O]`` of an episode walked straight to the junction (the cue first, the
    junction last), on a T-Maze of ``length``."""
    from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

    env, params = TMazeJax(), tmaze_params(corridor_length=length)
    reset_key, step_key = jax.random.split(key)
    obs, state = env.reset(reset_key, params)

    def step(state, key):
        obs, state, *_ = env.step(key, state, RIGHT, params)
        return state, obs

    _, rest = jax.lax.scan(step, state, jax.random.split(step_key, length - 1))
    return jnp.concatenate([obs[None], rest])


def cue_signal(trainer, length: int, seeds: int) -> np.ndarray:
    """|∂ (logit up − logit down) at the junction / ∂ cue bits of the first observation| at initialisation, one per
    seed (a fresh network and episode each); the cue's direction is its two bits swapped (up ↔ down)."""
    network = trainer.network

    def one(key):
        init_key, walk_key = jax.random.split(key)
        params = trainer.init_params(init_key)
        obs = walk(length, walk_key)
        start = jnp.zeros(length, bool).at[0].set(True)

        def gap(first):
            logits, _, _ = network.apply(params, obs.at[0].set(first), start, network.initialize_carry())
            return logits[-1, UP] - logits[-1, DOWN]

        direction = jnp.zeros_like(obs[0]).at[:2].set(jnp.array([1.0, -1.0]))
        return jnp.abs(jax.jvp(gap, (obs[0],), (direction,))[1])

    return np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), seeds)))


def forward_drift(trainer, length: int, seeds: int) -> np.ndarray:
    """The initial policy's mean drift down the corridor, ``p(right) − p(left)`` averaged over the steps of a
    straight walk before the junction, one per seed (a fresh network and episode each, the seeds of
    :func:`cue_signal`): where a seed's exploration starts (docs/reproduction.md, "Exploration"); a lazy random
    walk (drift 0) covers about √(t/2) cells in t steps. On the long-corridor sweep it does not predict which
    seeds walk: that is decided in the first updates."""
    network = trainer.network

    def one(key):
        init_key, walk_key = jax.random.split(key)
        obs = walk(length, walk_key)
        start = jnp.zeros(length, bool).at[0].set(True)
        logits, _, _ = network.apply(trainer.init_params(init_key), obs, start, network.initialize_carry())
        policy = jax.nn.softmax(logits[:-1], axis=-1)
        return jnp.mean(policy[:, RIGHT] - policy[:, LEFT])

    return np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), seeds)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=list(COMPACT), help="registered T-Maze agents (their networks)")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)), help="corridor lengths, e.g. 4,64,200")
    parser.add_argument("--seeds", type=int, default=16, help="initialisations (and episodes) per model and length")
    parser.add_argument("--smoke", action="store_true", help="two small models, two lengths, two seeds")
    args = parser.parse_args(argv)
    lengths = sorted({int(v) for v in args.lengths.split(",")})
    if any(length < 2 for length in lengths):
        parser.error(f"--lengths {args.lengths}: every corridor length must be at least 2")
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: at least 1")
    agents, seeds = args.agents, args.seeds
    if args.smoke:
        agents, lengths, seeds = ["a2c-long-mlp", "a2c-long-arelit"], [4, 16], 2
    print(f"|∂ junction logit gap / ∂ cue| at initialisation, median over {seeds} seeds (fraction of seeds above "
          f"{FLOOR:g} of the shortest corridor's median); jax {jax.__version__}, {jax.devices()[0].platform}")
    print(f"drifting forward: the fraction of seeds whose initial policy moves down the longest corridor by more than "
          f"{DRIFT:g} a step on average (p(right) − p(left) along a straight walk)")
    print("| agent | " + " | ".join(f"L = {length}" for length in lengths) + " | per step | drifting forward | seconds |")
    print("|---" * (len(lengths) + 4) + "|")
    for spec in agents:
        started = time.perf_counter()
        trainer = trainer_of(spec)
        medians, cells = [], []
        for length in lengths:
            signal = cue_signal(trainer, length, seeds)
            median = float(np.median(signal))
            medians.append(median)
            floor = FLOOR * medians[0]
            cells.append(f"{median:.1e} ({np.mean(signal > floor) if floor > 0 else 0.0:.2f})")
        ratio = medians[-1] / medians[0] if medians[0] > 0 else 0.0
        per_step = ratio ** (1.0 / (lengths[-1] - lengths[0])) if ratio > 0 else 0.0
        drifting = float(np.mean(forward_drift(trainer, lengths[-1], seeds) > DRIFT))
        print(f"| `{spec}` | " + " | ".join(cells) + f" | {per_step:.3f} | {drifting:.2f} | "
              f"{time.perf_counter() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
