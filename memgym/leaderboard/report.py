"""Turn a track's stored cells into its board: Markdown, a static HTML page, JSON and PNG plots.

Agents are ranked by their headline score — the mean *evaluation* score over
the values of the track's swept parameter (T-Maze: success over corridor
lengths, fixed evaluation mazes, harness-run) — with the stratified bootstrap
interval, IQM and ``L*`` of :mod:`memgym.leaderboard.stats`. The training score
(T-Maze: the thesis metric, success over the last window of steps) is reported
beside it. A cell counts with its first ``ok`` result; later ``ok`` results of
the same cell are shown as repeats (with their spread), failed cells that never
succeeded are listed with their reasons.

Files (:func:`write_report`): ``LEADERBOARD.md``, ``index.html`` (static, no
script: every figure is an ``<img>`` next to the file), ``board.json``,
``success_by_length.png`` (thesis Fig. 5.3 style: score vs swept value, 95%
interval bands) and ``learning_curves.png`` (training score over environment
steps, mean over seeds, one panel per value). They are derived files, rebuilt
from the store each time. Each track has its own board, never mixed with another's.

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
from memgym.leaderboard.track import Track
from memgym.leaderboard.tracks import TMAZE


def build_board(store: ResultsStore, track: Track = TMAZE) -> dict[str, Any]:
    """Summaries per agent (and per budget, when one store holds several presets), failures and repeats."""
    score, sweep = track.score, track.sweep
    first: dict[tuple, dict] = {}
    repeats: dict[tuple, list[dict]] = defaultdict(list)
    failures: dict[tuple, list[dict]] = defaultdict(list)

    def ordered(cell: tuple) -> tuple:  # (agent, preset, value, seed) with values in the sweep's order
        return cell[0], cell[1], sweep.index(cell[2]), cell[3]

    for record in track.records(store):
        cell = (record["agent"], record["preset"]["name"], record[sweep.name], record["seed"])
        if record.get("status", "ok") != "ok":
            failures[cell].append(record)
        elif cell in first:
            repeats[cell].append(record)
        else:
            first[cell] = record
    cells: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"eval": defaultdict(list), "train": defaultdict(list), "curves": defaultdict(list), "repeats": 0}
    )
    for (agent, budget, length, seed), record in sorted(first.items(), key=lambda item: ordered(item[0])):
        entry = cells[(agent, budget)]
        entry["eval"][length].append(record["eval"][score.name])
        entry["train"][length].append(record["train"][score.name])
        if "curve" in record["train"]:
            entry["curves"][length].append(record["train"]["curve"])
        entry["repeats"] += len(repeats.get((agent, budget, length, seed), []))
        entry["total_steps"] = record["preset"]["total_steps"]
    entries = []
    for (agent, budget), metrics in cells.items():
        entries.append({
            "agent": agent,
            "preset": budget,
            "eval": summarize(metrics["eval"], order=sweep.index, solved=score.solved),
            "train": summarize(metrics["train"], order=sweep.index, solved=score.solved),
            "curves": {length: _mean_curve(curves, metrics["total_steps"], score.name)
                       for length, curves in metrics["curves"].items()},
            "repeats": metrics["repeats"],
        })
    entries.sort(key=lambda e: (e["preset"], -e["eval"]["score"], e["agent"]))
    failed = [
        {"agent": agent, "preset": budget, sweep.name: length, "seed": seed,
         "attempts": len(records), "reason": records[-1].get("reason", "")}
        for (agent, budget, length, seed), records in sorted(failures.items(), key=lambda item: ordered(item[0]))
        if (agent, budget, length, seed) not in first
    ]
    return {"entries": entries, "failures": failed}


def _mean_curve(curves: list[list[list[float]]], total_steps: int, name: str) -> dict[str, list[float]]:
    """Mean score per curve bin (``name``: T-Maze ``success_rate``), pooled over seeds (bins without episodes are
    NaN)."""
    counts = np.asarray(curves, float).sum(axis=0)  # [bins, (episodes, successes)]
    bins = len(counts)
    rate = np.where(counts[:, 0] > 0, counts[:, 1] / np.maximum(counts[:, 0], 1), np.nan)
    steps = (np.arange(bins) + 1) * total_steps / bins
    return {"env_steps": steps.tolist(), name: rate.tolist()}


def _cell(summary: dict[str, Any]) -> str:
    se = summary["se"]
    return f"{summary['mean']:.2f} ± {se:.2f}" if se == se else f"{summary['mean']:.2f}"  # se is NaN for one seed


def ranked_rows(board: dict[str, Any], track: Track = TMAZE) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Per preset: the table header and one row per agent, best first."""
    sweep, solved = track.sweep, track.score.solved is not None
    tables: dict[str, tuple[list[str], list[list[str]]]] = {}
    by_preset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in board["entries"]:
        by_preset[entry["preset"]].append(entry)
    for budget, entries in by_preset.items():
        lengths = sorted({length for e in entries for length in e["eval"]["per_length"]}, key=sweep.index)
        header = ["rank", "agent", "score", "IQM"] + [f"{sweep.header}*"] * solved + ["train score"]
        header += [sweep.column(length) for length in lengths] + ["repeats"]
        rows = []
        for rank, e in enumerate(entries, 1):
            low, high = e["eval"]["score_ci"]
            row = [str(rank), e["agent"], f"{e['eval']['score']:.2f} [{low:.2f}, {high:.2f}]", f"{e['eval']['iqm']:.2f}"]
            row += [str(e["eval"]["longest_solved"] or "—")] * solved + [f"{e['train']['score']:.2f}"]
            per = e["eval"]["per_length"]
            row += [_cell(per[length]) if length in per else "—" for length in lengths]
            rows.append(row + [str(e["repeats"])])
        tables[budget] = (header, rows)
    return tables


def markdown(board: dict[str, Any], images: bool = False, track: Track = TMAZE) -> str:
    sweep = track.sweep
    lines = [f"# memgym {track.title} leaderboard", "", track.legend]
    for budget, (header, rows) in ranked_rows(board, track).items():
        lines += ["", f"## Preset `{budget}`", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for row in rows:
            lines.append("| " + " | ".join([row[0], f"`{row[1]}`", *row[2:]]) + " |")
    if board.get("failures"):
        lines += ["", "## Failed cells", "", f"| agent | preset | {sweep.header} | seed | attempts | reason |",
                  "|---|---|---|---|---|---|"]
        for f in board["failures"]:
            reason = f["reason"].replace("|", "\\|")
            lines.append(f"| `{f['agent']}` | {f['preset']} | {f[sweep.name]} | {f['seed']} | "
                         f"{f['attempts']} | {reason} |")
    if images:
        lines += ["", f"![{track.score.label} by {sweep.name.replace('_', ' ')}](success_by_length.png)", "",
                  "![learning curves](learning_curves.png)"]
    return "\n".join(lines) + "\n"


def html(board: dict[str, Any], images: tuple[str, ...] = (), track: Track = TMAZE) -> str:
    """A static page (no script) with the same tables as :func:`markdown` and the plots."""
    from html import escape

    title = escape(f"memgym {track.title} leaderboard")
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             f"<title>{title}</title>", "</head>", "<body>", f"<h1>{title}</h1>", f"<p>{escape(track.legend)}</p>"]
    for budget, (header, rows) in ranked_rows(board, track).items():
        parts.append(f"<h2>Preset <code>{escape(budget)}</code></h2>")
        parts.append('<table border="1">')
        parts.append("<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>")
        for row in rows:
            parts.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
        parts.append("</table>")
    if board.get("failures"):
        parts.append("<h2>Failed cells</h2>")
        parts.append('<table border="1">')
        parts.append(f"<tr><th>agent</th><th>preset</th><th>{escape(track.sweep.header)}</th><th>seed</th>"
                     "<th>attempts</th><th>reason</th></tr>")
        for f in board["failures"]:
            cells = (f["agent"], f["preset"], f[track.sweep.name], f["seed"], f["attempts"], f["reason"])
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


def plot(board: dict[str, Any], path: Path, track: Track = TMAZE) -> bool:
    """Score vs swept value with 95% intervals, one line per agent; False without matplotlib."""
    plt = _pyplot()
    if plt is None:
        return False
    score, sweep = track.score, track.sweep
    presets = sorted({e["preset"] for e in board["entries"]})
    figure, axes = plt.subplots(1, len(presets), figsize=(6 * len(presets), 4), squeeze=False)
    for axis, budget in zip(axes[0], presets):
        entries = [e for e in board["entries"] if e["preset"] == budget]
        grid = sorted({length for e in entries for length in e["eval"]["per_length"]}, key=sweep.index)
        axis.set_xticks([sweep.index(x) for x in grid], [str(x) for x in grid])  # the values run, nothing between
        for e in entries:
            per = e["eval"]["per_length"]
            lengths = sorted(per, key=sweep.index)
            at = [sweep.index(x) for x in lengths]
            axis.plot(at, [per[x]["mean"] for x in lengths], marker="o", label=e["agent"])
            axis.fill_between(at, [per[x]["ci_low"] for x in lengths], [per[x]["ci_high"] for x in lengths],
                              alpha=0.2)
        axis.set(title=f"{track.title}, preset {budget}", xlabel=sweep.name.replace("_", " "),
                 ylabel=f"evaluation {score.name.replace('_', ' ')}", ylim=_limits(score.bounds))
        if score.chance is not None:
            axis.axhline(score.chance, color="gray", linestyle=":", linewidth=1)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def plot_learning_curves(board: dict[str, Any], path: Path, track: Track = TMAZE) -> bool:
    """Training score over environment steps, one panel per (preset, swept value), a line per agent."""
    plt = _pyplot()
    if plt is None:
        return False
    score, sweep = track.score, track.sweep
    panels = sorted({(e["preset"], length) for e in board["entries"] for length in e["curves"]},
                    key=lambda panel: (panel[0], sweep.index(panel[1])))
    if not panels:
        return False
    columns = min(len(panels), 4)
    rows = -(-len(panels) // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4 * columns, 3 * rows), squeeze=False)
    for axis, (budget, length) in zip(axes.flat, panels):
        for e in (e for e in board["entries"] if e["preset"] == budget):
            curve = e["curves"].get(length)
            if curve:
                axis.plot(curve["env_steps"], curve[score.name], marker=".", label=e["agent"])
        axis.set(title=f"{budget}, {sweep.column(length)}", xlabel="environment steps",
                 ylabel=f"training {score.label}", ylim=_limits(score.bounds))
        axis.legend(fontsize=7)
    for axis in list(axes.flat)[len(panels):]:
        axis.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _limits(bounds: tuple[float, float]) -> tuple[float, float]:
    margin = 0.05 * (bounds[1] - bounds[0])
    return bounds[0] - margin, bounds[1] + margin


def write_report(results: str | os.PathLike, out: str | os.PathLike | None = None,
                 track: Track = TMAZE) -> dict[str, Path]:
    """Write ``LEADERBOARD.md``, ``index.html``, ``board.json`` and the PNG plots for ``track``'s store at
    ``results``.

    ``out`` defaults to the results directory. These are derived files: they are
    regenerated from the stored cells every time.
    """
    board = build_board(track.store(results), track)
    if not board["entries"] and not board["failures"]:
        raise ValueError(f"no results stored under {results}; run `memgym leaderboard run` first")
    out = Path(out or results)
    out.mkdir(parents=True, exist_ok=True)
    written = {"json": out / "board.json"}
    written["json"].write_text(json.dumps(board, indent=2, sort_keys=True))
    images = []
    if board["entries"] and plot(board, out / "success_by_length.png", track):
        written["plot"] = out / "success_by_length.png"
        images.append("success_by_length.png")
    if board["entries"] and plot_learning_curves(board, out / "learning_curves.png", track):
        written["curves"] = out / "learning_curves.png"
        images.append("learning_curves.png")
    written["markdown"] = out / "LEADERBOARD.md"
    written["markdown"].write_text(markdown(board, images=bool(images), track=track))
    written["html"] = out / "index.html"
    written["html"].write_text(html(board, tuple(images), track))
    return written
