"""``memgym leaderboard check AGENT``: a fast conformance check that explains each failure.

JAX tier: the factory builds an agent; ``train`` runs under ``jit(vmap(...))`` on a
tiny budget and returns the harness's environment state; two equal keys give equal
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

from memgym.leaderboard.protocol import AgentContext, load_factory, tier
from memgym.leaderboard.runner import tmaze_spaces

Check = tuple[str, bool, str]


def _attempt(name: str, test: Callable[[], str | None]) -> Check:
    try:
        problem = test()
    except (ValueError, TypeError) as error:  # a clear message of ours or of the agent's
        return name, False, f"{type(error).__name__}: {error}"
    except Exception as error:  # noqa: BLE001 - every failure is reported, not raised
        return name, False, f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}"
    return name, problem is None, problem or ""


def check_agent(spec: str, *, corridor_length: int = 3, budget: int | None = None) -> list[Check]:
    """Run every check; a list of ``(name, passed, explanation)``."""
    results: list[Check] = []
    observation_space, action_space = tmaze_spaces()
    state: dict[str, Any] = {}

    def build() -> str | None:
        factory = load_factory(spec)
        state["factory"] = factory
        state["agent"] = factory(AgentContext(observation_space, action_space, 2, 0, budget or 4096))
        state["tier"] = tier(state["agent"])
        return None

    results.append(_attempt("factory builds an agent of a known tier", build))
    if not results[-1][1]:
        return results
    if state["tier"] == "jax":
        results += _check_jax(state["agent"], corridor_length, budget)
    else:
        results += _check_any(state["factory"], observation_space, action_space)
    return results


def _check_jax(agent: Any, corridor_length: int, budget: int | None) -> list[Check]:
    import jax
    import jax.numpy as jnp

    from memgym.envs.tmaze_jax import TMazeJax, tmaze_params
    from memgym.leaderboard.scoring import ScoredEnv, ScoredParams, ScoredState

    env = ScoredEnv(TMazeJax())
    params = ScoredParams(tmaze_params(corridor_length, max_episode_steps=50), jnp.zeros((), jnp.int32),
                          jnp.ones((), jnp.int32))
    num_envs = agent.num_envs
    steps = budget or 4 * 256 * int(num_envs)
    state: dict[str, Any] = {}
    results: list[Check] = []

    def num_envs_ok():
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            return f"num_envs must be a positive int, got {num_envs!r}"
        return None

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
        obs, _ = TMazeJax().reset(jax.random.key(1), params.inner)
        carry = agent.init_carry()
        step = jax.jit(agent.act)
        action, new_carry = step(state["params"], carry, obs, jnp.ones((), bool), jax.random.key(2))
        action = np.asarray(action)
        if action.shape != () or not np.issubdtype(action.dtype, np.integer):
            return f"act must return a scalar integer action, got shape {action.shape} dtype {action.dtype}"
        if not 0 <= int(action) < 4:
            return f"act returned action {int(action)}, outside Discrete(4)"
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
        obs = jnp.zeros((3, params.inner.obs_size))
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


def _check_any(factory: Callable, observation_space, action_space) -> list[Check]:
    num_envs = 2
    rng = np.random.default_rng(0)
    observations = [rng.integers(0, 2, (num_envs,) + observation_space.shape).astype(np.float32) for _ in range(6)]

    def acts_validly():
        agent = factory(AgentContext(observation_space, action_space, num_envs, 0, 1000))
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
            agent = factory(AgentContext(observation_space, action_space, num_envs, 7, 1000))
            runs.append([np.asarray(agent.act(obs, np.ones(num_envs, bool))).tolist() for obs in observations])
        return None if runs[0] == runs[1] else "two agents built with the same seed acted differently"

    return [_attempt("act returns valid actions; observe accepts a step", acts_validly),
            _attempt("same seed, same actions", deterministic)]
