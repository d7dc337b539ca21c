"""``memgym leaderboard check AGENT [--track NAME]``: a fast conformance check that explains each failure.

Both tiers: the factory builds an agent of a tier the track runs. JAX tier:
``train`` runs under ``jit(vmap(...))`` on a tiny budget (the track's
``check_cell``) and returns the harness's environment state; two equal keys give equal
parameters (determinism); ``act`` gives a valid action of the right shape and dtype
and a carry with the structure of ``init_carry()``; and ``begin`` resets the memory —
acting on an episode's first observation gives the same result whatever carry
came before.

Any-framework tier: ``act`` returns one valid action per environment; ``observe``
accepts a step; two agents built with the same seed act identically on the same
observations.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from memgym.leaderboard.protocol import load_factory, tier
from memgym.leaderboard.track import Track
from memgym.leaderboard.tracks import TMAZE
from memgym.leaderboard.validation import check_positive

Check = tuple[str, bool, str]


def _attempt(name: str, test: Callable[[], str | None]) -> Check:
    try:
        problem = test()
    except (ValueError, TypeError) as error:  # a clear message of ours or of the agent's
        return name, False, f"{type(error).__name__}: {error}"
    except Exception as error:  # noqa: BLE001 - every failure is reported, not raised
        return name, False, f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}"
    return name, problem is None, problem or ""


def check_agent(spec: str, *, track: Track = TMAZE, budget: int | None = None) -> list[Check]:
    """Run every check on the track's ``check_cell``; a list of ``(name, passed, explanation)``."""
    results: list[Check] = []
    state: dict[str, Any] = {}

    def build() -> str | None:
        factory = load_factory(spec)
        state["factory"] = factory
        state["agent"] = factory(track.context(num_envs=2, seed=0, total_steps=budget or 4096))
        state["tier"] = tier(state["agent"])
        track.accept(state["tier"], spec)
        return None

    results.append(_attempt("factory builds an agent of a known tier that the track runs", build))
    if not results[-1][1]:
        return results
    if state["tier"] == "jax":
        results += _check_jax(state["agent"], track, budget)
    else:
        results += _check_any(state["factory"], track)
    return results


def _check_jax(agent: Any, track: Track, budget: int | None) -> list[Check]:
    import jax
    import jax.numpy as jnp

    from memgym.leaderboard.scoring import ScoredEnv, ScoredParams, ScoredState

    value, max_episode_steps = track.check_cell
    inner_env = track.jax_env()
    env = ScoredEnv(inner_env, score_key=track.score.key)
    inner = jax.tree.map(lambda x: x[0], track.jax_params([value], max_episode_steps))  # one cell, unbatched
    params = ScoredParams(inner, jnp.zeros((), jnp.int32), jnp.ones((), jnp.int32))
    num_actions = inner_env.action_space(inner).n
    num_envs = agent.num_envs
    steps = budget or 4 * 256 * int(num_envs)
    state: dict[str, Any] = {}
    results: list[Check] = []

    def num_envs_ok():
        check_positive(num_envs=num_envs)

    def train():
        key = jax.random.key(0)
        run = jax.jit(jax.vmap(lambda k: agent.train(k, env, params, steps)))
        policy_params, env_state = run(jnp.stack([key, key]))
        state["params"] = jax.tree.map(lambda x: x[0], policy_params)
        if not isinstance(env_state, ScoredState):
            return f"train must return (params, final env state); the env state is a {type(env_state).__name__}"
        taken = int(np.asarray(env_state.steps).sum()) // 2
        if abs(taken - steps) > max(steps // 10, int(num_envs)):
            return f"train was asked for {steps} environment steps but stepped the environment {taken} times"
        for leaf in jax.tree.leaves(policy_params):
            if not np.array_equal(np.asarray(leaf[0]), np.asarray(leaf[1])):
                return "two runs with the same key gave different parameters (train is not deterministic)"
        return None

    def act():
        obs, _ = inner_env.reset(jax.random.key(1), inner)
        carry = agent.init_carry()
        step = jax.jit(agent.act)
        action, new_carry = step(state["params"], carry, obs, jnp.ones((), bool), jax.random.key(2))
        action = np.asarray(action)
        if action.shape != () or not np.issubdtype(action.dtype, np.integer):
            return f"act must return a scalar integer action, got shape {action.shape} dtype {action.dtype}"
        if not 0 <= int(action) < num_actions:
            return f"act returned action {int(action)}, outside Discrete({num_actions})"
        if jax.tree.structure(new_carry) != jax.tree.structure(carry) or any(
            a.shape != b.shape for a, b in zip(jax.tree.leaves(new_carry), jax.tree.leaves(carry))
        ):
            return "act must return a carry with the same structure and shapes as init_carry()"
        # begin resets the memory: after some steps, a first observation acts like from a fresh carry.
        walked = new_carry
        for i in range(5):
            _, walked = step(state["params"], walked, obs * (i % 2), jnp.zeros((), bool), jax.random.key(3 + i))
        fresh = step(state["params"], carry, obs, jnp.ones((), bool), jax.random.key(9))
        reset = step(state["params"], walked, obs, jnp.ones((), bool), jax.random.key(9))
        for a, b in zip(jax.tree.leaves(fresh), jax.tree.leaves(reset)):
            if not np.allclose(np.asarray(a), np.asarray(b), atol=1e-5):
                return "acting with begin=True depends on the previous carry: memory is not reset at episode starts"
        return None

    def vmappable():
        obs = jnp.zeros((3,) + inner_env.observation_space(inner).shape)
        carries = jax.tree.map(lambda x: jnp.broadcast_to(x, (3,) + x.shape), agent.init_carry())
        batched = jax.jit(jax.vmap(agent.act, in_axes=(None, 0, 0, 0, 0)))
        actions, _ = batched(state["params"], carries, obs, jnp.ones(3, bool), jax.random.split(jax.random.key(0), 3))
        if np.asarray(actions).shape != (3,):
            return f"vmapped act over 3 streams gave actions of shape {np.asarray(actions).shape}"
        return None

    results.append(_attempt("num_envs is a positive integer", num_envs_ok))
    results.append(_attempt(f"train runs under jit(vmap) ({steps} steps) and is deterministic", train))
    if results[-1][1]:
        results.append(_attempt("act: valid action and carry; begin resets the memory", act))
        results.append(_attempt("act vmaps over streams", vmappable))
    return results


def _check_any(factory: Callable, track: Track) -> list[Check]:
    num_envs = 2
    observation_space, action_space = track.spaces()
    rng = np.random.default_rng(0)
    observations = [rng.integers(0, 2, (num_envs,) + observation_space.shape).astype(np.float32) for _ in range(6)]

    def acts_validly():
        agent = factory(track.context(num_envs=num_envs, seed=0, total_steps=1000))
        begin = np.ones(num_envs, bool)
        for obs in observations:
            action = np.asarray(agent.act(obs, begin))
            if action.shape != (num_envs,) or not np.issubdtype(action.dtype, np.integer):
                return f"act must return an integer array of shape ({num_envs},), got {action.shape} {action.dtype}"
            if (action < 0).any() or (action >= action_space.n).any():
                return f"act returned {action.tolist()}, outside Discrete({action_space.n})"
            agent.observe(action, np.zeros(num_envs, np.float32), obs, np.zeros(num_envs, bool),
                          np.zeros(num_envs, bool))
            begin = np.zeros(num_envs, bool)
        return None

    def deterministic():
        runs = []
        for _ in range(2):
            agent = factory(track.context(num_envs=num_envs, seed=7, total_steps=1000))
            runs.append([np.asarray(agent.act(obs, np.ones(num_envs, bool))).tolist() for obs in observations])
        return None if runs[0] == runs[1] else "two agents built with the same seed acted differently"

    return [_attempt("act returns valid actions; observe accepts a step", acts_validly),
            _attempt("same seed, same actions", deterministic)]
