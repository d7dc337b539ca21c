"""Run a leaderboard: every (agent, corridor length, seed) cell, scored by the harness, stored once.

For a JAX-tier agent all missing seeds of one corridor length train in one
``jax.jit(jax.vmap(train))`` call on a :class:`~memgym.leaderboard.scoring.ScoredEnv`,
then play the evaluation episodes in one more. An any-framework agent trains
cell by cell on a Gymnasium vector env of T-Mazes that the harness steps itself.
Finished cells go to the :class:`~memgym.leaderboard.store.ResultsStore` as soon
as they exist, so an interrupted run resumes where it stopped.

Evaluation episodes use fixed reset seeds derived from the corridor length only
(:func:`evaluation_keys`), so every agent faces the same evaluation mazes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from memgym.envs import tmaze
from memgym.leaderboard.protocol import AgentContext, agent_id, load_factory, tier
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


def _record(spec: str, kind: str, budget: Preset, length: int, seed: int, train: dict, evaluation: dict,
            seconds: float) -> dict[str, Any]:
    window = train["window_successes"] / train["window_episodes"] if train["window_episodes"] else 0.0
    return {
        "agent": spec,
        "tier": kind,
        "corridor_length": length,
        "seed": seed,
        "preset": dataclasses.asdict(budget),
        "train": dict(train, success_rate=window),
        "eval": evaluation,
        "wall_time_s": seconds,
        "provenance": provenance(),
    }


class JaxCells:
    """One JAX-tier agent's compiled training and evaluation, reused for every corridor length.

    The corridor length is a traced field of the T-Maze params, so one compilation per
    budget serves the whole grid.
    """

    def __init__(self, agent: Any, budget: Preset):
        import jax

        from memgym.envs.tmaze_jax import TMazeJax
        from memgym.leaderboard.scoring import ScoredEnv, evaluate_jax

        self.agent, self.budget = agent, budget
        env = ScoredEnv(TMazeJax())
        self.train = jax.jit(
            jax.vmap(lambda key, params: agent.train(key, env, params, budget.total_steps), in_axes=(0, None))
        )
        self.evaluate = jax.jit(
            jax.vmap(
                lambda policy, params, keys: evaluate_jax(agent, policy, TMazeJax(), params, keys,
                                                          budget.max_episode_steps),
                in_axes=(0, None, None),
            )
        )

    def run(self, spec: str, length: int, seeds: Sequence[int]) -> list[dict]:
        """Train and evaluate every seed of one corridor length (one call each, vmapped over seeds)."""
        import jax
        import jax.numpy as jnp

        from memgym.envs.tmaze_jax import tmaze_params
        from memgym.leaderboard.scoring import ScoredParams, counters

        budget = self.budget
        started = time.perf_counter()
        inner = tmaze_params(length, max_episode_steps=budget.max_episode_steps)
        window_start = max(0, (budget.total_steps - budget.train_window) // int(self.agent.num_envs))
        params = ScoredParams(inner, jnp.asarray(window_start, jnp.int32))
        keys = jnp.stack([jax.random.fold_in(jax.random.key(seed), length) for seed in seeds])
        policy_params, env_state = self.train(keys, params)
        evaluated = self.evaluate(policy_params, inner, evaluation_keys(length, budget.eval_episodes))
        success, returns, lengths = (np.asarray(x) for x in evaluated)
        seconds = (time.perf_counter() - started) / len(seeds)
        records = []
        for i, seed in enumerate(seeds):
            evaluation = {
                "episodes": int(budget.eval_episodes),
                "success_rate": float(success[i].mean()),
                "mean_return": float(returns[i].mean()),
                "mean_length": float(lengths[i].mean()),
            }
            train = counters(jax.tree.map(lambda x: x[i], env_state))
            records.append(_record(spec, "jax", budget, length, seed, train, evaluation, seconds))
        return records


def _vector_env(length: int, num_envs: int, max_episode_steps: int) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv(
        [lambda: tmaze.TMazeEnv(corridor_length=length, max_episode_steps=max_episode_steps)] * num_envs,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def run_any_cell(factory: Callable, spec: str, budget: Preset, length: int, seed: int, num_envs: int = 8) -> dict:
    """Train an any-framework agent on a vector env the harness steps and counts, then evaluate it."""
    started = time.perf_counter()
    observation_space, action_space = tmaze_spaces()
    agent = factory(AgentContext(observation_space, action_space, num_envs, seed, budget.total_steps))
    envs = _vector_env(length, num_envs, budget.max_episode_steps)
    obs, _ = envs.reset(seed=seed)
    begin = np.ones(num_envs, bool)
    totals = dict(steps=0, episodes=0, successes=0, window_episodes=0, window_successes=0)
    window_start = budget.total_steps - budget.train_window
    for _ in range(budget.total_steps // num_envs):
        action = np.asarray(agent.act(obs, begin))
        next_obs, reward, terminated, truncated, info = envs.step(action)
        done = terminated | truncated
        final_obs, success = next_obs.copy(), np.zeros(num_envs, bool)
        for i in np.flatnonzero(done):  # episode ends only (SAME_STEP autoreset put the new first obs in next_obs)
            final_obs[i] = info["final_obs"][i]
            success[i] = bool(info["final_info"]["success"][i])
        agent.observe(action, reward, final_obs, terminated, truncated)
        in_window = totals["steps"] >= window_start
        totals["steps"] += num_envs
        totals["episodes"] += int(done.sum())
        totals["successes"] += int(success.sum())
        if in_window:
            totals["window_episodes"] += int(done.sum())
            totals["window_successes"] += int(success.sum())
        obs, begin = next_obs, done
    envs.close()
    evaluation = evaluate_any(agent, length, budget, num_envs)
    return _record(spec, "any", budget, length, seed, totals, evaluation, time.perf_counter() - started)


def evaluate_any(agent: Any, length: int, budget: Preset, num_envs: int) -> dict[str, Any]:
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
        while not finished.all():
            obs, reward, terminated, truncated, info = envs.step(np.asarray(agent.act(obs, begin)))
            done = terminated | truncated
            live = ~finished
            returns += np.where(live, reward, 0.0)
            steps += live
            for i in np.flatnonzero(done & live):
                success[i] = bool(info["final_info"]["success"][i])
            finished |= done
            begin = done
        envs.close()
        outcomes += list(zip(success.tolist(), returns.tolist(), steps.tolist()))
    outcomes = outcomes[: budget.eval_episodes]
    return {
        "episodes": len(outcomes),
        "success_rate": float(np.mean([o[0] for o in outcomes])),
        "mean_return": float(np.mean([o[1] for o in outcomes])),
        "mean_length": float(np.mean([o[2] for o in outcomes])),
    }


def run(agents: Sequence[str], budget: Preset, results: str, *, log: Callable[[str], None] = print) -> ResultsStore:
    """Fill every missing cell of ``agents`` × ``budget`` into the store at ``results``."""
    store = ResultsStore(results)
    observation_space, action_space = tmaze_spaces()
    for spec in agents:
        name = agent_id(spec)
        factory = load_factory(spec)
        context = AgentContext(observation_space, action_space, 8, 0, budget.total_steps)
        kind = tier(factory(context))
        cells = JaxCells(factory(context), budget) if kind == "jax" else None
        for length in budget.corridor_lengths:
            stored = [s for s in range(budget.seeds) if store.has(name, length, s)]
            for seed in stored:
                kept = store.read(name, length, seed)["preset"]
                if kept != dataclasses.asdict(budget) | {"corridor_lengths": kept["corridor_lengths"]}:
                    raise ValueError(
                        f"{store.path(name, length, seed)} was produced with a different budget ({kept}); "
                        f"use another --results directory for this budget ({dataclasses.asdict(budget)})"
                    )
            missing = [s for s in range(budget.seeds) if s not in stored]
            if not missing:
                log(f"[{spec}] L={length}: all {budget.seeds} seeds stored, skipping")
                continue
            log(f"[{spec}] L={length}: training seeds {missing} for {budget.total_steps:,} steps ({kind} tier) ...")
            started = time.perf_counter()
            if kind == "jax":
                records = cells.run(spec, length, missing)
            else:
                records = [run_any_cell(factory, spec, budget, length, seed) for seed in missing]
            for record in records:
                store.write(name, length, record["seed"], record)
            elapsed = time.perf_counter() - started
            train = np.mean([r["train"]["success_rate"] for r in records])
            evaluation = np.mean([r["eval"]["success_rate"] for r in records])
            steps_per_s = budget.total_steps * len(records) / elapsed
            log(f"[{spec}] L={length}: done in {elapsed:.0f}s ({steps_per_s:,.0f} steps/s); "
                f"train success {train:.2f}, eval success {evaluation:.2f}")
    return store
