"""``memgym leaderboard check AGENT [--track NAME]``: a fast conformance check that explains each failure.

What each tier is checked for, the memory test and the time limit per call: docs/submitting.md
(the internals: docs/leaderboard_internals.md).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from memgym.leaderboard.protocol import initialize_carry, load_factory, tier
from memgym.leaderboard.limits import DEFAULT_STEP_TIMEOUT, CellFailure, alarm
from memgym.leaderboard.running.any_tier import checked_actions
from memgym.leaderboard.store import AGENT_FAULTS
from memgym.leaderboard.tracks import TMAZE, Track
from memgym.validation import check_choice, check_positive

Check = tuple[str, bool, str]

HISTORY_STEPS = 5  # observations of each previous episode in the memory test
EPISODE_STEPS = 8  # observations of the new episode
KEY_SEQUENCES = 3  # JAX tier: the new episode is compared under this many key sequences


class StepTimeout(Exception):
    """A call into the agent did not return within the step timeout."""


class _Checks:
    """Runs checks in order; after a timeout the remaining checks are not run (each would wait again)."""

    def __init__(self, step_timeout: float | None):
        self.step_timeout = step_timeout
        self.results: list[Check] = []
        self.timed_out = False
        self.raised_in: str | None = None  # the call into the agent that raised, while a check runs

    def call(self, name: str, function: Callable, *args: Any, block: bool = False) -> Any:
        """``function(*args)`` (and, with ``block``, its JAX arrays computed) within the step timeout."""
        try:
            with alarm(self.step_timeout):
                result = function(*args)
                if block:
                    import jax

                    jax.block_until_ready(result)
        except CellFailure:  # the alarm rang
            raise StepTimeout(f"{name} did not return within {self.step_timeout:g} s (--step-timeout); "
                              f"the remaining checks were not run") from None
        except BaseException:
            self.raised_in = name
            raise
        return result

    def run(self, name: str, test: Callable[[], str | None]) -> bool:
        """Run one check unless a call timed out before; whether it passed."""
        if self.timed_out:
            return False
        self.raised_in = None
        try:
            problem = test()
        except StepTimeout as error:
            self.timed_out = True
            problem = str(error)
        except CellFailure as error:  # a rule of the run broken (invalid actions): its message says which
            problem = str(error)
        except (ValueError, TypeError) as error:  # a clear message of ours or of the agent's
            problem = f"{self._raiser()}{type(error).__name__}: {error}"
        except AGENT_FAULTS as error:  # every failure is reported, not raised
            problem = f"{self._raiser()}{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}"
        self.results.append((name, problem is None, problem or ""))
        return problem is None

    def _raiser(self) -> str:
        return "" if self.raised_in is None else f"{self.raised_in} raised "


def check_agent(spec: str, *, track: Track = TMAZE, budget: int | None = None,
                step_timeout: float | None = DEFAULT_STEP_TIMEOUT, value: Any = None) -> list[Check]:
    """Run every check on one cell of the track; a list of ``(name, passed, explanation)``.

    ``value``: the cell's value of the swept parameter (a POPGym task, whose spaces differ by task), with the
    ``check_cell``'s time limit; None: the track's ``check_cell``. ``step_timeout``: seconds each call into the
    agent may take (None: no limit).
    """
    cell = track.check_cell if value is None else check_cell(track, value)
    checks = _Checks(step_timeout)
    state: dict[str, Any] = {}

    def build() -> str | None:
        factory = load_factory(spec)
        state["factory"] = factory
        state["agent"] = checks.call("the factory", factory,
                                     track.context(num_envs=2, seed=0, total_steps=budget or 4096, value=value))
        state["tier"] = tier(state["agent"])
        track.accept(state["tier"], spec)
        return None

    if checks.run("factory builds an agent of a known tier that the track runs", build):
        if state["tier"] == "jax":
            _check_jax(checks, state["agent"], track, budget, cell)
        else:
            _check_any(checks, state["factory"], track, cell, value)
    return checks.results


def check_cell(track: Track, value: Any) -> tuple[Any, int | None]:
    """The cell ``(value, time limit)`` of ``check_agent(value=...)``; ``ValueError`` naming ``value`` for one the
    track does not have."""
    limit = track.check_cell[1]
    if track.sweep.choices is not None:
        check_choice(track.sweep.name, value, track.sweep.choices)
    if track.check_value is not None:
        track.check_value(value, limit)
    return value, limit


def other_spaces(track: Track, value: Any = None) -> dict[str, Any]:
    """For a track whose values have spaces of other kinds (POPGym's tasks), the first value of each kind of action
    space other than the checked cell's (``value``; None: the ``check_cell``'s), by the space's class name."""
    if not track.per_value_env or track.sweep.choices is None:
        return {}
    checked = type(track.spaces(value)[1]).__name__
    first: dict[str, Any] = {}
    for other in track.sweep.choices:
        first.setdefault(type(track.spaces(other)[1]).__name__, other)
    first.pop(checked, None)
    return first


def _check_jax(checks: _Checks, agent: Any, track: Track, budget: int | None, cell: tuple[Any, int | None]) -> None:
    import jax
    import jax.numpy as jnp

    from memgym.leaderboard.scoring import ScoredEnv, ScoredParams, ScoredState, seal_weights, sealed

    value, max_episode_steps = cell
    inner_env = track.jax_env(value)
    env = ScoredEnv(inner_env, score_key=track.score.key, units=track.score_units)
    inner = jax.tree.map(lambda x: x[0], track.jax_params([value], max_episode_steps))  # one cell, unbatched
    seal = seal_weights()
    params = ScoredParams(inner, jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32), seal=jnp.asarray(seal))
    action_space = track.spaces(value)[1]
    num_envs = agent.num_envs
    steps = budget or 4 * 256 * int(num_envs)
    state: dict[str, Any] = {}

    def num_envs_ok():
        check_positive(num_envs=num_envs)

    def train():
        key = jax.random.key(0)
        run = jax.jit(jax.vmap(lambda k: agent.train(k, env, params, steps)))
        policy_params, env_state = checks.call("train", run, jnp.stack([key, key]), block=True)
        state["params"] = jax.tree.map(lambda x: x[0], policy_params)
        if not isinstance(env_state, ScoredState):
            return ("train must return (params, final env state); the env state is of type "
                    f"{type(env_state).__name__}")
        taken = int(np.asarray(env_state.steps).sum()) // 2
        if taken > steps:  # the rule of every run: a cell that steps past its budget fails
            return (f"train was asked for {steps} environment steps but stepped the environment {taken} times, "
                    "more than its budget")
        if steps - taken > max(steps // 10, int(num_envs)):  # a run stores such a cell: the agent's loss
            return (f"train was asked for {steps} environment steps but stepped the environment only {taken} "
                    "times (a run scores it, trained on less than its budget)")
        if not sealed(env_state, seal):
            return ("train returned training counters that ScoredEnv did not count (their seal does not match: "
                    "the returned ScoredState was edited after stepping)")
        invalid = int(np.asarray(env_state.invalid_actions).sum()) // 2
        if invalid:  # a run fails such a cell (jax_tier.cell_outcome)
            return f"train stepped the environment with {invalid} invalid actions (the action space is {action_space})"
        leaves = [(jax.tree_util.keystr(path), _host(leaf))
                  for path, leaf in jax.tree_util.tree_leaves_with_path(policy_params)]
        broken = [path or "params" for path, leaf in leaves
                  if np.issubdtype(leaf.dtype, np.inexact) and not np.isfinite(leaf).all()]
        if broken:
            return (f"train returned parameters with NaN or infinite values (in {', '.join(broken[:3])}"
                    f"{', …' if len(broken) > 3 else ''})")
        if any(not np.array_equal(leaf[0], leaf[1]) for _, leaf in leaves):
            return "two runs with the same key gave different parameters (train is not deterministic)"
        return None

    def act():
        obs, _ = inner_env.reset(jax.random.key(1), inner)
        carry = checks.call("initialize_carry", lambda: initialize_carry(agent), block=True)
        state["step"] = step = jax.jit(agent.act)
        action, new_carry = checks.call("act", step, state["params"], carry, obs, jnp.ones((), bool),
                                        jax.random.key(2), block=True)
        checked_actions(action, None, action_space)  # the run's rule: CellFailure says what is wrong
        if jax.tree.structure(new_carry) != jax.tree.structure(carry) or any(
            a.shape != b.shape for a, b in zip(jax.tree.leaves(new_carry), jax.tree.leaves(carry))
        ):
            return "act must return a carry with the same structure and shapes as initialize_carry()"
        return None

    def start_resets():
        histories, episodes = _memory_probe(track, cell)
        step, policy = state["step"], state["params"]
        fresh = checks.call("initialize_carry", lambda: initialize_carry(agent), block=True)

        def play(history: Sequence[np.ndarray] | None, episode: Sequence[np.ndarray], keys) -> list:
            carry = fresh
            for t, obs in enumerate(history or ()):
                _, carry = checks.call("act", step, policy, carry, obs, np.asarray(t == 0), keys[t], block=True)
            actions = []
            for t, obs in enumerate(episode):
                action, carry = checks.call("act", step, policy, carry, obs, np.asarray(t == 0), keys[t],
                                            block=True)
                actions.append(np.asarray(action).tolist())
            return actions

        for k in range(KEY_SEQUENCES):
            keys = jax.random.split(jax.random.key(100 + k), max(EPISODE_STEPS, HISTORY_STEPS))
            for episode in episodes:
                reference = play(None, episode, keys)
                for history in histories:
                    actions = play(history, episode, keys)
                    if actions != reference:
                        return (f"act carries memory across an episode start: with the same keys, a new episode "
                                f"beginning with {_show(episode[0])} (start=True on its first step) got actions "
                                f"{actions} after an episode that began with {_show(history[0])}, but {reference} "
                                f"from initialize_carry(); when start is True, act must act as from "
                                f"initialize_carry()")
        return None

    def vmappable():
        obs = jnp.zeros((3,) + inner_env.observation_space(inner).shape)
        carries = jax.tree.map(lambda x: jnp.broadcast_to(x, (3,) + x.shape), initialize_carry(agent))
        batched = jax.jit(jax.vmap(agent.act, in_axes=(None, 0, 0, 0, 0)))
        actions, _ = checks.call("act (vmapped)", batched, state["params"], carries, obs, jnp.ones(3, bool),
                                 jax.random.split(jax.random.key(0), 3), block=True)
        if np.asarray(actions).shape != (3, *action_space.shape):
            return (f"vmapped act over 3 streams gave actions of shape {np.asarray(actions).shape}, not "
                    f"{(3, *action_space.shape)}")
        return None

    checks.run("num_envs is a positive integer", num_envs_ok)
    if checks.run(f"train runs under jit(vmap) ({steps} steps), gives finite parameters and is deterministic",
                  train):
        if checks.run("act: valid action and carry", act):
            checks.run("start=True resets the memory (same actions after different previous episodes)",
                       start_resets)
            checks.run("act vmaps over streams", vmappable)


def _check_any(checks: _Checks, factory: Callable, track: Track, cell: tuple[Any, int | None], value: Any) -> None:
    num_envs = 2
    observation_space, action_space = track.spaces(cell[0])
    rng = np.random.default_rng(0)
    observations = [rng.integers(0, 2, (num_envs,) + observation_space.shape).astype(np.float32) for _ in range(6)]

    def build(seed: int, total_steps: int = 1000) -> Any:
        return checks.call(f"the factory (seed {seed})", factory,
                           track.context(num_envs=num_envs, seed=seed, total_steps=total_steps, value=value))

    def act(agent: Any, obs: np.ndarray, start: np.ndarray) -> np.ndarray:
        """The agent's actions, held to the run's rule (:func:`~memgym.leaderboard.running.any_tier.checked_actions`)
        in every check: those that call ``act`` alone are evaluation."""
        return checked_actions(checks.call("act", agent.act, obs, start), num_envs, action_space)

    def acts_validly():
        agent = build(0)
        start = np.ones(num_envs, bool)
        for obs in observations:
            action = act(agent, obs, start)
            checks.call("observe", agent.observe, action, np.zeros(num_envs, np.float32), obs,
                        np.zeros(num_envs, bool), np.zeros(num_envs, bool))
            start = np.zeros(num_envs, bool)
        return None

    def deterministic():
        runs = []
        for _ in range(2):
            agent = build(7, total_steps=0)
            runs.append([act(agent, obs, np.ones(num_envs, bool)) for obs in observations])
        same = all(_same(a, b) for a, b in zip(*runs))
        return None if same else "two agents built with the same seed acted differently"

    def start_resets():
        histories, episodes = _memory_probe(track, cell)
        length = min(len(h) for h in histories)
        for episode in episodes:
            runs = []
            for j in range(len(histories)):  # agent j: stream 0 after history j, stream 1 after history j + 1
                agent = build(7, total_steps=0)
                streams = (histories[j], histories[(j + 1) % len(histories)])
                for t in range(length):
                    act(agent, np.stack([streams[0][t], streams[1][t]]), np.full(num_envs, t == 0))
                runs.append(np.stack([act(agent, np.stack([obs] * num_envs), np.full(num_envs, t == 0))
                                      for t, obs in enumerate(episode)]))
            for stream in range(num_envs):
                for j in range(1, len(runs)):
                    if not _same(runs[j][:, stream], runs[0][:, stream]):
                        before = histories[(j + stream) % len(histories)][0]
                        other = histories[stream % len(histories)][0]
                        return (f"act carries memory across an episode start: agents built with the same seed gave "
                                f"the same new episode, beginning with {_show(episode[0])} (start=True on its first "
                                f"step), actions {runs[j][:, stream].tolist()} after an episode that began with "
                                f"{_show(before)}, but {runs[0][:, stream].tolist()} after one that began with "
                                f"{_show(other)} (environment {stream}; act only, as in evaluation)")
        return None

    # the act-only checks are evaluation: their agents get a budget of 0 steps, so they are evaluated from the
    # first call (an agent that tells training from evaluation by its budget, as the reference agents do)
    # the memory test compares agents built with the same seed: it runs only on an agent that passes the check
    # before it, so that one fault (unseeded randomness) gives one failure
    if checks.run("act returns valid actions; observe accepts a step", acts_validly) and \
            checks.run("same seed, same actions", deterministic):
        checks.run("start=True resets the memory (same actions after different previous episodes)", start_resets)


def _memory_probe(track: Track, cell: tuple[Any, int | None]) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Previous episodes and new ones, played on the checked cell with one fixed action (the memory test:
    :func:`_fixed_action`).

    The previous episodes are chosen among reset seeds 1…64 so that between them their first observations take
    two values (where there are two) of every feature that varies across first observations. The new episodes
    start from seed 0 and from the seed whose first observation differs from seed 0's in the most of those
    features (T-Maze: the other cue), so that an agent that keeps whichever cue it saw (the larger, the first)
    fails with one of them.
    """
    value, limit = cell
    env = track.make_env(value, limit)
    action = _fixed_action(env.action_space)
    try:
        def play(seed: int, length: int) -> list[np.ndarray]:
            obs, _ = env.reset(seed=seed)
            episode = [np.asarray(obs)]
            while len(episode) < length:
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    break
                episode.append(np.asarray(obs))
            return episode

        candidates = range(1, 65)
        firsts = {seed: np.asarray(env.reset(seed=seed)[0]).ravel() for seed in candidates}
        table = np.stack(list(firsts.values()))
        varying = np.flatnonzero((table != table[0]).any(axis=0))
        chosen = [candidates[0]]
        while len(chosen) < 4:
            seen = [{firsts[s][j] for s in chosen} for j in varying]

            def gain(seed: int) -> int:
                return sum(len(values) < 2 and firsts[seed][j] not in values for j, values in zip(varying, seen))

            best = max((s for s in candidates if s not in chosen), key=gain)
            if gain(best) == 0:
                break
            chosen.append(best)
        first = np.asarray(env.reset(seed=0)[0]).ravel()
        other = max(candidates, key=lambda seed: int((firsts[seed][varying] != first[varying]).sum()))
        return ([play(seed, HISTORY_STEPS) for seed in chosen],
                [play(seed, EPISODE_STEPS) for seed in ((0, other) if (firsts[other] != first).any() else (0,))])
    finally:
        env.close()


def _fixed_action(space: Any) -> Any:
    """The memory test's action in ``space``: its lowest (``Discrete``, ``MultiDiscrete``), or the point nearest 0
    within its bounds (``Box``)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return np.asarray(space.start, space.dtype)
    if isinstance(space, gym.spaces.Box):
        return np.clip(np.zeros(space.shape), space.low, space.high).astype(space.dtype)
    raise ValueError(f"the harness acts in Discrete, MultiDiscrete and Box spaces, not {space}")


def _host(leaf: Any) -> np.ndarray:
    """A JAX leaf as a NumPy array (a PRNG key as its key data)."""
    import jax

    if jax.dtypes.issubdtype(getattr(leaf, "dtype", None), jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    return np.asarray(leaf)


def _same(a: Any, b: Any) -> bool:
    """Equal arrays, NaN equal to NaN (a NaN action is reported once, as NaN, not as a difference)."""
    a, b = np.asarray(a), np.asarray(b)
    try:
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    except TypeError:
        return a.shape == b.shape and bool(np.all(a == b))


def _show(obs: np.ndarray) -> str:
    """A short form of an observation for a message."""
    return np.array2string(np.asarray(obs).ravel(), separator=",", precision=3, max_line_width=10_000)
