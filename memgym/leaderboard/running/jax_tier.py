"""The JAX tier: ``jit(vmap(train))`` over a task's cells on a :class:`~memgym.leaderboard.scoring.ScoredEnv`,
then the evaluation episodes in one more vmapped call; a lone cell trains and evaluates unbatched
(:class:`OverCells`).

**Resumable cells.** With a checkpoint folder (``memgym leaderboard run --checkpoints DIR``), an agent that
offers its run in pieces (:data:`PIECES`: ``train_updates``, ``train_start``, ``train_more``, ``train_end``, as
the reference agents do) trains a batch in :data:`CHECKPOINT_PIECES` pieces and writes the batch's whole
training state to DIR after each (atomically); a batch interrupted there resumes from its last piece, with the
seal it started with, and its files are removed once it is trained (a checkpoint that cannot be read is kept
aside, renamed ``…-unreadable-<time>.npz``, and the batch trains from its start). The pieces add up to the same run as
``train``. A batch whose training outlasts one sitting (the thesis configuration on a CPU) needs it.

The batches, their sharding over devices, the evaluation keys and the time limit:
docs/leaderboard_internals.md.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memgym.leaderboard.limits import alarm, over_time
from memgym.leaderboard.running.code_identity import COMPUTATION, describe_agent, describe_code
from memgym.leaderboard.running.planning import NUM_ENVS, Task, cell_record
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.store import AGENT_FAULTS, failure_reason
from memgym.leaderboard.tracks import EVALUATION_SEED, Preset, Track


#: The methods of an agent that trains in pieces (module docstring).
PIECES = ("train_updates", "train_start", "train_more", "train_end")
#: Pieces of a checkpointed batch's run: a checkpoint every 5 % of its updates.
CHECKPOINT_PIECES = 20


def run_task(task: Task, budget: Preset, cell_timeout: float | None = None,
             compiled: dict[tuple[str, Any], JaxCells] | None = None,
             checkpoints: str | Path | None = None) -> list[dict[str, Any]]:
    """Train and evaluate the cells of ``task`` in one batch; one record per cell.

    ``compiled`` caches an agent's :class:`JaxCells` across tasks (one compilation per agent, or per value on a
    track whose values have their own env: ``Track.per_value_env``, where a task holds one value).
    ``checkpoints``: the folder of resumable batches (module docstring); None: one call trains the batch.
    """
    started = time.perf_counter()
    agent_info: dict[str, Any] = {"spec": task.spec}
    vmapped = None  # how the batch trained, once known (OverCells)
    earlier = 0.0  # a resumed batch's seconds in its earlier sittings

    def records(outcomes: Sequence[tuple[dict, dict] | str]) -> list[dict[str, Any]]:
        seconds = (earlier + time.perf_counter() - started) / len(task.cells)
        return [cell_record(task, budget, cell, agent_info, seconds, train=o[0], evaluation=o[1], policy=o[2],
                            vmapped=vmapped)
                if isinstance(o, tuple) else cell_record(task, budget, cell, agent_info, seconds, reason=o,
                                                         vmapped=vmapped)
                for cell, o in zip(task.cells, outcomes)]

    try:
        factory = load_factory(task.spec)
        agent_info = describe_code(task.spec, factory)
        value = task.track.env_key(task.cells[0][0])
        with alarm(cell_timeout):  # a factory that hangs fails its cells
            agent = factory(task.track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps,
                                               value=value))
        agent_info = describe_agent(task.spec, factory, agent)
        cells = (compiled or {}).get((task.spec, value))
        if cells is None:
            cells = JaxCells(agent, task.track, budget, value)
            if compiled is not None:
                compiled[task.spec, value] = cells
        try:
            agent_info[COMPUTATION] = cells.computation()
        except Exception:  # noqa: BLE001 - not traceable on the inner env (it reads the harness's counters): code hash
            pass
        vmapped = cells.vmapped(task.cells)
        checkpoint = None if checkpoints is None else checkpoint_path(checkpoints, task, budget, agent_info, vmapped)
        if checkpoint is not None and checkpoint.exists():
            from memgym.agents.checkpoints import checkpoint_seconds

            earlier = checkpoint_seconds(checkpoint)
        outcomes = cells.run(task.cells, checkpoint)
        seconds = (earlier + time.perf_counter() - started) / len(task.cells)
        if cell_timeout is not None and seconds > cell_timeout:
            return records([over_time(seconds, cell_timeout)]
                           * len(task.cells))
        return records(outcomes)
    except AGENT_FAULTS as error:  # the agent's fault is its cells' result
        return records([failure_reason(error)] * len(task.cells))


def computation(spec: str, track: Track, budget: Preset, value: Any = None) -> str:
    """What agent ``spec`` computes in its cells of ``value``'s env (``Track.env_key``) on ``budget``
    (:func:`agent_computation`)."""
    factory = load_factory(spec)
    agent = factory(track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps, value=value))
    return agent_computation(agent, track, budget, value)


def agent_computation(agent: Any, track: Track, budget: Preset, value: Any = None) -> str:
    """The computation hash (:func:`~memgym.leaderboard.running.code_identity.computation_sha256`) of a JAX-tier agent:
    the jaxprs of its ``train`` on the track's environment for ``budget``'s steps, and of its ``act`` on the
    parameters ``train`` returns, traced for one cell and never run.

    It covers everything the agent computes: its algorithm, network, initializers and defaults, and the
    environment's dynamics and rewards (``train`` steps the environment). It leaves out the harness's own
    counting and evaluation loop (:class:`~memgym.leaderboard.scoring.ScoredEnv`,
    :func:`~memgym.leaderboard.scoring.evaluate_jax`), which are memgym's, not the agent's, and the budget's
    other figures (seeds, evaluation episodes), which the records hold. The value and the seed are traced
    inputs, so one hash serves every value of an env and every seed. ``value``: the env's (``Track.env_key``).
    Raises what ``train`` raises when traced on the track's own environment (an agent that reads the harness's
    counters); such an agent is identified by its code hash alone.
    """
    import jax
    import jax.numpy as jnp

    from memgym.leaderboard.running.code_identity import computation_sha256
    from memgym.leaderboard.protocol import initialize_carry

    env = track.jax_env(value)
    params = jax.tree.map(lambda leaf: leaf[0], track.jax_params(
        [value if track.per_value_env else budget.values[0]], budget.max_episode_steps))
    key = jax.random.key(0)

    def train(key, params):
        return agent.train(key, env, params, budget.total_steps)

    policy, _ = jax.eval_shape(train, key, params)
    obs = jax.eval_shape(env.reset, key, params)[0]
    act = jax.make_jaxpr(agent.act)(policy, initialize_carry(agent), obs, jnp.bool_(True), key)
    return computation_sha256(jax.make_jaxpr(train)(key, params), act)


#: Cells of at least this many training steps report their progress from inside the compiled training call
#: (a host callback every 1 % of the run); shorter ones report when the call returns. JAX's persistent
#: compilation cache does not store an executable with a host callback (:mod:`memgym.compilation_cache`), so
#: short runs, whose time is mostly compilation, are the ones it can serve. The callback changes no result.
IN_FLIGHT_PROGRESS_STEPS = 1_000_000


class OverCells:
    """``fn`` over a batch of cells: ``jit(vmap(fn))``, or for a batch of one cell ``jit(fn)`` on that cell, its
    outputs given their cell axis back (unless ``vmap_lone``).

    On a CPU ``vmap`` over one cell is slower than the cell alone: XLA's batched matrix products. Measured side
    by side (``benchmarks/train_speed.py --models arelit gru lstm --runs 1``: A2C on the T-Maze at L = 120, one
    run on a 2-core AMD EPYC with AVX-512 beside two other jobs), thesis-size AReLiT trains at 1,515 steps/s
    alone and 793 vmapped over one run, GRU at 2,577 and 1,868, LSTM at 2,472 and 2,119. The two differ in the
    last bits of the numbers (XLA rounds the two programs differently), so a record says which ran
    (``vmapped``) and a verification re-trains its cell the same way.
    """

    def __init__(self, fn: Any, vmap_lone: bool = False):
        import jax

        self.batched, self.alone, self.vmap_lone = jax.jit(jax.vmap(fn)), jax.jit(fn), vmap_lone

    def vmapped(self, cells: int) -> bool:
        """Whether a batch of ``cells`` cells (the padded batch) runs vmapped."""
        return cells != 1 or self.vmap_lone

    def __call__(self, *args: Any) -> Any:
        import jax

        if self.vmapped(len(jax.tree.leaves(args)[0])):
            return self.batched(*args)
        return jax.tree.map(lambda leaf: leaf[None], self.alone(*jax.tree.map(lambda leaf: leaf[0], args)))


class JaxCells:
    """One JAX-tier agent's compiled training and evaluation, reused for every task of the agent.

    Training is ``jit(vmap(train))`` over cells — (value, seed) pairs. With
    several local devices the cell batch is sharded across them
    (``jax.sharding``, one mesh axis ``cells``; the batch is padded to a multiple
    of the device count by repeating its last cell, whose copies are dropped),
    so k devices run k× the cells per call. Each cell's computation is
    independent of the others, so sharding does not change results.

    A batch of one cell (one device) trains and evaluates unbatched (:class:`OverCells`), unless ``vmap_lone``:
    what records made before memgym ran a lone cell unbatched need to be re-trained the same way.

    ``value``: the value whose env the cells use (``Track.env_key``: None where one env serves every value);
    every cell given to it must have that env.
    """

    def __init__(self, agent: Any, track: Track, budget: Preset, value: Any = None, vmap_lone: bool = False):
        from memgym.leaderboard.scoring import ScoredEnv, evaluate_jax

        if track.jax_env is None:
            raise ValueError(f"track {track.name!r} has no functional JAX environment")
        self.agent, self.track, self.budget, self.value = agent, track, budget, value
        self._computation: str | None = None
        key, counted, steps = track.score.key, track.score.counted, track.evaluation_steps(budget, value)
        env = ScoredEnv(track.jax_env(value), score_key=key, units=track.score_units)
        over = functools.partial(OverCells, vmap_lone=vmap_lone)
        self.train = over(lambda k, params: agent.train(k, env, params, budget.total_steps))
        self.pieces = all(callable(getattr(agent, name, None)) for name in PIECES)
        if self.pieces:
            self.train_start = over(lambda k, params: agent.train_start(k, env, params, budget.total_steps))
            self.train_more = functools.cache(lambda n: over(
                lambda state, params: agent.train_more(state, env, params, budget.total_steps, n)))
            self.train_end = over(agent.train_end)
        self.evaluate = over(
            lambda policy, params, keys, policy_keys: evaluate_jax(
                agent, policy, track.jax_env(value), params, keys, steps, score_key=key,
                policy_keys=policy_keys, counted=counted))

    def vmapped(self, cells: Sequence[tuple[Any, int]]) -> bool:
        """Whether ``cells`` train vmapped (:class:`OverCells`): several cells, or one padded for several devices,
        or ``vmap_lone``."""
        import jax

        devices = len(jax.local_devices())
        return self.train.vmapped(len(cells) + (-len(cells) % devices))

    def batch(self, cells: Sequence[tuple[Any, int]], seal: np.ndarray | None = None):
        """Keys, scored params (sealed with ``seal``), evaluation params, episode keys and policy keys of
        ``cells``, padded and sharded over local devices."""
        import jax
        import jax.numpy as jnp

        from memgym.leaderboard.scoring import scored_params

        budget, index = self.budget, self.track.sweep.index
        if any(self.track.env_key(value) != self.value for value, _ in cells):
            raise ValueError(f"cells {list(cells)} are not all cells of the env of {self.value!r}")
        devices = jax.local_devices()
        padded = list(cells) + [cells[-1]] * (-len(cells) % len(devices))
        inner = self.track.jax_params([value for value, _ in padded], budget.max_episode_steps)
        one = scored_params(inner, budget.total_steps, budget.train_window, int(self.agent.num_envs),
                            progress=budget.total_steps >= IN_FLIGHT_PROGRESS_STEPS, seal=seal)
        stacked = {name: jnp.broadcast_to(getattr(one, name), (len(padded), *jnp.shape(getattr(one, name))))
                   for name in ("window_start", "curve_step", "progress_step", "seal") if getattr(one, name) is not None}
        params = dataclasses.replace(one, **stacked)
        keys = jnp.stack([jax.random.fold_in(jax.random.key(seed), index(value)) for value, seed in padded])
        eval_keys = jnp.stack([evaluation_keys(index(value), budget.eval_episodes) for value, _ in padded])
        policy_keys = jnp.stack([evaluation_policy_keys(index(value), seed, budget.eval_episodes)
                                 for value, seed in padded])
        batch = (keys, params, inner, eval_keys, policy_keys)
        if len(devices) > 1:
            mesh = jax.sharding.Mesh(np.array(devices), ("cells",))
            batch = jax.device_put(batch, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("cells")))
        return batch

    def computation(self) -> str:
        """What the agent computes in these cells (:func:`agent_computation`), traced once per instance."""
        if self._computation is None:
            self._computation = agent_computation(self.agent, self.track, self.budget, self.value)
        return self._computation

    def train_cells(self, cells: Sequence[tuple[Any, int]], seal: np.ndarray, checkpoint: Path | None = None):
        """Train ``cells`` in one call (in resumable pieces where ``checkpoint`` is given and the agent has
        :data:`PIECES`); ``(policy params, final ScoredState, evaluation inputs)``, batched over the (padded)
        cells. The evaluation inputs are ``(inner params, episode keys, policy keys)``."""
        import jax

        from memgym.leaderboard.running import progress
        from memgym.leaderboard.scoring import progress_sink

        keys, params, inner, eval_keys, policy_keys = self.batch(cells, seal)
        share = len(cells) / len(keys)  # the batch's padding copies (several devices) are not the task's steps
        with progress_sink(lambda steps: progress.in_flight(steps * share)):
            if checkpoint is not None and self.pieces:
                steps = len(cells) * self.budget.total_steps
                policy_params, env_state = self.train_in_pieces(
                    keys, params, checkpoint, lambda fraction: progress.in_flight(fraction * steps, True))
            else:
                policy_params, env_state = jax.block_until_ready(self.train(keys, params))
        return policy_params, env_state, (inner, eval_keys, policy_keys)

    def train_in_pieces(self, keys: Any, params: Any, checkpoint: Path,
                        resumed: Callable[[float], None] = lambda fraction: None) -> tuple[Any, Any]:
        """The batch's run in :data:`CHECKPOINT_PIECES` calls of ``train_more``, its state written to
        ``checkpoint`` after each and resumed from it (module docstring), with the seconds the batch has trained
        in all its sittings (:func:`~memgym.agents.checkpoints.checkpoint_seconds`). On resuming, ``resumed``
        gets the fraction of the training the checkpoint holds."""
        import jax

        from memgym.agents.checkpoints import checkpoint_seconds, load_checkpoint, save_checkpoint

        started, earlier = time.perf_counter(), 0.0
        state, done = self.train_start(keys, params), 0
        if checkpoint.exists():
            try:
                state, done = load_checkpoint(checkpoint, state)
                earlier = checkpoint_seconds(checkpoint)
            except (OSError, ValueError, KeyError, zipfile.BadZipFile):  # unreadable: kept aside, trained anew
                checkpoint.replace(checkpoint.with_name(f"{checkpoint.stem}-unreadable-{time.time_ns()}.npz"))
        total = int(self.agent.train_updates(self.budget.total_steps))
        if done:
            resumed(done / total)
        piece = max(1, -(-total // CHECKPOINT_PIECES))
        while done < total:
            updates = min(piece, total - done)
            state = jax.block_until_ready(self.train_more(updates)(state, params))
            done += updates
            save_checkpoint(checkpoint, state, done, seconds=earlier + time.perf_counter() - started)
        trained = jax.block_until_ready(self.train_end(state))
        for path in (checkpoint, seal_path(checkpoint)):
            path.unlink(missing_ok=True)
        return trained

    def run(self, cells: Sequence[tuple[Any, int]], checkpoint: Path | None = None) -> list[tuple[dict, dict] | str]:
        """Train and evaluate ``cells`` (one call each, vmapped over cells; the training resumable from
        ``checkpoint``: :meth:`train_cells`).

        Returns per cell ``(train counters, evaluation, policy leaves)`` or the reason the cell failed.
        """
        import jax

        from memgym.leaderboard.scoring import seal_weights

        seal = checkpoint_seal(checkpoint) if checkpoint is not None and self.pieces else seal_weights()
        policy_params, env_state, evaluation_inputs = self.train_cells(cells, seal, checkpoint)
        evaluated = [np.asarray(x) for x in self.evaluate(policy_params, *evaluation_inputs)]
        return [cell_outcome(self.track, self.budget, jax.tree.map(lambda x: x[i], env_state), seal,
                             jax.tree.map(lambda x: x[i], policy_params), [x[i] for x in evaluated], cells[i][0])
                for i in range(len(cells))]


def checkpoint_path(folder: str | Path, task: Task, budget: Preset, agent_info: dict[str, Any],
                    vmapped: bool = True) -> Path:
    """The checkpoint file of ``task``'s batch in ``folder``, named by what the batch is (agent spec, version,
    cells, track, budget, what it computes and config, and whether it trains vmapped: :class:`OverCells`):
    another batch, or this one after a change of what it computes, never resumes it; a change of code alone
    (moved, renamed) does not orphan it."""
    what = {"spec": task.spec, "version": task.version, "cells": [list(cell) for cell in task.cells],
            "track": task.track.name, "budget": task.track.budget_record(budget),
            "computation": agent_info.get(COMPUTATION), "config": agent_info.get("config")}
    if not vmapped:  # a vmapped batch's name is the one it had before lone cells ran unbatched
        what["vmapped"] = False
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:24]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"cells-{digest}.npz"


def seal_path(checkpoint: Path) -> Path:
    """Where a checkpointed batch keeps the seal it started with."""
    return checkpoint.with_name(checkpoint.stem + "-seal.npy")


def checkpoint_seal(checkpoint: Path) -> np.ndarray:
    """The seal of a checkpointed batch: the one it started with, if it resumes, else a new one, kept."""
    from memgym.leaderboard.scoring import seal_weights

    kept = seal_path(checkpoint)
    if kept.exists() and checkpoint.exists():
        return np.load(kept)
    seal = seal_weights()
    temporary = kept.with_name(kept.stem + ".tmp.npy")
    np.save(temporary, seal)
    temporary.replace(kept)
    return seal


def cell_outcome(track: Track, budget: Preset, env_state: Any, seal: np.ndarray, policy_params: Any,
                 evaluated: Sequence[np.ndarray], value: Any = None) -> tuple[dict, dict, list[np.ndarray]] | str:
    """One cell's ``(train counters, evaluation, policy leaves)``, or the reason it failed: counters that the
    seal shows were edited, more training steps than the budget, non-finite parameters, invalid actions in
    training or evaluation.

    ``env_state`` is the cell's final :class:`~memgym.leaderboard.scoring.ScoredState`, ``evaluated`` its
    :func:`~memgym.leaderboard.scoring.evaluate_jax` arrays ``(success, return, length, invalid)``, ``value``
    its value of the swept parameter (None: the ``check_cell``'s; it names the action space in messages).
    """
    from memgym.leaderboard.store.policies import leaves_of
    from memgym.leaderboard.scoring import counters, sealed

    train = counters(env_state, total=track.score.total, units=track.score_units)
    leaves = leaves_of(policy_params)
    finite = all(np.isfinite(leaf).all() for leaf in leaves if np.issubdtype(leaf.dtype, np.inexact))
    if not sealed(env_state, seal):
        return ("train returned training counters that ScoredEnv did not count (their seal does not match: "
                "the returned ScoredState was edited after stepping)")
    if train["steps"] > budget.total_steps:
        return (f"train stepped the environment {train['steps']} times, more than the budget's "
                f"{budget.total_steps} steps")
    if not finite:
        return "the trained policy parameters contain NaN or infinite values"
    if train["invalid_actions"]:
        return (f"the agent emitted {train['invalid_actions']} invalid actions during training "
                f"(the action space is {track.spaces(value)[1]})")
    figures = evaluation_figures(track, budget, evaluated, value)
    return figures if isinstance(figures, str) else (train, figures, leaves)


def evaluation_figures(track: Track, budget: Preset, evaluated: Sequence[np.ndarray],
                       value: Any = None) -> dict[str, Any] | str:
    """A record's ``eval`` from :func:`~memgym.leaderboard.scoring.evaluate_jax`'s arrays ``(success, return,
    length, invalid)``, or the reason the cell fails (an invalid action; ``value``: the cell's, for the
    action space it names)."""
    success, returns, lengths, invalid = evaluated
    if invalid.sum():
        return (f"the agent emitted {int(invalid.sum())} invalid actions during evaluation "
                f"(the action space is {track.spaces(value)[1]})")
    return {
        "episodes": int(budget.eval_episodes),
        track.score.name: float(np.mean(success, dtype=np.float64)),
        "mean_return": float(returns.mean()),
        "mean_length": float(lengths.mean()),
    }


def evaluation_keys(index: int, episodes: int):
    """The evaluation episodes' keys of a swept value's integer (a corridor length), shared by every agent and seed."""
    import jax

    return jax.random.split(jax.random.fold_in(jax.random.key(EVALUATION_SEED), index), episodes)


def evaluation_policy_keys(index: int, seed: int, episodes: int):
    """The keys of the policy in the evaluation of cell ``(index, seed)``, one per episode."""
    import jax

    cell = jax.random.fold_in(jax.random.key(seed), index)  # the key train gets
    return jax.random.split(jax.random.fold_in(cell, EVALUATION_SEED), episodes)
