"""Cost of memgym's Memory Maze wrapper: memory per environment and steps per second, wrapped vs upstream.

**Memory** (first table). Each variant runs in a fresh child process that builds ``--envs``
environments one after another, resetting each (a Memory Maze env compiles its maze at a
reset), and reads its resident memory after each:

* ``upstream task``: ``memory_maze.tasks.memory_maze_<size>(seed)``, the ``dm_env``
  environment memgym wraps, every texture of its arena compiled (what memgym's wrapper
  cost before it trimmed textures: the wrapper itself holds nothing of size);
* ``MemoryMazeEnv``: memgym's wrapper, whose ``UnusedTextures`` hook compiles the wall
  textures an episode does not show as one pixel.

Columns: the process after its imports, what the first environment added (with the
libraries and the OpenGL platform loaded once per process), what each further one added (the
mean over envs 2..N: what ``--num-envs`` multiplies), the compiled ``MjModel`` of one env, the
time to build and reset one, and the steps/s of one env (random actions, resets off the clock).

**Speed** (second table). The same pre-drawn random actions are played on the raw task, on
``MemoryMazeEnv`` and on ``gymnasium.make`` (adds TimeLimit and the passive env checker), runs
alternating between them; the median of the repeats and each variant's overhead per step
against the raw task. A physics step takes tens of milliseconds, so the last row times the
wrapper's translation alone (MemoryMazeEnv around a stub task that returns a stored timestep).

    python benchmarks/memory_maze_overhead.py [--size 11x11] [--envs 4] [--steps 300] [--repeats 3] [--smoke]

``--smoke``: the 9x9 maze, 2 envs per memory child, 10 steps, 1 repeat, 200 stub steps: both tables
in well under a minute (a check that the script runs, not a measurement). Given flags win over these.

Needs the ``memory-maze`` extra and a headless OpenGL library (EGL or OSMesa).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np

import memgym  # noqa: F401  (registers the environments)
from memgym.envs.memory_check import resident_bytes
from memgym.envs.memory_maze import SIZES, MemoryMazeEnv, load_memory_maze_tasks, memory_maze_env_id

MEMORY_VARIANTS = {"upstream": "upstream task (every texture)", "memgym": "MemoryMazeEnv (shown textures)"}


def memory_child(variant: str, size: str, num_envs: int, steps: int) -> dict:
    """In this (fresh) process: build and reset ``num_envs`` envs of ``variant``, reading resident memory."""
    tasks = load_memory_maze_tasks()
    after_imports = resident_bytes()
    envs, resident, build_seconds = [], [], []
    for index in range(num_envs):
        started = time.perf_counter()
        if variant == "upstream":
            env = getattr(tasks, f"memory_maze_{size}")(seed=index)
            env.reset()
        else:
            env = MemoryMazeEnv(size)
            env.reset(seed=index)
        build_seconds.append(time.perf_counter() - started)
        envs.append(env)
        resident.append(resident_bytes())
    model_bytes = int((envs[0] if variant == "upstream" else envs[0].task).physics.model.ptr.nbuffer)
    actions = [int(a) for a in np.random.default_rng(0).integers(0, 6, steps)]
    seconds = time_raw(envs[-1], actions) if variant == "upstream" else time_gym(envs[-1], actions)
    for env in envs:
        env.close()
    return dict(after_imports=after_imports, resident=resident, build_seconds=build_seconds,
                model_bytes=model_bytes, steps_per_s=steps / seconds)


def memory_table(size: str, num_envs: int, steps: int) -> None:
    load_memory_maze_tasks()  # chooses MUJOCO_GL here, so the children inherit it
    results = {}
    for variant in MEMORY_VARIANTS:  # one fresh process each: resident memory is per process
        out = subprocess.run([sys.executable, __file__, "--child", variant, "--size", size, "--envs", str(num_envs),
                              "--steps", str(steps)], capture_output=True, text=True, check=True)
        results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    mib = 2**20
    print(f"Memory Maze {size}: resident memory of a process building {num_envs} envs (each reset once), "
          f"MUJOCO_GL={os.environ.get('MUJOCO_GL')}, {os.cpu_count()} CPUs")
    print(f"{'variant':<32} {'imports':>9} {'1st env':>9} {'each next':>10} {'MjModel':>9} {'build s':>8} "
          f"{'steps/s':>8}")
    each = {variant: (r["resident"][-1] - r["resident"][0]) / (num_envs - 1) for variant, r in results.items()}
    for variant, r in results.items():
        first = r["resident"][0] - r["after_imports"]
        print(f"{MEMORY_VARIANTS[variant]:<32} {r['after_imports'] / mib:7.0f} M {first / mib:7.0f} M "
              f"{each[variant] / mib:8.0f} M {r['model_bytes'] / mib:7.0f} M {statistics.median(r['build_seconds']):8.1f} "
              f"{r['steps_per_s']:8.1f}")
    upstream, ours = (each[variant] for variant in MEMORY_VARIANTS)
    print(f"memory per further env: {ours / upstream:.2f}x upstream's; environments in 20 GiB available: "
          f"{int(20 * 2**30 // upstream)} -> {int(20 * 2**30 // ours)}")


def time_raw(task, actions: list[int]) -> float:
    """Seconds spent in ``task.step`` over ``actions`` (resets off the clock)."""
    total = 0.0
    for action in actions:
        start = time.perf_counter()
        timestep = task.step(action)
        total += time.perf_counter() - start
        if timestep.last():
            task.reset()
    return total


def time_gym(env, actions: list[int]) -> float:
    """Seconds spent in ``env.step`` over ``actions`` (resets off the clock)."""
    total = 0.0
    for action in actions:
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        total += time.perf_counter() - start
        if terminated or truncated:
            env.reset()
    return total


class _StoredTask:
    """Returns one stored upstream timestep forever: isolates the wrapper's own work."""

    def __init__(self, timestep):
        self._timestep = timestep

    def reset(self):
        return self._timestep

    def step(self, action):
        return self._timestep

    def close(self):
        pass


def translation_seconds_per_step(timestep, steps: int = 20_000) -> float:
    env = MemoryMazeEnv("9x9")
    env._task, env._task_seed = _StoredTask(timestep._replace(step_type=1, reward=0.0, discount=1.0)), 0
    env.reset()
    step = env.step
    start = time.perf_counter()
    for _ in range(steps):
        step(1)
    return (time.perf_counter() - start) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=SIZES, default="11x11")
    parser.add_argument("--steps", type=int, default=300, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per variant (median)")
    parser.add_argument("--envs", type=int, default=4, help="environments each memory child builds (>= 2)")
    parser.add_argument("--translation-steps", type=int, default=20_000, help="steps of the stub-task row")
    parser.add_argument("--smoke", action="store_true",
                        help="9x9, 2 envs, 10 steps, 1 repeat, 200 stub steps: both tables in seconds")
    parser.add_argument("--child", choices=MEMORY_VARIANTS, help=argparse.SUPPRESS)
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(size="9x9", envs=2, steps=10, repeats=1, translation_steps=200)
    args = parser.parse_args()
    if args.envs < 2:
        parser.error(f"--envs must be at least 2 (the first env also loads the libraries), got {args.envs}")
    if args.child:
        print(json.dumps(memory_child(args.child, args.size, args.envs, args.steps)))
        return
    memory_table(args.size, args.envs, args.steps)
    print()

    tasks = load_memory_maze_tasks()  # chooses MUJOCO_GL
    raw = getattr(tasks, f"memory_maze_{args.size}")(seed=0)
    first = raw.reset()
    wrapped = MemoryMazeEnv(args.size)
    wrapped.reset(seed=0)
    made = gym.make(memory_maze_env_id(args.size))
    made.reset(seed=0)

    actions = [int(a) for a in np.random.default_rng(0).integers(0, 6, args.steps)]
    runners = {
        "raw dm_env": lambda: time_raw(raw, actions),
        "MemoryMazeEnv": lambda: time_gym(wrapped, actions),
        "gymnasium.make": lambda: time_gym(made, actions),
    }
    warm_up = actions[:20]
    time_raw(raw, warm_up)
    time_gym(wrapped, warm_up)
    time_gym(made, warm_up)
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.repeats):
        for name, run in runners.items():
            seconds[name].append(run())
    translation = translation_seconds_per_step(first, args.translation_steps)
    for closeable in (raw, wrapped, made):
        closeable.close()

    print(
        f"Memory Maze {args.size}, {args.steps} random-action steps x {args.repeats} repeats (median), "
        f"MUJOCO_GL={os.environ.get('MUJOCO_GL')}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs"
    )
    raw_per_step = statistics.median(seconds["raw dm_env"]) / args.steps
    print(f"{'variant':<36} {'steps/s':>9} {'ms/step':>9} {'overhead':>9}")
    for name, values in seconds.items():
        per_step = statistics.median(values) / args.steps
        print(f"{name:<36} {1 / per_step:9.1f} {per_step * 1e3:9.2f} {per_step / raw_per_step - 1:+9.1%}")
    print(
        f"{'wrapper translation alone (stub)':<36} {1 / translation:9.0f} {translation * 1e3:9.4f} "
        f"{translation / raw_per_step:+9.2%}"
    )


if __name__ == "__main__":
    main()
