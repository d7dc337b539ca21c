"""Grid throughput: a whole leaderboard grid trained in one vmapped call against one process per cell.

A board is a grid of cells, corridor lengths × seeds. memgym's JAX tier trains them the
way ``memgym leaderboard run`` does (:class:`memgym.leaderboard.running.jax_tier.JaxCells`):
``jit(vmap(train))`` over the cells, then every cell's evaluation episodes in one more
vmapped call. Code written one run per process trains the same cells one at a time, a
fresh Python process each, which pays its imports, compilation and one cell's worth of
arrays per run. Three ways of running one grid, timed on the same machine in one run:

* ``whole grid``: every cell in one call (what ``memgym leaderboard run`` does where several devices are visible);
* ``per length``: one call per corridor length, its seeds vmapped (the harness's default
  plan); the lengths share one compiled function;
* ``per process``: one ``python`` process per cell (``--parallel`` of them at a time, by
  default one per CPU core), each training and evaluating its cell with the same code.

Every figure is wall-clock time from the start of the work, compilation and evaluation included
in every mode (as a board run pays them), and steps/s = cells × training steps per cell / time.

    python benchmarks/grid_throughput.py [--agents a2c-tiny-gru a2c-arelit] [--lengths 16 32 64]
                                         [--seeds 5] [--steps 20000] [--parallel 2] [--json out.json] [--smoke]

``--smoke``: a grid of 2 lengths × 1 seed, 512 training steps (two updates) and 2 evaluation episodes
per cell, with the tiny GRU: every mode of every row in well under a minute (a check
that the script runs, not a measurement). Given flags win over these.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import subprocess
import sys
import time

# One cell in a process of its own: build the agent from its spec, train and evaluate the cell.
CELL_WORKER = r"""
import json, sys, time
started = time.perf_counter()
from memgym.leaderboard.running.jax_tier import JaxCells
from memgym.leaderboard.running.planning import NUM_ENVS
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.tracks import Preset, get
spec, length, seed, steps, window, episodes, limit = json.loads(sys.argv[1])
track = get("tmaze")
budget = Preset("grid", (length,), seeds=1, total_steps=steps, train_window=window, eval_episodes=episodes,
                max_episode_steps=limit)
agent = load_factory(spec)(track.context(num_envs=NUM_ENVS, seed=0, total_steps=steps))
outcome = JaxCells(agent, track, budget).run([(length, seed)])[0]
if isinstance(outcome, str):
    raise SystemExit(f"cell {length}/{seed} failed: {outcome}")
print("CELL " + json.dumps({"seconds": time.perf_counter() - started, "success": outcome[1]["success_rate"]}))
"""


def budget_of(args: argparse.Namespace):
    from memgym.leaderboard.tracks import Preset

    return Preset("grid", tuple(args.lengths), seeds=args.seeds, total_steps=args.steps,
                  train_window=min(args.window, args.steps), eval_episodes=args.episodes,
                  max_episode_steps=args.max_episode_steps)


def in_one_process(spec: str, args: argparse.Namespace) -> dict[str, float]:
    """Seconds for the whole grid in one call, and for one call per length (the lengths share one compilation)."""
    from memgym.leaderboard.running.jax_tier import JaxCells
    from memgym.leaderboard.running.planning import NUM_ENVS
    from memgym.leaderboard.protocol import load_factory
    from memgym.leaderboard.tracks import get

    track, budget = get("tmaze"), budget_of(args)
    cells = [(length, seed) for length in args.lengths for seed in range(args.seeds)]
    results = {}
    for mode, groups in (("whole grid", [cells]),
                         ("per length", [[(length, s) for s in range(args.seeds)] for length in args.lengths])):
        started = time.perf_counter()
        agent = load_factory(spec)(track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps))
        runner = JaxCells(agent, track, budget)  # a fresh one: each mode pays its own compilation
        outcomes = [runner.run(group) for group in groups]
        first = time.perf_counter() - started
        failed = [o for group in outcomes for o in group if isinstance(o, str)]
        if failed:
            raise SystemExit(f"{spec}: {len(failed)} cells failed, e.g. {failed[0]}")
        results[mode] = first
    return results


def one_process_per_cell(spec: str, args: argparse.Namespace) -> float:
    """Wall-clock seconds for every cell in a fresh process, ``args.parallel`` processes at a time."""
    budget = budget_of(args)
    cells = [(length, seed) for length in args.lengths for seed in range(args.seeds)]

    def run(cell):
        payload = json.dumps([spec, cell[0], cell[1], budget.total_steps, budget.train_window,
                              budget.eval_episodes, budget.max_episode_steps])
        done = subprocess.run([sys.executable, "-c", CELL_WORKER, payload], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{spec} cell {cell}: the worker failed:\n{done.stderr[-2000:]}")

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(run, cells))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", nargs="+", default=["a2c-tiny-gru", "a2c-arelit"],
                        help="registered JAX-tier agents (default: a tiny GRU and the thesis-size AReLiT)")
    parser.add_argument("--lengths", nargs="+", type=int, default=[16, 32, 64], help="corridor lengths of the grid")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per corridor length")
    parser.add_argument("--steps", type=int, default=20_480, help="training steps per cell")
    parser.add_argument("--window", type=int, default=10_240, help="training window of the train score, in steps")
    parser.add_argument("--episodes", type=int, default=50, help="evaluation episodes per cell")
    parser.add_argument("--max-episode-steps", type=int, default=1000, help="episode time limit")
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 1,
                        help="processes at a time in the one-process-per-cell mode (default: CPU cores)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny agents, 2 cells of 512 steps and 2 evaluation episodes: a run of seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(agents=["a2c-tiny-gru"], lengths=[4, 6], seeds=1, steps=512,
                            window=256, episodes=2, max_episode_steps=50)
    args = parser.parse_args()
    if args.parallel < 1:
        parser.error(f"--parallel must be at least 1; got {args.parallel}")

    import jax

    cells = len(args.lengths) * args.seeds
    print(f"# jax {jax.__version__} on {jax.devices()[0].device_kind} ({jax.default_backend()}), "
          f"{platform.machine()}, {os.cpu_count()} CPUs, load before {os.getloadavg()[0]:.1f}")
    print(f"# grid: corridor lengths {args.lengths} x {args.seeds} seeds = {cells} cells, "
          f"{args.steps:,} training steps and {args.episodes} evaluation episodes each; "
          f"one process per cell: {args.parallel} at a time")
    rows = []
    for spec in args.agents:
        timings = in_one_process(spec, args)
        timings["per process"] = one_process_per_cell(spec, args)
        for mode, seconds in timings.items():
            rows.append({"agent": spec, "mode": mode, "seconds": seconds, "steps_per_second": cells * args.steps / seconds,
                         "speedup": timings["per process"] / seconds})
        print(f"# {spec} done, load {os.getloadavg()[0]:.1f}", flush=True)

    print()
    print("| agent | mode | wall time | steps/s | × one process per cell |")
    print("|---|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['agent']} | {row['mode']} | {row['seconds']:.1f} s | {row['steps_per_second']:,.0f} | "
              f"{row['speedup']:.2f}× |")
    print(f"\n# load after {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"args": vars(args), "jax": jax.__version__, "rows": rows}, out, indent=2)


if __name__ == "__main__":
    main()
