"""A POPGym board's grid in the JAX tier against the host loop: wall-clock time of the same cells, side by side.

One task of a POPGym track (``--task``, default Repeat Previous Easy), ``--seeds`` seeds, one reference agent
(``--agent``, default ``ppo-cpu-gru``: PPO with the tiny GRU), trained and evaluated by the leaderboard harness
exactly as ``memgym leaderboard run --track popgym`` does, twice in one run:

* **JAX tier**: the task in JAX (:mod:`memgym.envs.popgym_jax`); the agent's whole training is one jitted
  call, every seed of the task in one ``vmap`` (:class:`memgym.leaderboard.running.jax_tier.JaxCells`), then the
  evaluation episodes in one more vmapped call;
* **host loop**: popgym's NumPy task through Gymnasium's vector env, the same agent's trainer behind the
  any-framework protocol (:class:`memgym.agents.host.HostAgent`: a jitted update per rollout, one Python
  step per vector step), one cell after another: what the track ran before its tasks were written in JAX.

Times are wall clock from the start of the run to its stored records, compilation and evaluation included
(as a board run pays them); steps/s = seeds × steps / time; ``ratio`` is host loop over JAX tier. The
machine's load average is printed: read the ratio.

    python benchmarks/popgym_grid_speed.py [--agent ppo-cpu-gru] [--task RepeatPreviousEasy] [--seeds 5]
        [--steps 300000] [--json out.json] [--smoke]

``--smoke``: 2 seeds, 4,096 steps, 8 evaluation episodes: the table in well under a minute (a check that the
script runs, not a measurement). Given flags win over these. Needs the ``agents`` and ``popgym`` extras.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time


def grid_seconds(agent: str, track, budget) -> tuple[float, list[dict]]:
    """Train and evaluate ``budget``'s cells of ``agent`` on ``track`` through the harness; (seconds, records)."""
    from memgym.leaderboard.running import runner

    with tempfile.TemporaryDirectory() as results:
        started = time.perf_counter()
        store = runner.run([agent], budget, results, track=track, log=lambda line: None, policies=False)
        seconds = time.perf_counter() - started
        return seconds, [record for record in store.records() if record.get("agent") == agent]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="ppo-cpu-gru", help="a reference agent (or any spec both tiers run)")
    parser.add_argument("--task", default="RepeatPreviousEasy", help="a task of the popgym track")
    parser.add_argument("--seeds", type=int, default=None, help="seeds of the task (default 5)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per cell (default 300,000)")
    parser.add_argument("--eval-episodes", type=int, default=None, help="evaluation episodes per cell (default 100)")
    parser.add_argument("--json", default=None, help="also write the table as JSON to this file")
    parser.add_argument("--smoke", action="store_true", help="2 seeds x 4,096 steps: the table in well under a minute")
    args = parser.parse_args()
    small = dict(seeds=2, steps=4096, eval_episodes=8) if args.smoke else dict(seeds=5, steps=300_000,
                                                                                eval_episodes=100)
    for name, value in small.items():
        if getattr(args, name) is None:
            setattr(args, name, value)

    import jax

    from memgym.leaderboard.tracks import POPGYM

    budget = POPGYM.preset("cpu", values=[args.task], seeds=args.seeds, total_steps=args.steps,
                           eval_episodes=args.eval_episodes)
    # the same track without its JAX env: reference agents then train through the host loop
    host = dataclasses.replace(POPGYM, jax_env=None, jax_params=None, episode_limit=None, per_value_env=False)
    print(f"{args.agent} on {args.task}: {args.seeds} seeds x {args.steps:,} steps, {args.eval_episodes} evaluation "
          f"episodes per cell; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, jax "
          f"{jax.__version__} on {jax.default_backend()}, load {os.getloadavg()[0]:.1f} at the start")
    rows = []
    for label, track in (("JAX tier (seeds vmapped, one call)", POPGYM), ("host loop (one cell at a time)", host)):
        seconds, records = grid_seconds(args.agent, track, budget)
        failed = [r.get("reason") for r in records if r["status"] != "ok"]
        if failed:
            raise SystemExit(f"{label}: cells failed: {failed}")
        score = sum(r["eval"]["normalized_return"] for r in records) / len(records)
        rows.append({"mode": label, "tier": records[0]["tier"], "seconds": seconds,
                     "steps_per_s": args.seeds * args.steps / seconds, "eval_normalized_return": score})
    print("\n| mode | tier | wall time (s) | steps/s | eval normalized return (mean over seeds) |")
    print("|---|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['mode']} | {row['tier']} | {row['seconds']:.1f} | {row['steps_per_s']:,.0f} | "
              f"{row['eval_normalized_return']:+.3f} |")
    ratio = rows[1]["seconds"] / rows[0]["seconds"]
    print(f"\nratio (host loop time / JAX tier time): {ratio:.2f}x; load {os.getloadavg()[0]:.1f} at the end")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"agent": args.agent, "task": args.task, "seeds": args.seeds, "steps": args.steps,
                       "rows": rows, "ratio": ratio}, out, indent=1)


if __name__ == "__main__":
    main()
