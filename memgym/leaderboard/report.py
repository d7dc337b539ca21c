"""Turn the stored cells into a board: ``board.json``, ``board.md`` and ``board.png``.

Agents are ranked by their headline score — mean *evaluation* success over the
corridor lengths (fixed evaluation mazes, harness-run) — with the stratified
bootstrap interval, IQM and ``L*`` of :mod:`memgym.leaderboard.stats`. The
thesis metric (training success over the last window of steps) is reported
beside it.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from memgym.leaderboard.stats import summarize
from memgym.leaderboard.store import ResultsStore


def build_board(store: ResultsStore) -> dict[str, Any]:
    """Summaries per agent (and per budget, when one store holds several presets)."""
    cells: dict[tuple[str, str], dict[str, dict[int, list[float]]]] = defaultdict(
        lambda: {"eval": defaultdict(list), "train": defaultdict(list)}
    )
    for record in store.records():
        key = (record["agent"], record["preset"]["name"])
        cells[key]["eval"][record["corridor_length"]].append(record["eval"]["success_rate"])
        cells[key]["train"][record["corridor_length"]].append(record["train"]["success_rate"])
    entries = []
    for (agent, budget), metrics in cells.items():
        entries.append({
            "agent": agent,
            "preset": budget,
            "eval": summarize(metrics["eval"]),
            "train": summarize(metrics["train"]),
        })
    entries.sort(key=lambda e: (e["preset"], -e["eval"]["score"], e["agent"]))
    return {"entries": entries}


def _cell(summary: dict[str, Any]) -> str:
    se = summary["se"]
    return f"{summary['mean']:.2f} ± {se:.2f}" if se == se else f"{summary['mean']:.2f}"  # se is NaN for one seed


def markdown(board: dict[str, Any]) -> str:
    lines = ["# memgym T-Maze leaderboard", ""]
    lines.append(
        "Score: mean evaluation success over corridor lengths [95% stratified bootstrap]. "
        "Per length: evaluation success, mean ± standard error over seeds. "
        "L*: longest corridor whose lower 95% bound is ≥ 0.9. "
        "Train: success over the last training window (the thesis metric)."
    )
    by_preset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in board["entries"]:
        by_preset[entry["preset"]].append(entry)
    for budget, entries in by_preset.items():
        lengths = sorted({int(length) for e in entries for length in e["eval"]["per_length"]})
        lines += ["", f"## Preset `{budget}`", ""]
        header = ["rank", "agent", "score", "IQM", "L*", "train score"] + [f"L={length}" for length in lengths]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for rank, e in enumerate(entries, 1):
            low, high = e["eval"]["score_ci"]
            row = [str(rank), f"`{e['agent']}`", f"{e['eval']['score']:.2f} [{low:.2f}, {high:.2f}]",
                   f"{e['eval']['iqm']:.2f}", str(e["eval"]["longest_solved"] or "—"), f"{e['train']['score']:.2f}"]
            per = e["eval"]["per_length"]
            row += [_cell(per[length]) if length in per else "—" for length in lengths]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def plot(board: dict[str, Any], path: Path) -> bool:
    """Success vs corridor length with 95% intervals, one line per agent; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    presets = sorted({e["preset"] for e in board["entries"]})
    figure, axes = plt.subplots(1, len(presets), figsize=(6 * len(presets), 4), squeeze=False)
    for axis, budget in zip(axes[0], presets):
        for e in (e for e in board["entries"] if e["preset"] == budget):
            per = e["eval"]["per_length"]
            lengths = sorted(per)
            mean = [per[length]["mean"] for length in lengths]
            axis.plot(lengths, mean, marker="o", label=e["agent"])
            axis.fill_between(lengths, [per[x]["ci_low"] for x in lengths], [per[x]["ci_high"] for x in lengths],
                              alpha=0.2)
        axis.set(title=f"T-Maze, preset {budget}", xlabel="corridor length", ylabel="evaluation success rate",
                 ylim=(-0.05, 1.05))
        axis.axhline(0.5, color="gray", linestyle=":", linewidth=1)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def write_report(results: str | os.PathLike, out: str | os.PathLike | None = None) -> dict[str, Path]:
    """Write ``board.json``, ``board.md`` (and ``board.png``) for the store at ``results`` into ``out``.

    These are derived files: they are regenerated from the stored cells every time.
    """
    store = ResultsStore(results)
    board = build_board(store)
    if not board["entries"]:
        raise ValueError(f"no results stored under {results}; run `memgym leaderboard run` first")
    out = Path(out or results)
    out.mkdir(parents=True, exist_ok=True)
    written = {"json": out / "board.json", "markdown": out / "board.md"}
    written["json"].write_text(json.dumps(board, indent=2, sort_keys=True))
    written["markdown"].write_text(markdown(board))
    if plot(board, out / "board.png"):
        written["plot"] = out / "board.png"
    return written
