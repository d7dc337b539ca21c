"""``memgym train``: the two training loops (the JAX T-Maze; any Gymnasium env through a host loop).

On the T-Maze the jitted trainer runs every seed at once (``vmap``) in chunks of
updates; after each chunk the run appends the chunk's metrics to
``metrics.csv`` (and to TensorBoard under ``tensorboard/`` when ``tensorboardX``
is installed), writes ``checkpoint.npz`` (atomically: a temporary file renamed
over the previous checkpoint of the same run) and prints a progress line. An
interrupted run continues with ``--resume``; a directory that already holds a
run is never reused without it. At the end ``learning_curve.png`` shows the
success rate per seed against environment steps.

Any other Gymnasium environment with a discrete action space (POPGym, Memory
Maze, a user's env) trains through :func:`train_gymnasium`: a host loop, one
seed per run, the same directory layout, a learning curve of the episode return.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from memgym.agents.checkpoints import load_checkpoint, save_checkpoint
from memgym.agents.logs import append_csv, metric_rows, plot_learning_curve, prepare_run, tensorboard_writer
from memgym.agents.metrics import success_over_last
from memgym.envs.memory_check import check_num_envs, gib

TMAZE_IDS = ("memgym/TMaze-v0", "memgym/TMazeJax-v0")


def train_tmaze(config: Any, out: str | os.PathLike, *, corridor_length: int,
                max_episode_steps: int = 1000, seeds: int = 1, resume: bool = False, chunks: int = 20,
                log: Callable[[str], None] = print) -> Path:
    """Train ``seeds`` runs of ``config`` (any config of :data:`memgym.agents.TRAINERS`) on the JAX T-Maze
    into directory ``out`` (see module docstring)."""
    from memgym.agents.registry import make_trainer
    from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

    out = Path(out)
    meta = {"config": dataclasses.asdict(config), "kind": type(config).__name__, "corridor_length": corridor_length,
            "max_episode_steps": max_episode_steps, "seeds": seeds}
    checkpoint, csv_path = out / "checkpoint.npz", out / "metrics.csv"
    prepare_run(out, meta, resume)

    env = TMazeJax()
    params = tmaze_params(np.full(seeds, corridor_length), max_episode_steps=np.full(seeds, max_episode_steps))
    trainer = make_trainer(config, env, tmaze_params(corridor_length, max_episode_steps=max_episode_steps))
    keys = jax.random.split(jax.random.key(0), seeds)
    state = jax.jit(jax.vmap(trainer.init))(keys, params)
    done = 0
    if resume and checkpoint.exists():
        state, done = load_checkpoint(checkpoint, state)
        log(f"resuming {out} at update {done}")
    total = config.num_updates
    per_chunk = max(1, total // chunks)
    run = jax.jit(jax.vmap(trainer.run, in_axes=(0, 0, None)), static_argnums=2)
    started, start_update = time.perf_counter(), done
    board = tensorboard_writer(out)
    while done < total:
        n = min(per_chunk, total - done)
        state, metrics = run(state, params, n)
        metrics = {k: np.asarray(v) for k, v in metrics.items()}
        rows = metric_rows(metrics, list(range(seeds)), done)
        append_csv(csv_path, rows)
        if board is not None:
            for row in rows:
                for name, value in row.items():
                    if name not in ("seed", "update", "env_steps") and value != "":
                        board.add_scalar(f"seed{row['seed']}/{name}", value, row["env_steps"])
        done += n
        save_checkpoint(checkpoint, state, done)
        steps_per_s = (done - start_update) * config.env_steps_per_update * seeds / (time.perf_counter() - started)
        rate = metrics["successes"].sum() / max(metrics["episodes"].sum(), 1)
        ret = metrics["return_sum"].sum() / max(metrics["episodes"].sum(), 1)
        bar = "#" * (20 * done // total)
        log(f"[{bar:<20}] {100 * done / total:5.1f}%  {done * config.env_steps_per_update:,} "
            f"steps/seed  {steps_per_s:,.0f} steps/s  success {rate:.2f}  return {ret:.2f}")
    if board is not None:
        board.close()
        log(f"TensorBoard logs: {out / 'tensorboard'}")
    with open(csv_path) as file:
        rows = list(csv.DictReader(file))
    window = min(100_000, config.total_steps // 5)
    per_seed = {k: np.array([[int(r[k]) for r in rows if int(r["seed"]) == s] for s in range(seeds)])
                for k in ("episodes", "successes")}
    final = success_over_last(per_seed, window, config.env_steps_per_update)
    log(f"success over the last {window:,} steps per seed: {np.round(final, 3).tolist()}")
    if plot_learning_curve(csv_path, out / "learning_curve.png", f"T-Maze L={corridor_length}, {config.memory}"):
        log(f"wrote {out / 'learning_curve.png'}")
    return out


def train_gymnasium(config: Any, env_id: str, out: str | os.PathLike, *, seed: int = 0,
                    resume: bool = False, chunks: int = 20, env_kwargs: dict[str, Any] | None = None,
                    log: Callable[[str], None] = print) -> Path:
    """Train ``config`` on Gymnasium env ``env_id`` through a host loop, into directory ``out``.

    ``config.num_envs`` copies of the env step in a synchronous vector env while
    acting and learning stay jitted (:class:`~memgym.agents.host.HostLoop` with the
    trainer of ``config``). Each update appends a row to
    ``metrics.csv``; ``chunks`` times per run a progress line is printed and
    ``checkpoint.npz`` written (atomically). ``--resume`` restores the learner
    (parameters, optimiser, replay, memory carries, update count) and restarts
    the environments with fresh episodes: a host env's simulator state is not
    saved. The run ends with ``learning_curve.png`` of the mean episode return.
    """
    import gymnasium as gym

    from memgym.agents.host import HostLoop

    out = Path(out)
    meta = {"config": dataclasses.asdict(config), "kind": type(config).__name__, "env": env_id, "seed": seed,
            "env_kwargs": env_kwargs or {}}
    try:
        spec = gym.spec(env_id)
    except gym.error.Error as error:
        raise ValueError(f"--env {env_id!r} is not a registered Gymnasium environment ({error}); "
                         "`memgym envs` lists memgym's") from None
    # Before the run directory is made: refuse what cannot fit (a Memory Maze env holds hundreds of MiB).
    memory = check_num_envs(lambda: gym.make(spec.id, **(env_kwargs or {})), config.num_envs, what=env_id, seed=seed)
    room = "" if memory.available is None else f" of the {gib(memory.available)} available"
    log(f"building {config.num_envs} x {env_id}: about {gib(memory.need(config.num_envs))}{room} "
        f"({gib(memory.each)} each, measured)")
    prepare_run(out, meta, resume)
    checkpoint, csv_path = out / "checkpoint.npz", out / "metrics.csv"
    envs = gym.make_vec(spec.id, num_envs=config.num_envs, vectorization_mode="sync",
                        vector_kwargs=dict(autoreset_mode=gym.vector.AutoresetMode.SAME_STEP), **(env_kwargs or {}))
    try:
        loop = HostLoop.for_config(config, envs, seed=seed)
        done = 0
        if resume and checkpoint.exists():
            state, done = load_checkpoint(checkpoint, loop.state)
            loop.state = state.replace(start=jnp.ones_like(state.start))  # the envs were just reset
            log(f"resuming {out} at update {done} (environments restart with new episodes)")
        total = config.num_updates
        per_chunk = max(1, total // chunks)
        per_update = config.env_steps_per_update
        started, start_update = time.perf_counter(), done
        while done < total:
            rows, episodes, return_sum = [], 0.0, 0.0
            for _ in range(min(per_chunk, total - done)):
                metrics = loop.update()
                done += 1
                metrics = {k: np.asarray(v)[None, None] for k, v in metrics.items()}
                rows += metric_rows(metrics, [seed], done - 1)
                episodes += float(metrics["episodes"].sum())
                return_sum += float(metrics["return_sum"].sum())
            append_csv(csv_path, rows)
            save_checkpoint(checkpoint, loop.state, done)
            steps_per_s = (done - start_update) * per_update / (time.perf_counter() - started)
            bar = "#" * (20 * done // total)
            split = "  ".join(f"{name} {seconds:,.0f} s" for name, seconds in loop.seconds.items())
            log(f"[{bar:<20}] {100 * done / total:5.1f}%  {done * per_update:,} steps  {steps_per_s:,.1f} steps/s  "
                f"episodes {int(episodes)}  mean return {return_sum / max(episodes, 1):.3f}  ({split})")
    finally:
        envs.close()
    if plot_learning_curve(csv_path, out / "learning_curve.png", f"{env_id}, {config.memory}", metric="return"):
        log(f"wrote {out / 'learning_curve.png'}")
    return out
