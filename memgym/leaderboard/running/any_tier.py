"""The any-framework tier: the harness steps a Gymnasium vector env itself and counts every episode.

One task is one cell: a fresh agent trains on ``num_envs`` copies of the track's env, then plays the
evaluation episodes on fixed reset seeds; ``cell_timeout`` stops it (docs/leaderboard_internals.md).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from memgym.leaderboard.limits import OVER_TIME, CellFailure, alarm, over_time
from memgym.leaderboard.running import progress
from memgym.leaderboard.running.code_identity import describe_agent, describe_code
from memgym.leaderboard.running.planning import NUM_ENVS, Task, cell_record
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.store import AGENT_FAULTS, CURVE_POINTS, failure_reason
from memgym.leaderboard.tracks import EVALUATION_SEED, Preset, Track


def run_task(task: Task, budget: Preset, cell_timeout: float | None = None) -> list[dict[str, Any]]:
    """Train and evaluate each cell of ``task``; one record per cell, failed where the agent failed."""
    started = time.perf_counter()
    try:
        factory = load_factory(task.spec)
    except AGENT_FAULTS as error:  # the agent's fault is its cells' result
        seconds = (time.perf_counter() - started) / len(task.cells)
        return [cell_record(task, budget, cell, {"spec": task.spec}, seconds, reason=failure_reason(error))
                for cell in task.cells]
    code = describe_code(task.spec, factory)
    records = []
    for cell in task.cells:
        value, seed = cell
        cell_started = time.perf_counter()
        agent_info: dict[str, Any] = code
        deadline = math.inf if cell_timeout is None else cell_started + float(cell_timeout)
        try:
            with alarm(cell_timeout):  # the factory's call counts: a factory that hangs fails its cell
                agent = factory(task.track.context(num_envs=NUM_ENVS, seed=seed, total_steps=budget.total_steps,
                                                   value=value))
                agent_info = describe_agent(task.spec, factory, agent)
                with _during("training"):
                    train_counters = train(agent, task.track, budget, value, seed, NUM_ENVS, deadline)
                with _during("evaluation"):
                    evaluation = evaluate(agent, task.track, budget, value, NUM_ENVS, deadline)
            records.append(cell_record(task, budget, cell, agent_info, time.perf_counter() - cell_started,
                                       train=train_counters, evaluation=evaluation))
        except AGENT_FAULTS as error:  # the agent's fault is this cell's result
            seconds, reason = time.perf_counter() - cell_started, failure_reason(error)
            if reason == OVER_TIME and cell_timeout is not None:
                reason = over_time(seconds, cell_timeout)
            records.append(cell_record(task, budget, cell, agent_info, seconds, reason=reason))
    return records


@contextlib.contextmanager
def _during(phase: str) -> Iterator[None]:
    """Name the phase of the cell in which the agent broke a rule (its running out of time says so itself)."""
    try:
        yield
    except CellFailure as error:
        if str(error) == OVER_TIME:
            raise
        raise CellFailure(f"during {phase}: {error}") from None


def train(agent: Any, track: Track, budget: Preset, value: Any, seed: int, num_envs: int,
          deadline: float = math.inf) -> dict[str, Any]:
    """Train on a vector env the harness steps; its counters (the track's score summed over episodes)."""
    score = track.score
    envs = _vector_env(track, value, num_envs, budget.max_episode_steps)
    obs, _ = envs.reset(seed=seed)
    start = np.ones(num_envs, bool)
    zero = score.number(0)
    totals = {"steps": 0, "episodes": 0, score.total: zero, "window_episodes": 0, f"window_{score.total}": zero,
              "invalid_actions": 0}
    curve = np.zeros((CURVE_POINTS, 2), np.int64 if score.counted else np.float64)  # [episodes, score sum]
    window_start = budget.total_steps - budget.train_window
    steps_per_point = -(-budget.total_steps // CURVE_POINTS)
    report_every = max(1, budget.total_steps // num_envs // 100)
    try:
        for step in range(budget.total_steps // num_envs):
            if step and step % report_every == 0:
                progress.in_flight(totals["steps"])
            action = checked_actions(agent.act(obs, start), num_envs, envs.single_action_space, deadline)
            next_obs, reward, terminated, truncated, info = envs.step(action)
            done = terminated | truncated
            final_obs, outcome = next_obs.copy(), np.zeros(num_envs, bool if score.counted else np.float64)
            for i in np.flatnonzero(done):  # episode ends only (SAME_STEP autoreset put the new first obs in next_obs)
                final_obs[i] = info["final_obs"][i]
                outcome[i] = info["final_info"][score.key][i]
            agent.observe(action, reward, final_obs, terminated, truncated)
            finished, scored = int(done.sum()), score.number(outcome.sum())
            curve[min(totals["steps"] // steps_per_point, CURVE_POINTS - 1)] += (finished, scored)
            if totals["steps"] >= window_start:
                totals["window_episodes"] += finished
                totals[f"window_{score.total}"] += scored
            totals["steps"] += num_envs
            totals["episodes"] += finished
            totals[score.total] += scored
            obs, start = next_obs, done
    finally:
        envs.close()
    totals["curve"] = [[int(episodes), score.number(scored)] for episodes, scored in curve.tolist()]
    return totals


def evaluate(agent: Any, track: Track, budget: Preset, value: Any, num_envs: int,
             deadline: float = math.inf) -> dict[str, Any]:
    """``eval_episodes`` episodes on fixed seeds, ``num_envs`` at a time; only first episodes count."""
    score = track.score
    outcomes: list[tuple[Any, float, int]] = []
    base = EVALUATION_SEED + 1000 * track.sweep.index(value)
    for first in range(0, budget.eval_episodes, num_envs):
        envs = _vector_env(track, value, num_envs, budget.max_episode_steps)
        obs, _ = envs.reset(seed=[base + first + i for i in range(num_envs)])
        start = np.ones(num_envs, bool)
        finished = np.zeros(num_envs, bool)
        outcome = np.zeros(num_envs, bool if score.counted else np.float64)
        returns = np.zeros(num_envs)
        steps = np.zeros(num_envs, int)
        try:
            while not finished.all():
                action = checked_actions(agent.act(obs, start), num_envs, envs.single_action_space, deadline)
                obs, reward, terminated, truncated, info = envs.step(action)
                done = terminated | truncated
                live = ~finished
                returns += np.where(live, reward, 0.0)
                steps += live
                for i in np.flatnonzero(done & live):
                    outcome[i] = info["final_info"][score.key][i]
                finished |= done
                start = done
        finally:
            envs.close()
        outcomes += list(zip(outcome.tolist(), returns.tolist(), steps.tolist()))
    outcomes = outcomes[: budget.eval_episodes]
    return {
        "episodes": len(outcomes),
        score.name: float(np.mean([o[0] for o in outcomes])),
        "mean_return": float(np.mean([o[1] for o in outcomes])),
        "mean_length": float(np.mean([o[2] for o in outcomes])),
    }


def _vector_env(track: Track, value: Any, num_envs: int, max_episode_steps: int | None) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv(
        [lambda: track.make_env(value, max_episode_steps)] * num_envs,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def checked_actions(actions: Any, num_envs: int | None, space: gym.Space, deadline: float = math.inf) -> np.ndarray:
    """The agent's ``num_envs`` actions in ``space`` as an array the env takes, or :class:`CellFailure` saying what
    is wrong with them: the rule of ``run`` and ``check``, the JAX tier's
    (:func:`~memgym.envs.functional.valid_action`) in NumPy. A ``Discrete`` or ``MultiDiscrete`` action is whole
    numbers in range (``2.0`` is 2; ``1.5``, NaN, booleans are refused), a ``Box`` one finite numbers within its
    bounds. ``num_envs=None``: one action, without the environments' axis (a JAX-tier ``act``). Past ``deadline``
    (``perf_counter``) the cell has run out of time."""
    if time.perf_counter() > deadline:
        raise CellFailure(OVER_TIME)
    actions = np.asarray(actions)
    whole = not isinstance(space, gym.spaces.Box)
    if actions.dtype == bool or not (np.issubdtype(actions.dtype, np.integer)
                                     or np.issubdtype(actions.dtype, np.floating)):
        raise CellFailure(f"act returned {actions.dtype} actions {actions.tolist()}; expected "
                          f"{'whole' if whole else 'real'} numbers in {space}")
    shape = (*(() if num_envs is None else (num_envs,)), *(space.shape or ()))
    if actions.shape != shape:
        raise CellFailure(f"act returned actions of shape {actions.shape}; expected shape {shape}")
    if np.isnan(actions).any():
        raise CellFailure(f"act returned NaN actions {actions.tolist()}; the action space is {space}")
    if isinstance(space, gym.spaces.Discrete):
        low, high = space.start, space.start + space.n - 1
    elif isinstance(space, gym.spaces.MultiDiscrete):
        low, high = space.start, space.start + space.nvec - 1
    elif isinstance(space, gym.spaces.Box):
        low, high = space.low, space.high
    else:
        raise CellFailure(f"the harness acts in Discrete, MultiDiscrete and Box spaces, not {space}")
    inside = (actions >= low) & (actions <= high)  # NaN fails both
    if whole:
        inside &= actions == np.floor(actions)
    if not inside.all():
        raise CellFailure(f"act returned invalid actions {actions.tolist()}; the action space is {space}")
    return actions.astype(np.int64) if whole else actions.astype(space.dtype)
