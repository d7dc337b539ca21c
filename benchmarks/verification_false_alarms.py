"""Verification false alarms: how often ``memgym leaderboard verify`` calls an honest JAX-tier cell "not
reproduced" when it re-trains it on another backend, and how often it catches an over-trained one there.

On the records' backend ``verify`` demands that a re-trained cell repeat its record bitwise. On another
backend training takes another path, so the statistical rule of
:func:`memgym.leaderboard.submissions.comparison.compare_training` applies: the re-trained cell's evaluation score and
training-window score must each lie within ``[min, max]`` of the submission's own seeds' stored scores at that
corridor length, widened by :func:`~memgym.leaderboard.submissions.comparison.tolerance` (``--z`` standard errors);
otherwise the cell is "not reproduced" (not conclusive). This script measures that rule on one machine,
which stands in for two: ``XLA_FLAGS=--xla_cpu_max_isa=SSE4_2`` (``--other-flags``, the default) caps the
instruction set XLA emits CPU code for, a different backend fingerprint. Whether training really takes another
path there is what the table's bitwise-equal column says: on an AVX-512 Xeon the SSE4.2 cap changed every cell
of the tiny GRU's 10-seed batches, ``--other-flags=--xla_cpu_max_isa=AVX2`` none (no other path, so no false
alarm can occur).

1. The smoke grid of the reference agent (``memgym leaderboard run --agent a2c-tiny-gru --preset smoke``,
   corridor lengths 4, 8, 12, ``--seeds`` seeds) runs twice, each in a ``python -m memgym.cli`` process
   with ``MEMGYM_COMPILATION_CACHE=off``: natively and with the other flags.
2. Per corridor length, every pair of native seeds ``(s1, s2)`` is a 2-seed submission (the smoke preset's
   size); the other backend's runs of ``s1`` and ``s2`` are that submission's re-trained cells, judged by
   ``compare_training(..., exact=False)`` against ``spreads()`` of the pair's records. The share judged "not
   reproduced" is the false-alarm rate per re-trained cell (each length has seeds × (seeds − 1) such
   judgements; they share cells, so they are not independent draws). Also: how many cells of the other
   backend equal their native twin bitwise (training counters, evaluation and trained parameters: the same
   path after all), and the mean |Δ evaluation score| between twins.
3. The rule's power against over-training: a submission whose stored cells at ``--cheat-length`` (12) come
   from a native run with ``--cheat-factor`` (5) times the budget, same seeds, while its re-training is the
   honest run on the other backend. The share of those re-trained cells judged "not reproduced" is the flag
   rate (on the records' own backend the exact rule flags every such cell).

    python benchmarks/verification_false_alarms.py [--seeds 10] [--lengths 4 8 12] [--steps 100000]
        [--eval-episodes 256] [--cheat-length 12] [--cheat-factor 5] [--z 3] [--jobs 2]
        [--other-flags=--xla_cpu_max_isa=SSE4_2] [--keep DIR] [--json out.json] [--smoke]

``--keep DIR`` keeps the three results folders (``DIR/native``, ``DIR/other-<flags>``, ``DIR/native-5x-L12``;
a folder that exists is resumed, its stored cells reused, so a second ``--other-flags`` trains only its own
run); without it they live in a temporary directory. ``--jobs``: how many of the three runs go at once
(their results do not depend on it: XLA's CPU code is deterministic; on 2 busy cores 3 at once took longer).
``--smoke``: 2 seeds at L=4 only, 2,048 training steps and 32 evaluation episodes per cell, the over-trained
run at L=4 too: every row in about a minute (a check that the script runs, not a measurement). Given flags
win over these.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memgym.leaderboard.store import result_order
from memgym.leaderboard.submissions.comparison import NOT_REPRODUCED, Z, compare_training, spreads
from memgym.leaderboard.tracks import TMAZE

ROOT = Path(__file__).resolve().parents[1]  # the runs import this checkout's memgym

PRESET = "smoke"


def machine() -> str:
    """The processor's model name, the cores this process may use and the load averages."""
    model = None
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), None)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{model or platform.processor() or platform.machine()}, nproc {cores}, load average {load}"


def leaderboard_run(name: str, folder: Path, agent: str, lengths: Sequence[int], seeds: int, steps: int,
                    episodes: int, xla_flags: str) -> float:
    """``python -m memgym.cli leaderboard run`` of one grid into ``folder`` (its output in ``folder.log``);
    the seconds it took. A failed run stops the script with the end of its output."""
    environment = dict(os.environ, MEMGYM_COMPILATION_CACHE="off", XLA_FLAGS=xla_flags,
                       PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--agent", agent, "--preset", PRESET,
               "--values", ",".join(map(str, lengths)), "--seeds", str(seeds), "--steps", str(steps),
               "--eval-episodes", str(episodes), "--results", str(folder)]
    started = time.perf_counter()
    log = folder.with_name(folder.name + ".log")
    with open(log, "w") as out:
        done = subprocess.run(command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"the {name} run failed (exit code {done.returncode}): {' '.join(command)}\n"
                         f"{log.read_text()[-4000:]}")
    print(f"# {name} run ({', '.join(f'L={v}' for v in lengths)} x {seeds} seeds, {steps:,} steps, "
          f"XLA_FLAGS={xla_flags!r}): {seconds:.0f} s", flush=True)
    return seconds


def safe_name(flags: str) -> str:
    """XLA flags as part of a folder name: ``--xla_cpu_max_isa=AVX2`` becomes ``-xla_cpu_max_isa-AVX2``."""
    return "".join(f"-{''.join(c if c.isalnum() or c == '_' else '-' for c in flag.lstrip('-'))}"
                   for flag in flags.split())


def cells_of(folder: Path, agent: str, xla_flags: str) -> dict[tuple[int, int], dict[str, Any]]:
    """The stored record of each ``(corridor length, seed)`` of ``agent`` (its first ``ok`` result, else its
    first one, as the board counts a cell); a record trained with other XLA flags (a kept folder of another
    run) stops the script."""
    found: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for record in TMAZE.records(TMAZE.store(folder)):
        if record.get("agent") == agent:
            provenance = record.get("provenance", {})
            recorded = (provenance.get("backend") or {}).get("xla_flags", provenance.get("xla_flags", ""))
            if " ".join(str(recorded).split()) != " ".join(xla_flags.split()):
                raise SystemExit(f"{record['path']} was trained with XLA_FLAGS={recorded!r}, not {xla_flags!r}: "
                                 f"keep the runs of other flags in another --keep directory")
            found.setdefault((record[TMAZE.sweep.name], record["seed"]), []).append(record)
    chosen = {}
    for cell, records in found.items():
        records.sort(key=result_order)
        chosen[cell] = next((r for r in records if r["status"] == "ok"), records[0])
    return chosen


def retraining(record: dict[str, Any]) -> tuple[dict, dict, list] | str:
    """A record as ``compare_training`` takes a re-trained cell: ``(training counters, evaluation, leaves)``
    (the counters without the score the store adds; the leaves unused by the statistical rule), or the
    reason the cell failed."""
    if record["status"] != "ok":
        return record.get("reason") or "failed"
    counters = {k: v for k, v in record["train"].items() if k != TMAZE.score.name}
    return counters, record["eval"], []


def bitwise_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two records of one cell trained and evaluated the same: counters, evaluation and trained parameters."""
    return (a["status"] == b["status"] == "ok" and a["train"] == b["train"] and a["eval"] == b["eval"]
            and (a.get("policy") or {}).get("params_sha256") == (b.get("policy") or {}).get("params_sha256"))


def judge(stored: dict[tuple[int, int], dict[str, Any]], rerun: dict[tuple[int, int], dict[str, Any]],
          length: int, seeds: Sequence[int], z: float) -> list[dict[str, Any]]:
    """Every pair of ``stored`` seeds at ``length`` as a 2-seed submission whose cells are re-trained as in
    ``rerun``: one ``compare_training`` row per re-trained cell, with the pair."""
    rows = []
    for pair in itertools.combinations(seeds, 2):
        submission = {(length, seed): stored[(length, seed)] for seed in pair}
        spread = spreads(submission, TMAZE)[length]
        for seed in pair:
            row = compare_training(stored[(length, seed)], retraining(rerun[(length, seed)]), spread, TMAZE,
                                   exact=False, z=z)
            rows.append({"pair": list(pair), "seed": seed, "outcome": row["outcome"],
                         "reason": row.get("reason", ""), "eval_rerun": row.get("eval_rerun"),
                         "train_rerun": row.get("train_rerun"), "spread": spread})
    return rows


def rate(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """``(not reproduced, judged)``."""
    return sum(r["outcome"] == NOT_REPRODUCED for r in rows), len(rows)


def percent(flagged: int, judged: int) -> str:
    return f"{flagged}/{judged} ({100 * flagged / judged:.1f} %)" if judged else "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    smoke = TMAZE.presets[PRESET]
    parser.add_argument("--agent", default="a2c-tiny-gru", help="a registered JAX-tier agent (default: the reference)")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per corridor length (at least 2; default 10)")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(smoke.values),
                        help=f"corridor lengths (default: the {PRESET} preset's, {' '.join(map(str, smoke.values))})")
    parser.add_argument("--steps", type=int, default=smoke.total_steps,
                        help=f"honest training steps per cell (default: the preset's {smoke.total_steps:,})")
    parser.add_argument("--eval-episodes", type=int, default=smoke.eval_episodes,
                        help=f"evaluation episodes per cell (default: the preset's {smoke.eval_episodes})")
    parser.add_argument("--cheat-length", type=int, default=12,
                        help="the corridor length of the over-trained submission (one of --lengths; default 12)")
    parser.add_argument("--cheat-factor", type=int, default=5,
                        help="the over-trained run's budget as a multiple of --steps (at least 2; default 5)")
    parser.add_argument("--z", type=float, default=Z, help=f"the rule's tolerance in standard errors (default {Z:g})")
    parser.add_argument("--other-flags", default="--xla_cpu_max_isa=SSE4_2",
                        help="XLA_FLAGS added for the other backend (default: --xla_cpu_max_isa=AVX2)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once (default 1: on a small machine they slow each other more than they gain)")
    parser.add_argument("--keep", help="keep the results folders under this directory (resumed where they exist)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--smoke", action="store_true",
                        help="2 seeds at L=4, 2,048 steps, 32 evaluation episodes, the over-training at L=4: ~1 min")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(seeds=2, lengths=[4], steps=2048, eval_episodes=32, cheat_length=4)
    args = parser.parse_args()
    if args.seeds < 2:
        parser.error(f"--seeds must be at least 2 (a submission is a pair of seeds); got {args.seeds}")
    if len(set(args.lengths)) < len(args.lengths):
        parser.error(f"--lengths names a length twice: {args.lengths}")
    if args.cheat_length not in args.lengths:
        parser.error(f"--cheat-length must be one of --lengths {args.lengths} (its re-training is the honest run "
                     f"there); got {args.cheat_length}")
    if args.cheat_factor < 2:
        parser.error(f"--cheat-factor must be at least 2; got {args.cheat_factor}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    if not args.z > 0:
        parser.error(f"--z must be positive; got {args.z}")
    if not args.other_flags.split():
        parser.error("--other-flags must name at least one XLA flag; got an empty string")

    started = time.perf_counter()
    print(f"# machine: {machine()}", flush=True)
    base_flags = os.environ.get("XLA_FLAGS", "")
    other_flags = f"{base_flags} {args.other_flags}".strip()
    seeds = list(range(args.seeds))
    cheat_steps = args.steps * args.cheat_factor
    with tempfile.TemporaryDirectory(prefix="verification-false-alarms-") as scratch:
        root = Path(args.keep) if args.keep else Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        # the other backend's folder is named by its flags: a kept directory serves several of them
        folders = {"native": root / "native", "other": root / f"other{safe_name(args.other_flags)}",
                   "cheat": root / f"native-{args.cheat_factor}x-L{args.cheat_length}"}
        plans = {"native": (args.lengths, args.steps, base_flags),
                 "other": (args.lengths, args.steps, other_flags),
                 "cheat": ([args.cheat_length], cheat_steps, base_flags)}
        print(f"# {args.agent}, preset {PRESET}: {args.seeds} seeds, {args.steps:,} steps, {args.eval_episodes} "
              f"evaluation episodes per cell; over-trained: L={args.cheat_length} with {cheat_steps:,} steps; "
              f"results in {root if args.keep else 'a temporary directory'}", flush=True)
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {name: pool.submit(leaderboard_run, name, folders[name], args.agent, lengths, args.seeds,
                                         steps, args.eval_episodes, flags)
                       for name, (lengths, steps, flags) in plans.items()}
            seconds = {name: future.result() for name, future in futures.items()}
        cells = {name: cells_of(folder, args.agent, plans[name][2]) for name, folder in folders.items()}

    for name, (lengths, _, _) in plans.items():
        missing = [(v, s) for v in lengths for s in seeds if (v, s) not in cells[name]]
        if missing:
            raise SystemExit(f"the {name} run stored no record of cells {missing}")
    native, other, cheat = cells["native"], cells["other"], cells["cheat"]
    fingerprints = {name: sorted({str(r.get("provenance", {}).get("backend", {}).get("fingerprint"))
                                  for r in found.values()}) for name, found in cells.items()}

    rows, details = [], {}
    for length in args.lengths:
        twins = [(native[(length, s)], other[(length, s)]) for s in seeds]
        deltas = [abs(a["eval"][TMAZE.score.name] - b["eval"][TMAZE.score.name]) for a, b in twins
                  if a["status"] == b["status"] == "ok"]
        honest = judge(native, other, length, seeds, args.z)
        over = judge(cheat, other, length, seeds, args.z) if length == args.cheat_length else []
        details[length] = {"honest": honest, "over_trained": over}
        rows.append({"length": length, "cells": len(seeds), "bitwise_equal": sum(bitwise_equal(a, b) for a, b in twins),
                     "abs_delta_eval": deltas, "mean_abs_delta_eval": sum(deltas) / len(deltas) if deltas else None,
                     "false_alarms": rate(honest), "over_trained_flags": rate(over) if over else None,
                     "eval_native": [native[(length, s)]["eval"].get(TMAZE.score.name) for s in seeds],
                     "eval_other": [other[(length, s)]["eval"].get(TMAZE.score.name) for s in seeds],
                     "eval_over_trained": [cheat[(length, s)]["eval"].get(TMAZE.score.name) for s in seeds]
                     if over else None})
    everything = [r for d in details.values() for r in d["honest"]]
    all_deltas = [d for r in rows for d in r["abs_delta_eval"]]

    print()
    print(f"| L | cells | bitwise-equal | mean \\|Δ eval\\| | false-alarm rate (honest) | "
          f"flag rate ({args.cheat_factor}× budget) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        delta = "—" if row["mean_abs_delta_eval"] is None else f"{row['mean_abs_delta_eval']:.3f}"
        flags = "—" if row["over_trained_flags"] is None else percent(*row["over_trained_flags"])
        print(f"| {row['length']} | {row['cells']} | {row['bitwise_equal']}/{row['cells']} | {delta} | "
              f"{percent(*row['false_alarms'])} | {flags} |")
    cell_count = sum(r["cells"] for r in rows)
    over_all = next(r["over_trained_flags"] for r in rows if r["length"] == args.cheat_length)
    print(f"| all | {cell_count} | {sum(r['bitwise_equal'] for r in rows)}/{cell_count} | "
          f"{sum(all_deltas) / len(all_deltas) if all_deltas else float('nan'):.3f} | {percent(*rate(everything))} | "
          f"{percent(*over_all)} |")
    print()
    print(f"Rates are per re-trained cell: each pair of seeds is a 2-seed submission, each of its two cells re-trained "
          f"with XLA_FLAGS={args.other_flags!r} and judged by compare_training (z = {args.z:g}); "
          f"{args.seeds * (args.seeds - 1)} judgements per length.")
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    cheat_row = next(r for r in rows if r["length"] == args.cheat_length)
    print(f"Evaluation success at L={args.cheat_length}, mean over seeds: native {mean(cheat_row['eval_native']):.3f}, "
          f"other backend {mean(cheat_row['eval_other']):.3f}, {args.cheat_factor}× budget "
          f"{mean(cheat_row['eval_over_trained']):.3f}.")
    print(f"Backend fingerprints: native {fingerprints['native']}, other {fingerprints['other']} "
          f"({'different' if set(fingerprints['native']).isdisjoint(fingerprints['other']) else 'NOT all different'}).")
    elapsed = time.perf_counter() - started
    print(f"\n# machine at the end: {machine()}")
    print(f"# total time {elapsed:.0f} s (runs: {', '.join(f'{k} {v:.0f} s' for k, v in seconds.items())}, "
          f"{args.jobs} at a time)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"args": vars(args), "machine": machine(), "seconds": seconds, "total_seconds": elapsed,
                       "fingerprints": fingerprints, "rows": rows,
                       "judgements": {str(k): v for k, v in details.items()}}, out, indent=2)


if __name__ == "__main__":
    main()
