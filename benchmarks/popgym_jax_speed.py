"""POPGym in JAX against popgym's NumPy tasks: environment steps per second, side by side in one run.

For each task (every family written in JAX, at Easy; ``--tasks`` to choose) and random actions:

* **JAX, vmapped**: the task of :mod:`memgym.envs.popgym_jax` stepped ``--envs`` at a time (each of the
  given numbers: 1,024 and 4,096 by default) with
  ``jax.vmap`` inside one jitted ``lax.scan`` over ``--steps`` steps (gymnax's auto-resetting
  ``step``): the way the JAX tier's training loops step it;
* **popgym through Gymnasium's vector env**: ``gymnasium.make_vec("memgym/popgym-<Name>-v0",
  num_envs=--numpy-envs, vectorization_mode="sync")``, memgym's wrapper of popgym 1.0.7's NumPy
  task in a ``SyncVectorEnv`` stepped in a Python loop (what the host loop does);
* **popgym alone**: popgym's own env (no wrapper) in a bare Python loop, one environment, resetting
  when an episode ends: the fastest a Python loop over popgym gets.

Steps/s count environment steps over all environments (median of ``--repeats`` timed runs, after a
warm-up that compiles); ``ratio`` is the JAX tier's best over the vector env. The machine's load average is printed:
the machine may be shared, so read the ratios.

    python benchmarks/popgym_jax_speed.py [--tasks RepeatPreviousEasy ...] [--envs 1024 4096] [--steps 500]
        [--numpy-envs 8] [--numpy-steps 2000] [--repeats 3] [--json out.json] [--smoke]

``--smoke``: 2 tasks, 16 JAX envs x 20 steps, 2 NumPy envs x 50 steps, 1 repeat: the table in seconds
(a check that the script runs, not a measurement). Given flags win over these.

Needs the ``jax`` and ``popgym`` extras. Runs unchanged on a GPU (JAX's default device is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

import memgym  # noqa: F401  (registers the ids)
from memgym.envs.popgym_jax import task_names
from memgym.envs.popgym_jax.registration import task_class


def jax_runner(name: str, num_envs: int, steps: int):
    """A function ``run(key) -> float`` that steps ``num_envs`` copies of the JAX task ``steps`` times with random
    actions (one jitted call) and returns the sum of rewards (so nothing is optimised away)."""
    env = task_class(name)()
    params = env.default_params
    space = env.action_space(params)

    @jax.jit
    def run(key):
        reset_key, key = jax.random.split(key)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, num_envs), params)

        def step(carry, key):
            state, total = carry
            act_key, step_key = jax.random.split(key)
            action = jax.vmap(space.sample)(jax.random.split(act_key, num_envs))
            _, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, num_envs), state, action, params)
            return (state, total + reward.sum()), None

        (_, total), _ = jax.lax.scan(step, (state, jnp.float32(0)), jax.random.split(key, steps))
        return total

    return lambda key: float(jax.block_until_ready(run(key)))


def vector_seconds(name: str, num_envs: int, steps: int, seed: int) -> float:
    """Seconds for ``steps`` random steps of popgym's task in memgym's wrapper, ``num_envs`` in a SyncVectorEnv."""
    envs = gym.make_vec(f"memgym/popgym-{name}-v0", num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    actions = [envs.action_space.sample() for _ in range(steps)]
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    seconds = time.perf_counter() - start
    envs.close()
    return seconds


def bare_seconds(name: str, steps: int, seed: int) -> float:
    """Seconds for ``steps`` random steps of popgym's own env in a plain Python loop (one env)."""
    import popgym.envs

    env = getattr(popgym.envs, name)()
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = [env.action_space.sample() for _ in range(64)]
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(actions[int(rng.integers(64))])
        if terminated or truncated:
            env.reset()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=None,
                        help="popgym class names (default: every family written in JAX, at Easy)")
    parser.add_argument("--envs", type=int, nargs="+", default=[1024, 4096],
                        help="JAX environments, vmapped (one column per number)")
    parser.add_argument("--steps", type=int, default=500, help="steps of the JAX environments per timed run")
    parser.add_argument("--numpy-envs", type=int, default=8, help="environments of the SyncVectorEnv")
    parser.add_argument("--numpy-steps", type=int, default=2000, help="vector steps of the SyncVectorEnv per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per variant (median)")
    parser.add_argument("--json", default=None, help="also write the table as JSON to this file")
    parser.add_argument("--smoke", action="store_true", help="2 tasks, tiny runs, 1 repeat: the table in seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(tasks=["RepeatPreviousEasy", "BattleshipEasy"], envs=[16], steps=20, numpy_envs=2,
                            numpy_steps=50, repeats=1)
    args = parser.parse_args()
    tasks = args.tasks or [name for name in task_names() if name.endswith("Easy")]
    unknown = sorted(set(tasks) - set(task_names()))
    if unknown:
        parser.error(f"--tasks {unknown} are not written in JAX; choose from {', '.join(task_names())}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"POPGym in JAX against popgym's NumPy tasks ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {load:.1f} at the start; jax {jax.__version__} on "
          f"{jax.devices()[0].platform}); JAX: {' and '.join(map(str, args.envs))} envs x {args.steps} steps per "
          f"call; vector env: {args.numpy_envs} envs x {args.numpy_steps} steps; median of {args.repeats}")
    columns = "".join(f" JAX, {envs:,} envs, steps/s |" for envs in args.envs)
    print(f"| task |{columns} popgym, Gymnasium vector env steps/s | popgym alone steps/s | JAX / vector env |")
    print("|---|" + "---|" * (len(args.envs) + 3))
    rows = []
    for name in tasks:
        runs = {envs: jax_runner(name, envs, args.steps) for envs in args.envs}
        for run in runs.values():
            run(jax.random.key(0))  # compiles
        jax_times = {envs: [] for envs in args.envs}
        vector_times, bare_times = [], []
        for repeat in range(args.repeats):
            for envs, run in runs.items():
                start = time.perf_counter()
                run(jax.random.key(repeat + 1))
                jax_times[envs].append(time.perf_counter() - start)
            vector_times.append(vector_seconds(name, args.numpy_envs, args.numpy_steps, repeat))
            bare_times.append(bare_seconds(name, args.numpy_steps, repeat))
        row = {"task": name,
               "jax_steps_per_s": {envs: envs * args.steps / statistics.median(times)
                                   for envs, times in jax_times.items()},
               "vector_steps_per_s": args.numpy_envs * args.numpy_steps / statistics.median(vector_times),
               "popgym_steps_per_s": args.numpy_steps / statistics.median(bare_times)}
        row["ratio"] = max(row["jax_steps_per_s"].values()) / row["vector_steps_per_s"]
        rows.append(row)
        cells = "".join(f" {rate:,.0f} |" for rate in row["jax_steps_per_s"].values())
        print(f"| {name} |{cells} {row['vector_steps_per_s']:,.0f} | {row['popgym_steps_per_s']:,.0f} | "
              f"{row['ratio']:,.0f}x |", flush=True)
    load_end = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load at the end: {load_end:.1f}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"rows": rows, "load": [load, load_end], "args": vars(args)}, file, indent=1)


if __name__ == "__main__":
    main()
