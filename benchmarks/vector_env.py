"""Gymnasium vector envs of the T-Maze: memgym's vmapped JAX vector env against ``SyncVectorEnv``.

For each number of environments N, the same pre-drawn random actions are played on

* ``gymnasium.make_vec("memgym/TMazeJax-v0", num_envs=N)`` — memgym's native vector env
  (Gymnasium's ``vector_entry_point``): one jitted ``vmap`` of the JAX T-Maze per step;
* ``gymnasium.make_vec("memgym/TMaze-v0", num_envs=N, vectorization_mode="sync")`` —
  ``SyncVectorEnv`` of N NumPy T-Mazes stepped in a Python loop;

through the Gymnasium API a user calls (``step(actions)`` with NumPy arrays in and out,
auto-reset ``SAME_STEP``). Runs alternate between the two; the table shows steps/s (over all
environments, median of the repeats) and their ratio, with the machine's load average.

    python benchmarks/vector_env.py [--sizes 8 64 1024] [--steps 200] [--repeats 5] [--smoke]

``--smoke``: 2 and 8 environments, 10 steps, 1 repeat: the table in seconds (a check that the
script runs, not a measurement). Given flags win over these.

Needs the ``jax`` extra. Runs unchanged on a GPU (JAX's default device is printed).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import gymnasium as gym
import jax
import numpy as np

import memgym  # noqa: F401  (registers the ids)

CORRIDOR_LENGTH = 120


def make(kind: str, num_envs: int) -> gym.vector.VectorEnv:
    if kind == "jax":
        return gym.make_vec("memgym/TMazeJax-v0", num_envs=num_envs, corridor_length=CORRIDOR_LENGTH)
    return gym.make_vec("memgym/TMaze-v0", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
                        corridor_length=CORRIDOR_LENGTH)


def play(envs: gym.vector.VectorEnv, actions: np.ndarray) -> float:
    """Seconds to play ``actions[T, N]`` (the envs reset themselves)."""
    envs.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 1024], help="numbers of environments")
    parser.add_argument("--steps", type=int, default=200, help="vector steps per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per variant (median)")
    parser.add_argument("--smoke", action="store_true", help="2 and 8 envs, 10 steps, 1 repeat: the table in seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(sizes=[2, 8], steps=10, repeats=1)
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"T-Maze vector envs, L = {CORRIDOR_LENGTH} ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {load:.1f}; jax {jax.__version__} on {jax.devices()[0].platform}, "
          f"gymnasium {gym.__version__}); {args.steps} steps x {args.repeats} repeats, median")
    print(f"{'N':>6} {'JAX vector env steps/s':>23} {'SyncVectorEnv steps/s':>22} {'ratio':>7}")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        actions = rng.integers(0, 4, size=(args.steps, n))
        variants = {kind: make(kind, n) for kind in ("jax", "sync")}
        for envs in variants.values():  # warm-up (compilation)
            play(envs, actions[:5])
        seconds: dict[str, list[float]] = {kind: [] for kind in variants}
        for repeat in range(args.repeats):
            for kind in (("jax", "sync") if repeat % 2 == 0 else ("sync", "jax")):
                seconds[kind].append(play(variants[kind], actions))
        rate = {kind: args.steps * n / statistics.median(values) for kind, values in seconds.items()}
        print(f"{n:>6} {rate['jax']:>23,.0f} {rate['sync']:>22,.0f} {rate['jax'] / rate['sync']:>6.1f}x")
        for envs in variants.values():
            envs.close()
    print(f"load after: {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "")


if __name__ == "__main__":
    main()
