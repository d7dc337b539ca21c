"""Cost of memgym's Memory Maze wrapper: steps per second wrapped vs the raw dm_env task.

The same pre-drawn random actions are played on

* ``raw dm_env``: upstream ``memory_maze.tasks.memory_maze_<size>(seed=0)``, the
  ``dm_env.Environment`` memgym wraps;
* ``MemoryMazeEnv``: :class:`memgym.envs.memory_maze.MemoryMazeEnv` around its own
  upstream task (``reset(seed=0)``), no Gymnasium wrappers;
* ``gymnasium.make``: ``gymnasium.make("memgym/MemoryMaze-<size>-v0")`` as users make
  it (adds TimeLimit and the passive env checker).

Only steps are timed: when an episode ends, the reset (which recompiles the maze,
seconds) happens off the clock. Runs alternate between the variants; the table shows
the median of the repeats and each variant's overhead per step against the raw task
(time / raw time - 1). A physics step takes tens of milliseconds, so the wrapper's
share is far below run-to-run noise; the last row therefore times the wrapper's
translation alone (MemoryMazeEnv around a stub task that returns a stored timestep).

    python benchmarks/memory_maze_overhead.py [--size 9x9] [--steps 300] [--repeats 3] [--quick]

Needs the ``memory-maze`` extra and a headless OpenGL library (EGL or OSMesa).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import gymnasium as gym
import numpy as np

import memgym  # noqa: F401  (registers the environments)
from memgym.envs.memory_maze import SIZES, MemoryMazeEnv, load_memory_maze_tasks, memory_maze_env_id


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
    parser.add_argument("--size", choices=SIZES, default="9x9")
    parser.add_argument("--steps", type=int, default=300, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per variant (median)")
    parser.add_argument("--quick", action="store_true", help="100 steps, 2 repeats")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats = 100, 2

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
    translation = translation_seconds_per_step(first)
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
