"""A unit of work (:class:`Task`: some cells of one agent on one track) and the record of a cell.

A cell is ``(value, seed)``: one value of the track's swept parameter (a
corridor length) and one training seed. Whatever happens to it, a cell ends as
one record: ``status: "ok"`` with the harness's training counters and
evaluation, or ``status: "failed"`` with the reason. An agent that breaks a
rule of the harness raises :class:`CellFailure` inside a tier; any exception of
the agent is turned into the failed record's reason by :func:`failure_reason`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

from memgym.leaderboard.protocol import entry_points
from memgym.leaderboard.store import provenance
from memgym.leaderboard.track import Preset, Track

NUM_ENVS = 8  # what a factory is told in a run; the any-framework tier's vector env has as many envs
CURVE_POINTS = 20  # learning-curve bins per training run


class CellFailure(Exception):
    """The agent broke a rule of the harness (invalid actions, NaN, too slow); the cell is recorded as failed."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One unit of work: some ``(value, seed)`` cells of one agent on one track.

    Any tier: one cell. JAX tier: the missing seeds of one value, or of the whole
    grid (``plan(..., whole_grid=True)``), trained in one vmapped call.
    """

    spec: str
    kind: str  # "jax" | "any"
    cells: tuple[tuple[Any, int], ...]
    track: Track

    def describe(self) -> str:
        values = sorted({value for value, _ in self.cells}, key=self.track.sweep.index)
        seeds = sorted({seed for _, seed in self.cells})
        return f"[{self.spec}] {self.track.sweep.columns(values)} seeds {seeds}"


def describe_agent(spec: str, factory: Callable, agent: Any) -> dict[str, Any]:
    """Which code the agent is: its spec, package version, a hash of its module's source, its config."""
    info: dict[str, Any] = {"spec": spec, "factory": f"{getattr(factory, '__module__', '?')}:"
                                                     f"{getattr(factory, '__qualname__', '?')}"}
    entry = entry_points().get(spec)
    if entry is not None and entry.dist is not None:
        info["package"] = f"{entry.dist.name} {entry.dist.version}"
    module = sys.modules.get(getattr(factory, "__module__", ""), None)
    try:
        info["code_sha256"] = hashlib.sha256(inspect.getsource(module).encode()).hexdigest()[:16]
    except (TypeError, OSError):
        pass
    config = getattr(agent, "config", None)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        info["config"] = dataclasses.asdict(config)
    return info


def cell_record(task: Task, budget: Preset, cell: tuple[Any, int], agent: dict[str, Any], seconds: float, *,
                train: dict | None = None, evaluation: dict | None = None,
                reason: str | None = None) -> dict[str, Any]:
    """The record of one cell: ``train`` counters and ``evaluation``, or the ``reason`` it failed."""
    track = task.track
    record: dict[str, Any] = {
        "agent": task.spec,
        "agent_info": agent,
        "tier": task.kind,
        track.sweep.name: cell[0],
        "seed": cell[1],
        "preset": track.budget_record(budget),
        "status": "ok" if reason is None else "failed",
        "wall_time_s": seconds,
        "provenance": provenance(),
    }
    if reason is not None:
        record["reason"] = reason
    else:
        score = track.score
        window = train[f"window_{score.total}"] / train["window_episodes"] if train["window_episodes"] else 0.0
        record["train"] = dict(train, **{score.name: window})
        record["eval"] = evaluation
    return record


def failure_reason(error: BaseException) -> str:
    """An exception as a failed record's reason: its type and first line."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")[:500]
