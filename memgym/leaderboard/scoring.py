"""Stage 3, counting: the harness's own episode counting in the JAX tier, :class:`ScoredEnv` (the wrapper a
JAX-tier agent trains on) and :func:`evaluate_jax`.

Its counters give the thesis metric, success rate over the last 100K training steps (§5.1.2), the
learning curve and the invalid actions; a seal (:func:`seal_weights`, :func:`sealed`) shows when
``train`` returned counters that the wrapper did not count; it also reports progress from inside the
compiled run. How: docs/leaderboard_internals.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gymnax.environments.environment import Environment

from memgym.envs import gymnax_compat
from memgym.envs.functional import EpisodeStatistics, StatefulWrapper, valid_action
from memgym.leaderboard.protocol import initialize_carry
from memgym.leaderboard.store import CURVE_POINTS


@dataclasses.dataclass(frozen=True)
class ScoredParams:
    """Inner params, ``window_start`` (the per-environment step from which episodes are scored),
    ``curve_step`` (per-environment steps per learning-curve bin), ``progress_step`` (report the
    steps taken to :func:`progress_sink` every this many steps of an environment; None: never) and
    ``seal`` (the weights of :func:`seal_weights`; None: no seal)."""

    inner: Any
    window_start: jax.Array
    curve_step: jax.Array
    progress_step: jax.Array | None = None
    seal: jax.Array | None = None


@dataclasses.dataclass(frozen=True)
class ScoredState:
    """Inner state plus the harness's counters (``int32`` scalars per environment) and their seal ``tag``."""

    inner: Any
    steps: jax.Array
    episodes: jax.Array
    successes: jax.Array
    window_episodes: jax.Array
    window_successes: jax.Array
    invalid_actions: jax.Array
    curve_episodes: jax.Array  # [CURVE_POINTS]
    curve_successes: jax.Array  # [CURVE_POINTS]
    tag: jax.Array  # uint32: the seal's weights dotted with the counts, added step by step


COUNTERS = ("steps", "episodes", "successes", "window_episodes", "window_successes", "invalid_actions")
jax.tree_util.register_dataclass(ScoredParams, data_fields=["inner", "window_start", "curve_step", "progress_step",
                                                           "seal"], meta_fields=[])
PROGRESS_REPORTS = 100  # reports per training run (every 1% of an environment's steps)
jax.tree_util.register_dataclass(
    ScoredState, data_fields=["inner", *COUNTERS, "curve_episodes", "curve_successes", "tag"], meta_fields=[]
)
SEAL_SIZE = len(COUNTERS) + 2 * CURVE_POINTS  # one weight per count: the counters, then both curves' bins


def scored_params(inner: Any, total_steps: int, train_window: int, num_envs: int,
                  progress: bool = False, seal: np.ndarray | None = None) -> ScoredParams:
    """Params for a run of ``total_steps`` over ``num_envs`` lockstep environments (``progress``: report
    the steps taken :data:`PROGRESS_REPORTS` times; ``seal``: the weights of :func:`seal_weights`)."""
    per_env = max(1, total_steps // num_envs)
    window_start = max(0, (total_steps - train_window) // num_envs)
    every = jnp.asarray(max(1, per_env // PROGRESS_REPORTS), jnp.int32) if progress else None
    return ScoredParams(inner, jnp.asarray(window_start, jnp.int32),
                        jnp.asarray(-(-per_env // CURVE_POINTS), jnp.int32), every,
                        None if seal is None else jnp.asarray(seal, jnp.uint32))


def seal_weights() -> np.ndarray:
    """Fresh random weights (``uint32[SEAL_SIZE]``) for the seal of one training run.

    :class:`ScoredEnv` adds each step's counts, weighted by these, to ``ScoredState.tag``
    (mod 2**32). The tag is linear in the counts, so :func:`sealed` can recompute it from the
    final counters, summed over any number of environments: a state whose counters were edited
    after stepping (``dataclasses.replace(state, successes=...)``) fails unless the edit also
    recomputed the tag from the weights. The weights reach ``train`` inside its ``env_params``,
    so an agent that reads them can forge a matching tag: the seal makes an edit evident, it
    does not make the counters unforgeable (docs/submitting.md, "What is verified").
    """
    return np.frombuffer(secrets.token_bytes(4 * SEAL_SIZE), np.uint32).copy()


def sealed(state: ScoredState, seal: np.ndarray) -> bool:
    """Whether ``state``'s tag (summed over its environments) matches its counters under ``seal``."""
    counts = np.concatenate([
        [np.asarray(getattr(state, name), np.int64).sum() for name in COUNTERS],
        np.asarray(state.curve_episodes, np.int64).reshape(-1, CURVE_POINTS).sum(0),
        np.asarray(state.curve_successes, np.int64).reshape(-1, CURVE_POINTS).sum(0),
    ])
    expected = sum(int(c) * int(w) for c, w in zip(counts.tolist(), np.asarray(seal).tolist())) % 2**32
    return int(np.asarray(state.tag, np.uint64).sum()) % 2**32 == expected


_SINK: list[Callable[[float], None] | None] = [None]


@contextlib.contextmanager
def progress_sink(sink: Callable[[float], None]) -> Iterator[None]:
    """While open, ``sink(steps)`` receives the progress reports of :class:`ScoredEnv` (the steps taken so
    far, summed over every environment of the compiled call), on whatever thread runs the callback."""
    previous, _SINK[0] = _SINK[0], sink
    try:
        yield
    finally:
        _SINK[0] = previous


def _emit(steps) -> None:
    sink = _SINK[0]
    if sink is not None:
        sink(float(steps))


@jax.custom_batching.custom_vmap
def _report(due: jax.Array, steps: jax.Array) -> jax.Array:
    """Send ``steps`` to the host when ``due`` (a real branch: nothing runs otherwise)."""
    jax.lax.cond(due, lambda: jax.debug.callback(_emit, steps), lambda: None)
    return due


@_report.def_vmap
def _report_batched(axis_size: int, in_batched: Sequence[bool], due: jax.Array, steps: jax.Array):
    """One report for the batch: due if any member is, the members' steps summed."""
    due_batched, steps_batched = in_batched
    _report(jnp.any(due) if due_batched else due, jnp.sum(steps) if steps_batched else steps * axis_size)
    return due, due_batched


class ScoredEnv(StatefulWrapper):
    """A functional environment that counts its finished episodes and successes (docs/leaderboard_internals.md).

    A :class:`~memgym.envs.functional.StatefulWrapper`: only the inner environment
    auto-resets, the counters run across episodes. ``units``: None counts ``info[score_key]`` as a
    yes/no outcome (the T-Maze's ``success``); a number counts a number score in integer units of
    ``1 / units`` (:data:`memgym.leaderboard.tracks.SCORE_UNITS`), rounded to the nearest, in the same counters.
    """

    def __init__(self, inner: Environment, score_key: str = "success", units: int | None = None):
        super().__init__(inner)
        self.score_key, self.units = score_key, units

    def inner_params(self, params: ScoredParams) -> Any:
        return params.inner

    @property
    def default_params(self) -> ScoredParams:
        return ScoredParams(self.inner.default_params, jnp.zeros((), jnp.int32),
                            jnp.ones((), jnp.int32))  # no progress reports

    def init(self, inner_state: Any, params: ScoredParams) -> ScoredState:
        zero, bins = jnp.zeros((), jnp.int32), jnp.zeros(CURVE_POINTS, jnp.int32)
        return ScoredState(inner_state, zero, zero, zero, zero, zero, zero, bins, bins, jnp.zeros((), jnp.uint32))

    def update(self, state: ScoredState, action, reward, terminated, truncated, info, params: ScoredParams):
        done = jnp.logical_or(terminated, truncated)
        in_window = state.steps >= params.window_start
        if self.units is None:
            success = jnp.logical_and(done, info[self.score_key]).astype(jnp.int32)
        else:
            success = jnp.where(done, jnp.round(info[self.score_key] * self.units), 0).astype(jnp.int32)
        window_success = jnp.where(in_window, success, 0)
        valid = valid_action(self.inner.action_space(params.inner), action)
        point = jnp.minimum(state.steps // params.curve_step, CURVE_POINTS - 1)
        counted = ScoredState(
            inner=state.inner,
            steps=state.steps + 1,
            episodes=state.episodes + done,
            successes=state.successes + success,
            window_episodes=state.window_episodes + (done & in_window),
            window_successes=state.window_successes + window_success,
            invalid_actions=state.invalid_actions + ~valid,
            curve_episodes=state.curve_episodes.at[point].add(done.astype(jnp.int32)),
            curve_successes=state.curve_successes.at[point].add(success),
            tag=state.tag if params.seal is None else state.tag + _seal_step(
                params.seal, point, done, success, done & in_window, window_success, ~valid),
        )
        if params.progress_step is not None:
            _report(counted.steps % params.progress_step == 0, counted.steps.astype(jnp.float32))
        return counted, info


def _seal_step(seal: jax.Array, point: jax.Array, *counts: jax.Array) -> jax.Array:
    """One step's counts weighted by ``seal`` (uint32, wrapping): the step itself, then ``counts`` in the
    order of :data:`COUNTERS` after ``steps``, then the curves' bin ``point``. A negative count (a number
    score's units) wraps to its two's complement, which :func:`sealed`'s sums modulo 2**32 agree with."""
    done, success = counts[0], counts[1]
    weights = jnp.stack([seal[0], *(seal[1 + i] * c.astype(jnp.uint32) for i, c in enumerate(counts)),
                         seal[len(COUNTERS) + point] * done.astype(jnp.uint32),
                         seal[len(COUNTERS) + CURVE_POINTS + point] * success.astype(jnp.uint32)])
    return weights.sum(dtype=jnp.uint32)


def counters(state: ScoredState, total: str = "successes", units: int | None = None) -> dict[str, Any]:
    """Counters summed over every environment in a (batched) :class:`ScoredState`, plus the learning curve
    (``curve``: per bin, ``[episodes, successes]``); ``total`` names the successes (and ``window_<total>``).
    ``units``: the :class:`ScoredEnv`'s; a number score's sums are given as floats (units / ``units``)."""
    if not isinstance(state, ScoredState):
        raise TypeError(
            f"train must return the final state of the environment it was given (a ScoredState), "
            f"got {type(state).__name__}"
        )
    def score(units_sum: Any) -> int | float:
        return int(units_sum) if units is None else int(units_sum) / units

    sums = {name: np.asarray(getattr(state, name), np.int64).sum() for name in COUNTERS}
    totals: dict[str, Any] = {name.replace("successes", total): score(count) if "successes" in name else int(count)
                              for name, count in sums.items()}
    episodes = np.asarray(state.curve_episodes, np.int64).reshape(-1, CURVE_POINTS).sum(0)
    successes = np.asarray(state.curve_successes, np.int64).reshape(-1, CURVE_POINTS).sum(0)
    totals["curve"] = [[int(e), score(s)] for e, s in zip(episodes, successes)]
    return totals


def evaluate_jax(agent: Any, params: Any, env: Environment, env_params: Any, keys: jax.Array, max_steps: int,
                 score_key: str = "success", policy_keys: jax.Array | None = None, counted: bool = True):
    """Play one episode per key with ``agent.act``; returns ``(success[N], return[N], length[N], invalid[N])``.

    ``keys`` fix the episodes: each one's reset and the environment's randomness at
    every step (T-Maze: the cue and the distractor bits). ``policy_keys`` (one per
    episode) are split into the keys ``act`` gets at each step; None: they come from
    ``keys`` too. ``max_steps`` bounds the scan (the environment's time limit ends every
    episode earlier); the outcome ``info[score_key]`` (a yes/no one when ``counted``, else a
    float32 number: ``success`` is then that number, 0 for an episode that did not end), return
    and length of each key's first episode are read at its end from
    :class:`~memgym.envs.functional.EpisodeStatistics`.
    ``invalid`` counts the actions outside the action space (:func:`~memgym.envs.functional.valid_action`:
    out of range, fractional or NaN) the agent chose before its episode ended.
    """
    env = EpisodeStatistics(env)
    action_space = env.action_space(env_params)

    def episode(key: jax.Array, policy_key: jax.Array | None):
        key_reset, key_run = jax.random.split(key)
        obs, state = env.reset(key_reset, env_params)
        step_keys = jax.random.split(key_run, max_steps)
        act_keys = None if policy_key is None else jax.random.split(policy_key, max_steps)

        def step(carry, keys):
            obs, state, memory, start, finished, result, invalid = carry
            key_act, key_env = jax.random.split(keys[0])
            key_act = key_act if keys[1] is None else keys[1]
            action, memory = agent.act(params, memory, obs, start, key_act)
            bad = ~valid_action(action_space, action)
            next_obs, next_state, _, _, _, info = gymnax_compat.step_env(env, key_env, state, action, env_params)
            end = info["done"] & ~finished
            ended = (info[score_key].astype(result[0].dtype), info["episode_return"], info["episode_length"])
            result = jax.tree.map(lambda new, old: jnp.where(end, new, old), ended, result)
            invalid = invalid + (bad & ~finished)
            return (next_obs, next_state, memory, jnp.zeros((), bool), finished | info["done"], result, invalid), None

        outcome = jnp.zeros((), bool if counted else jnp.float32)
        initial = (obs, state, initialize_carry(agent), jnp.ones((), bool), jnp.zeros((), bool),
                   (outcome, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32)), jnp.zeros((), jnp.int32))
        (_, _, _, _, finished, result, invalid), _ = jax.lax.scan(step, initial, (step_keys, act_keys))
        success, ret, length = result
        return jnp.where(finished, success, outcome), ret, length, invalid

    return jax.vmap(episode)(keys, policy_keys)
