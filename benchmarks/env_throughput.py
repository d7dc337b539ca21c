"""Environment throughput: steps per second of the T-Maze implementations.

Rows: the Gymnasium T-Maze as one env and as ``gymnasium.make_vec`` with 8 envs,
and the pure-JAX twin jitted and vmapped over 1, 1k and 64k environments
(random actions, ``lax.scan`` over steps, auto-reset on). Prints a table.

    python benchmarks/env_throughput.py [--quick]
"""

from __future__ import annotations

import argparse
import platform
import time

import gymnasium as gym
import numpy as np

import memgym  # noqa: F401  (registers the environments)


def gymnasium_single(steps: int) -> float:
    env = gym.make("memgym/TMaze-v0", corridor_length=200).unwrapped  # raw env, no checker wrappers
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, steps)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def gymnasium_vector(steps: int, num_envs: int = 8) -> float:
    envs = gym.make_vec("memgym/TMaze-v0", num_envs=num_envs, corridor_length=200)
    envs.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, (steps // num_envs, num_envs))
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    return actions.size / (time.perf_counter() - start)


def jax_twin(num_envs: int, steps: int, repeats: int = 3) -> float:
    import jax
    import jax.numpy as jnp

    from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

    env = TMazeJax()
    params = tmaze_params(corridor_length=jnp.full((num_envs,), 200))

    @jax.jit
    def run(key):
        keys = jax.random.split(key, num_envs)
        obs, state = jax.vmap(env.reset)(keys, params)

        def body(carry, _):
            state, key = carry
            key, k_act, k_env = jax.random.split(key, 3)
            actions = jax.random.randint(k_act, (num_envs,), 0, 4)
            obs, state, reward, term, trunc, info = jax.vmap(env.step)(
                jax.random.split(k_env, num_envs), state, actions, params
            )
            return (state, key), info["success"].sum()

        (_, _), successes = jax.lax.scan(body, (state, key), None, length=steps)
        return successes.sum()

    run(jax.random.key(0)).block_until_ready()  # compile
    best = float("inf")
    for r in range(repeats):
        start = time.perf_counter()
        run(jax.random.key(r + 1)).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return num_envs * steps / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    import jax

    rows = [
        ("Gymnasium TMaze, 1 env", gymnasium_single(200_000 // scale)),
        ("Gymnasium make_vec, 8 envs", gymnasium_vector(80_000 // scale)),
    ]
    for num_envs, steps in ((1, 20_000), (1_000, 2_000), (65_536, 200)):
        rows.append((f"JAX twin, jit+vmap, {num_envs} envs", jax_twin(num_envs, max(10, steps // scale))))
    print(f"machine: {platform.processor() or platform.machine()}, jax backend: {jax.default_backend()}, "
          f"devices: {jax.devices()}")
    print(f"{'implementation':<36} {'steps/s':>14}")
    for name, rate in rows:
        print(f"{name:<36} {rate:>14,.0f}")


if __name__ == "__main__":
    main()
