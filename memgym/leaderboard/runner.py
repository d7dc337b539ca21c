"""Run a leaderboard: every (agent, corridor length, seed) cell, scored by the harness, stored once.

The run is planned as :class:`Task` s. For a JAX-tier agent all missing seeds of
one corridor length are one task: they train in one ``jax.jit(jax.vmap(train))``
call on a :class:`~memgym.leaderboard.scoring.ScoredEnv`, then play the
evaluation episodes in one more. An any-framework agent's task is one seed,
trained on a Gymnasium vector env of T-Mazes that the harness steps itself.
:func:`execute` runs a task and returns one record per cell; a backend
(:class:`LocalBackend` here, :class:`~memgym.leaderboard.ray_backend.RayBackend`
on a cluster) runs many, and the driver alone writes the finished records to the
:class:`~memgym.leaderboard.store.ResultsStore`, so an interrupted run (Ctrl-C,
``kill -9``) loses only the tasks in flight and resumes where it stopped.

**Failures are results.** An agent that raises, returns NaN parameters, emits
invalid actions or exceeds the wall-clock limit per cell (``cell_timeout``)
gets its cells recorded with ``status: "failed"`` and the reason, and the run
goes on with the other cells; a rerun retries them (the failed record is kept).
An any-framework agent is stopped when its time is up (checked every step, and
by ``SIGALRM`` when running in the main thread, which interrupts a hung
``act``); a compiled JAX call cannot be pre-empted, so a JAX task that took
longer than ``cell_timeout`` per cell is recorded as failed when it returns.

Evaluation episodes use fixed reset seeds derived from the corridor length only
(:func:`evaluation_keys`), so every agent faces the same evaluation mazes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import json
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from memgym.envs import tmaze
from memgym.leaderboard.protocol import AgentContext, agent_id, entry_points, load_factory, tier
from memgym.leaderboard.scoring import CURVE_POINTS
from memgym.leaderboard.store import ResultsStore, provenance

EVALUATION_SEED = 2_000_003


@dataclasses.dataclass(frozen=True)
class Preset:
    """A leaderboard budget.

    Attributes:
        corridor_lengths: the T-Maze lengths scored.
        seeds: training seeds per length (seeds ``0 … seeds−1``).
        total_steps: training budget per cell, in environment steps.
        train_window: training success is measured over the last ``train_window`` steps (thesis: 100K).
        eval_episodes: post-training evaluation episodes per cell.
        max_episode_steps: T-Maze time limit (a timeout is a failure).
    """

    name: str
    corridor_lengths: tuple[int, ...]
    seeds: int
    total_steps: int
    train_window: int
    eval_episodes: int
    max_episode_steps: int

    def __post_init__(self) -> None:
        if not self.corridor_lengths:
            raise ValueError("corridor_lengths must name at least one length")
        for length in self.corridor_lengths:
            tmaze.validate_config(int(length), tmaze.DEFAULT_NUM_DISTRACTORS, tmaze.DEFAULT_GRAY_BITS,
                                  self.max_episode_steps)
        for name in ("seeds", "total_steps", "train_window", "eval_episodes", "max_episode_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
        if self.train_window > self.total_steps:
            raise ValueError(f"train_window={self.train_window} exceeds total_steps={self.total_steps}")


PRESETS: dict[str, Preset] = {
    # A 2-core CPU finishes this in a few minutes (the README's main job).
    "smoke": Preset("smoke", (4, 8, 12), seeds=2, total_steps=100_000, train_window=20_000, eval_episodes=64,
                    max_episode_steps=100),
    "standard": Preset("standard", (20, 40, 60, 80, 100), seeds=5, total_steps=2_000_000, train_window=100_000,
                       eval_episodes=100, max_episode_steps=1000),
    # Thesis §5.1: corridor lengths 120-200, 10M steps, success over the last 100K steps (GPU).
    "thesis": Preset("thesis", (120, 140, 160, 180, 200), seeds=10, total_steps=10_000_000, train_window=100_000,
                     eval_episodes=100, max_episode_steps=1000),
}


def preset(name: str, **overrides: Any) -> Preset:
    """A named preset with some fields replaced (``None`` values are ignored)."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "total_steps" in overrides and "train_window" not in overrides:
        # a shorter budget measures training success over its last fifth at most
        overrides["train_window"] = min(PRESETS[name].train_window, max(1, overrides["total_steps"] // 5))
    if "corridor_lengths" in overrides:
        overrides["corridor_lengths"] = tuple(int(x) for x in overrides["corridor_lengths"])
    budget = dataclasses.replace(PRESETS[name], **overrides)
    if budget != PRESETS[name]:  # a custom grid is never mistaken for the named preset on a board
        budget = dataclasses.replace(budget, name=f"{name}+custom")
    return budget


def evaluation_keys(corridor_length: int, episodes: int):
    """The evaluation reset keys of a corridor length, shared by every agent."""
    import jax

    return jax.random.split(jax.random.fold_in(jax.random.key(EVALUATION_SEED), corridor_length), episodes)


def tmaze_spaces() -> tuple[gym.Space, gym.Space]:
    env = tmaze.TMazeEnv()
    return env.observation_space, env.action_space


class CellFailure(Exception):
    """The agent broke a rule of the harness (invalid actions, NaN, too slow); the cell is recorded as failed."""


@dataclasses.dataclass(frozen=True)
class Task:
    """One unit of work: some ``(corridor length, seed)`` cells of one agent.

    Any tier: one cell. JAX tier: the missing seeds of one corridor length, or of
    the whole grid (``plan(..., whole_grid=True)``), trained in one vmapped call.
    """

    spec: str
    kind: str  # "jax" | "any"
    cells: tuple[tuple[int, int], ...]

    def describe(self) -> str:
        lengths = sorted({length for length, _ in self.cells})
        seeds = sorted({seed for _, seed in self.cells})
        return f"[{self.spec}] L={','.join(map(str, lengths))} seeds {seeds}"


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


def _record(task: Task, budget: Preset, cell: tuple[int, int], agent: dict[str, Any], seconds: float, *,
            train: dict | None = None, evaluation: dict | None = None, reason: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "agent": task.spec,
        "agent_info": agent,
        "tier": task.kind,
        "corridor_length": cell[0],
        "seed": cell[1],
        "preset": dataclasses.asdict(budget),
        "status": "ok" if reason is None else "failed",
        "wall_time_s": seconds,
        "provenance": provenance(),
    }
    if reason is not None:
        record["reason"] = reason
    else:
        window = train["window_successes"] / train["window_episodes"] if train["window_episodes"] else 0.0
        record["train"] = dict(train, success_rate=window)
        record["eval"] = evaluation
    return record


class JaxCells:
    """One JAX-tier agent's compiled training and evaluation, reused for every task of the agent.

    Training is ``jit(vmap(train))`` over cells — (corridor length, seed) pairs:
    the corridor length is a traced field of the T-Maze params, so one compilation
    per batch size serves the whole grid. With several local devices the cell
    batch is sharded across them (``jax.sharding``, one mesh axis ``cells``; the
    batch is padded to a multiple of the device count by repeating its last cell,
    whose copies are dropped), so k devices run k× the cells per call. Each cell's
    computation is independent of the others, so sharding does not change results.
    """

    def __init__(self, agent: Any, budget: Preset):
        import jax

        from memgym.envs.tmaze_jax import TMazeJax
        from memgym.leaderboard.scoring import ScoredEnv, evaluate_jax

        self.agent, self.budget = agent, budget
        env = ScoredEnv(TMazeJax())
        self.train = jax.jit(jax.vmap(lambda key, params: agent.train(key, env, params, budget.total_steps)))
        self.evaluate = jax.jit(
            jax.vmap(
                lambda policy, params, keys: evaluate_jax(agent, policy, TMazeJax(), params, keys,
                                                          budget.max_episode_steps),
            )
        )

    def batch(self, cells: Sequence[tuple[int, int]]):
        """Keys, scored params, evaluation params and keys of ``cells``, padded and sharded over local devices."""
        import jax
        import jax.numpy as jnp

        from memgym.envs.tmaze_jax import tmaze_params
        from memgym.leaderboard.scoring import scored_params

        budget = self.budget
        devices = jax.local_devices()
        padded = list(cells) + [cells[-1]] * (-len(cells) % len(devices))
        lengths = np.array([length for length, _ in padded])
        inner = tmaze_params(lengths, max_episode_steps=np.full(len(padded), budget.max_episode_steps))
        one = scored_params(inner, budget.total_steps, budget.train_window, int(self.agent.num_envs))
        params = dataclasses.replace(
            one, window_start=jnp.full(len(padded), one.window_start), curve_step=jnp.full(len(padded), one.curve_step)
        )
        keys = jnp.stack([jax.random.fold_in(jax.random.key(seed), length) for length, seed in padded])
        eval_keys = jnp.stack([evaluation_keys(length, budget.eval_episodes) for length, _ in padded])
        batch = (keys, params, inner, eval_keys)
        if len(devices) > 1:
            mesh = jax.sharding.Mesh(np.array(devices), ("cells",))
            batch = jax.device_put(batch, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("cells")))
        return batch

    def run(self, cells: Sequence[tuple[int, int]]) -> list[tuple[dict, dict] | str]:
        """Train and evaluate ``cells`` (one call each, vmapped over cells).

        Returns per cell ``(train counters, evaluation)`` or the reason the cell failed.
        """
        import jax

        from memgym.leaderboard.scoring import counters

        budget = self.budget
        keys, params, inner, eval_keys = self.batch(cells)
        policy_params, env_state = self.train(keys, params)
        evaluated = self.evaluate(policy_params, inner, eval_keys)
        success, returns, lengths = (np.asarray(x) for x in evaluated)
        out: list[tuple[dict, dict] | str] = []
        for i in range(len(cells)):
            train = counters(jax.tree.map(lambda x: x[i], env_state))
            finite = all(np.isfinite(np.asarray(leaf[i])).all() for leaf in jax.tree.leaves(policy_params)
                         if np.issubdtype(np.asarray(leaf).dtype, np.inexact))
            if not finite:
                out.append("the trained policy parameters contain NaN or infinite values")
            elif train["invalid_actions"]:
                out.append(f"the agent emitted {train['invalid_actions']} invalid actions during training "
                           f"(the action space is Discrete(4))")
            else:
                out.append((train, {
                    "episodes": int(budget.eval_episodes),
                    "success_rate": float(success[i].mean()),
                    "mean_return": float(returns[i].mean()),
                    "mean_length": float(lengths[i].mean()),
                }))
        return out


def _vector_env(length: int, num_envs: int, max_episode_steps: int) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv(
        [lambda: tmaze.TMazeEnv(corridor_length=length, max_episode_steps=max_episode_steps)] * num_envs,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def _checked_actions(actions: Any, num_envs: int, deadline: float) -> np.ndarray:
    """The agent's actions as an int array, or :class:`CellFailure` saying what is wrong with them."""
    if time.perf_counter() > deadline:
        raise CellFailure("exceeded the wall-clock limit per cell")
    actions = np.asarray(actions)
    if actions.shape != (num_envs,):
        raise CellFailure(f"act returned actions of shape {actions.shape}; expected ({num_envs},)")
    if not np.issubdtype(actions.dtype, np.number) or not np.all(np.isfinite(actions)):
        raise CellFailure(f"act returned non-numeric or NaN actions: {actions.tolist()}")
    if np.any(actions != np.round(actions)) or np.any((actions < 0) | (actions > 3)):
        raise CellFailure(f"act returned invalid actions {actions.tolist()}; the action space is Discrete(4)")
    return actions.astype(np.int64)


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CellFailure` in the main thread after ``seconds`` (interrupts a hung agent)."""
    if seconds is None or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def ring(signum, frame):
        raise CellFailure("exceeded the wall-clock limit per cell")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_any_cell(agent: Any, budget: Preset, length: int, seed: int, num_envs: int = 8,
                 deadline: float = math.inf) -> tuple[dict, dict]:
    """Train an any-framework agent on a vector env the harness steps and counts, then evaluate it."""
    envs = _vector_env(length, num_envs, budget.max_episode_steps)
    obs, _ = envs.reset(seed=seed)
    begin = np.ones(num_envs, bool)
    totals = dict(steps=0, episodes=0, successes=0, window_episodes=0, window_successes=0, invalid_actions=0)
    curve = np.zeros((CURVE_POINTS, 2), np.int64)
    window_start = budget.total_steps - budget.train_window
    steps_per_point = -(-budget.total_steps // CURVE_POINTS)
    try:
        for _ in range(budget.total_steps // num_envs):
            action = _checked_actions(agent.act(obs, begin), num_envs, deadline)
            next_obs, reward, terminated, truncated, info = envs.step(action)
            done = terminated | truncated
            final_obs, success = next_obs.copy(), np.zeros(num_envs, bool)
            for i in np.flatnonzero(done):  # episode ends only (SAME_STEP autoreset put the new first obs in next_obs)
                final_obs[i] = info["final_obs"][i]
                success[i] = bool(info["final_info"]["success"][i])
            agent.observe(action, reward, final_obs, terminated, truncated)
            in_window = totals["steps"] >= window_start
            curve[min(totals["steps"] // steps_per_point, CURVE_POINTS - 1)] += (int(done.sum()), int(success.sum()))
            totals["steps"] += num_envs
            totals["episodes"] += int(done.sum())
            totals["successes"] += int(success.sum())
            if in_window:
                totals["window_episodes"] += int(done.sum())
                totals["window_successes"] += int(success.sum())
            obs, begin = next_obs, done
    finally:
        envs.close()
    totals["curve"] = curve.tolist()
    return totals, evaluate_any(agent, length, budget, num_envs, deadline)


def evaluate_any(agent: Any, length: int, budget: Preset, num_envs: int,
                 deadline: float = math.inf) -> dict[str, Any]:
    """``eval_episodes`` episodes on fixed seeds, ``num_envs`` at a time; only first episodes count."""
    outcomes: list[tuple[bool, float, int]] = []
    base = EVALUATION_SEED + 1000 * length
    for first in range(0, budget.eval_episodes, num_envs):
        envs = _vector_env(length, num_envs, budget.max_episode_steps)
        obs, _ = envs.reset(seed=[base + first + i for i in range(num_envs)])
        begin = np.ones(num_envs, bool)
        finished = np.zeros(num_envs, bool)
        success = np.zeros(num_envs, bool)
        returns = np.zeros(num_envs)
        steps = np.zeros(num_envs, int)
        try:
            while not finished.all():
                action = _checked_actions(agent.act(obs, begin), num_envs, deadline)
                obs, reward, terminated, truncated, info = envs.step(action)
                done = terminated | truncated
                live = ~finished
                returns += np.where(live, reward, 0.0)
                steps += live
                for i in np.flatnonzero(done & live):
                    success[i] = bool(info["final_info"]["success"][i])
                finished |= done
                begin = done
        finally:
            envs.close()
        outcomes += list(zip(success.tolist(), returns.tolist(), steps.tolist()))
    outcomes = outcomes[: budget.eval_episodes]
    return {
        "episodes": len(outcomes),
        "success_rate": float(np.mean([o[0] for o in outcomes])),
        "mean_return": float(np.mean([o[1] for o in outcomes])),
        "mean_length": float(np.mean([o[2] for o in outcomes])),
    }


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")[:500]


def execute(task: Task, budget: Preset, cell_timeout: float | None = None,
            compiled: dict[str, JaxCells] | None = None) -> list[dict[str, Any]]:
    """Run ``task``; one record per cell. The agent's faults become failed records, never exceptions.

    ``compiled`` caches a JAX-tier agent's :class:`JaxCells` across tasks (one compilation per agent).
    """
    started = time.perf_counter()
    observation_space, action_space = tmaze_spaces()
    agent_info: dict[str, Any] = {"spec": task.spec}

    def failed(reason: str) -> list[dict[str, Any]]:
        seconds = (time.perf_counter() - started) / len(task.cells)
        return [_record(task, budget, cell, agent_info, seconds, reason=reason) for cell in task.cells]

    try:
        factory = load_factory(task.spec)
        if task.kind == "jax":
            agent = factory(AgentContext(observation_space, action_space, 8, 0, budget.total_steps))
            agent_info = describe_agent(task.spec, factory, agent)
            cells = (compiled or {}).get(task.spec)
            if cells is None:
                cells = JaxCells(agent, budget)
                if compiled is not None:
                    compiled[task.spec] = cells
            outcomes = cells.run(task.cells)
            seconds = (time.perf_counter() - started) / len(task.cells)
            if cell_timeout is not None and seconds > cell_timeout:
                return failed(f"exceeded the wall-clock limit per cell ({seconds:.0f}s > {cell_timeout}s)")
            return [_record(task, budget, cell, agent_info, seconds, train=o[0], evaluation=o[1])
                    if isinstance(o, tuple) else _record(task, budget, cell, agent_info, seconds, reason=o)
                    for cell, o in zip(task.cells, outcomes)]
        records = []
        for cell in task.cells:
            length, seed = cell
            cell_started = time.perf_counter()
            try:
                agent = factory(AgentContext(observation_space, action_space, 8, seed, budget.total_steps))
                agent_info = describe_agent(task.spec, factory, agent)
                deadline = math.inf if cell_timeout is None else cell_started + float(cell_timeout)
                with _alarm(cell_timeout):
                    train, evaluation = run_any_cell(agent, budget, length, seed, deadline=deadline)
                records.append(_record(task, budget, cell, agent_info, time.perf_counter() - cell_started,
                                       train=train, evaluation=evaluation))
            except Exception as error:  # noqa: BLE001 - the agent's fault is this cell's result
                records.append(_record(task, budget, cell, agent_info, time.perf_counter() - cell_started,
                                       reason=_reason(error)))
        return records
    except Exception as error:  # noqa: BLE001
        return failed(_reason(error))


def plan(agents: Sequence[str], budget: Preset, store: ResultsStore, *, repeat: bool = False,
         whole_grid: bool = False) -> list[Task]:
    """The tasks that fill every cell of ``agents`` × ``budget`` without an ``ok`` result in ``store``.

    Every agent is loaded and built first, so a bad submission (unimportable, wrong
    type) raises ``ValueError`` before anything runs or is written. ``repeat``
    plans finished cells again (their new results are stored as repeats). A
    JAX-tier agent gets one task per corridor length, or one for its whole grid
    with ``whole_grid`` (fewer, larger batches: what several devices want).
    """
    if not agents:
        raise ValueError("name at least one agent (--agent)")
    observation_space, action_space = tmaze_spaces()
    kinds: dict[str, tuple[str, dict]] = {}
    for spec in agents:
        factory = load_factory(spec)
        try:
            agent = factory(AgentContext(observation_space, action_space, 8, 0, budget.total_steps))
        except Exception as error:  # noqa: BLE001
            raise ValueError(f"agent {spec!r}: its factory raised {_reason(error)}") from error
        try:
            kinds[spec] = (tier(agent), describe_agent(spec, factory, agent).get("config"))
        except TypeError as error:
            raise ValueError(f"agent {spec!r}: the factory returned {type(agent).__name__}, which {error}") from None
    tasks = []
    for spec in agents:
        name = agent_id(spec)
        kind, config = kinds[spec]
        grid = []
        for length in budget.corridor_lengths:
            missing = []
            for seed in range(budget.seeds):
                done = store.finished(name, length, seed)
                if done is not None:
                    kept = done["preset"]
                    if kept != dataclasses.asdict(budget) | {"corridor_lengths": kept["corridor_lengths"]}:
                        raise ValueError(
                            f"{done['path']} was produced with a different budget ({kept}); use another "
                            f"--results directory for this budget ({dataclasses.asdict(budget)})"
                        )
                    if done.get("agent_info", {}).get("config") != json.loads(json.dumps(config)):
                        raise ValueError(
                            f"{done['path']} was produced by {spec!r} with a different config; use another "
                            f"--results directory (or agent name) for this configuration"
                        )
                if done is None or repeat:
                    missing.append((length, seed))
            if kind == "any":
                tasks += [Task(spec, kind, (cell,)) for cell in missing]
            elif whole_grid:
                grid += missing
            elif missing:
                tasks.append(Task(spec, kind, tuple(missing)))
        if grid:
            tasks.append(Task(spec, kind, tuple(grid)))
    return tasks


class LocalBackend:
    """Runs tasks one after another in this process (JAX-tier agents compile once each)."""

    def map(self, tasks: Sequence[Task], budget: Preset, cell_timeout: float | None,
            started: Callable[[Task], None] = lambda task: None) -> Iterator[tuple[Task, list[dict]]]:
        compiled: dict[str, JaxCells] = {}
        for task in tasks:
            started(task)
            yield task, execute(task, budget, cell_timeout, compiled)


class Progress:
    """Cells done / total, environment steps per second and ETA: a rich bar on a terminal, lines otherwise."""

    def __init__(self, total_cells: int, steps_per_cell: int, log: Callable[[str], None]):
        self.total, self.steps_per_cell, self.log = total_cells, steps_per_cell, log
        self.done = self.failed = 0
        self.started = time.perf_counter()
        self._bar = None
        if log is print and sys.stdout.isatty():
            try:
                from rich import progress as rich_progress
            except ImportError:
                rich_progress = None
            if rich_progress is not None:
                self._bar = rich_progress.Progress(
                    rich_progress.TextColumn("cells"), rich_progress.BarColumn(), rich_progress.MofNCompleteColumn(),
                    rich_progress.TextColumn("{task.fields[rate]}"), rich_progress.TimeElapsedColumn(),
                    rich_progress.TextColumn("ETA"), rich_progress.TimeRemainingColumn(),
                )
                self._task = self._bar.add_task("cells", total=total_cells, rate="")
                self._bar.start()

    def message(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line)
        else:
            self.log(line)

    def advance(self, task: Task, records: list[dict]) -> None:
        self.done += len(records)
        failed = [r for r in records if r["status"] != "ok"]
        self.failed += len(failed)
        elapsed = time.perf_counter() - self.started
        rate = self.done * self.steps_per_cell / max(elapsed, 1e-9)
        eta = elapsed / self.done * (self.total - self.done) if self.done else math.inf
        ok = [r for r in records if r["status"] == "ok"]
        summary = ""
        if ok:
            summary = (f"train success {np.mean([r['train']['success_rate'] for r in ok]):.2f}, "
                       f"eval success {np.mean([r['eval']['success_rate'] for r in ok]):.2f}")
        for r in failed:
            summary += f"{'; ' if summary else ''}L={r['corridor_length']} seed {r['seed']} FAILED: {r['reason']}"
        self.message(f"{task.describe()}: {summary}")
        status = (f"cells {self.done}/{self.total} ({100 * self.done / max(self.total, 1):.0f}%)"
                  f"{f', {self.failed} failed' if self.failed else ''} | {rate:,.0f} steps/s | "
                  f"elapsed {_clock(elapsed)} | ETA {_clock(eta)}")
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, rate=f"{rate:,.0f} steps/s")
        else:
            self.log(status)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"


def run(agents: Sequence[str], budget: Preset, results: str, *, log: Callable[[str], None] = print,
        cell_timeout: float | None = None, repeat: bool = False, backend: Any = None) -> ResultsStore:
    """Fill every missing cell of ``agents`` × ``budget`` into the store at ``results``.

    ``backend`` runs the tasks (default :class:`LocalBackend`); whatever it is, this
    process alone writes the store, a task's records as soon as it finishes.
    """
    if cell_timeout is not None and not cell_timeout > 0:
        raise ValueError(f"cell_timeout must be a positive number of seconds, got cell_timeout={cell_timeout!r}")
    store = ResultsStore(results)
    tasks = plan(agents, budget, store, repeat=repeat, whole_grid=_several_devices())
    for spec in agents:
        for length in budget.corridor_lengths:
            if not any(t.spec == spec and length in {c[0] for c in t.cells} for t in tasks):
                log(f"[{spec}] L={length}: all {budget.seeds} seeds stored, skipping")
    if not tasks:
        return store
    backend = backend or LocalBackend()
    progress = Progress(sum(len(t.cells) for t in tasks), budget.total_steps, log)

    def started(task: Task) -> None:
        progress.message(f"{task.describe()}: training for {budget.total_steps:,} steps per cell "
                         f"({task.kind} tier) ...")

    try:
        for task, records in backend.map(tasks, budget, cell_timeout, started):
            for record in records:
                store.write(agent_id(task.spec), record["corridor_length"], record["seed"], record)
            progress.advance(task, records)
    finally:
        progress.close()
    return store


def _several_devices() -> bool:
    """Whether this process sees several JAX devices (then a JAX agent's whole grid is one sharded batch)."""
    try:
        import jax
    except ImportError:
        return False
    return jax.local_device_count() > 1
