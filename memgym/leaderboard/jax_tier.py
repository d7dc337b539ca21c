"""The JAX tier: ``jit(vmap(train))`` over a task's cells on a :class:`~memgym.leaderboard.scoring.ScoredEnv`,
then the evaluation episodes in one more vmapped call.

The batches, their sharding over devices, the evaluation keys and the time limit:
docs/leaderboard_internals.md.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from memgym.leaderboard.code_identity import describe_agent, describe_code
from memgym.leaderboard.planning import NUM_ENVS, Task
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.store import cell_record, failure_reason
from memgym.leaderboard.tracks import EVALUATION_SEED, Preset, Track


def run_task(task: Task, budget: Preset, cell_timeout: float | None = None,
             compiled: dict[str, JaxCells] | None = None) -> list[dict[str, Any]]:
    """Train and evaluate the cells of ``task`` in one batch; one record per cell.

    ``compiled`` caches an agent's :class:`JaxCells` across tasks (one compilation per agent).
    """
    started = time.perf_counter()
    agent_info: dict[str, Any] = {"spec": task.spec}

    def records(outcomes: Sequence[tuple[dict, dict] | str]) -> list[dict[str, Any]]:
        seconds = (time.perf_counter() - started) / len(task.cells)
        return [cell_record(task, budget, cell, agent_info, seconds, train=o[0], evaluation=o[1])
                if isinstance(o, tuple) else cell_record(task, budget, cell, agent_info, seconds, reason=o)
                for cell, o in zip(task.cells, outcomes)]

    try:
        factory = load_factory(task.spec)
        agent_info = describe_code(task.spec, factory)
        agent = factory(task.track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps))
        agent_info = describe_agent(task.spec, factory, agent)
        cells = (compiled or {}).get(task.spec)
        if cells is None:
            cells = JaxCells(agent, task.track, budget)
            if compiled is not None:
                compiled[task.spec] = cells
        outcomes = cells.run(task.cells)
        seconds = (time.perf_counter() - started) / len(task.cells)
        if cell_timeout is not None and seconds > cell_timeout:
            return records([f"exceeded the wall-clock limit per cell ({seconds:.0f}s > {cell_timeout}s)"]
                           * len(task.cells))
        return records(outcomes)
    except Exception as error:  # noqa: BLE001 - the agent's fault is its cells' result
        return records([failure_reason(error)] * len(task.cells))


class JaxCells:
    """One JAX-tier agent's compiled training and evaluation, reused for every task of the agent.

    Training is ``jit(vmap(train))`` over cells — (value, seed) pairs. With
    several local devices the cell batch is sharded across them
    (``jax.sharding``, one mesh axis ``cells``; the batch is padded to a multiple
    of the device count by repeating its last cell, whose copies are dropped),
    so k devices run k× the cells per call. Each cell's computation is
    independent of the others, so sharding does not change results.
    """

    def __init__(self, agent: Any, track: Track, budget: Preset):
        import jax

        from memgym.leaderboard.scoring import ScoredEnv, evaluate_jax

        if track.jax_env is None:
            raise ValueError(f"track {track.name!r} has no functional JAX environment")
        self.agent, self.track, self.budget = agent, track, budget
        key = track.score.key
        env = ScoredEnv(track.jax_env(), score_key=key)
        self.train = jax.jit(jax.vmap(lambda k, params: agent.train(k, env, params, budget.total_steps)))
        self.evaluate = jax.jit(
            jax.vmap(
                lambda policy, params, keys, policy_keys: evaluate_jax(
                    agent, policy, track.jax_env(), params, keys, budget.max_episode_steps, score_key=key,
                    policy_keys=policy_keys),
            )
        )

    def batch(self, cells: Sequence[tuple[Any, int]]):
        """Keys, scored params, evaluation params, episode keys and policy keys of ``cells``, padded and sharded
        over local devices."""
        import jax
        import jax.numpy as jnp

        from memgym.leaderboard.scoring import scored_params

        budget, index = self.budget, self.track.sweep.index
        devices = jax.local_devices()
        padded = list(cells) + [cells[-1]] * (-len(cells) % len(devices))
        inner = self.track.jax_params([value for value, _ in padded], budget.max_episode_steps)
        one = scored_params(inner, budget.total_steps, budget.train_window, int(self.agent.num_envs), progress=True)
        params = dataclasses.replace(
            one, window_start=jnp.full(len(padded), one.window_start), curve_step=jnp.full(len(padded), one.curve_step),
            progress_step=jnp.full(len(padded), one.progress_step),
        )
        keys = jnp.stack([jax.random.fold_in(jax.random.key(seed), index(value)) for value, seed in padded])
        eval_keys = jnp.stack([evaluation_keys(index(value), budget.eval_episodes) for value, _ in padded])
        policy_keys = jnp.stack([evaluation_policy_keys(index(value), seed, budget.eval_episodes)
                                 for value, seed in padded])
        batch = (keys, params, inner, eval_keys, policy_keys)
        if len(devices) > 1:
            mesh = jax.sharding.Mesh(np.array(devices), ("cells",))
            batch = jax.device_put(batch, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("cells")))
        return batch

    def run(self, cells: Sequence[tuple[Any, int]]) -> list[tuple[dict, dict] | str]:
        """Train and evaluate ``cells`` (one call each, vmapped over cells).

        Returns per cell ``(train counters, evaluation)`` or the reason the cell failed.
        """
        import jax

        from memgym.leaderboard import progress
        from memgym.leaderboard.scoring import counters, progress_sink

        budget, score = self.budget, self.track.score
        num_actions = self.track.spaces()[1].n
        keys, params, inner, eval_keys, policy_keys = self.batch(cells)
        share = len(cells) / len(keys)  # the batch's padding copies (several devices) are not the task's steps
        with progress_sink(lambda steps: progress.in_flight(steps * share)):
            policy_params, env_state = jax.block_until_ready(self.train(keys, params))
        evaluated = self.evaluate(policy_params, inner, eval_keys, policy_keys)
        success, returns, lengths, invalid = (np.asarray(x) for x in evaluated)
        out: list[tuple[dict, dict] | str] = []
        for i in range(len(cells)):
            train = counters(jax.tree.map(lambda x: x[i], env_state), total=score.total)
            finite = all(np.isfinite(np.asarray(leaf[i])).all() for leaf in jax.tree.leaves(policy_params)
                         if np.issubdtype(np.asarray(leaf).dtype, np.inexact))
            if not finite:
                out.append("the trained policy parameters contain NaN or infinite values")
            elif train["invalid_actions"]:
                out.append(f"the agent emitted {train['invalid_actions']} invalid actions during training "
                           f"(the action space is Discrete({num_actions}))")
            elif invalid[i].sum():
                out.append(f"the agent emitted {int(invalid[i].sum())} invalid actions during evaluation "
                           f"(the action space is Discrete({num_actions}))")
            else:
                out.append((train, {
                    "episodes": int(budget.eval_episodes),
                    score.name: float(success[i].mean()),
                    "mean_return": float(returns[i].mean()),
                    "mean_length": float(lengths[i].mean()),
                }))
        return out


def evaluation_keys(index: int, episodes: int):
    """The evaluation episodes' keys of a swept value's integer (a corridor length), shared by every agent and seed."""
    import jax

    return jax.random.split(jax.random.fold_in(jax.random.key(EVALUATION_SEED), index), episodes)


def evaluation_policy_keys(index: int, seed: int, episodes: int):
    """The keys of the policy in the evaluation of cell ``(index, seed)``, one per episode."""
    import jax

    cell = jax.random.fold_in(jax.random.key(seed), index)  # the key train gets
    return jax.random.split(jax.random.fold_in(cell, EVALUATION_SEED), episodes)
