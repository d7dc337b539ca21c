"""What counting out of the agent's reach costs: ``memgym leaderboard verify``'s child process against ``run``'s
in-process agent, side by side in one run.

* Any-framework tier: ``--steps`` training steps of each agent over the 8-env T-Maze vector env that
  the harness steps (:func:`memgym.leaderboard.running.any_tier.train`), once with the agent in this process
  (``run``) and once in a child process, every ``act`` and ``observe`` a message over a socket
  (``verify``, :class:`memgym.leaderboard.submissions.isolation.RemoteAgent`). Steps/s of each; the child's start
  is timed apart.
* JAX tier (``--jax-agent``, default the reference ``a2c-tiny-gru``, smoke preset at L=8): the
  cell's evaluation (256 episodes) in process (``JaxCells.evaluate``) and with the agent's ``act``
  exported by the child and evaluated here (:func:`memgym.leaderboard.submissions.isolation.exported_evaluator`),
  compile and run separately, plus the whole of one verified cell in the child (start, import,
  compile, train, export) and the size of the exported ``act``. Training itself runs the same
  compiled code in both.

    python benchmarks/verification_cost.py [--steps 20000] [--repeats 3] [--jax-agent a2c-tiny-gru] [--smoke]

``--smoke``: 512 any-framework steps, one repeat, and the JAX-tier cells trained for 512 steps
(two updates of the tiny GRU) with 4 evaluation episodes each: every row of both tables, mostly
start-up and compilation (a check that the script runs, not a measurement). Given flags win over these.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time

import jax
import numpy as np

from memgym.leaderboard.running import any_tier
from memgym.leaderboard.submissions import isolation
from memgym.leaderboard.running.jax_tier import JaxCells, cell_outcome
from memgym.leaderboard.running.planning import NUM_ENVS
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.scoring import ScoredState, seal_weights
from memgym.leaderboard.tracks import TMAZE

ANY_AGENTS = ("examples.random_agent:factory", "examples.numpy_agent:factory")


def any_tier_rows(steps: int, repeats: int) -> list[list[str]]:
    budget = TMAZE.presets["smoke"]
    budget = type(budget)(**{**budget.__dict__, "total_steps": steps, "train_window": steps // 5})
    rows = []
    for spec in ANY_AGENTS:
        local, remote, starts = [], [], []
        factory = load_factory(spec)
        for _ in range(repeats):
            agent = factory(TMAZE.context(num_envs=NUM_ENVS, seed=0, total_steps=steps, value=8))
            started = time.perf_counter()
            any_tier.train(agent, TMAZE, budget, 8, 0, NUM_ENVS)
            local.append(time.perf_counter() - started)
            started = time.perf_counter()
            with isolation.AgentProcess(spec) as process:
                agent = isolation.RemoteAgent(process, TMAZE, 8, 0, steps, NUM_ENVS)
                starts.append(time.perf_counter() - started)
                started = time.perf_counter()
                any_tier.train(agent, TMAZE, budget, 8, 0, NUM_ENVS)
                remote.append(time.perf_counter() - started)
        here, there = steps / statistics.median(local), steps / statistics.median(remote)
        rows.append([spec, f"{here:,.0f}", f"{there:,.0f}", f"{there / here:.2f}x",
                     f"{statistics.median(starts):.1f}s"])
    return rows


def jax_tier_rows(spec: str, repeats: int, budget=None) -> list[list[str]]:
    """Rows of the JAX-tier table; ``budget`` (default the smoke preset) gives the seeds, steps and episodes."""
    budget = budget or TMAZE.presets["smoke"]
    cells = [(8, seed) for seed in range(budget.seeds)]
    agent = load_factory(spec)(TMAZE.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps))
    local = JaxCells(agent, TMAZE, budget)
    seal = seal_weights()
    params, _, inputs = local.train_cells(cells, seal)

    def in_process():
        return jax.block_until_ready(local.evaluate(params, *inputs))

    started = time.perf_counter()
    with isolation.AgentProcess(spec) as process:
        trained = isolation.train_jax(process, TMAZE, budget, cells, seal)
    child_seconds = time.perf_counter() - started
    exported = isolation.exported_agent(trained["act"], trained["carry"], NUM_ENVS)
    evaluate = isolation.exported_evaluator(exported, TMAZE, budget)

    def exported_evaluation():
        return [evaluate(8, seed, trained["params"][i]) for i, (_, seed) in enumerate(cells)]

    rows = []
    results = {}
    for name, function in (("in process (run)", in_process), ("exported act, here (verify)", exported_evaluation)):
        started = time.perf_counter()
        results[name] = function()
        first = time.perf_counter() - started
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            function()
            times.append(time.perf_counter() - started)
        rows.append([name, f"{first:.2f}s", f"{statistics.median(times):.3f}s"])
    local_eval = [np.asarray(x) for x in results["in process (run)"]]
    same = all(np.array_equal(local_eval[k][i], results["exported act, here (verify)"][i][k])
               for i in range(len(cells)) for k in range(4))
    state = ScoredState(inner=None, **{n: c[0] for n, c in trained["counters"].items()})
    outcome = cell_outcome(TMAZE, budget, state, seal, trained["params"][0], results["exported act, here (verify)"][0])
    print(f"JAX tier ({spec}, {budget.name} budget, L=8, {budget.seeds} seeds, {budget.eval_episodes} evaluation "
          f"episodes each): one child run (start, import, compile, train {budget.total_steps:,} steps x {budget.seeds}, "
          f"export) {child_seconds:.1f}s; exported act {len(trained['act']) / 1024:.0f} KiB; evaluation arrays "
          f"identical in process and exported: {same}; seed 0 evaluated here: "
          f"{outcome[1]['success_rate'] if isinstance(outcome, tuple) else outcome}")
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000, help="any-framework training steps per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jax-agent", default="a2c-tiny-gru")
    parser.add_argument("--jax-steps", type=int, default=None,
                        help="training steps of each JAX-tier cell (default: the smoke preset's)")
    parser.add_argument("--jax-episodes", type=int, default=None,
                        help="evaluation episodes of each JAX-tier cell (default: the smoke preset's)")
    parser.add_argument("--smoke", action="store_true",
                        help="512 steps, 1 repeat, JAX cells of 512 steps and 4 episodes: both tables, seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(steps=512, repeats=1, jax_steps=512, jax_episodes=4)
    args = parser.parse_args()
    smoke = TMAZE.presets["smoke"]
    steps = smoke.total_steps if args.jax_steps is None else args.jax_steps
    budget = dataclasses.replace(  # the preset checks the values (a clear ValueError for a bad one)
        smoke, name="smoke" if args.jax_steps is None and args.jax_episodes is None else "smoke+custom",
        total_steps=steps, train_window=min(smoke.train_window, steps),
        eval_episodes=smoke.eval_episodes if args.jax_episodes is None else args.jax_episodes)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
          f"jax {jax.__version__} ({jax.default_backend()})")
    print(f"\nAny-framework tier: training steps/s over 8 envs ({args.steps:,} steps, median of {args.repeats})\n")
    print(table(["agent", "in process (run)", "child process (verify)", "ratio", "child start"],
                any_tier_rows(args.steps, args.repeats)))
    print()
    rows = jax_tier_rows(args.jax_agent, args.repeats, budget)
    print()
    print(table(["evaluation of 2 cells", "first call (compile)", f"median of {args.repeats}"], rows))
    print(f"\nload at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
