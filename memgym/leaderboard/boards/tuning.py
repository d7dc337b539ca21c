"""Hyperparameter selection through the leaderboard harness (thesis §5.1.2, Appendix A.1, Table A.1).

The thesis tunes each T-Maze agent's learning rate and entropy coefficient on a
grid (Table A.1: 5 × 5 values), trains every configuration for 5M steps with 5
seeds at each of the 5 corridor lengths 120–200, and selects the configuration
with the highest mean success over the last 100K training steps across all
lengths and seeds. :func:`tune` does exactly that with the harness: every
configuration is the agent with options, ``NAME[learning_rate=…,entropy_coef=…]``
(:func:`~memgym.leaderboard.protocol.parse_spec`), its cells run and are stored
like any board's (resumable, never overwritten, failed cells count as success 0),
and the selection is read from the stored records' training score (the board's
"train score"). The result is written to ``<results>/tuning-<agent>.json``
(derived from the store, rewritten on every run; a selection of another grid or budget found there is
moved aside to ``tuning-<agent>.<n>.json`` first) and printed as a table.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memgym.leaderboard.boards import report
from memgym.leaderboard.running import runner
from memgym.leaderboard.protocol import agent_id, canonical_spec, format_spec, parse_spec
from memgym.leaderboard.running.planning import stored_spelling
from memgym.leaderboard.tracks import TMAZE, Preset, Track

#: Table A.1: the learning rates and entropy coefficients the thesis sweeps for every T-Maze agent.
THESIS_GRID: dict[str, tuple[float, ...]] = {
    "learning_rate": (1e-3, 5e-4, 1e-4, 5e-5, 1e-5),
    "entropy_coef": (1e-1, 1e-2, 1e-3, 1e-4, 1e-5),
}


def grid_specs(agent: str, grid: Mapping[str, Sequence[Any]]) -> list[str]:
    """One spec per point of the grid: ``agent`` with the point's options added (in grid order)."""
    base, options = parse_spec(agent)
    if not grid or any(len(values) == 0 for values in grid.values()):
        raise ValueError(f"grid must give at least one value per option, got {dict(grid)!r}")
    clash = sorted(set(grid) & set(options))
    if clash:
        raise ValueError(f"agent {agent!r} already fixes {clash}, which the grid sweeps")
    specs = []
    for point in itertools.product(*grid.values()):
        chosen = {**options, **dict(zip(grid, point))}
        specs.append(format_spec(base, chosen))
    return specs


def select(results: str | os.PathLike, specs: Sequence[str], budget: Preset, track: Track = TMAZE) -> dict[str, Any]:
    """The stored configurations of ``specs`` under ``budget``, best training score first, scored on ``budget``'s
    values alone (a store may hold the same preset's cells at values the budget leaves out).

    Only complete configurations (every cell of ``budget`` has a result) are ranked;
    ties keep grid order.
    """
    board = report.build_board(track.store(results), track, values=budget.values)
    rows = {}  # the latest version of each spec
    for e in sorted(board["entries"], key=lambda e: e["version"]):
        if e["preset"] == budget.name:
            rows[e["spec"]] = e
    needed = len(budget.values) * budget.seeds
    candidates = []
    for order, spec in enumerate(specs):
        entry = rows.get(spec)
        if entry is None:
            continue
        candidates.append({
            "spec": spec, "options": parse_spec(spec)[1],
            "complete": entry["complete"] and entry["cells"]["ok"] + entry["cells"]["failed"] >= needed,
            "train_score": entry["train"]["score"], "eval_score": entry["eval"]["score"],
            "cells": entry["cells"], "order": order,
        })
    ranked = sorted((c for c in candidates if c["complete"]), key=lambda c: (-c["train_score"], c["order"]))
    return {
        "selected": ranked[0] if ranked else None,
        "ranked": ranked,
        "incomplete": [c["spec"] for c in candidates if not c["complete"]],
    }


def tune(agent: str, budget: Preset, results: str | os.PathLike, *, grid: Mapping[str, Sequence[Any]] = THESIS_GRID,
         track: Track = TMAZE, log: Callable[[str], None] = print, **run_options: Any) -> dict[str, Any]:
    """Run every configuration of ``grid`` for ``agent`` under ``budget`` into the store at ``results``, then select.

    ``run_options`` go to :func:`memgym.leaderboard.running.runner.run` (``cell_timeout``, ``backend``,
    ``new_version``; ``policies`` is off unless given: a sweep's trained parameters are not kept). Returns the selection of :func:`select` plus the grid and budget, as written
    to ``<results>/tuning-<agent>.json``.
    """
    agent = canonical_spec(agent)
    specs = stored_spelling(grid_specs(agent, grid), track.records(track.store(results)))
    values = track.sweep.plural.replace("_", " ") if len(budget.values) > 1 else track.sweep.name.replace("_", " ")
    log(f"tuning {agent}: {len(specs)} configuration{'s' * (len(specs) > 1)} "
        f"({' × '.join(f'{len(v)} {k}' for k, v in grid.items())}), "
        f"{len(budget.values)} {values} × {budget.seeds} seed{'s' * (budget.seeds > 1)} × "
        f"{budget.total_steps:,} steps each; selected by the training {track.score.label} over the last "
        f"{budget.train_window:,} steps")
    runner.run(specs, budget, results, track=track, log=log, **{"policies": False, **run_options})
    outcome = {"agent": agent, "grid": {k: list(v) for k, v in grid.items()}, "preset": track.budget_record(budget),
               **select(results, specs, budget, track)}
    path = Path(results) / f"tuning-{agent_id(agent)}.json"
    text = json.dumps(outcome, indent=2, default=str) + "\n"
    _keep_another_sweeps(path, json.loads(text), log)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
    outcome["path"] = str(path)
    return outcome


def _keep_another_sweeps(path: Path, outcome: Mapping[str, Any], log: Callable[[str], None]) -> None:
    """Before ``path`` is rewritten with ``outcome`` (as JSON values): when it holds the selection of another grid or
    budget, move it aside to the first free ``tuning-<agent>.<n>.json`` (its cells stay in the store; only the
    selection file is derived)."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return  # none yet, or unreadable: nothing of another sweep to keep
    if not isinstance(earlier, dict) or (earlier.get("grid"), earlier.get("preset")) == (outcome["grid"],
                                                                                        outcome["preset"]):
        return
    n = 1
    while (kept := path.with_name(f"{path.stem}.{n}.json")).exists():
        n += 1
    os.replace(path, kept)
    log(f"{path.name} held the selection of another grid or budget: kept as {kept.name}")


def table(outcome: Mapping[str, Any], track: Track = TMAZE) -> str:
    """The ranked configurations as a Markdown table, the selected one first."""
    keys = list(outcome["grid"])
    lines = ["| rank | " + " | ".join(keys) + f" | train {track.score.label} | eval {track.score.label} |",
             "|---" * (len(keys) + 3) + "|"]
    for rank, c in enumerate(outcome["ranked"], 1):
        values = " | ".join(f"{c['options'][k]:g}" if isinstance(c["options"][k], float) else str(c["options"][k])
                            for k in keys)
        lines.append(f"| {rank} | {values} | {c['train_score']:.3f} | {c['eval_score']:.3f} |")
    if outcome["incomplete"]:
        lines.append(f"\nnot ranked (cells missing): {', '.join(outcome['incomplete'])}")
    return "\n".join(lines)
