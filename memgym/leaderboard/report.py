"""Turn the stored cells into a board: Markdown, a static HTML page, JSON and PNG plots.

Agents are ranked by their headline score — mean *evaluation* success over the
corridor lengths (fixed evaluation mazes, harness-run) — with the stratified
bootstrap interval, IQM and ``L*`` of :mod:`memgym.leaderboard.stats`. The
thesis metric (training success over the last window of steps) is reported
beside it. A cell counts with its first ``ok`` result; later ``ok`` results of
the same cell are shown as repeats (with their spread), failed cells that never
succeeded are listed with their reasons.

Files (:func:`write_report`): ``LEADERBOARD.md``, ``index.html`` (static, no
script: every figure is an ``<img>`` next to the file), ``board.json``,
``success_by_length.png`` (thesis Fig. 5.3 style: success vs corridor length,
95% interval bands) and ``learning_curves.png`` (training success over
environment steps, mean over seeds, one panel per corridor length). They are
derived files, rebuilt from the store each time.

The HTML is tested with Python's HTML parser rather than a browser: it has no
script or style that a browser would have to run, so what a parser sees (the
tables, the image links) is what a reader gets.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from memgym.leaderboard.stats import summarize
from memgym.leaderboard.store import ResultsStore


def build_board(store: ResultsStore) -> dict[str, Any]:
    """Summaries per agent (and per budget, when one store holds several presets), failures and repeats."""
    first: dict[tuple, dict] = {}
    repeats: dict[tuple, list[dict]] = defaultdict(list)
    failures: dict[tuple, list[dict]] = defaultdict(list)
    for record in store.records():
        cell = (record["agent"], record["preset"]["name"], record["corridor_length"], record["seed"])
        if record.get("status", "ok") != "ok":
            failures[cell].append(record)
        elif cell in first:
            repeats[cell].append(record)
        else:
            first[cell] = record
    cells: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"eval": defaultdict(list), "train": defaultdict(list), "curves": defaultdict(list), "repeats": 0}
    )
    for (agent, budget, length, seed), record in sorted(first.items()):
        entry = cells[(agent, budget)]
        entry["eval"][length].append(record["eval"]["success_rate"])
        entry["train"][length].append(record["train"]["success_rate"])
        if "curve" in record["train"]:
            entry["curves"][length].append(record["train"]["curve"])
        entry["repeats"] += len(repeats.get((agent, budget, length, seed), []))
        entry["total_steps"] = record["preset"]["total_steps"]
    entries = []
    for (agent, budget), metrics in cells.items():
        entries.append({
            "agent": agent,
            "preset": budget,
            "eval": summarize(metrics["eval"]),
            "train": summarize(metrics["train"]),
            "curves": {length: _mean_curve(curves, metrics["total_steps"])
                       for length, curves in metrics["curves"].items()},
            "repeats": metrics["repeats"],
        })
    entries.sort(key=lambda e: (e["preset"], -e["eval"]["score"], e["agent"]))
    failed = [
        {"agent": agent, "preset": budget, "corridor_length": length, "seed": seed,
         "attempts": len(records), "reason": records[-1].get("reason", "")}
        for (agent, budget, length, seed), records in sorted(failures.items())
        if (agent, budget, length, seed) not in first
    ]
    return {"entries": entries, "failures": failed}


def _mean_curve(curves: list[list[list[int]]], total_steps: int) -> dict[str, list[float]]:
    """Success rate per curve bin, pooled over seeds (bins without episodes are NaN)."""
    counts = np.asarray(curves, float).sum(axis=0)  # [bins, (episodes, successes)]
    bins = len(counts)
    rate = np.where(counts[:, 0] > 0, counts[:, 1] / np.maximum(counts[:, 0], 1), np.nan)
    steps = (np.arange(bins) + 1) * total_steps / bins
    return {"env_steps": steps.tolist(), "success_rate": rate.tolist()}


def _cell(summary: dict[str, Any]) -> str:
    se = summary["se"]
    return f"{summary['mean']:.2f} ± {se:.2f}" if se == se else f"{summary['mean']:.2f}"  # se is NaN for one seed


def ranked_rows(board: dict[str, Any]) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Per preset: the table header and one row per agent, best first."""
    tables: dict[str, tuple[list[str], list[list[str]]]] = {}
    by_preset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in board["entries"]:
        by_preset[entry["preset"]].append(entry)
    for budget, entries in by_preset.items():
        lengths = sorted({int(length) for e in entries for length in e["eval"]["per_length"]})
        header = ["rank", "agent", "score", "IQM", "L*", "train score"] + [f"L={length}" for length in lengths]
        header.append("repeats")
        rows = []
        for rank, e in enumerate(entries, 1):
            low, high = e["eval"]["score_ci"]
            row = [str(rank), e["agent"], f"{e['eval']['score']:.2f} [{low:.2f}, {high:.2f}]",
                   f"{e['eval']['iqm']:.2f}", str(e["eval"]["longest_solved"] or "—"), f"{e['train']['score']:.2f}"]
            per = e["eval"]["per_length"]
            row += [_cell(per[length]) if length in per else "—" for length in lengths]
            rows.append(row + [str(e["repeats"])])
        tables[budget] = (header, rows)
    return tables


LEGEND = (
    "Score: mean evaluation success over corridor lengths [95% stratified bootstrap]. "
    "Per length: evaluation success, mean ± standard error over seeds. "
    "L*: longest corridor whose lower 95% bound is ≥ 0.9. "
    "Train: success over the last training window (the thesis metric). "
    "Repeats: extra results of already scored cells (not counted in the score)."
)


def markdown(board: dict[str, Any], images: bool = False) -> str:
    lines = ["# memgym T-Maze leaderboard", "", LEGEND]
    for budget, (header, rows) in ranked_rows(board).items():
        lines += ["", f"## Preset `{budget}`", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for row in rows:
            lines.append("| " + " | ".join([row[0], f"`{row[1]}`", *row[2:]]) + " |")
    if board.get("failures"):
        lines += ["", "## Failed cells", "", "| agent | preset | L | seed | attempts | reason |", "|---|---|---|---|---|---|"]
        for f in board["failures"]:
            reason = f["reason"].replace("|", "\\|")
            lines.append(f"| `{f['agent']}` | {f['preset']} | {f['corridor_length']} | {f['seed']} | "
                         f"{f['attempts']} | {reason} |")
    if images:
        lines += ["", "![success by corridor length](success_by_length.png)", "",
                  "![learning curves](learning_curves.png)"]
    return "\n".join(lines) + "\n"


def html(board: dict[str, Any], images: tuple[str, ...] = ()) -> str:
    """A static page (no script) with the same tables as :func:`markdown` and the plots."""
    from html import escape

    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             "<title>memgym T-Maze leaderboard</title>", "</head>", "<body>",
             "<h1>memgym T-Maze leaderboard</h1>", f"<p>{escape(LEGEND)}</p>"]
    for budget, (header, rows) in ranked_rows(board).items():
        parts.append(f"<h2>Preset <code>{escape(budget)}</code></h2>")
        parts.append('<table border="1">')
        parts.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
        parts.append("</table>")
    if board.get("failures"):
        parts.append("<h2>Failed cells</h2>")
        parts.append('<table border="1">')
        parts.append("<tr><th>agent</th><th>preset</th><th>L</th><th>seed</th><th>attempts</th><th>reason</th></tr>")
        for f in board["failures"]:
            cells = (f["agent"], f["preset"], f["corridor_length"], f["seed"], f["attempts"], f["reason"])
            parts.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    for image in images:
        parts.append(f'<p><img src="{escape(image)}" alt="{escape(image[:-4].replace("_", " "))}"></p>')
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot(board: dict[str, Any], path: Path) -> bool:
    """Success vs corridor length with 95% intervals, one line per agent; False without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return False
    presets = sorted({e["preset"] for e in board["entries"]})
    figure, axes = plt.subplots(1, len(presets), figsize=(6 * len(presets), 4), squeeze=False)
    for axis, budget in zip(axes[0], presets):
        entries = [e for e in board["entries"] if e["preset"] == budget]
        grid = sorted({int(length) for e in entries for length in e["eval"]["per_length"]})
        axis.set_xticks(grid)  # the corridor lengths run, not fractions between them
        for e in entries:
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


def plot_learning_curves(board: dict[str, Any], path: Path) -> bool:
    """Training success over environment steps, one panel per (preset, corridor length), a line per agent."""
    plt = _pyplot()
    if plt is None:
        return False
    panels = sorted({(e["preset"], int(length)) for e in board["entries"] for length in e["curves"]})
    if not panels:
        return False
    columns = min(len(panels), 4)
    rows = -(-len(panels) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3 * rows), squeeze=False)
    for axis, (budget, length) in zip(axes.flat, panels):
        for e in (e for e in board["entries"] if e["preset"] == budget):
            curve = e["curves"].get(length) or e["curves"].get(str(length))
            if curve:
                axis.plot(curve["env_steps"], curve["success_rate"], marker=".", label=e["agent"])
        axis.set(title=f"{budget}, L={length}", xlabel="environment steps", ylabel="training success",
                 ylim=(-0.05, 1.05))
        axis.legend(fontsize=7)
    for axis in list(axes.flat)[len(panels):]:
        axis.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def write_report(results: str | os.PathLike, out: str | os.PathLike | None = None) -> dict[str, Path]:
    """Write ``LEADERBOARD.md``, ``index.html``, ``board.json`` and the PNG plots for the store at ``results``.

    ``out`` defaults to the results directory. These are derived files: they are
    regenerated from the stored cells every time.
    """
    store = ResultsStore(results)
    board = build_board(store)
    if not board["entries"] and not board["failures"]:
        raise ValueError(f"no results stored under {results}; run `memgym leaderboard run` first")
    out = Path(out or results)
    out.mkdir(parents=True, exist_ok=True)
    written = {"json": out / "board.json"}
    written["json"].write_text(json.dumps(board, indent=2, sort_keys=True))
    images = []
    if board["entries"] and plot(board, out / "success_by_length.png"):
        written["plot"] = out / "success_by_length.png"
        images.append("success_by_length.png")
    if board["entries"] and plot_learning_curves(board, out / "learning_curves.png"):
        written["curves"] = out / "learning_curves.png"
        images.append("learning_curves.png")
    written["markdown"] = out / "LEADERBOARD.md"
    written["markdown"].write_text(markdown(board, images=bool(images)))
    written["html"] = out / "index.html"
    written["html"].write_text(html(board, tuple(images)))
    return written
