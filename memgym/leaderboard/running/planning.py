"""Plan a run: the :class:`Task` s that fill every cell not stored yet, each counted for one version of its agent.

Submissions that cannot take part are refused before anything runs; how versions are told apart:
docs/leaderboard_internals.md.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memgym.extras import MissingExtra
from memgym.leaderboard.running.code_identity import COMPUTATION, describe_agent, describe_code
from memgym.leaderboard.protocol import agent_id, canonical_spec, load_factory, same_agent, tier
from memgym.leaderboard.limits import alarm
from memgym.leaderboard.store import AGENT_FAULTS, ResultsStore, failure_reason, provenance
from memgym.leaderboard.tracks import Preset, Track

NUM_ENVS = 8  # what a factory is told in a run; the any-framework tier's vector env has as many envs


@dataclasses.dataclass(frozen=True)
class Task:
    """One unit of work: some ``(value, seed)`` cells of one agent on one track.

    Any tier: one cell. JAX tier: the missing seeds of one value, or of the whole
    grid (``plan(..., whole_grid=True)``), trained in one vmapped call.
    """

    spec: str
    kind: str  # "jax" | "any" | "unknown" (the factory raised before its tier was known)
    cells: tuple[tuple[Any, int], ...]
    track: Track
    version: int = 1  # the agent's version these cells are recorded as (a new one per change of code or config)
    reason: str | None = None  # set: every cell fails with this reason without running (the factory raised)

    @property
    def label(self) -> str:
        """The agent as the board names it: its spec, ``spec@v<n>`` from version 2 on."""
        return version_label(self.spec, self.version)

    def describe(self) -> str:
        values = sorted({value for value, _ in self.cells}, key=self.track.sweep.index)
        seeds = sorted({seed for _, seed in self.cells})
        return f"[{self.label}] {self.track.sweep.columns(values)} seeds {seeds}"


def cell_record(task: Task, budget: Preset, cell: tuple[Any, int], agent: dict[str, Any], seconds: float, *,
                train: dict | None = None, evaluation: dict | None = None, reason: str | None = None,
                policy: list | None = None, vmapped: bool | None = None) -> dict[str, Any]:
    """The record of one cell: ``train`` counters and ``evaluation``, or the ``reason`` it failed.

    ``policy``: the leaves of a JAX-tier cell's trained parameters; :meth:`ResultsStore.write` stores them in a
    file beside the record (:mod:`memgym.leaderboard.store.policies`) and the record names it. ``vmapped``:
    whether a JAX-tier batch trained under ``vmap`` (:class:`~memgym.leaderboard.running.jax_tier.OverCells`;
    None where it never started)."""
    track = task.track
    record: dict[str, Any] = {
        "agent": task.spec,
        "track": track.name,
        "version": task.version,
        "agent_info": agent,
        "tier": task.kind,
        track.sweep.name: cell[0],
        "seed": cell[1],
        "preset": track.budget_record(budget),
        "status": "ok" if reason is None else "failed",
        "wall_time_s": seconds,
        "provenance": provenance(),
    }
    if task.kind == "jax":  # XLA's numbers depend on a batch's size and form: a verification re-trains alike
        record["batch"] = len(task.cells)
        if vmapped is not None:
            record["vmapped"] = vmapped
    if reason is not None:
        record["reason"] = reason
    else:
        score = track.score
        record["train"] = dict(train, **{score.name: score.window_score(train)})
        record["eval"] = evaluation
        if policy is not None:
            record["policy"] = policy
    return record


def version_label(spec: str, version: int) -> str:
    """``spec`` for an agent's first version, ``spec@v<n>`` for later ones."""
    return spec if version == 1 else f"{spec}@v{version}"


def stored_spelling(agents: Sequence[str], records: Iterable[dict[str, Any]],
                    log: Callable[[str], None] = lambda line: None) -> list[str]:
    """``agents`` as the store keys them: each as the spelling its stored ``records`` have
    (:func:`~memgym.leaderboard.protocol.same_agent`: options in any order, values in any spelling), else its
    :func:`~memgym.leaderboard.protocol.canonical_spec`; an agent named twice is kept once.

    So ``x[learning_rate=1e-3]`` resumes the cells of ``x[learning_rate=0.001]`` and shares its row.
    """
    spellings = sorted({r["agent"] for r in records if isinstance(r.get("agent"), str)})
    chosen: list[str] = []
    for spec in agents:
        spelling = next((s for s in spellings if same_agent(s, spec)), None) or canonical_spec(spec)
        if spelling != spec:
            log(f"[{spec}] is stored as {spelling!r}")
        if spelling in chosen:
            log(f"[{spec}] is named twice; it runs once")
        else:
            chosen.append(spelling)
    return chosen


def plan(agents: Sequence[str], budget: Preset, store: ResultsStore, *, track: Track, repeat: bool = False,
         whole_grid: bool = False, new_version: bool = False, log=lambda line: None,
         computation: Callable[[str, Any], str] | None = None, seeds_per_batch: int | None = None,
         cell_timeout: float | None = None) -> list[Task]:
    """The tasks that fill every cell of ``agents`` × ``budget`` without an ``ok`` result of the agent's version.

    ``repeat`` plans finished cells again (their new results are stored as
    repeats). ``new_version`` records the cells of an agent whose code or config
    changed since its cells were stored as its next version (without it such a
    run raises ``ValueError``). A JAX-tier agent gets one task per value of the
    swept parameter, or one for its whole grid with ``whole_grid`` (fewer, larger
    batches: what several devices want; not on a track whose values have their own env); an any-framework agent one task per
    cell; an agent whose factory raised one task whose cells all fail with the reason. ``seeds_per_batch``: a
    JAX-tier agent's missing seeds of a value are split into tasks of at most that many (on a CPU, where
    vmapping seeds gains little, one seed per batch trains each seed sooner; ignored with ``whole_grid``).

    ``computation(spec, env_key)``: what a JAX-tier agent's cells of that env compute on ``budget``
    (:func:`memgym.leaderboard.running.jax_tier.computation`); with it, a JAX-tier agent whose code changed since its
    cells were stored is still the same version if what it computes did not change (:func:`_differences`).
    ``cell_timeout``: seconds each factory call of the planning may take (a factory that hangs fails its cells).
    """
    if not agents:
        raise ValueError("name at least one agent (--agent)")
    inspected = {spec: _inspect(spec, budget, track, cell_timeout) for spec in agents}
    stored: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in track.records(store):
        stored[record.get("agent")].append(record)
    for spec in agents:  # before versions: a record's config holds its budget's total_steps
        for record in stored[spec]:
            _check_budget(record, track, budget)
    budget_record = json.loads(json.dumps(track.budget_record(budget)))  # as records hold it
    versions = {spec: _version(spec, *inspected[spec][1:], stored[spec], new_version, store, log, track.sweep.name,
                               _computed(spec, computation, track, budget_record))
                for spec in agents}
    tasks = []
    for spec in agents:
        (kind, _, _, reason), version = inspected[spec], versions[spec]
        grid = []
        for value in budget.values:
            missing = [(value, seed) for seed in budget.seed_range
                       if _missing(store, spec, version, value, seed) or repeat]
            if reason is not None or whole_grid and kind == "jax" and not track.per_value_env:
                grid += missing
            elif kind == "any":
                tasks += [Task(spec, kind, (cell,), track, version) for cell in missing]
            elif missing:
                size = seeds_per_batch or len(missing)
                tasks += [Task(spec, kind, tuple(missing[i:i + size]), track, version)
                          for i in range(0, len(missing), size)]
        if grid:
            tasks.append(Task(spec, kind, tuple(grid), track, version, reason))
    return tasks


def _inspect(spec: str, budget: Preset, track: Track, cell_timeout: float | None = None
             ) -> tuple[str, dict[str, Any], dict[Any, Any], str | None]:
    """``(tier, code identity, configs, reason)`` of an agent; ``reason`` is set when its factory raised.

    ``configs`` maps a value of the swept parameter to the config the agent's cells of that value record, and
    None to the config of the agent built for every value (tier detection). On a track whose values have their
    own env (``per_value_env``) the cells' agents are built for their value, so each value's config is asked
    of the factory (a value whose factory call raises is left out: its cells fail with the reason when run).

    ``ValueError`` for a submission that cannot take part: unimportable, of no known tier or of a
    tier the track does not run. ``cell_timeout``: seconds each factory call may take.
    """
    factory = load_factory(spec)
    identity = describe_code(spec, factory)
    try:
        with alarm(cell_timeout):
            agent = factory(track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps))
    except MissingExtra as error:  # not the agent's fault: refused before anything is stored
        raise ValueError(f"agent {spec!r} cannot run here: {error}") from None
    except AGENT_FAULTS as error:  # the agent's fault: its cells fail with the reason
        if getattr(error, "verdict", False):  # the alarm rang
            return "unknown", identity, None, "the factory did not return within the wall-clock limit per cell"
        return "unknown", identity, None, f"the factory raised {failure_reason(error)}"
    try:
        kind, config = tier(agent), describe_agent(spec, factory, agent).get("config")
    except TypeError as error:
        raise ValueError(f"agent {spec!r}: the factory returned no agent: {error}") from None
    track.accept(kind, spec)
    configs = {None: json.loads(json.dumps(config))}
    for value in budget.values if track.per_value_env else ():
        try:
            with alarm(cell_timeout):
                built = factory(track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps, value=value))
            configs[value] = json.loads(json.dumps(describe_agent(spec, factory, built).get("config")))
        except AGENT_FAULTS:  # the value's cells fail with the reason when they run
            continue
    return kind, identity, configs, None


def _computed(spec: str, computation: Callable[[str, Any], str] | None, track: Track,
              budget_record: dict[str, Any]) -> Callable[[dict[str, Any]], str | None]:
    """What agent ``spec`` computes now for the cells of a stored record, or None where that cannot be told: no
    ``computation``, a record of another tier or budget, or an agent that cannot be traced now. A record of the
    budget on other values (:func:`_of_budget`) is of the budget: a cell's env is traced for its own value. Traced
    once per env."""
    traced: dict[Any, str | None] = {}

    def of(record: dict[str, Any]) -> str | None:
        if (computation is None or record.get("tier") != "jax"
                or not _of_budget(record.get("preset") or {}, budget_record, track)):
            return None
        key = track.env_key(record.get(track.sweep.name))
        if key not in traced:
            try:
                traced[key] = computation(spec, key)
            except AGENT_FAULTS:  # an agent that cannot be traced now is compared by its code
                traced[key] = None
        return traced[key]

    return of


def _version(spec: str, identity: dict[str, Any], configs: dict[Any, Any] | None, reason: str | None,
             records: list[dict[str, Any]], new_version: bool, store: ResultsStore, log, value_key: str,
             computed: Callable[[dict[str, Any]], str | None] = lambda record: None) -> int:
    """The version of ``spec`` this run's cells count for; ``ValueError`` when the agent changed (``configs``:
    :func:`_inspect`'s; ``value_key``: the records' key of the swept value; ``computed``: :func:`_computed`'s)."""
    by_version: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_version[int(record.get("version", 1))].append(record)
    if not by_version:
        return 1
    differences = {v: _differences(identity, configs, kept, value_key, config_known=reason is None,
                                   computed=computed)
                   for v, kept in by_version.items()}
    same = [v for v, why in differences.items() if not why]
    if same:
        return max(same)
    latest = max(by_version)
    if new_version:
        log(f"[{spec}] its code or config changed since version {latest}: recording its cells as version "
            f"{latest + 1} ({version_label(spec, latest + 1)})")
        return latest + 1
    raise ValueError(
        f"agent {spec!r}: {differences[latest]} since its cells in {store.root} were stored as version {latest}, "
        f"so new cells would mix two versions of the agent in one row of the board. Either run into a new "
        f"results directory (--results), or pass --new-version to record them as version {latest + 1} of the "
        f"agent (shown as {version_label(spec, latest + 1)!r})"
    )


def _differences(identity: dict[str, Any], configs: dict[Any, Any] | None, records: list[dict[str, Any]],
                 value_key: str, config_known: bool,
                 computed: Callable[[dict[str, Any]], str | None] = lambda record: None) -> str:
    """What differs between the agent now and the stored records of one version ("" when nothing).

    A record is of the same code when its code hash is the agent's now, or, in the JAX tier, when its
    computation hash (:data:`~memgym.leaderboard.running.code_identity.COMPUTATION`) is what the agent computes now
    (``computed``): code that was moved, renamed or re-commented is the same agent. A record without either
    hash is not compared. The config is compared with the ``ok`` records (a failed record may come from a
    factory that raised) unless the factory raised now: a record's with its value's config where ``configs``
    has one, else with the config of the agent built for every value.
    """
    now = identity.get("code_sha256")
    for record in records:
        info = record.get("agent_info") or {}
        kept = info.get("code_sha256")
        if kept is None or now is None or kept == now:
            continue
        changed = sorted(name for name in {*info.get("code_modules", {}), *identity.get("code_modules", {})}
                         if info.get("code_modules", {}).get(name) != identity.get("code_modules", {}).get(name))
        code = f"code sha256 {kept[:16]}… -> {now[:16]}…; modules changed: {', '.join(changed) or '?'}"
        stored, current = info.get(COMPUTATION), computed(record)
        if stored is None or current is None:
            return f"its code changed ({code})"
        if stored != current:
            return f"what it computes changed (computation sha256 {stored[:16]}… -> {current[:16]}…; {code})"
    if config_known:
        for record in records:
            expected = configs.get(record.get(value_key), configs[None])
            if record.get("status") == "ok" and (record.get("agent_info") or {}).get("config") != expected:
                return "its config changed"
    return ""


def still_missing(tasks: Sequence[Task], store: ResultsStore, repeat: bool = False) -> list[Task]:
    """``tasks`` without the cells that got an ``ok`` result since they were planned (another run stored them),
    and without the tasks left empty; with ``repeat``, all of them."""
    if repeat:
        return list(tasks)
    left = [dataclasses.replace(task, cells=tuple(
        cell for cell in task.cells if _missing(store, task.spec, task.version, *cell))) for task in tasks]
    return [task for task in left if task.cells]


def _missing(store: ResultsStore, spec: str, version: int, value: Any, seed: int) -> bool:
    """Whether the cell has no ``ok`` result of ``version`` (:func:`plan` checked the budgets of its results)."""
    results = [r for r in store.results(agent_id(spec), value, seed) if r.get("agent", spec) == spec]
    return not any(r.get("status") == "ok" and int(r.get("version", 1)) == version for r in results)


def _of_budget(kept: dict[str, Any], wanted: dict[str, Any], track: Track) -> bool:
    """Whether a record's budget ``kept`` is ``wanted`` (both as records hold them) on any values of the swept
    parameter: adding values to a grid keeps its records."""
    return kept == wanted | {track.sweep.plural: kept.get(track.sweep.plural)}


def _check_budget(record: dict[str, Any], track: Track, budget: Preset) -> None:
    """``ValueError`` for an ``ok`` record of another budget (adding values to a grid is allowed)."""
    if record.get("status") != "ok":
        return
    kept, wanted = record["preset"], track.budget_record(budget)
    if not _of_budget(kept, wanted, track):
        raise ValueError(f"{record['path']} was produced with a different budget ({kept}); use another "
                         f"--results directory for this budget ({wanted})")
