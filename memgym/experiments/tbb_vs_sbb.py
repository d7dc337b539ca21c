"""Tape-based vs segment-based batching for recurrent DQN: the monoid paper's study (§6) as one command.

    memgym experiment tbb-vs-sbb run --preset smoke      # a few minutes on a 2-core CPU
    memgym experiment tbb-vs-sbb run --preset paper      # the paper's grid, meant for a GPU machine

The grid is the paper's: double DQN (:mod:`memgym.agents.dqn`, Alg. 1 for TBB,
Alg. 2 for SBB) with each memory model — FFM, S5, LRU and the linear transformer
in the paper's own form (eq. 9–13, ``linear_attention_monoid``) — on four POPGym
tasks (RepeatFirst, RepeatPrevious, CountRecall, PositionOnlyCartPole; Easy),
trained with TBB and with SBB at segment lengths ``L`` ∈ {10, 20, 50, 100}, the
same hyperparameters and seeds for every batching. Each (model, batching) pair
is one agent of the leaderboard harness, in its JAX tier: the tasks are
memgym's JAX versions of popgym's (:mod:`memgym.envs.popgym_jax`, step for step
with popgym), so a cell's whole training is one jitted call and a task's seeds
train in one ``vmap``. Training, the greedy evaluation on fixed episodes,
failures, resuming and provenance are the harness's, and the results go to the
same append-only store (:func:`memgym.leaderboard.running.runner.run`).

The report (:func:`write_report`) gives

* **Fig. 5–6**: per (task, model, batching), the mean evaluation return over
  seeds with its 95% bootstrap interval (POPGym returns lie in [−1, 1]), as a
  table and a plot;
* **Table 1**: wall-clock time per cell (training and evaluation), mean and
  standard deviation per batching;
* **Fig. 3 / eq. 36**: the observation sensitivity ``|∂Q(s_n, a_n)/∂o_i|`` at the
  last step of RepeatPrevious episodes for a policy trained with TBB and one
  trained with SBB (:func:`observation_sensitivity`), and the share of it that
  comes from observations older than the segment length — the part SBB's
  truncated gradient cannot train.

Agents are the specs ``memgym.experiments.tbb_vs_sbb:dqn[size=<size>,model=<model>,segment_length=<L>]``
(no ``segment_length``: TBB), e.g. ``...:dqn[size=small,model=ffm,segment_length=10]``, whose factory is
named ``<size>_<model>_<batching>`` (``small_ffm_sbb10``); :data:`SIZES` holds the
hyperparameters of each size (``small`` for CPU runs, ``paper`` for the paper
preset), shared by every model and batching of that size.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memgym.leaderboard.protocol import AgentContext
from memgym.validation import check_choice, check_positive
from memgym.leaderboard.boards.stats import summarize_length
from memgym.leaderboard.tracks import PAPER_TASKS, Preset, Score, Sweep, Track, popgym_envs

TASKS = PAPER_TASKS
DIFFICULTY = "Easy"
MODELS = ("ffm", "s5", "lru", "linear_attention_monoid")
SEGMENT_LENGTHS = (10, 20, 50, 100)
MODULE = __name__

#: Hyperparameters per size: the DQN config shared by every agent of the size, and each model's memory config.
#: ``batch_size`` is a multiple of every segment length, so SBB batches hold exactly as many transitions as TBB's.
SIZES: dict[str, dict[str, Any]] = {
    # CPU-sized: small memories, a short ε schedule, a gradient step every vector step.
    "small": dict(
        dqn=dict(batch_size=200, buffer_size=16_000, learning_starts=1_000, learning_rate=3e-3, gamma=0.9,
                 target_rate=0.95, epsilon_fraction=0.3, head_width=64),
        memory={
            "ffm": ("ffm", dict(features=32, memory_size=32, context_size=4)),
            "s5": ("s5", dict(features=32, state_size=32)),
            "lru": ("lru", dict(features=32, state_size=32)),
            "linear_attention_monoid": ("linear_attention_monoid", dict(features=32, key_size=16, value_size=16)),
        },
    ),
    # The paper preset: memgym's monoid-model presets (features 256) and DQN defaults (B = 1000).
    "paper": dict(
        dqn=dict(batch_size=1000, buffer_size=100_000, learning_starts=5_000, learning_rate=1e-4, gamma=0.99,
                 target_rate=0.995, epsilon_fraction=0.2, head_width=128),
        memory={"ffm": ("ffm", {}), "s5": ("s5", {}), "lru": ("lru", {}),
                "linear_attention_monoid": ("linear_attention_monoid", {})},
    ),
}


def batching_name(segment_length: int | None) -> str:
    """``"tbb"`` (None) or ``"sbb<L>"``."""
    return "tbb" if segment_length is None else f"sbb{segment_length}"


def batching_label(name: str) -> str:
    """``"TBB"`` or ``"SBB L=10"`` (tables and plots)."""
    return "TBB" if name == "tbb" else f"SBB L={name[3:]}"


def agent_name(size: str, model: str, segment_length: int | None) -> str:
    return f"{size}_{model}_{batching_name(segment_length)}"


def agent_spec(size: str, model: str, segment_length: int | None) -> str:
    """The harness's spec of one agent of the grid: the factory :data:`dqn` with its options."""
    length = "" if segment_length is None else f",segment_length={segment_length}"
    return f"{MODULE}:dqn[size={size},model={model}{length}]"


def parse_agent(spec: str) -> tuple[str, str, int | None]:
    """``(size, model, segment_length)`` of an agent spec of the grid; ``ValueError`` naming what is allowed."""
    from memgym.leaderboard.protocol import parse_spec

    base, options = parse_spec(spec)
    if base != f"{MODULE}:dqn":
        raise ValueError(f"{spec!r} is not an agent of the study (its specs are {MODULE}:dqn[...])")
    return _check_options(**options)


def _check_options(size: str = "small", model: str = "ffm", segment_length: int | None = None,
                   **unknown: Any) -> tuple[str, str, int | None]:
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)}; allowed: size, model, segment_length")
    check_choice("size", size, sorted(SIZES))
    check_choice("model", model, MODELS)
    if segment_length is not None:
        check_positive(segment_length=segment_length)
    return size, model, segment_length


def dqn_config(size: str, model: str, segment_length: int | None, num_envs: int, total_steps: int):
    """The :class:`~memgym.agents.dqn.DQNConfig` of one agent of the grid."""
    from memgym.agents.dqn import DQNConfig

    memory, memory_config = SIZES[size]["memory"][model]
    batching = dict(batching="tape") if segment_length is None else dict(batching="segment",
                                                                         segment_length=segment_length)
    return DQNConfig(memory=memory, memory_config=json.dumps(memory_config), num_envs=num_envs,
                     total_steps=total_steps, **batching, **SIZES[size]["dqn"])


def _factory(size: str, model: str, segment_length: int | None) -> Callable[[AgentContext], Any]:
    def factory(context: AgentContext):
        config = dqn_config(size, model, segment_length, context.num_envs, context.total_steps)
        if context.jax_env:  # the track's tasks in JAX (memgym.envs.popgym_jax): the whole run is one jitted call
            from memgym.leaderboard.reference import TrainerAgent

            return TrainerAgent(config)
        from memgym.agents.host import HostAgent

        return HostAgent.for_config(config, context.observation_space, context.action_space, seed=context.seed,
                                    total_steps=context.total_steps)

    factory.__name__ = factory.__qualname__ = agent_name(size, model, segment_length)
    factory.__doc__ = (f"Double DQN, {model} memory ({size} size), "
                       f"{batching_label(batching_name(segment_length))}: JAX tier on the study's track (the "
                       f"host loop on a track without a JAX env).")
    return factory


def _dqn_factory(size: str, model: str, segment_length: int | None) -> Callable[[AgentContext], Any]:
    """The factory of one agent of the grid; ``with_options(size=, model=, segment_length=)`` gives another."""
    factory = _factory(size, model, segment_length)
    factory.with_options = lambda **options: _dqn_factory(*_check_options(**options))  # type: ignore[attr-defined]
    return factory


#: The study's agent factory (default: small FFM, TBB); specs like ``dqn[size=paper,model=s5,segment_length=10]``.
dqn = _dqn_factory("small", "ffm", None)


# --- the track and the presets ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Study:
    """A grid of the study: the harness budget (tasks × seeds × steps) and the agents (size × models × batchings).

    Attributes:
        name: the preset's name.
        budget: tasks (the track's swept values), seeds, training steps, evaluation episodes.
        size: the hyperparameters of :data:`SIZES`.
        models: memory models of :data:`MODELS`.
        segment_lengths: SBB's segment lengths (TBB always runs).
        sensitivity: ``(task, segment length)`` of the Fig. 3 analysis: the first model trained with TBB and
            with SBB at that length on that task; None: no analysis.
        description: what the preset is for (``memgym experiment tbb-vs-sbb list``).
    """

    name: str
    budget: Preset
    size: str
    models: tuple[str, ...]
    segment_lengths: tuple[int, ...]
    sensitivity: tuple[str, int] | None
    description: str

    def __post_init__(self) -> None:
        if self.size not in SIZES:
            raise ValueError(f"size must be one of {sorted(SIZES)}, got size={self.size!r}")
        for model in self.models:
            if model not in MODELS:
                raise ValueError(f"models: {model!r} is not one of {list(MODELS)}")
        if not self.models:
            raise ValueError("models: name at least one memory model")
        batch = SIZES[self.size]["dqn"]["batch_size"]
        for length in self.segment_lengths:
            if isinstance(length, bool) or not isinstance(length, int) or length < 1 or batch % length:
                raise ValueError(f"segment_lengths: {length!r} must be a positive divisor of the batch size "
                                 f"{batch} of size {self.size!r}")
        if self.sensitivity is not None and self.sensitivity[0] not in TASKS:
            raise ValueError(f"sensitivity task {self.sensitivity[0]!r} is not one of {list(TASKS)}")

    def agents(self) -> list[str]:
        """The harness specs of the grid, model by model, TBB first."""
        return [agent_spec(self.size, model, length) for model in self.models
                for length in (None, *self.segment_lengths)]


STUDIES: dict[str, Study] = {
    study.name: study for study in (
        Study("smoke", Preset("smoke", ("RepeatFirst", "RepeatPrevious"), seeds=3, total_steps=16_000,
                              train_window=3_200, eval_episodes=32),
              size="small", models=("ffm",), segment_lengths=(10,), sensitivity=("RepeatPrevious", 10),
              description="CPU, a few minutes: FFM, TBB vs SBB L=10, RepeatFirst and RepeatPrevious, 3 seeds, "
                          "16K steps"),
        # Fig. 6 on a CPU: the paper's whole grid (4 tasks × 4 models × TBB and SBB at the paper's 4 segment
        # lengths) with 5 seeds, the small size, 100K steps per cell: 400 cells, the tasks in JAX (JAX tier).
        Study("cpu", Preset("cpu", TASKS, seeds=5, total_steps=100_000, train_window=20_000, eval_episodes=100),
              size="small", models=MODELS, segment_lengths=SEGMENT_LENGTHS, sensitivity=("RepeatPrevious", 10),
              description="CPU, a few hours: the paper's grid (4 models × 4 tasks × TBB, SBB L=10/20/50/100), "
                          "5 seeds, 100K steps, small size"),
        # The paper's grid and its 10 seeds. Its text gives no step budget (Table 1: ~886 s per run on an
        # RTX 2080Ti); 500K steps per cell is ours.
        Study("paper", Preset("paper", TASKS, seeds=10, total_steps=500_000, train_window=50_000,
                              eval_episodes=100),
              size="paper", models=MODELS, segment_lengths=SEGMENT_LENGTHS, sensitivity=("RepeatPrevious", 10),
              description="GPU: 4 models × 4 tasks × (TBB, SBB L=10/20/50/100) × 10 seeds × 500K steps"),
    )
}

TRACK = Track(
    name="tbb-vs-sbb",
    title="TBB vs SBB (monoid paper §6)",
    sweep=Sweep(name="task", plural="tasks", choices=TASKS),
    score=Score(key="normalized_return", name="normalized_return", total="normalized_return_sum",
                label="return", counted=False, bounds=(-1.0, 1.0)),
    **popgym_envs(lambda task: task + DIFFICULTY),
    presets={name: study.budget for name, study in STUDIES.items()},
    default_preset="smoke",
    legend="Evaluation return (POPGym, Easy; in [−1, 1]) per task, mean over seeds [95% bootstrap].",
    reading="How to read it: within a task, compare the rows of one model across batchings; the paper's claim is "
            "that TBB (whole episodes) scores at least as high as SBB with any segment length.",
    results_dir="tbb-vs-sbb-results",
    report_dir="docs/tbb-vs-sbb",
    check_cell=("RepeatPrevious", None),
)


def make_study(name: str = "smoke", *, tasks: Sequence[str] | None = None, models: Sequence[str] | None = None,
          segment_lengths: Sequence[int] | None = None, seeds: int | None = None,
          total_steps: int | None = None, eval_episodes: int | None = None, sensitivity: bool = True) -> Study:
    """A named study with some fields replaced (None: the preset's); a changed grid is named ``<name>+custom``."""
    if name not in STUDIES:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(STUDIES)}")
    base = STUDIES[name]
    budget = TRACK.preset(name, values=tasks, seeds=seeds, total_steps=total_steps, eval_episodes=eval_episodes)
    changed = dataclasses.replace(
        base, budget=budget, models=tuple(models) if models is not None else base.models,
        segment_lengths=tuple(segment_lengths) if segment_lengths is not None else base.segment_lengths,
        sensitivity=base.sensitivity if sensitivity else None)
    if changed.models != base.models or changed.segment_lengths != base.segment_lengths:
        changed = dataclasses.replace(changed, budget=dataclasses.replace(budget, name=f"{name}+custom"))
    return dataclasses.replace(changed, name=changed.budget.name)


# --- Fig. 3: observation sensitivity -----------------------------------------------------------------


def observation_sensitivity(trainer: Any, params: Any, obs: np.ndarray) -> np.ndarray:
    """``|∂Q(s_n, a_n)/∂o_i|`` for ``i = 0 … n`` of one episode ``obs[n + 1, O]`` (monoid paper eq. 36).

    ``s_n`` is the memory's state after the whole episode (replayed from a fresh
    carry, the first observation flagged as the episode start) and ``a_n`` the
    greedy action there; the gradient's L1 norm over each observation's features.
    Each call compiles anew; for many episodes, call :func:`sensitivity_function` once and reuse it.
    """
    return np.asarray(sensitivity_function(trainer)(params, np.asarray(obs, np.float32)))


def sensitivity_function(trainer: Any) -> Callable[[Any, Any], Any]:
    """:func:`observation_sensitivity` of ``trainer``'s network as one jitted ``(params, obs) -> |∂Q/∂o|``:
    built once, it compiles once per episode length rather than tracing the replay's scan anew for every
    episode."""
    import jax
    import jax.numpy as jnp

    def sensitivity(params, obs):
        start = jnp.zeros(obs.shape[0], bool).at[0].set(True)

        def last_q(observations):
            q, _ = trainer.network.apply(params, observations, start, trainer.initialize_carry())
            return q[-1, jnp.argmax(jax.lax.stop_gradient(q[-1]))]

        return jnp.abs(jax.grad(last_q)(obs)).sum(axis=-1)

    return jax.jit(sensitivity)


def sensitivity_run(size: str, model: str, segment_length: int | None, task: str, total_steps: int, seed: int = 0,
                    episodes: int = 16, num_envs: int = 8) -> dict[str, Any]:
    """Train one agent of the grid on ``task`` in the JAX tier (the task's JAX env, the whole run one jitted
    call, as the grid's cells), then the mean normalised :func:`observation_sensitivity` over ``episodes``
    greedy evaluation episodes of that env.

    Returns ``{"lag": [...], "share": [...]}``: ``share[j]`` is the mean share of the
    total sensitivity that comes from the observation ``lag[j] = j`` steps before the last one.
    """
    import jax

    from memgym.agents.dqn import DQNTrainer
    from memgym.envs import gymnax_compat
    from memgym.leaderboard.tracks import EVALUATION_SEED

    env = TRACK.jax_env(task)
    env_params = env.default_params
    trainer = DQNTrainer(dqn_config(size, model, segment_length, num_envs, total_steps), env, env_params)
    state, _ = jax.jit(trainer.train)(jax.random.key(seed), env_params)
    params = state.params
    act, reset, sensitivity = jax.jit(trainer.act), jax.jit(env.reset), sensitivity_function(trainer)
    step = jax.jit(lambda key, env_state, action: gymnax_compat.step_env(env, key, env_state, action, env_params))
    shares = []
    for episode in range(episodes):
        key_reset, key = jax.random.split(jax.random.fold_in(jax.random.key(EVALUATION_SEED), episode))
        obs, env_state = reset(key_reset, env_params)
        carry, observations, done, start = trainer.initialize_carry(), [np.asarray(obs)], False, True
        while not done:
            action, carry = act(params, carry, obs, start)
            key, key_step = jax.random.split(key)
            obs, env_state, _, terminated, truncated, _ = step(key_step, env_state, action)
            done, start = bool(terminated | truncated), False
            if not done:
                observations.append(np.asarray(obs))
        gradient = np.asarray(sensitivity(params, np.stack(observations)))[::-1]  # lag 0 first
        shares.append(gradient / max(gradient.sum(), 1e-12))
    longest = max(len(s) for s in shares)
    share = np.mean([np.pad(s, (0, longest - len(s))) for s in shares], axis=0)
    return {"model": model, "batching": batching_name(segment_length), "task": task, "seed": seed,
            "total_steps": total_steps, "episodes": episodes, "lag": list(range(longest)),
            "share": [float(x) for x in share]}


def _sensitivity_path(results: Path, study: Study, segment_length: int | None) -> Path:
    task, _ = study.sensitivity
    name = f"{agent_name(study.size, study.models[0], segment_length)}-{task}-{study.budget.total_steps}.json"
    return results / "sensitivity" / name


def run_sensitivity(study: Study, results: str | os.PathLike, log: Callable[[str], None] = print) -> list[Path]:
    """The Fig. 3 analysis of ``study`` (TBB and SBB at its segment length), each result stored once in
    ``<results>/sensitivity/`` (an existing one is reused, never rewritten)."""
    if study.sensitivity is None:
        return []
    task, length = study.sensitivity
    paths = []
    for segment_length in (None, length):
        path = _sensitivity_path(Path(results), study, segment_length)
        paths.append(path)
        if path.exists():
            log(f"sensitivity: {path} stored, skipping")
            continue
        log(f"sensitivity: training {study.models[0]} with {batching_label(batching_name(segment_length))} on "
            f"{task} for {study.budget.total_steps:,} steps ...")
        result = sensitivity_run(study.size, study.models[0], segment_length, task, study.budget.total_steps)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(result, indent=2))
        os.link(temporary, path)  # fails rather than replace a result stored meanwhile
        temporary.unlink()
    return paths


# --- running and reporting ------------------------------------------------------------------------------


def run(study: Study, results: str | os.PathLike | None = None, *, log: Callable[[str], None] = print,
        cell_timeout: float | None = None, new_version: bool = False) -> Path:
    """Fill the study's missing cells (and its sensitivity analysis) into the store at ``results``."""
    from memgym.leaderboard.running import runner

    results = Path(results or TRACK.results_dir)
    try:
        TRACK.store(results).check_writable()
    except ValueError as error:
        raise ValueError(f"results {str(results)!r}: {error}") from None
    log(f"memgym experiment tbb-vs-sbb: preset {study.name}, {len(study.agents())} agents × "
        f"{len(study.budget.values)} tasks × {study.budget.seeds} seeds, {study.budget.total_steps:,} steps per cell "
        f"-> {results}")
    runner.run(study.agents(), study.budget, results, track=TRACK, log=log, cell_timeout=cell_timeout,
               new_version=new_version, policies=False)  # the study reads returns; it keeps no parameters
    run_sensitivity(study, results, log)
    return results


def summarize(results: str | os.PathLike) -> dict[str, Any]:
    """Per (preset, task, model, batching): the evaluation returns over seeds, their mean and 95% bootstrap
    interval, and wall-clock seconds; failed cells are counted, not averaged."""
    cells: dict[tuple, dict[str, Any]] = defaultdict(lambda: {"returns": [], "seconds": [], "seeds": set(),
                                                              "failed": set(), "curves": [], "steps": None})
    for record in TRACK.records(TRACK.store(results)):
        try:
            _, model, length = parse_agent(record["agent"])
        except ValueError:
            continue  # an agent outside the grid (run through the harness by hand)
        key = (record["preset"]["name"], record["task"], model, batching_name(length))
        entry = cells[key]
        if record["status"] != "ok":
            entry["failed"].add(record["seed"])
        elif record["seed"] not in entry["seeds"]:  # a cell counts with its first ok result
            entry["seeds"].add(record["seed"])
            entry["returns"].append(record["eval"]["normalized_return"])
            entry["seconds"].append(record["wall_time_s"])
            entry["curves"].append(training_curve(record["train"]["curve"]))
            entry["steps"] = record["train"]["steps"]
    rows = []
    for (preset, task, model, batching), entry in sorted(cells.items(), key=lambda item: _order(item[0])):
        row = {"preset": preset, "task": task, "model": model, "batching": batching,
               "failed": len(entry["failed"] - entry["seeds"]), "seconds": entry["seconds"]}
        if entry["returns"]:
            row.update(summarize_length(entry["returns"]))
            row["curve"] = curve_summary(entry["curves"], entry["steps"])
        rows.append(row)
    return {"rows": rows}


def training_curve(curve: Sequence[Sequence[float]]) -> list[float | None]:
    """A record's learning curve (per bin ``[episodes, return sum]``) as the mean return of the episodes that
    ended in each bin (None: no episode ended there)."""
    return [float(total) / episodes if episodes else None for episodes, total in curve]


def curve_summary(curves: Sequence[Sequence[float | None]], steps: int) -> dict[str, list]:
    """Fig. 6's curve of one (task, model, batching): per bin of training, the mean over seeds of the training
    return with its 95% bootstrap interval (bins where some seed finished no episode are left out)."""
    bins = len(curves[0])
    summary: dict[str, list] = {"steps": [], "mean": [], "ci_low": [], "ci_high": []}
    for i in range(bins):
        values = [curve[i] for curve in curves]
        if any(value is None for value in values):
            continue
        point = summarize_length(values, seed=i)
        summary["steps"].append(int(round((i + 0.5) * steps / bins)))
        for key in ("mean", "ci_low", "ci_high"):
            summary[key].append(point[key])
    return summary


def _order(key: tuple) -> tuple:
    preset, task, model, batching = key
    length = 0 if batching == "tbb" else int(batching[3:])
    return (preset, TASKS.index(task), MODELS.index(model) if model in MODELS else len(MODELS), length)


def _interval(row: dict[str, Any]) -> str:
    if "mean" not in row:
        return "—"
    return f"{row['mean']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]"


def markdown(summary: dict[str, Any], sensitivity: list[dict[str, Any]], images: Sequence[str] = ()) -> str:
    """The report: Fig. 5–6 as a table, Table 1, and the Fig. 3 shares."""
    rows = summary["rows"]
    lines = ["# TBB vs SBB (monoid paper §6)", "",
             "Double DQN on POPGym (Easy) tasks; evaluation return in [−1, 1] per (task, model, batching): mean over "
             "seeds [95% bootstrap interval] of greedy evaluation episodes on fixed seeds. Written by "
             "`memgym experiment tbb-vs-sbb report`.", ""]
    for preset in sorted({r["preset"] for r in rows}):
        part = [r for r in rows if r["preset"] == preset]
        batchings = sorted({r["batching"] for r in part}, key=lambda b: 0 if b == "tbb" else int(b[3:]))
        lines += [f"## Evaluation return, preset `{preset}` (Fig. 5–6)", "",
                  "| task | model | " + " | ".join(batching_label(b) for b in batchings) + " | seeds |",
                  "|---|---|" + "---:|" * len(batchings) + "---:|"]
        for task in [t for t in TASKS if any(r["task"] == t for r in part)]:
            for model in sorted({r["model"] for r in part if r["task"] == task}, key=MODELS.index):
                by = {r["batching"]: r for r in part if r["task"] == task and r["model"] == model}
                seeds = "/".join(str(by[b].get("n", 0)) for b in batchings if b in by)
                failed = sum(by[b]["failed"] for b in by)
                lines.append(f"| {task} | {model} | " + " | ".join(_interval(by[b]) if b in by else "" for b in
                             batchings) + f" | {seeds}{f' ({failed} failed)' if failed else ''} |")
        lines += ["", f"## Wall-clock per cell, preset `{preset}` (Table 1)", "",
                  "| batching | cells | mean (s) | standard deviation (s) |", "|---|---:|---:|---:|"]
        for batching in batchings:
            seconds = [s for r in part if r["batching"] == batching for s in r["seconds"]]
            if seconds:
                lines.append(f"| {batching_label(batching)} | {len(seconds)} | {np.mean(seconds):.1f} | "
                             f"{np.std(seconds, ddof=1) if len(seconds) > 1 else 0.0:.1f} |")
        lines.append("")
    if sensitivity:
        lines += ["## Observation sensitivity (Fig. 3, eq. 36)", "",
                  "Share of `|∂Q(s_n, a_n)/∂o_i|` at the last step of an episode that comes from observations older "
                  "than the given number of steps (mean over evaluation episodes of the trained policy).", "",
                  "| policy | task | steps | older than 4 | older than 10 | older than 20 |", "|---|---|---:|---:|---:|---:|"]
        for result in sensitivity:
            share = np.asarray(result["share"])
            older = [f"{share[k + 1:].sum():.2f}" for k in (4, 10, 20)]
            lines.append(f"| {result['model']} {batching_label(result['batching'])} | {result['task']} | "
                         f"{result['total_steps']:,} | " + " | ".join(older) + " |")
        lines.append("")
    lines += [f"![{name[:-4]}]({name})" for name in images]
    return "\n".join(lines) + "\n"


def plot_returns(summary: dict[str, Any], path: Path) -> bool:
    """Fig. 6 style: a panel per (preset, task), evaluation return per batching with 95% intervals, a line per model
    (one style per model in every panel, the legend beside the panels); False without matplotlib or returns."""
    from memgym.leaderboard.boards.report import save_figure

    return save_figure(returns_figure(summary), path)


def returns_figure(summary: dict[str, Any]):
    """The figure of :func:`plot_returns` (a matplotlib ``Figure``), or None without matplotlib or returns."""
    from memgym.leaderboard.boards.report import arrange_panels, panel_grid, pyplot, series_styles

    plt = pyplot()
    rows = [r for r in summary["rows"] if "mean" in r]
    if plt is None or not rows:
        return None
    panels = sorted({(r["preset"], r["task"]) for r in rows}, key=lambda p: (p[0], TASKS.index(p[1])))
    models = sorted({r["model"] for r in rows}, key=_model_order)
    styles = series_styles(models)
    figure, axes = panel_grid(plt, len(panels), height=3.2)
    for axis, (preset, task) in zip(axes.flat, panels):
        part = [r for r in rows if r["preset"] == preset and r["task"] == task]
        batchings = sorted({r["batching"] for r in part}, key=lambda b: 0 if b == "tbb" else int(b[3:]))
        drawn = sorted({r["model"] for r in part}, key=_model_order)
        width = min(0.3, 0.05 * len(drawn))  # the models side by side at each batching, equal returns all seen
        for place, model in enumerate(drawn):
            by = {r["batching"]: r for r in part if r["model"] == model}
            at = [i for i, b in enumerate(batchings) if b in by]
            mean = np.array([by[batchings[i]]["mean"] for i in at])
            low = mean - np.array([by[batchings[i]]["ci_low"] for i in at])
            high = np.array([by[batchings[i]]["ci_high"] for i in at]) - mean
            shift = width * (place / (len(drawn) - 1) - 0.5) if len(drawn) > 1 else 0.0
            axis.errorbar(np.array(at) + shift, mean, yerr=[low, high], capsize=3, label=model, **styles[model])
        axis.set_xticks(range(len(batchings)), [batching_label(b) for b in batchings], fontsize=8)
        axis.set_xlim(-0.5, len(batchings) - 0.5)
        axis.set(title=f"{task} ({preset})", ylabel="evaluation return", ylim=(-1.05, 1.05))
    arrange_panels(figure, axes, len(panels))
    return figure


def plot_curves(summary: dict[str, Any], path: Path) -> bool:
    """Fig. 6's form: a panel per (task, model), the training return against environment steps, a line per
    batching (mean over seeds, 95% bootstrap band; one style per batching in every panel, the legend beside
    the panels); False without matplotlib or curves."""
    from memgym.leaderboard.boards.report import save_figure

    return save_figure(curves_figure(summary), path)


def curves_figure(summary: dict[str, Any]):
    """The figure of :func:`plot_curves`, or None without matplotlib or curves."""
    from memgym.leaderboard.boards.report import arrange_panels, panel_grid, pyplot, series_styles

    plt = pyplot()
    rows = [r for r in summary["rows"] if r.get("curve", {}).get("steps")]
    if plt is None or not rows:
        return None
    panels = sorted({(r["preset"], r["task"], r["model"]) for r in rows},
                    key=lambda p: (p[0], TASKS.index(p[1]), _model_order(p[2])))
    batchings = sorted({r["batching"] for r in rows}, key=lambda b: 0 if b == "tbb" else int(b[3:]))
    styles = series_styles([batching_label(b) for b in batchings])
    figure, axes = panel_grid(plt, len(panels), width=3.6, height=2.8)
    for axis, (preset, task, model) in zip(axes.flat, panels):
        for batching in batchings:
            row = next((r for r in rows if (r["preset"], r["task"], r["model"], r["batching"])
                        == (preset, task, model, batching)), None)
            if row is None:
                continue
            curve, label = row["curve"], batching_label(batching)
            style = styles[label]
            axis.plot(curve["steps"], curve["mean"], markersize=3, label=label, **style)
            axis.fill_between(curve["steps"], curve["ci_low"], curve["ci_high"], color=style["color"], alpha=0.15,
                              linewidth=0)
        axis.set(title=f"{task}, {model}" + ("" if len(
            {p[0] for p in panels}) == 1 else f" ({preset})"), ylim=(-1.05, 1.05))
        axis.set_xlabel("environment steps", fontsize=8)
        axis.set_ylabel("training return", fontsize=8)
        axis.tick_params(labelsize=7)
    arrange_panels(figure, axes, len(panels))
    return figure


def _model_order(model: str) -> tuple[int, str]:
    return (MODELS.index(model) if model in MODELS else len(MODELS), model)


def plot_sensitivity(sensitivity: list[dict[str, Any]], path: Path) -> bool:
    """Fig. 3 style: the share of ``|∂Q/∂o_i|`` per lag, and its cumulative share, TBB vs SBB (a style per
    policy, the legend beside the panels); False without matplotlib or results."""
    from memgym.leaderboard.boards.report import save_figure

    return save_figure(sensitivity_figure(sensitivity), path)


def sensitivity_figure(sensitivity: list[dict[str, Any]]):
    """The figure of :func:`plot_sensitivity`, or None without matplotlib or results."""
    from memgym.leaderboard.boards.report import arrange_panels, panel_grid, pyplot, series_styles

    plt = pyplot()
    if plt is None or not sensitivity:
        return None
    figure, axes = panel_grid(plt, 2, width=5.0, height=3.5)
    left, right = axes.flat
    tasks = len({result["task"] for result in sensitivity})
    labels = [f"{result['model']} {batching_label(result['batching'])}" + (f" ({result['task']})" if tasks > 1 else "")
              for result in sensitivity]
    styles = series_styles(list(dict.fromkeys(labels)))
    for place, (label, result) in enumerate(zip(labels, sensitivity)):
        share = np.asarray(result["share"])
        every = (place % 5, 5)  # a marker every fifth lag, the policies' markers staggered
        left.plot(result["lag"], share, markersize=4, markevery=every, label=label, **styles[label])
        right.plot(result["lag"], np.cumsum(share), markersize=4, markevery=every, label=label, **styles[label])
        if result["batching"] != "tbb":
            for axis in (left, right):
                axis.axvline(int(result["batching"][3:]), color="red", linestyle=":", linewidth=1)
    left.set(title=f"|∂Q(s_n, a_n)/∂o_i| at the last step, {sensitivity[0]['task']}", xlabel="steps before the last",
             ylabel="share of the total")
    right.set(title="cumulative share (red: SBB segment length)", xlabel="steps before the last",
              ylabel="share from the last k steps", ylim=(0, 1.02))
    arrange_panels(figure, axes, 2)
    return figure


def write_report(results: str | os.PathLike | None = None, out: str | os.PathLike | None = None) -> dict[str, Path]:
    """``REPORT.md``, ``study.json``, ``curves.png`` (Fig. 6), ``returns.png`` and ``sensitivity.png`` from the
    store at ``results``
    (derived files, rebuilt every time) in ``out`` (default: the results directory)."""
    results = Path(results or TRACK.results_dir)
    if not results.is_dir():
        raise ValueError(f"--results {results} is not a directory; run `memgym experiment tbb-vs-sbb run` first")
    summary = summarize(results)
    sensitivity, unreadable = [], []
    for path in sorted((results / "sensitivity").glob("*.json")):
        try:
            result = json.loads(path.read_text())
            if not (isinstance(result, dict) and {"task", "model", "batching", "share", "lag", "total_steps"} <= set(result)):
                raise ValueError("not a sensitivity result")
            sensitivity.append(result)
        except (OSError, UnicodeDecodeError, ValueError) as error:  # kept, listed, not used
            unreadable.append(f"{path} ({type(error).__name__}: {error})")
    sensitivity.sort(key=lambda r: (r["task"], r["model"], 0 if r["batching"] == "tbb" else int(r["batching"][3:])))
    if not summary["rows"] and not sensitivity:
        raise ValueError(f"no results of the study under {results}; run `memgym experiment tbb-vs-sbb run` first")
    out = Path(out or results)
    out.mkdir(parents=True, exist_ok=True)
    written = {"json": out / "study.json"}
    written["json"].write_text(json.dumps({"cells": summary["rows"], "sensitivity": sensitivity}, indent=2))
    images = []
    if plot_curves(summary, out / "curves.png"):
        written["curves"] = out / "curves.png"
        images.append("curves.png")
    if plot_returns(summary, out / "returns.png"):
        written["returns"] = out / "returns.png"
        images.append("returns.png")
    if plot_sensitivity(sensitivity, out / "sensitivity.png"):
        written["sensitivity"] = out / "sensitivity.png"
        images.append("sensitivity.png")
    written["markdown"] = out / "REPORT.md"
    text = markdown(summary, sensitivity, images)
    if unreadable:
        text += "\nUnreadable sensitivity results (kept, not used): " + "; ".join(unreadable) + "\n"
    written["markdown"].write_text(text)
    return written
