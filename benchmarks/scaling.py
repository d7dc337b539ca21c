"""Scale-out speed: the sharded JAX-tier cell batch over k devices, and the Ray backend vs local.

Part 1 — sharding. One JAX-tier agent's grid of cells (corridor lengths × seeds)
is trained and evaluated as one batch by
:class:`memgym.leaderboard.running.jax_tier.JaxCells`, sharded over the ``k`` local devices.
Each ``k`` runs in a fresh process with ``XLA_FLAGS=--xla_force_host_platform_device_count=k``
on CPU (on a GPU machine, ``--backend gpu`` uses the real devices, ``k`` = 1 …
all, via ``CUDA_VISIBLE_DEVICES``). Reported: compile + first call, and the
median of the next calls (the steady state: a new grid of the same size reuses
the compilation), as cells per minute and environment steps per second, and the
speed-up over ``k = 1``.

Part 2 — backends. The same leaderboard run (``memgym.leaderboard.running.runner.run``
with a fresh results directory) with the local backend and with the Ray backend
on a local Ray cluster of ``--ray-cpus`` CPUs, wall-clock end to end (Ray start-up
excluded, reported separately). Ray runs one task per corridor length in parallel
worker processes, each compiling its own copy of the agent; the local backend
compiles once and runs the tasks one after another.

    python benchmarks/scaling.py [--agent a2c-tiny-gru] [--devices 1 2 4] [--steps 50000] [--smoke]

``--smoke``: 1 length × 1 seed of 512 steps, 2 evaluation episodes, devices 1 and 2, one steady
call, a Ray cluster of 2 CPUs: both parts (Ray too, when it is installed) at the smallest sizes (a
check that the script runs, not a measurement; tests/leaderboard/test_ray_backend.py checks the Ray
backend itself). Given flags win over these.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

WORKER = r"""
import json, statistics, sys, time
import jax
from memgym.leaderboard.running.jax_tier import JaxCells
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.tracks import TMAZE, Preset
args = json.loads(sys.argv[1])
budget = Preset("bench", tuple(args["lengths"]), args["seeds"], args["steps"], args["steps"] // 5,
                args["eval_episodes"], 1000)
agent = load_factory(args["agent"])(TMAZE.context(total_steps=args["steps"]))
cells = JaxCells(agent, TMAZE, budget)
grid = [(length, seed) for length in budget.values for seed in range(budget.seeds)]
def call():
    t0 = time.perf_counter()
    out = cells.run(grid)
    assert all(isinstance(o, tuple) for o in out), out
    return time.perf_counter() - t0
first = call()
steady = statistics.median(call() for _ in range(args["repeats"]))
print(json.dumps({"devices": jax.device_count(), "kind": jax.devices()[0].device_kind, "first": first,
                  "steady": steady, "cells": len(grid)}))
"""


def shard_run(devices: int, config: dict, gpu: bool) -> dict:
    env = dict(os.environ)
    if gpu:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(devices)))
    else:
        # added to the caller's XLA flags (which it keeps), not in place of them
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
        env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run([sys.executable, "-c", WORKER, json.dumps(config)], capture_output=True, text=True,
                         env=env, check=False)
    if out.returncode:
        raise SystemExit(f"worker with {devices} devices failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.splitlines()[-1])


def backends(config: dict, ray_cpus: int) -> dict:
    from memgym.leaderboard.running import runner
    from memgym.leaderboard.running.ray_backend import RayBackend
    from memgym.leaderboard.tracks import Preset

    budget = Preset("bench", tuple(config["lengths"]), config["seeds"], config["steps"],
                    config["steps"] // 5, config["eval_episodes"], 1000)
    times = {}
    root = tempfile.mkdtemp()
    try:
        t0 = time.perf_counter()
        runner.run([config["agent"]], budget, os.path.join(root, "local"), log=lambda line: None)
        times["local"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        # Ray runs its workers at niceness 15 by default: on a machine doing anything else they would be slowed
        # down where the local backend is not. At niceness 0 both backends run at the same priority.
        os.environ.setdefault("RAY_worker_niceness", "0")
        backend = RayBackend(num_cpus=1, local_cpus=ray_cpus)
        times["ray start-up"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        runner.run([config["agent"]], budget, os.path.join(root, "ray"), log=lambda line: None, backend=backend)
        times["ray"] = time.perf_counter() - t0
        backend.ray.shutdown()
    finally:
        shutil.rmtree(root)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", default="a2c-tiny-gru", help="a JAX-tier agent spec")
    parser.add_argument("--lengths", type=int, nargs="+", default=[4, 8, 12, 16])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=50_000, help="training steps per cell")
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=3, help="steady-state calls per device count")
    parser.add_argument("--gpu", action="store_true", help="shard over real GPUs instead of forced CPU devices")
    parser.add_argument("--ray-cpus", type=int, default=os.cpu_count(), help="CPUs of the local Ray cluster")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--skip-sharding", action="store_true", help="e.g. for an any-framework --agent")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--smoke", action="store_true",
                        help="1 cell of 512 steps, devices 1 and 2, 1 repeat, Ray on 2 CPUs: both parts, small")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(lengths=[4], seeds=1, steps=512, eval_episodes=2, devices=[1, 2], repeats=1, ray_cpus=2)
    args = parser.parse_args()
    config = {"agent": args.agent, "lengths": args.lengths, "seeds": args.seeds, "steps": args.steps,
              "eval_episodes": args.eval_episodes, "repeats": args.repeats}
    cells = len(args.lengths) * args.seeds
    print(f"# {platform.machine()} · {os.cpu_count()} CPUs · python {platform.python_version()} · agent "
          f"{args.agent} · {cells} cells (L {args.lengths} × {args.seeds} seeds) × {args.steps:,} steps",
          flush=True)

    rows = [] if args.skip_sharding else [shard_run(k, config, args.gpu) for k in args.devices]
    if rows:
        base = rows[0]["steady"]
        print("\n| devices | device kind | compile + first call (s) | steady call (s) | cells/min | env steps/s "
              "| speed-up |")
        print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['devices']} | {r['kind']} | {r['first']:.1f} | {r['steady']:.2f} | "
              f"{60 * r['cells'] / r['steady']:.1f} | {r['cells'] * args.steps / r['steady']:,.0f} | "
              f"{base / r['steady']:.2f}× |", flush=True)
    result = {"config": config, "sharding": rows}
    ray_missing = importlib.util.find_spec("ray") is None
    if not args.skip_ray and ray_missing:
        print('\nPart 2 skipped: Ray is not installed (pip install "memgym[ray]"; --skip-ray skips it quietly)')
    if not args.skip_ray and not ray_missing:
        times = backends(config, args.ray_cpus)
        print(f"\n| backend | wall-clock (s) | speed-up |\n|---|---:|---:|\n| local (1 process) | "
              f"{times['local']:.1f} | 1.00× |\n| Ray, {args.ray_cpus} CPUs, 1 CPU per task | {times['ray']:.1f} | "
              f"{times['local'] / times['ray']:.2f}× |\n\nRay start-up (not included): {times['ray start-up']:.1f} s")
        result["backends"] = times
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
