"""Plan a run: the :class:`~memgym.leaderboard.cells.Task` s that fill every cell not stored yet.

Every agent is loaded and built first, so a bad submission (unimportable, of no
known tier, of a tier the track does not run) raises ``ValueError`` before
anything runs or is written. A cell already stored must have been produced with
the same budget and the same agent config, or the run stops: each budget has
its own results directory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memgym.leaderboard.cells import NUM_ENVS, Task, describe_agent, failure_reason
from memgym.leaderboard.protocol import agent_id, load_factory, tier
from memgym.leaderboard.store import ResultsStore
from memgym.leaderboard.track import Preset, Track


def plan(agents: Sequence[str], budget: Preset, store: ResultsStore, *, track: Track, repeat: bool = False,
         whole_grid: bool = False) -> list[Task]:
    """The tasks that fill every cell of ``agents`` × ``budget`` without an ``ok`` result in ``store``.

    ``repeat`` plans finished cells again (their new results are stored as
    repeats). A JAX-tier agent gets one task per value of the swept parameter, or
    one for its whole grid with ``whole_grid`` (fewer, larger batches: what
    several devices want); an any-framework agent one task per cell.
    """
    if not agents:
        raise ValueError("name at least one agent (--agent)")
    kinds = {spec: _kind_and_config(spec, budget, track) for spec in agents}
    tasks = []
    for spec in agents:
        kind, config = kinds[spec]
        grid = []
        for value in budget.values:
            missing = [(value, seed) for seed in range(budget.seeds)
                       if _missing(store, spec, config, track, budget, value, seed) or repeat]
            if kind == "any":
                tasks += [Task(spec, kind, (cell,), track) for cell in missing]
            elif whole_grid:
                grid += missing
            elif missing:
                tasks.append(Task(spec, kind, tuple(missing), track))
        if grid:
            tasks.append(Task(spec, kind, tuple(grid), track))
    return tasks


def _kind_and_config(spec: str, budget: Preset, track: Track) -> tuple[str, Any]:
    """The agent's tier (one the track runs) and its config; ``ValueError`` for a bad submission."""
    factory = load_factory(spec)
    try:
        agent = factory(track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps))
    except Exception as error:  # noqa: BLE001
        raise ValueError(f"agent {spec!r}: its factory raised {failure_reason(error)}") from error
    try:
        kind, config = tier(agent), describe_agent(spec, factory, agent).get("config")
    except TypeError as error:
        raise ValueError(f"agent {spec!r}: the factory returned {type(agent).__name__}, which {error}") from None
    track.accept(kind, spec)
    return kind, config


def _missing(store: ResultsStore, spec: str, config: Any, track: Track, budget: Preset, value: Any,
             seed: int) -> bool:
    """Whether the cell has no ``ok`` result; ``ValueError`` if its result has another budget or config."""
    done = store.finished(agent_id(spec), value, seed)
    if done is None:
        return True
    kept, wanted = done["preset"], track.budget_record(budget)
    if kept != wanted | {track.sweep.plural: kept.get(track.sweep.plural)}:  # adding values to a grid is allowed
        raise ValueError(
            f"{done['path']} was produced with a different budget ({kept}); use another "
            f"--results directory for this budget ({wanted})"
        )
    if done.get("agent_info", {}).get("config") != json.loads(json.dumps(config)):
        raise ValueError(
            f"{done['path']} was produced by {spec!r} with a different config; use another "
            f"--results directory (or agent name) for this configuration"
        )
    return False
