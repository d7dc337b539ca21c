"""memgym beside the thesis authors' code on one matched small T-Maze configuration: a table and a plot.

Reads the learning curves of memgym runs (``memgym train … --out DIR``: ``DIR/metrics.csv``, one or more seeds)
and of the authors' code (:mod:`agalite_tmaze`'s CSVs, one seed each). Per curve group it prints how many seeds
reached a junction at all in their first 200K steps (a seed that did not has not learned to walk the corridor),
how many held the cue at the end (success ≥ 0.9 over the last 100K steps), when each first did, and the mean
final success; ``--plot`` draws every seed's curve, one panel per group. The commands that made the published
comparison are in docs/reproduction.md ("The authors' code, run on one matched configuration").

    python comparisons/matched_tmaze.py --group "memgym AReLiT=runs/memgym-arelit" \\
        --group "authors' AReLiT=runs/agalite/arelit-s*.csv" --plot docs/figures/matched_tmaze.png
"""

from __future__ import annotations

import argparse
import csv
import glob
from pathlib import Path

import numpy as np

BUCKET = 100_000  # steps per point of a curve; the last bucket is the "last 100K steps" of the thesis's metric
HELD = 0.9
WALKED = 200_000  # a seed that reaches the junction by then walks the corridor from the start


def curves(pattern: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(steps, success)`` per seed, success pooled over episodes in buckets of :data:`BUCKET` steps."""
    paths = [path for path in sorted(glob.glob(pattern)) if Path(path).is_file()]
    paths = paths or sorted(glob.glob(str(Path(pattern) / "metrics.csv")))
    if not paths:
        raise SystemExit(f"--group: nothing matches {pattern!r} (a memgym run folder or CSV files)")
    out = []
    for path in paths:
        try:
            out += seed_curves(path)
        except (KeyError, ValueError, IndexError) as error:
            raise SystemExit(f"--group {pattern!r}: {path} is not a learning curve of memgym or agalite_tmaze.py "
                             f"(env_steps, episodes and successes or success_rate per row): {error!r}") from None
    return out


def seed_curves(path: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`curves` of one CSV file."""
    with open(path) as file:
        rows = list(csv.DictReader(file))
    out = []
    if not rows:
        raise ValueError("no rows")
    seeds = sorted({row.get("seed", "0") for row in rows})
    for seed in seeds:
        mine = [row for row in rows if row.get("seed", "0") == seed]
        steps = np.array([float(row["env_steps"]) for row in mine])
        episodes = np.array([float(row["episodes"] or 0) for row in mine])
        if "successes" in mine[0]:
            wins = np.array([float(row["successes"] or 0) for row in mine])
        else:
            wins = np.nan_to_num(np.array([float(row["success_rate"]) for row in mine])) * episodes
        bucket = ((steps - 1) // BUCKET).astype(int)
        n = bucket.max() + 1
        won = np.bincount(bucket, wins, n)
        ended = np.bincount(bucket, episodes, n)
        out.append(((np.arange(n) + 1) * BUCKET, np.where(ended > 0, won / np.maximum(ended, 1), 0.0)))
    return out


def summary(name: str, group: list[tuple[np.ndarray, np.ndarray]]) -> str:
    walked = [(success[steps <= WALKED] > 0).any() for steps, success in group]  # any success: it got there
    held = [success[-1] >= HELD for _, success in group]
    first = [f"{steps[np.argmax(success >= HELD)] / 1e6:.1f}M" if (success >= HELD).any() else "–"
             for steps, success in group]
    final = np.mean([success[-1] for _, success in group])
    return f"| {name} | {sum(walked)}/{len(group)} | {sum(held)}/{len(group)} | {', '.join(first)} | {final:.2f} |"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", action="append", required=True, metavar="NAME=PATTERN",
                        help="a curve group: a memgym run folder, or a glob of CSV files")
    parser.add_argument("--plot", help="write the learning curves here (PNG)")
    args = parser.parse_args(argv)
    groups = {}
    for spec in args.group:
        name, sep, pattern = spec.partition("=")
        if not sep:
            parser.error(f"--group {spec!r}: expected NAME=PATTERN")
        groups[name] = curves(pattern)
    print(f"| runs | at the junction by {WALKED / 1e6:.1f}M | seeds ≥ {HELD} at the end | first ≥ {HELD} (per seed) "
          "| final success |")
    print("|---|---|---|---|---|")
    for name, group in groups.items():
        print(summary(name, group))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 2.8), sharey=True, squeeze=False)
        for axis, (name, group) in zip(axes[0], groups.items()):
            for steps, success in group:
                axis.plot(steps / 1e6, success, lw=1.2)
            axis.set_title(name, fontsize=9)
            axis.set_xlabel("environment steps (M)")
            axis.axhline(0.5, color="grey", lw=0.6, ls=":")
        axes[0][0].set_ylabel("success rate")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
