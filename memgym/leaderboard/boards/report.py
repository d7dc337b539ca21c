"""Turn a track's stored cells into its board: Markdown, a static HTML page, JSON and PNG plots.

Agents are ranked by their mean evaluation score over the swept values, with the statistics of
:mod:`~memgym.leaderboard.boards.stats`; the plot of score against swept value follows thesis Fig. 5.3. The
files and how a cell counts: docs/leaderboard_internals.md.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memgym.leaderboard.protocol import parse_spec
from memgym.leaderboard.running.planning import version_label
from memgym.leaderboard.boards.stats import summarize
from memgym.leaderboard.store import ResultsStore, result_order
from memgym.leaderboard.tracks import TMAZE, Track


#: A cell *collapsed* when its last training window scores this share of the score's range (T-Maze: 0.25)
#: or more below the best learning-curve bin of the same run (bins of at least COLLAPSE_MIN_EPISODES episodes).
COLLAPSE_DROP = 0.25
COLLAPSE_MIN_EPISODES = 20
#: An agent is *below chance* at a value where its mean evaluation score lies this share of the score's
#: range (T-Maze: 0.25) or more under chance: in T-Maze it does not reach the junction, so the cell
#: measures exploration, not memory (a memory that forgot the cue still scores chance there).
BELOW_CHANCE = 0.25


def collapse(record: dict[str, Any], track: Track = TMAZE) -> dict[str, float] | None:
    """``{"best", "final"}`` of an ``ok`` record whose run collapsed (see :data:`COLLAPSE_DROP`), else None."""
    score = track.score
    curve = np.asarray(record["train"].get("curve") or [], float).reshape(-1, 2)
    counted = curve[curve[:, 0] >= COLLAPSE_MIN_EPISODES]
    if not len(counted):
        return None
    best = float((counted[:, 1] / counted[:, 0]).max())
    final = float(record["train"][score.name])
    if best - final >= COLLAPSE_DROP * (score.bounds[1] - score.bounds[0]):
        return {"best": best, "final": final}
    return None


def flags(entry: dict[str, Any], track: Track = TMAZE) -> list[str]:
    """What a reader must know before trusting a row: its collapsed cells, the values it scores below chance (in its
    cells that ran) and the values where cells failed (each counted as the score's worst)."""
    short = track.sweep.column
    notes = [f"collapsed {short(c['value'])} seed {c['seed']} ({c['best']:.2f} → {c['final']:.2f})"
             for c in entry.get("collapsed", [])]
    notes += [f"below chance {short(value)}" for value in entry.get("below_chance", [])]
    notes += [f"failed {short(value)} ({count} {'cell' if count == 1 else 'cells'})"
              for value, count in entry.get("failed_at", [])]
    return notes


def build_board(store: ResultsStore | None, track: Track = TMAZE, submissions: Sequence[Any] = (),
                values: Collection[Any] | None = None) -> dict[str, Any]:
    """Summaries per agent version (and per budget, when one store holds several presets), failures and repeats.

    ``values``: only these values of the track's sweep make the rows (their cells alone are planned and scored);
    None: every value a row's records carry.

    ``submissions`` (:class:`~memgym.leaderboard.submissions.format.Submission` of ``track``) add one
    row each, named by the submission, with a ``verified`` cell
    (:func:`~memgym.leaderboard.submissions.verdict.status`); the rows of ``store`` (a reference board, or
    None) are then marked ``reference``.

    A row is one version of one agent under one preset. Its planned cells are the
    grid (values × seeds) of the presets its records carry. A cell counts with its
    first ``ok`` result; a cell with only failed results counts as the track's worst
    score (``Score.bounds[0]``: success 0) in every statistic; a planned cell with
    no result at all is *missing*, and a row with missing cells is incomplete and
    ranked after every complete row of its preset.
    """
    from memgym.leaderboard.submissions.verdict import status

    score, sweep = track.score, track.sweep
    worst = float(score.bounds[0])
    rows: dict[tuple[str, int, str], dict[str, Any]] = defaultdict(
        lambda: {"results": defaultdict(list), "planned": set()})
    stores = [store] * (store is not None) + [s.store() for s in submissions]
    verified = {submission_label(s): status(s) for s in submissions}
    for record in _board_records(store, submissions, track):
        if values is not None and record[sweep.name] not in values:
            continue
        budget = record["preset"]
        row = rows[(record["agent"], int(record.get("version", 1)), budget["name"])]
        row["results"][(record[sweep.name], record["seed"])].append(record)
        row["tiers"] = row.get("tiers", set()) | {record.get("tier")}
        row["planned"] |= {(value, seed) for value in budget.get(sweep.plural) or ()
                           if values is None or value in values
                           for seed in range(int(budget.get("first_seed", 0)),
                                             int(budget.get("first_seed", 0)) + int(budget.get("seeds", 0)))}
    entries, failed = [], []
    for (spec, version, budget), row in rows.items():
        cells = sorted(row["planned"] | set(row["results"]), key=lambda c: (sweep.index(c[0]), c[1]))
        metrics: dict[str, Any] = {"eval": defaultdict(list), "train": defaultdict(list), "curves": defaultdict(list),
                                   "ran": defaultdict(list), "failed": defaultdict(int)}
        counts = {"planned": len(cells), "ok": 0, "failed": 0, "missing": 0}
        missing, collapsed, repeats, total_steps = [], [], 0, None
        for value, seed in cells:
            results = sorted(row["results"].get((value, seed), []), key=result_order)
            ok = [r for r in results if r["status"] == "ok"]
            if ok:
                counts["ok"] += 1
                repeats += len(ok) - 1
                record = ok[0]
                metrics["eval"][value].append(record["eval"][score.name])
                metrics["ran"][value].append(record["eval"][score.name])
                metrics["train"][value].append(record["train"][score.name])
                if "curve" in record["train"]:
                    metrics["curves"][value].append(record["train"]["curve"])
                total_steps = record["preset"]["total_steps"]
                fell = collapse(record, track)
                if fell:
                    collapsed.append({"value": value, "seed": seed, **fell})
            elif results:
                counts["failed"] += 1
                metrics["failed"][value] += 1
                metrics["eval"][value].append(worst)
                metrics["train"][value].append(worst)
                failed.append({"agent": version_label(spec, version), "spec": spec, "version": version,
                               "preset": budget, sweep.name: value, "seed": seed, "attempts": len(results),
                               "reason": results[-1].get("reason", "")})
            else:
                counts["missing"] += 1
                missing.append([value, seed])
        if not metrics["eval"]:  # planned cells only, none stored (cannot happen with stored records)
            continue
        evaluation = summarize(metrics["eval"], order=sweep.index, solved=score.solved)
        below = [] if score.chance is None else [  # judged on the cells that ran: a failed cell is flagged as such
            value for value in sorted(metrics["ran"], key=sweep.index)
            if np.mean(metrics["ran"][value]) <= score.chance - BELOW_CHANCE * (score.bounds[1] - score.bounds[0])]
        entries.append({
            "agent": version_label(spec, version),
            "spec": spec,
            "version": version,
            "preset": budget,
            "eval": evaluation,
            "train": summarize(metrics["train"], order=sweep.index, solved=score.solved),
            "curves": {value: _mean_curve(curves, total_steps, score.name)
                       for value, curves in metrics["curves"].items()},
            "repeats": repeats,
            "cells": counts,
            "complete": not counts["missing"],
            "missing": missing,
            "collapsed": collapsed,
            "below_chance": below,
            "failed_at": [[value, metrics["failed"][value]] for value in sorted(metrics["failed"], key=sweep.index)],
            **({"verified": verified.get(spec, "reference")} if submissions else {}),
            **({"unverified": True} if spec in verified and not _agreed(verified[spec]) else {}),
            # a submission's JAX-tier training counters were counted in its own process (docs/submitting.md)
            **({"train_self_reported": True} if spec in verified and "jax" in row["tiers"] else {}),
        })
    entries.sort(key=lambda e: (e["preset"], not e["complete"] or e.get("unverified", False), -e["eval"]["score"],
                                e["agent"]))
    failed.sort(key=lambda f: (f["spec"], f["version"], f["preset"], sweep.index(f[sweep.name]), f["seed"]))
    unreadable = [{"path": str(path), "problem": problem} for source in stores for path, problem in source.unreadable()]
    return {"entries": entries, "failures": failed, "unreadable": unreadable}


#: A board's own account of what it shows, written by hand beside the derived files (``--out``). ``report`` puts it
#: under the board: in ``LEADERBOARD.md`` as a section, in ``index.html`` as a link (its Markdown is not rendered).
ABOUT = "ABOUT.md"
ABOUT_HEADING = "What this board shows"


def read_about(out: Path) -> str | None:
    """The text of ``out``'s :data:`ABOUT` file (None where there is none); a file that is not UTF-8 text is refused."""
    path = out / ABOUT
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} must be UTF-8 text (a board's account of what it shows): {error}") from None
    return text.strip() or None


VERIFIED_LEGEND = (
    "Verified: what memgym leaderboard verify checked of a submission (a folder of submissions/). JAX tier: "
    "eval a/n, every cell's stored policy evaluated by the verifier / agreeing with its record; train r/k, cells "
    "re-trained / reproduced (exactly on the records' backend, within the spread of the submission's seeds on "
    "another). Any-framework tier: re-run a/k of n, cells re-trained and evaluated by the verifier / agreeing, of "
    "the grid's n. mismatch: some evaluation disagrees (or a re-training on the records' backend did not repeat "
    "them); malformed: its offline checks failed; not verified: no verdict yet; stale: its files changed since the "
    "verdict; reference: a board the project ran itself. Only verified submissions are ranked; the others follow "
    "them unranked. A JAX-tier submission's train score is self-reported: counted in the agent's own process, "
    "sealed against edits, not re-counted (its evaluation is).")


def _agreed(status: str) -> bool:
    """Whether a submission's ``verified`` cell is a verdict ``verified`` (``eval 6/6, train 2/2``, ``re-run 2/2
    of 6``; :func:`~memgym.leaderboard.submissions.verdict.status`): every evaluation agreed."""
    return status.startswith(("eval ", "re-run "))


def _has_submissions(board: dict[str, Any]) -> bool:
    return any("verified" in entry for entry in board.get("entries", ()))


def _board_records(store: ResultsStore | None, submissions: Sequence[Any], track: Track) -> Iterator[dict[str, Any]]:
    """The records of ``store`` and of each submission (renamed to the submission, as one row each)."""
    if store is not None:
        yield from track.records(store)
    for submission in submissions:
        for record in track.records(submission.store()):
            yield dict(record, agent=submission_label(submission), version=1)


def submission_label(submission: Any) -> str:
    """A submission's row: ``submissions/<name>`` (no reference agent's name has a slash, so none is taken over)."""
    return f"submissions/{submission.name}"


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


def coverage(entry: dict[str, Any]) -> str:
    """``ok/planned`` cells of a board entry (``3/6``), marked ``incomplete`` when cells were never run."""
    cells = entry.get("cells")
    if cells is None:
        return "—"
    return f"{cells['ok']}/{cells['planned']}" + ("" if entry.get("complete", True) else " incomplete")


def ranked_rows(board: dict[str, Any], track: Track = TMAZE) -> dict[str, tuple[list[str], list[list[str]]]]:
    """Per preset: the table header and one row per agent version, best first.

    Complete rows are ranked by score; incomplete rows (planned cells never run) and
    submissions whose sampled cells did not all agree in a verification follow them
    unranked (rank ``—``).
    """
    sweep, solved = track.sweep, track.score.solved is not None
    tables: dict[str, tuple[list[str], list[list[str]]]] = {}
    by_preset: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in board["entries"]:
        by_preset[entry["preset"]].append(entry)
    for budget, entries in by_preset.items():
        # every planned value is a column: one whose cells are all missing (never run, or unreadable) shows "—"
        lengths = sorted({length for e in entries for length in e["eval"]["per_length"]}
                         | {value for e in entries for value, _ in e.get("missing", ())}, key=sweep.index)
        header = ["rank", "agent", "score", "cells", "IQM"] + [f"{sweep.header}*"] * solved + ["train score"]
        header += [sweep.column(length) for length in lengths] + ["repeats", "flags"]
        header += ["verified"] * any("verified" in e for e in entries)
        rows = []
        for rank, e in enumerate(entries, 1):
            low, high = e["eval"]["score_ci"]
            row = [str(rank) if e.get("complete", True) and not e.get("unverified") else "—", e["agent"],
                   f"{e['eval']['score']:.2f} [{low:.2f}, {high:.2f}]", coverage(e), f"{e['eval']['iqm']:.2f}"]
            train = f"{e['train']['score']:.2f}" + (" (self-reported)" if e.get("train_self_reported") else "")
            row += [str(e["eval"]["longest_solved"] or "—")] * solved + [train]
            per = e["eval"]["per_length"]
            row += [_cell(per[length]) if length in per else "—" for length in lengths]
            row += [str(e["repeats"]), "; ".join(flags(e, track)) or "—"]
            rows.append(row + ([e["verified"]] if "verified" in e else []))
        tables[budget] = (header, rows)
    return tables


def markdown(board: dict[str, Any], images: bool = False, track: Track = TMAZE, about: str | None = None) -> str:
    """The board as Markdown; ``about`` (:func:`read_about`) is set under it as its own section."""
    sweep = track.sweep
    lines = [f"# memgym {track.title} leaderboard", "", track.legend]
    for budget, (header, rows) in ranked_rows(board, track).items():
        lines += ["", f"## Preset `{budget}`", ""]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for row in rows:
            lines.append("| " + " | ".join([row[0], f"`{row[1]}`", *row[2:]]) + " |")
    if board.get("entries"):
        lines += ["", track.reading] + (["", VERIFIED_LEGEND] if _has_submissions(board) else [])
    if board.get("failures"):
        lines += ["", "## Failed cells", "", f"| agent | preset | {sweep.header} | seed | attempts | reason |",
                  "|---|---|---|---|---|---|"]
        for f in board["failures"]:
            reason = f["reason"].replace("|", "\\|")
            lines.append(f"| `{f['agent']}` | {f['preset']} | {f[sweep.name]} | {f['seed']} | "
                         f"{f['attempts']} | {reason} |")
    if board.get("unreadable"):
        lines += ["", "## Unreadable records", "", "Kept in the store, not counted on the board.", "",
                  "| record | what is wrong |", "|---|---|"]
        for u in board["unreadable"]:
            problem = u["problem"].replace("|", "\\|")
            lines.append(f"| `{u['path']}` | {problem} |")
    if images:
        lines += ["", f"![{track.score.label} by {sweep.name.replace('_', ' ')}](success_by_length.png)", "",
                  "![learning curves](learning_curves.png)"]
    if about:
        lines += ["", f"## {ABOUT_HEADING}", "", about]
    return "\n".join(lines) + "\n"


def html(board: dict[str, Any], images: tuple[str, ...] = (), track: Track = TMAZE, about: bool = False) -> str:
    """A static page (no script) with the same tables as :func:`markdown` and the plots; with ``about``, a link to
    the board's :data:`ABOUT` file."""
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
    if board.get("entries"):
        parts.append(f"<p>{escape(track.reading)}</p>")
        if _has_submissions(board):
            parts.append(f"<p>{escape(VERIFIED_LEGEND)}</p>")
    if board.get("failures"):
        parts.append("<h2>Failed cells</h2>")
        parts.append('<table border="1">')
        parts.append(f"<tr><th>agent</th><th>preset</th><th>{escape(track.sweep.header)}</th><th>seed</th>"
                     "<th>attempts</th><th>reason</th></tr>")
        for f in board["failures"]:
            cells = (f["agent"], f["preset"], f[track.sweep.name], f["seed"], f["attempts"], f["reason"])
            parts.append("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in cells) + "</tr>")
        parts.append("</table>")
    if board.get("unreadable"):
        parts.append("<h2>Unreadable records</h2>")
        parts.append("<p>Kept in the store, not counted on the board.</p>")
        parts.append('<table border="1">')
        parts.append("<tr><th>record</th><th>what is wrong</th></tr>")
        for u in board["unreadable"]:
            parts.append(f"<tr><td>{escape(u['path'])}</td><td>{escape(u['problem'])}</td></tr>")
        parts.append("</table>")
    for image in images:
        parts.append(f'<p><img src="{escape(image)}" alt="{escape(image[:-4].replace("_", " "))}"></p>')
    if about:
        parts += [f"<h2>{escape(ABOUT_HEADING)}</h2>", f'<p>Written beside the board: <a href="{ABOUT}">{ABOUT}</a></p>']
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


#: Markers crossed with the 20 colours of :func:`series_styles`: 7 is coprime with 20, so the first 140
#: series all differ in (colour, marker), and two series of one hue (a strong colour and its light shade,
#: ten places apart) never share a marker.
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
#: One column of a plot's legend holds at most this many series; a taller legend gets more columns.
LEGEND_ROWS = 24
#: A board of more agents than this (a tuning sweep's configurations) draws one panel per agent family, the name
#: before the options, each panel with a legend of its own configurations: 50 lines in one panel cannot be read.
FAMILY_PANELS_ABOVE = LEGEND_ROWS


def series_styles(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A distinct style per name, ``{"color", "marker", "linestyle"}``, fixed by the name's position.

    The colours are matplotlib's ``tab20``: its ten strong colours first (solid lines), then their
    ten light shades (dashed lines), so the first ten names get the strongest colours; the markers
    cycle through :data:`MARKERS`. A board passes its agents in ranking order
    (:func:`board_styles`), so an agent has one style in every plot of the board.
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    names = list(names)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"names {repeated!r} are given more than once; each series needs one name of its own")
    pairs = colormaps["tab20"].colors  # (strong, light) per hue
    colours = [to_hex(c) for c in pairs[0::2]] + [to_hex(c) for c in pairs[1::2]]
    return {name: {"color": colours[i % len(colours)], "marker": MARKERS[i % len(MARKERS)],
                   "linestyle": "-" if (i // (len(colours) // 2)) % 2 == 0 else "--"}
            for i, name in enumerate(names)}


def board_styles(board: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """:func:`series_styles` of the board's agents in its ranking order (preset by preset, each agent once)."""
    return series_styles(list(dict.fromkeys(e["agent"] for e in board["entries"])))


def families(board: dict[str, Any]) -> dict[str, str] | None:
    """Per agent row, its family (the spec's name without options: ``a2c-cpu-gru``) where the board has more than
    :data:`FAMILY_PANELS_ABOVE` rows and its plots get a panel per family; None where one panel holds them all."""
    if len({e["agent"] for e in board["entries"]}) <= FAMILY_PANELS_ABOVE:
        return None
    return {e["agent"]: parse_spec(e["spec"])[0] for e in board["entries"]}


def family_label(entry: dict[str, Any]) -> str:
    """An agent row named within its family's panel: its options and version (``learning_rate=0.003,
    entropy_coef=0.01 @v2``), or ``defaults``."""
    options = ", ".join(f"{key}={value}" for key, value in parse_spec(entry["spec"])[1].items()) or "defaults"
    return version_label(options, entry["version"]).replace("@", " @")


def family_panels(figure, axes, used: int, fontsize: float = 7) -> None:
    """:func:`arrange_panels` for a plot of family panels (:func:`families`): each panel's own legend to its right."""
    panels = list(np.ravel(axes))
    for axis in panels[used:]:
        axis.axis("off")
    for axis in panels[:used]:
        handles, labels = axis.get_legend_handles_labels()
        if handles:
            axis.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=fontsize,
                        borderaxespad=0.0)


def panel_series(board: dict[str, Any], grouped: dict[str, str] | None, budget: str, family: str):
    """What one panel of preset ``budget`` draws: its rows (in board order), how its legend names them and their
    styles. One panel of every row (``grouped`` None) names them in full with the board's styles; a family panel
    names them by :func:`family_label`, styled by their place in the family."""
    entries = [e for e in board["entries"] if e["preset"] == budget and (grouped is None or grouped[e["agent"]] == family)]
    if grouped is None:
        return entries, (lambda e: e["agent"]), board_styles(board)
    styles = series_styles([family_label(e) for e in entries]).values()
    return entries, family_label, {e["agent"]: style for e, style in zip(entries, styles)}


def figure_grid(plt, panels: int, grouped: dict[str, str] | None, width: float, height: float):
    """:func:`panel_grid` for a board's plot: ``width`` × ``height`` panels, or for family panels (``grouped``)
    wider ones, two to a row, with room for each panel's legend."""
    if grouped is None:
        return panel_grid(plt, panels, width=width, height=height)
    return panel_grid(plt, panels, width=7.5, height=3.6, max_columns=2)


def by_length_figure(board: dict[str, Any], track: Track = TMAZE):
    """The figure of :func:`plot` (a matplotlib ``Figure``), or None without matplotlib or entries."""
    plt = pyplot()
    if plt is None or not board["entries"]:
        return None
    score, sweep = track.score, track.sweep
    grouped = families(board)
    panels = sorted({(e["preset"], grouped[e["agent"]] if grouped else "") for e in board["entries"]})
    # tasks (a sweep of named values) are categories: no line joins them, and each has room for its name
    categories = sweep.choices is not None
    values = len({length for e in board["entries"] for length in e["eval"]["per_length"]})
    figure, axes = figure_grid(plt, len(panels), grouped, width=max(6.5, 0.45 * values + 2 if categories else 0),
                               height=4.2 + (1.6 if categories and values > 6 else 0))
    for axis, (budget, family) in zip(axes.flat, panels):
        entries, label, styles = panel_series(board, grouped, budget, family)
        grid = sorted({length for e in entries for length in e["eval"]["per_length"]}, key=sweep.index)
        # the values run, evenly spaced, and nothing between; each agent's points a little to the side of
        # the value's tick (its place in the ranking), so agents with equal scores are all seen
        labels = [str(x) for x in grid]
        long_labels = max(map(len, labels)) > 8  # task names (RepeatPreviousEasy): slanted, so they do not overlap
        upright = long_labels and len(grid) > 6  # many task names: read bottom to top, one under each point
        axis.set_xticks(range(len(grid)), labels, rotation=90 if upright else 25 if long_labels else 0,
                        ha="right" if long_labels and not upright else "center")
        width = min(0.5, 0.035 * len(entries))
        for rank, e in enumerate(entries):
            per = e["eval"]["per_length"]
            lengths = sorted(per, key=sweep.index)
            shift = width * (rank / max(len(entries) - 1, 1) - 0.5) if len(entries) > 1 else 0.0
            at = np.array([grid.index(x) for x in lengths]) + shift
            mean = np.array([per[x]["mean"] for x in lengths])
            low = np.array([per[x]["ci_low"] for x in lengths])
            high = np.array([per[x]["ci_high"] for x in lengths])
            axis.errorbar(at, mean, yerr=[mean - low, high - mean], label=label(e), capsize=2, markersize=5,
                          linewidth=1.2, elinewidth=0.8, **{**styles[e["agent"]], **(
                              {"linestyle": "none"} if categories else {})})
        axis.set_xlim(-0.5, len(grid) - 0.5)
        axis.set(title=f"{family or track.title}, preset {budget}", xlabel=sweep.name.replace("_", " "),
                 ylabel=f"evaluation {score.name.replace('_', ' ')} (95% interval)", ylim=_limits(score.bounds))
        if score.chance is not None:
            axis.axhline(score.chance, color="gray", linestyle=":", linewidth=1)
    (arrange_panels if grouped is None else family_panels)(figure, axes, len(panels))
    return figure


def plot(board: dict[str, Any], path: Path, track: Track = TMAZE) -> bool:
    """Score vs swept value with 95% intervals, one line per agent, the legend beside the panels; False
    without matplotlib (or entries)."""
    return save_figure(by_length_figure(board, track), path, dpi=120)


def learning_curves_figure(board: dict[str, Any], track: Track = TMAZE):
    """The figure of :func:`plot_learning_curves`, or None without matplotlib or curves."""
    plt = pyplot()
    score, sweep = track.score, track.sweep
    grouped = families(board)
    panels = sorted({(e["preset"], length, grouped[e["agent"]] if grouped else "") for e in board["entries"]
                     for length in e["curves"]}, key=lambda panel: (panel[0], panel[2], sweep.index(panel[1])))
    if plt is None or not panels:
        return None
    figure, axes = figure_grid(plt, len(panels), grouped, width=4.5, height=3.4)
    for axis, (budget, length, family) in zip(axes.flat, panels):
        entries, label, styles = panel_series(board, grouped, budget, family)
        for rank, e in enumerate(entries):
            curve = e["curves"].get(length)
            if curve:
                # a marker every third bin, the agents' markers staggered so they do not pile up
                axis.plot(curve["env_steps"], curve[score.name], label=label(e), markersize=4, linewidth=1.1,
                          markevery=(rank % 3, 3), **styles[e["agent"]])
        axis.set(title=f"{family + ', ' if family else ''}{budget}, {sweep.column(length)}",
                 xlabel="environment steps", ylabel=f"training {score.label}", ylim=_limits(score.bounds))
    (arrange_panels if grouped is None else family_panels)(figure, axes, len(panels))
    return figure


def plot_learning_curves(board: dict[str, Any], path: Path, track: Track = TMAZE) -> bool:
    """Training score over environment steps, one panel per (preset, swept value), a line per agent, the
    legend beside the panels; False without matplotlib (or curves)."""
    return save_figure(learning_curves_figure(board, track), path)


def panel_grid(plt, panels: int, width: float = 4.0, height: float = 3.0, max_columns: int = 4):
    """``(figure, axes)``: a grid of at most ``max_columns`` columns with room for ``panels`` panels (constrained
    layout, so that :func:`arrange_panels` can put the legend beside them)."""
    if isinstance(panels, bool) or not isinstance(panels, int) or panels < 1:
        raise ValueError(f"panels must be a positive integer, got {panels!r}")
    columns = min(panels, max_columns)
    rows = -(-panels // columns)
    return plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False,
                        layout="constrained")


def arrange_panels(figure, axes, used: int, fontsize: float = 8):
    """Hide the grid's panels past the first ``used`` and put one legend, every labelled series once (in the
    order drawn), to the right of the panels, outside every axes; the figure grows taller where the legend
    needs it, and wider by the legend's width, so that long names (an agent's options) leave the panels the
    width they were given. Returns the legend (None: nothing labelled)."""
    panels = list(np.ravel(axes))
    for axis in panels[used:]:
        axis.axis("off")
    handles: dict[str, Any] = {}
    for axis in panels[:used]:
        for handle, label in zip(*axis.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if not handles:
        return None
    columns = -(-len(handles) // LEGEND_ROWS)
    rows = -(-len(handles) // columns)
    width, height = figure.get_size_inches()
    needed = rows * fontsize * 1.75 / 72 + 0.6  # a legend row is about 1.75 font sizes tall, in inches
    if needed > height:
        figure.set_size_inches(width, needed)
    figure.set_layout_engine("constrained")
    legend = figure.legend(list(handles.values()), list(handles), loc="outside right upper", ncols=columns,
                           fontsize=fontsize)
    legend_width = legend.get_window_extent(figure.canvas.get_renderer()).width / figure.dpi  # inches, not drawn
    figure.set_size_inches(width + legend_width, figure.get_size_inches()[1])
    return legend


def save_figure(figure, path: Path, dpi: int = 110) -> bool:
    """Save ``figure`` to ``path`` and close it; True (False for no figure)."""
    if figure is None:
        return False
    import matplotlib.pyplot as plt

    figure.savefig(path, dpi=dpi)
    plt.close(figure)
    return True


def _limits(bounds: tuple[float, float]) -> tuple[float, float]:
    margin = 0.05 * (bounds[1] - bounds[0])
    return bounds[0] - margin, bounds[1] + margin


def require_results(board: dict[str, Any], results: str | os.PathLike | None) -> None:
    """Refuse a board with nothing on it: no cell, failed or not, no unreadable record, no submission
    (``results`` mistyped, or an agent's own folder given where the store's is meant)."""
    if board["entries"] or board["failures"] or board["unreadable"]:
        return
    if results is None:
        raise ValueError("--submissions: no submission of this track to put on the board")
    raise ValueError(f"no results stored under {results} (a results folder holds one folder per agent, "
                     "as `memgym leaderboard run --results` makes it); run `memgym leaderboard run` first")


def write_report(results: str | os.PathLike | None, out: str | os.PathLike | None = None,
                 track: Track = TMAZE, submissions: Sequence[Any] = (),
                 sources: dict[str, str | None] | None = None) -> dict[str, Path]:
    """Write ``LEADERBOARD.md``, ``index.html``, ``board.json`` and the PNG plots for ``track``'s store at
    ``results`` (None: none) and ``submissions`` (:func:`build_board`). ``sources`` (the command's
    ``--results`` and ``--submissions``) are kept in ``board.json`` to rebuild a board of submissions.

    ``out`` defaults to the results directory. These are derived files: they are
    regenerated from the stored cells every time, and ``out``'s :data:`ABOUT` file, where there is one, is set
    under the board.
    """
    board = build_board(None if results is None else track.store(results), track, submissions)
    require_results(board, results)
    board["track"] = track.name  # which track rebuilds it (`memgym leaderboard report --track`)
    if submissions:
        board["sources"] = sources or {}
    if out is None and results is None:
        raise ValueError("a board of submissions alone needs --out")
    out = Path(out or results)
    if out.exists() and not out.is_dir():
        raise ValueError(f"the board's folder {out} is a file, not a folder")
    about = read_about(out)
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
    written["markdown"].write_text(markdown(board, images=bool(images), track=track, about=about))
    written["html"] = out / "index.html"
    written["html"].write_text(html(board, tuple(images), track, about=about is not None))
    return written
