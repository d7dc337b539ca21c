"""Run a leaderboard: every (agent, swept value, seed) cell of a track, scored by the harness, stored once.

:func:`run` plans the missing cells (:mod:`~memgym.leaderboard.running.planning`), hands the tasks to a backend
(:class:`LocalBackend`, or :class:`~memgym.leaderboard.running.ray_backend.RayBackend` on a cluster) that runs each
with :func:`execute`, and alone writes their records to the store. How a run resumes and how an agent's
failures become failed cells: docs/leaderboard_internals.md.
"""

from __future__ import annotations

import contextlib

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from memgym.leaderboard.running import any_tier, jax_tier
from memgym.leaderboard.running.code_identity import describe_code
from memgym.leaderboard.running.planning import Task, cell_record, plan, still_missing, stored_spelling
from memgym.leaderboard.running.progress import Progress, listening
from memgym.leaderboard.protocol import agent_id, load_factory
from memgym.leaderboard.store import ResultsStore
from memgym.leaderboard.tracks import TMAZE, Preset, Track
from memgym.validation import check_int, check_real


def run(agents: Sequence[str], budget: Preset, results: Any, *, track: Track = TMAZE,
        log: Callable[[str], None] = print, cell_timeout: float | None = None, repeat: bool = False,
        backend: Any = None, new_version: bool = False, policies: bool = True,
        seeds_per_batch: int | None = None) -> ResultsStore:
    """Fill every missing cell of ``agents`` × ``budget`` of ``track`` into the store at ``results``.

    ``backend`` runs the tasks (default :class:`LocalBackend`); whatever it is, this
    process alone writes the store, a task's records as soon as it finishes.
    ``new_version`` records the cells of an agent whose code or config changed since
    its cells were stored as its next version (without it, such a run raises ``ValueError``).
    ``policies``: store each JAX-tier cell's trained parameters beside its record
    (:mod:`~memgym.leaderboard.store.policies`); a submission needs them.
    ``seeds_per_batch``: train a JAX-tier agent's seeds of a value in batches of at most that many (default: all
    of them in one vmapped batch; :func:`~memgym.leaderboard.running.planning.plan`).
    """
    if seeds_per_batch is not None:
        check_int("seeds_per_batch", seeds_per_batch, 1)
    if cell_timeout is not None:
        check_real("cell_timeout", cell_timeout, 0.0, include_low=False)
    track.check(budget)
    try:  # a missing extra (popgym) is refused before anything is stored, not stored as failed cells
        track.spaces()
    except ImportError as error:
        raise ValueError(f"track {track.name!r} cannot run here: {error}") from None
    store = track.store(results)
    agents = stored_spelling(agents, track.records(store), log)  # also refuses another track's results folder
    whole_grid = "jax" in track.tiers and seeds_per_batch is None and _several_devices()
    tasks = plan(agents, budget, store, track=track, repeat=repeat, whole_grid=whole_grid, new_version=new_version,
                 log=log, computation=lambda spec, key: jax_tier.computation(spec, track, budget, key),
                 seeds_per_batch=seeds_per_batch, cell_timeout=cell_timeout)
    with contextlib.ExitStack() as locks:
        for spec in sorted({task.spec for task in tasks}):  # one run at a time stores an agent's cells in a store
            locks.enter_context(store.writing(agent_id(spec)))
        tasks = still_missing(tasks, store, repeat)  # less what a run that held the lock before stored
        for spec in agents:
            for value in budget.values:
                if not any(t.spec == spec and value in {c[0] for c in t.cells} for t in tasks):
                    log(f"[{spec}] {track.sweep.column(value)}: "
                        f"{'its seed' if budget.seeds == 1 else f'all {budget.seeds} seeds'} stored, skipping")
        if tasks:
            _run_tasks(tasks, budget, store, track, log, cell_timeout, backend or LocalBackend(), policies)
    return store


def _run_tasks(tasks: Sequence[Task], budget: Preset, store: ResultsStore, track: Track, log: Callable[[str], None],
               cell_timeout: float | None, backend: Any, policies: bool) -> None:
    """Run ``tasks`` on ``backend`` and store each one's records as it finishes (:func:`run`)."""
    progress = Progress(sum(len(t.cells) for t in tasks), budget.total_steps, log, track)

    def started(task: Task) -> None:
        progress.start(task)
        if task.reason is None:
            progress.message(f"{task.describe()}: training for {budget.total_steps:,} steps per cell "
                             f"({task.kind} tier) ...")

    try:
        with listening(progress.training):  # in-flight reports of the task running in this process
            for task, records in backend.map(tasks, budget, cell_timeout, started):
                for record in records:
                    if not policies:
                        record.pop("policy", None)
                    store.write(agent_id(task.spec), record[track.sweep.name], record["seed"], record)
                progress.advance(task, records)
    finally:
        progress.close()


def execute(task: Task, budget: Preset, cell_timeout: float | None = None,
            compiled: dict[tuple[str, Any], jax_tier.JaxCells] | None = None,
            checkpoints: Any = None) -> list[dict[str, Any]]:
    """Run ``task``; one record per cell. The agent's faults become failed records, never exceptions.

    ``compiled`` caches a JAX-tier agent's compiled cells across tasks, by (spec, ``Track.env_key`` of the value).
    ``checkpoints``: a folder where JAX-tier batches keep their training state, resumable (:mod:`.jax_tier`).
    """
    if task.reason is not None:  # the agent failed before it could run (its factory raised)
        try:
            agent_info = describe_code(task.spec, load_factory(task.spec))
        except Exception:  # noqa: BLE001
            agent_info = {"spec": task.spec}
        return [cell_record(task, budget, cell, agent_info, 0.0, reason=task.reason) for cell in task.cells]
    if task.kind == "jax":
        return jax_tier.run_task(task, budget, cell_timeout, compiled, checkpoints)
    return any_tier.run_task(task, budget, cell_timeout)


class LocalBackend:
    """Runs tasks one after another in this process (JAX-tier agents compile once each).

    ``checkpoints``: a folder where JAX-tier batches keep their training state as they go, so that a batch cut
    off (a killed process, a machine shut down) resumes where it stopped (:mod:`~memgym.leaderboard.running.jax_tier`).
    """

    def __init__(self, checkpoints: Any = None):
        self.checkpoints = checkpoints

    def map(self, tasks: Sequence[Task], budget: Preset, cell_timeout: float | None,
            started: Callable[[Task], None] = lambda task: None) -> Iterator[tuple[Task, list[dict]]]:
        compiled: dict[tuple[str, Any], jax_tier.JaxCells] = {}
        keys = [(task.spec, task.track.env_key(task.cells[0][0])) for task in tasks]
        for i, task in enumerate(tasks):
            # An agent's compiled cells are kept while a task left needs them, and no longer: each holds its
            # executables, whose code pages a process keeps mapped, and a sweep of many configurations on a
            # track with an env per value (POPGym's suite: 96 compilations) otherwise runs out of Linux's memory
            # maps (vm.max_map_count, 65,530) a few dozen tasks in, and XLA's next compilation fails.
            for key in set(compiled) - set(keys[i:]):
                del compiled[key]
            started(task)
            yield task, execute(task, budget, cell_timeout, compiled, self.checkpoints)


def _several_devices() -> bool:
    """Whether this process sees several JAX devices (then a JAX agent's whole grid is one sharded batch)."""
    try:
        import jax
    except ImportError:
        return False
    return jax.local_device_count() > 1
