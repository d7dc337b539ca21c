"""What a training run writes besides checkpoints: ``run.json``, ``metrics.csv``, TensorBoard, the learning curve."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

#: Episode statistics summed per update (turned into rates and means in the CSV).
STAT_KEYS = ("episodes", "successes", "return_sum", "length_sum")


def prepare_run(out: Path, meta: dict[str, Any], resume: bool) -> None:
    """Create run directory ``out`` for ``meta``, or check that ``--resume`` continues the same run."""
    meta_path = out / "run.json"
    if meta_path.exists() and not resume:
        raise ValueError(f"{out} already holds a training run; pass --resume to continue it or choose another --out")
    if resume:
        if not meta_path.exists():
            raise ValueError(f"--resume: no run to resume in {out}")
        stored = json.loads(meta_path.read_text())
        if stored != meta:
            raise ValueError(f"--resume: {out} holds a run with different settings: {stored}")
    out.mkdir(parents=True, exist_ok=True)
    meta_path.write_text(json.dumps(meta, indent=2))


def metric_rows(metrics: dict[str, np.ndarray], seeds: list[int], first_update: int) -> list[dict[str, Any]]:
    """One CSV row per seed and update from metrics ``[seeds, updates]`` (episode statistics as rates and means)."""
    rows = []
    for s, seed in enumerate(seeds):
        for u in range(metrics["episodes"].shape[1]):
            m = {k: float(v[s, u]) for k, v in metrics.items()}
            episodes = m["episodes"]
            rows.append({
                "seed": seed, "update": first_update + u + 1, "env_steps": int(m["env_steps"]),
                "episodes": int(episodes), "successes": int(m["successes"]),
                "success_rate": m["successes"] / episodes if episodes else "",
                "mean_return": m["return_sum"] / episodes if episodes else "",
                "mean_length": m["length_sum"] / episodes if episodes else "",
                **{k: v for k, v in m.items() if k not in STAT_KEYS and k != "env_steps"},
            })
    return rows


def append_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` to the CSV file ``path`` (its header first, if the file is new)."""
    new = not path.exists()
    with open(path, "a", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        if new:
            writer.writeheader()
        writer.writerows(rows)


def tensorboard_writer(out: Path):
    """A TensorBoard writer under ``out/tensorboard`` when ``tensorboardX`` is installed, else None."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(out / "tensorboard"))


def plot_learning_curve(csv_path: Path, png_path: Path, title: str, metric: str = "success") -> bool:
    """Success rate or mean episode return (smoothed over updates) against environment steps, a line per seed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    with open(csv_path) as file:
        rows = list(csv.DictReader(file))
    figure, axis = plt.subplots(figsize=(7, 4))
    for seed in sorted({int(r["seed"]) for r in rows}):
        mine = [r for r in rows if int(r["seed"]) == seed]
        steps = np.array([int(r["env_steps"]) for r in mine])
        episodes = np.array([int(r["episodes"]) for r in mine], float)
        if metric == "success":
            totals = np.array([int(r["successes"]) for r in mine], float)
        else:
            totals = np.array([float(r["mean_return"]) * int(r["episodes"]) if r["mean_return"] else 0.0
                               for r in mine])
        window = max(1, len(mine) // 50)
        kernel = np.ones(window)
        value = np.convolve(totals, kernel, "same") / np.maximum(np.convolve(episodes, kernel, "same"), 1)
        axis.plot(steps, value, label=f"seed {seed}")
    if metric == "success":
        axis.set(ylabel="success rate", ylim=(-0.05, 1.05))
    else:
        axis.set(ylabel="mean episode return")
    axis.set(xlabel="environment steps", title=title)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(png_path, dpi=120)
    plt.close(figure)
    return True
