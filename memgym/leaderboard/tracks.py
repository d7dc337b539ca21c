"""Stage 1, tracks: what a board scores, the :class:`Track` type and the built-in tracks with their presets.

A track is data: an environment family, the parameter swept across the board's
columns (:class:`Sweep`), the per-episode outcome it ranks by (:class:`Score`)
and its named budgets (:class:`Preset`); the harness builds everything else from
these fields. A new track is a new entry of :data:`TRACKS`:

* ``tmaze`` (default): T-Maze success rate across corridor lengths (thesis §5.1), both tiers.
* ``popgym-repeat-previous``: POPGym RepeatPrevious normalised return across Easy / Medium /
  Hard (monoid paper §6), both tiers (the JAX tier on memgym.envs.popgym_jax's tasks).
* ``popgym``: the monoid paper's four POPGym tasks (Repeat First, Repeat Previous, Count Recall,
  Position-Only CartPole) in their difficulties, one column each, both tiers.
* ``popgym-suite``: every POPGym task family, one column per task, both tiers; and one track per
  POPGym group of families (:data:`POPGYM_GROUPS`): ``popgym-diagnostic``, ``popgym-control``,
  ``popgym-noisy``, ``popgym-game``, ``popgym-navigation``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from memgym.envs import tmaze
from memgym.leaderboard.protocol import AgentContext
from memgym.leaderboard.store import ResultsStore
from memgym.validation import check_choice, check_int, check_optional_positive, check_positive

# Evaluation episodes use fixed seeds derived from this and the swept value only,
# so every agent of a tier faces the same evaluation episodes.
EVALUATION_SEED = 2_000_003

#: The JAX tier counts a number score (POPGym's normalized return, in [-1, 1]) in integer units of
#: 1/SCORE_UNITS (:class:`memgym.leaderboard.scoring.ScoredEnv`), so that its sums are exact and sealed like a
#: yes/no score's. Rounding moves an episode's score by at most 2**-13 (half a unit); an int32 counter of one
#: environment holds 2**31 / 4096 = 524,288 episodes of score 1, more than any budget gives one environment.
SCORE_UNITS = 4096


@dataclasses.dataclass(frozen=True)
class Score:
    """The per-episode outcome a board ranks by, read from the ``info`` of the step that ends an episode.

    Attributes:
        key: the ``info`` entry (``"success"``, ``"normalized_return"``).
        name: the record key of its mean over episodes (``"success_rate"``).
        total: the record key of its sum over episodes (``"successes"``); ``window_<total>`` sums
            the episodes that end in the training window.
        label: its name in progress lines and plots (``"success"``).
        counted: a yes/no outcome, summed as an integer count; otherwise a number summed as a float.
        bounds: the range of the per-episode value (the plots' limits).
        chance: what a random policy scores (a dotted line on the plot), or None.
        solved: a value counts as solved when the lower 95% bound of its score reaches this; the
            board's ``<short>*`` column (T-Maze ``L*``) names the last solved value. None: no column.
    """

    key: str
    name: str
    total: str
    label: str
    counted: bool = True
    bounds: tuple[float, float] = (0.0, 1.0)
    chance: float | None = None
    solved: float | None = None

    def number(self, value: Any) -> int | float:
        """A per-episode value or a sum of them, as the record stores it."""
        return int(value) if self.counted else float(value)

    def window_score(self, train: dict[str, Any]) -> float:
        """A cell's training score from its record's ``train`` counts: the mean over the episodes that end in
        the training window, or the worst per-episode value (``bounds[0]``: T-Maze 0, POPGym −1) when none
        ends there, so that a cell with nothing to show scores as a failed episode, never as a middling one."""
        episodes = train["window_episodes"]
        return train[f"window_{self.total}"] / episodes if episodes else float(self.bounds[0])


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The parameter a board varies across its columns.

    Attributes:
        name: the record key of a cell's value (``"corridor_length"``).
        plural: the key of a budget's values in a record's ``preset`` (``"corridor_lengths"``).
        short: prefix of columns (``L=4``) and of the store's directories (``L4``); ``""`` shows
            the bare value.
        choices: the allowed values in order, or None for integers (ordered by size).
    """

    name: str
    plural: str
    short: str = ""
    choices: tuple[Any, ...] | None = None

    def index(self, value: Any) -> int:
        """The integer of a value: seeds derive from it and columns are ordered by it."""
        return int(value) if self.choices is None else self.choices.index(value)

    def parse(self, text: str) -> Any:
        """A value given on the command line."""
        if self.choices is not None:
            return text
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{self.name} must be an integer, got {text!r}") from None

    def column(self, value: Any) -> str:
        return f"{self.short}={value}" if self.short else str(value)

    def columns(self, values: Sequence[Any]) -> str:
        return self.column(",".join(map(str, values)))

    @property
    def header(self) -> str:
        """The name of the value in table headers (``L``, ``difficulty``)."""
        return self.short or self.name


@dataclasses.dataclass(frozen=True)
class Preset:
    """A budget of a track.

    Attributes:
        name: the preset's name (a changed grid is named ``<name>+custom``).
        values: the values of the track's swept parameter (T-Maze: corridor lengths).
        seeds: training seeds per value (seeds ``first_seed … first_seed + seeds − 1``).
        total_steps: training budget per cell, in environment steps.
        train_window: training score is measured over the last ``train_window`` steps (thesis: 100K).
        eval_episodes: post-training evaluation episodes per cell.
        max_episode_steps: an episode's time limit (a timeout is a finished episode; in T-Maze a
            failure); None: the environment's own episode end.
        first_seed: the first training seed (a tuning preset starts past a board's seeds, so that the
            configuration a board scores was never selected on the seeds it is scored on).
    """

    name: str
    values: tuple[Any, ...]
    seeds: int
    total_steps: int
    train_window: int
    eval_episodes: int
    max_episode_steps: int | None = None
    first_seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(self.values))
        if not self.values:
            raise ValueError("a preset must name at least one value of the swept parameter")
        check_positive(seeds=self.seeds, total_steps=self.total_steps)
        check_int("train_window", self.train_window, 1, self.total_steps, why="at most total_steps")
        check_positive(eval_episodes=self.eval_episodes)
        check_optional_positive("max_episode_steps", self.max_episode_steps, "the environment's own episode end")
        check_int("first_seed", self.first_seed, 0)

    @property
    def seed_range(self) -> range:
        """The training seeds of every value: ``first_seed … first_seed + seeds − 1``."""
        return range(self.first_seed, self.first_seed + self.seeds)


@dataclasses.dataclass(frozen=True, eq=False)
class Track:
    """One leaderboard: an environment family, the swept parameter, the score and the budgets.

    Attributes:
        name: the ``--track`` name.
        title: the board's title (``"T-Maze"``).
        sweep, score: see :class:`Sweep`, :class:`Score`.
        make_env: ``make_env(value, max_episode_steps)`` -> the Gymnasium env of one cell (the
            any-framework tier's vector env holds copies; its spaces are the agents' spaces).
        presets: the named budgets; ``default_preset`` is the one ``run`` uses when none is named, and
            ``tuning_preset`` the one ``tune`` uses (a sweep's budget, on seeds past the boards'; None:
            ``tune`` must be given one).
        legend: the board's explanation of its columns.
        reading: one sentence under the board saying how to read it.
        results_dir, report_dir: default directories of the results store and of ``report``.
        check_cell: ``(value, max_episode_steps)`` of the small cell ``memgym leaderboard check`` uses.
        check_value: ``check_value(value, max_episode_steps)`` raises ``ValueError`` for a cell
            the environment cannot have (beyond ``sweep.choices``), or None.
        jax_env: ``jax_env(value)`` -> the functional JAX env of a value's cells (the JAX tier trains
            on it), or None: the track accepts any-framework agents only. Its ``info`` must carry
            ``score.key`` (a boolean for a counted score, else a number).
        jax_params: ``jax_params(values, max_episode_steps)`` -> the functional env's params of a
            batch of cells (a leading axis over ``values``; every value of the batch shares one env).
        episode_limit: ``episode_limit(value)`` -> the longest episode of a value's JAX env, where the
            env ends every episode itself (POPGym): the JAX tier's evaluation then runs that many steps
            and presets give no ``max_episode_steps``; None: every preset must give one.
        per_value_env: each value has its own JAX env (``jax_env`` ignores its argument otherwise):
            POPGym's difficulties deal decks of other shapes, and its tasks have other spaces. The JAX
            tier then trains one value per call, and builds the agent for that value's spaces.
    """

    name: str
    title: str
    sweep: Sweep
    score: Score
    make_env: Callable[[Any, int | None], Any]
    presets: Mapping[str, Preset]
    default_preset: str
    legend: str
    reading: str
    results_dir: str
    report_dir: str
    check_cell: tuple[Any, int | None]
    check_value: Callable[[Any, int | None], None] | None = None
    jax_env: Callable[[Any], Any] | None = None
    jax_params: Callable[[Sequence[Any], int | None], Any] | None = None
    episode_limit: Callable[[Any], int] | None = None
    per_value_env: bool = False
    tuning_preset: str | None = None

    def __post_init__(self) -> None:
        named = {"default_preset": self.default_preset}
        if self.tuning_preset is not None:
            named["tuning_preset"] = self.tuning_preset
        for field, preset in named.items():
            if preset not in self.presets:
                raise ValueError(f"track {self.name!r}: {field} {preset!r} is not one of its presets")
        if self.jax_env is not None and self.jax_params is None:
            raise ValueError(f"track {self.name!r}: a JAX env needs jax_params")
        for budget in self.presets.values():
            self.check(budget)

    @property
    def tiers(self) -> tuple[str, ...]:
        return ("jax", "any") if self.jax_env is not None else ("any",)

    def accept(self, kind: str, spec: str) -> None:
        """Raise ``ValueError`` when agent ``spec`` is of a tier this track does not run."""
        if kind not in self.tiers:
            names = {"jax": "JAX-tier", "any": "any-framework"}
            raise ValueError(
                f"agent {spec!r} is a {names[kind]} agent, but track {self.name!r} runs "
                f"{' and '.join(names[t] for t in self.tiers)} agents only (it has no functional JAX environment); "
                f"see docs/submitting.md"
            )

    def check(self, budget: Preset) -> None:
        """Raise ``ValueError`` for a budget with a value the environment cannot take."""
        for value in budget.values:
            if self.sweep.choices is not None:
                check_choice(self.sweep.name, value, self.sweep.choices)
            if self.check_value is not None:
                self.check_value(value, budget.max_episode_steps)
        if self.jax_env is not None and budget.max_episode_steps is None and self.episode_limit is None:
            raise ValueError(f"track {self.name!r}: preset {budget.name!r} needs max_episode_steps (the JAX tier's "
                             f"evaluation runs that many steps)")

    def preset(self, name: str | None = None, **overrides: Any) -> Preset:
        """A named preset (default: ``default_preset``) with some fields replaced (``None`` values are ignored)."""
        name = name or self.default_preset
        if name not in self.presets:
            raise ValueError(f"unknown preset {name!r} of track {self.name!r}; choose one of {', '.join(self.presets)}")
        base = self.presets[name]
        overrides = {k: v for k, v in overrides.items() if v is not None}
        if "total_steps" in overrides and "train_window" not in overrides:
            # a shorter budget measures training success over its last fifth at most
            overrides["train_window"] = min(base.train_window, max(1, overrides["total_steps"] // 5))
        if "values" in overrides:
            overrides["values"] = tuple(overrides["values"])
        budget = dataclasses.replace(base, **overrides)
        if budget != base:  # a custom grid is never mistaken for the named preset on a board
            budget = dataclasses.replace(budget, name=f"{name}+custom")
        self.check(budget)
        return budget

    def budget_record(self, budget: Preset) -> dict[str, Any]:
        """A budget as records store it (``values`` under the sweep's ``plural`` name)."""
        record = dataclasses.asdict(budget)
        record[self.sweep.plural] = record.pop("values")
        if not record["first_seed"]:
            del record["first_seed"]  # seeds from 0: stored as before the field existed
        return record

    def budget_from_record(self, record: dict[str, Any]) -> Preset:
        """The :class:`Preset` of a record's ``preset`` (the inverse of :meth:`budget_record`)."""
        fields = {f.name for f in dataclasses.fields(Preset)} - {"values"}
        return Preset(values=tuple(record[self.sweep.plural]), **{k: record[k] for k in fields if k in record})

    def evaluation_steps(self, budget: Preset, value: Any = None) -> int:
        """The steps the JAX tier's evaluation of a value's cells runs: the budget's ``max_episode_steps``, else the
        longest episode of the value's env (``episode_limit``)."""
        if budget.max_episode_steps is not None:
            return int(budget.max_episode_steps)
        return int(self.episode_limit(self.check_cell[0] if value is None else value))

    def env_key(self, value: Any) -> Any:
        """What decides a cell's JAX env: its value where each value has its own (``per_value_env``), else
        None (one env serves every value). Cells of one key train in one call and share one exported act."""
        return value if self.per_value_env else None

    @property
    def score_units(self) -> int | None:
        """How the JAX tier counts the score: None for a yes/no one, else in units of 1/:data:`SCORE_UNITS`."""
        return None if self.score.counted else SCORE_UNITS

    def spaces(self, value: Any = None) -> tuple[Any, Any]:
        """Observation and action space of the env of a cell (default: the ``check_cell``'s)."""
        env = self.make_env(self.check_cell[0] if value is None else value, None)
        try:
            return env.observation_space, env.action_space
        finally:
            env.close()

    def context(self, *, num_envs: int = 8, seed: int = 0, total_steps: int = 0, value: Any = None) -> AgentContext:
        """What a factory is told; ``value`` is the cell's value of the swept parameter (None: every value)."""
        observation_space, action_space = self.spaces(value)
        return AgentContext(observation_space=observation_space, action_space=action_space, num_envs=num_envs,
                            seed=seed, total_steps=total_steps, track=self.name, parameter=self.sweep.name,
                            parameter_value=value, jax_env=self.jax_env is not None)

    def store(self, root: Any) -> ResultsStore:
        return ResultsStore(root, prefix=self.sweep.short, value_key=self.sweep.name, values_key=self.sweep.plural,
                            score_key=self.score.name, score_bounds=self.score.bounds)

    def records(self, store: ResultsStore) -> Iterator[dict[str, Any]]:
        """The store's records; ``ValueError`` for one of another track (each track has its own directory): a
        record that names another ``track``, has no value of this track's swept parameter or one it does not
        have (records written before they named their track are told apart by the last two alone)."""
        for record in store.records():
            value = record.get(self.sweep.name)
            if record.get("track", self.name) != self.name:
                why = f"it is of track {record['track']!r}"
            elif self.sweep.name not in record:
                why = f"it has no {self.sweep.name!r}"
            elif self.sweep.choices is not None and value not in self.sweep.choices:
                why = f"its {self.sweep.name} {value!r} is not one of the track's"
            else:
                yield record
                continue
            hint = (f"pass --track {record['track']} if this folder holds that track's results, and "
                    if record.get("track", self.name) != self.name else "")
            raise ValueError(f"{record['path']} is not a result of track {self.name!r} ({why}); {hint}give each "
                             f"track its own --results directory")


# --- the built-in tracks ---------------------------------------------------------------------


def _presets(*presets: Preset) -> dict[str, Preset]:
    return {p.name: p for p in presets}


# --- T-Maze ----------------------------------------------------------------------------------


def _tmaze_env(corridor_length: int, max_episode_steps: int | None) -> tmaze.TMazeEnv:
    return tmaze.TMazeEnv(corridor_length=corridor_length,
                          max_episode_steps=max_episode_steps or tmaze.DEFAULT_MAX_EPISODE_STEPS)


def _tmaze_check(corridor_length: int, max_episode_steps: int | None) -> None:
    tmaze.validate_config(corridor_length, tmaze.DEFAULT_NUM_DISTRACTORS, tmaze.DEFAULT_GRAY_BITS,
                          max_episode_steps or tmaze.DEFAULT_MAX_EPISODE_STEPS)


def _tmaze_jax_env(corridor_length: int | None = None):
    """The JAX T-Maze (one env for every corridor length: the length is a param)."""
    from memgym.envs.tmaze_jax import TMazeJax

    return TMazeJax()


def _tmaze_jax_params(corridor_lengths: Sequence[int], max_episode_steps: int | None):
    from memgym.envs.tmaze_jax import tmaze_params

    lengths = np.asarray(corridor_lengths)
    return tmaze_params(lengths, max_episode_steps=np.full(len(lengths), max_episode_steps))


THESIS_LENGTHS = (120, 140, 160, 180, 200)  # thesis §5.1.2

TMAZE = Track(
    name="tmaze",
    title="T-Maze",
    sweep=Sweep(name="corridor_length", plural="corridor_lengths", short="L"),
    score=Score(key="success", name="success_rate", total="successes", label="success", chance=0.5, solved=0.9),
    make_env=_tmaze_env,
    check_value=_tmaze_check,
    jax_env=_tmaze_jax_env,
    jax_params=_tmaze_jax_params,
    check_cell=(3, 50),
    presets=_presets(
        # A 2-core CPU finishes this in about a minute (the README's main job). 256 evaluation episodes: a
        # memoryless policy scores the share of evaluation cues on the side it prefers, within ±0.04 of 0.5.
        Preset("smoke", (4, 8, 12), seeds=2, total_steps=100_000, train_window=20_000, eval_episodes=256,
               max_episode_steps=100),
        # The CPU reference board (docs/reproduction.md): corridors from where every memory holds the cue to where
        # the weak ones lose it, 1000-step episodes so that the memoryless control reaches the junction (it
        # scores 0.5) at every length; docs/leaderboard/tmaze-cpu/ holds its records and board.
        Preset("cpu", (16, 32, 64), seeds=5, total_steps=1_500_000, train_window=100_000, eval_episodes=200,
               max_episode_steps=1000),
        # Its tuning sweep (`memgym leaderboard tune --preset cpu-tune`): the board's budget and lengths on seeds
        # 100-102, disjoint from the board's 0-4, so that the thesis's rule (best mean over lengths and seeds) sees
        # a configuration that fails at a short corridor. The first sweep ran at 64 alone; its records count here.
        Preset("cpu-tune", (16, 32, 64), seeds=3, total_steps=1_500_000, train_window=100_000, eval_episodes=200,
               max_episode_steps=1000, first_seed=100),
        Preset("standard", (20, 40, 60, 80, 100), seeds=5, total_steps=2_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
        # Thesis §5.1.2: corridor lengths 120-200, 10M steps, 50 seeds, success over the last 100K steps (GPU).
        Preset("thesis", THESIS_LENGTHS, seeds=50, total_steps=10_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
        # The same with 10 seeds: a fifth of the cost, wider intervals (not the thesis protocol).
        Preset("thesis-10-seeds", THESIS_LENGTHS, seeds=10, total_steps=10_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
        # The long-corridor CPU board (docs/reproduction.md): compact models from where they hold the cue (64) into
        # the thesis's range and past it; 10M steps per cell, the thesis's budget. Its tuning sweep runs on seeds
        # 100-101, disjoint from the board's 0-4, at its lengths from 128 on (as Table A.1 sweeps every length of
        # the thesis's range; 200 was added when a selection made at 128 and 256 alone stopped walking at 200) and
        # half its budget (as Table A.1's sweep is half the thesis's runs).
        Preset("cpu-long", (64, 128, 200, 256), seeds=5, total_steps=10_000_000, train_window=100_000,
               eval_episodes=200, max_episode_steps=1000),
        Preset("cpu-long-tune", (128, 200, 256), seeds=2, total_steps=5_000_000, train_window=100_000,
               eval_episodes=200, max_episode_steps=1000, first_seed=100),
        # The thesis's configuration at one length (docs/reproduction.md): thesis-size agents, 10M steps, L = 120,
        # 3 seeds; on a 2-core CPU a batch trains for hours: run it with --checkpoints.
        Preset("thesis-120", (120,), seeds=3, total_steps=10_000_000, train_window=100_000, eval_episodes=100,
               max_episode_steps=1000),
        # Thesis Appendix A.1: the hyperparameter sweep's budget (`memgym leaderboard tune`), 5 seeds × 5M steps.
        Preset("tune", THESIS_LENGTHS, seeds=5, total_steps=5_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
    ),
    default_preset="thesis",
    tuning_preset="tune",
    legend=(
        "Score: mean evaluation success over corridor lengths [95% stratified bootstrap]. "
        "Cells: cells that ran ok / cells planned (corridor lengths × seeds); a failed cell counts as success 0 "
        "everywhere; an incomplete agent (planned cells never run) is not ranked and follows the complete ones. "
        "An agent whose code or config changed has one row per version (name@v2, …). "
        "Per length: evaluation success, mean ± standard error over seeds. "
        "L*: longest corridor whose lower 95% bound is ≥ 0.9. "
        "Train: success over the last training window (the thesis metric). "
        "Repeats: extra results of already scored cells (not counted in the score). "
        "Flags: a collapsed cell (its last training window scores 0.25 or more below the best twentieth of the same "
        "run: it had solved the task in training and lost it), a length where the agent scores 0.25 or less in its "
        "cells that ran (far below chance: it does not reach the junction, so there the board measures exploration, "
        "not memory) and a length where cells failed (each counted as success 0)."
    ),
    reading=(
        "How to read it: 0.5 is chance — an agent that forgot the cue guesses the turn, as the memoryless control "
        "does — and 1.0 is a perfect memory, so an agent remembers the cue over a corridor of length L where its "
        "score at L is well above 0.5. A length's evaluation episodes are the same for every agent and seed and do "
        "not cue each side exactly half the time, so an agent that takes one turn whatever the cue scores that "
        "side's share (0.40–0.60 on the published boards), with no spread across seeds that all turn the same way."
    ),
    results_dir="leaderboard-results",
    report_dir="docs/leaderboard",
)


# --- POPGym ----------------------------------------------------------------------------------

DIFFICULTIES = ("Easy", "Medium", "Hard")
#: the monoid paper's four POPGym tasks (its Figure 6)
PAPER_TASKS = ("RepeatFirst", "RepeatPrevious", "CountRecall", "PositionOnlyCartPole")


def _popgym_env(task: str, max_episode_steps: int | None):
    from memgym.envs import popgym

    _popgym_check(task, max_episode_steps)
    return popgym.make(task)


def _popgym_check(task: str, max_episode_steps: int | None) -> None:
    if max_episode_steps is not None:
        raise ValueError(f"max_episode_steps={max_episode_steps}: a POPGym task ends its own episodes (its longest "
                         f"is its difficulty's); allowed: None")


@functools.cache
def _popgym_jax_env(task: str):
    """The JAX version of popgym task ``task`` (memgym.envs.popgym_jax, step for step with popgym's)."""
    from memgym.envs.popgym_jax.registration import task_class

    return task_class(task)()


def _popgym_jax_params(tasks: Sequence[str], max_episode_steps: int | None):
    import jax
    import jax.numpy as jnp

    _popgym_check(tasks[0], max_episode_steps)
    params = [_popgym_jax_env(task).default_params for task in tasks]
    return jax.tree.map(lambda *leaves: jnp.stack([jnp.asarray(leaf) for leaf in leaves]), *params)


def _popgym_episode_limit(task: str) -> int:
    return int(_popgym_jax_env(task).default_params.max_steps_in_episode)


def popgym_envs(task_of: Callable[[Any], str] = str) -> dict[str, Any]:
    """The env fields of a track whose cells are POPGym tasks: ``task_of(value)`` is the cell's popgym class name
    (``"RepeatPreviousEasy"``). Both tiers: popgym's own task through Gymnasium (any-framework tier) and its JAX
    version (the JAX tier, one env per value); popgym's tasks end their own episodes (no ``max_episode_steps``)."""
    return dict(make_env=lambda value, limit: _popgym_env(task_of(value), limit),
                check_value=lambda value, limit: _popgym_check(task_of(value), limit),
                jax_env=lambda value: _popgym_jax_env(task_of(value)),
                jax_params=lambda values, limit: _popgym_jax_params([task_of(v) for v in values], limit),
                episode_limit=lambda value: _popgym_episode_limit(task_of(value)), per_value_env=True)


POPGYM_SCORE = Score(key="normalized_return", name="normalized_return", total="normalized_return_sum",
                     label="normalized return", counted=False, bounds=(-1.0, 1.0), chance=-0.5)

POPGYM_REPEAT_PREVIOUS = Track(
    name="popgym-repeat-previous",
    title="POPGym RepeatPrevious",
    sweep=Sweep(name="difficulty", plural="difficulties", choices=DIFFICULTIES),
    score=POPGYM_SCORE,
    **popgym_envs(lambda difficulty: "RepeatPrevious" + difficulty),
    check_cell=("Easy", None),
    presets=_presets(
        Preset("smoke", DIFFICULTIES, seeds=2, total_steps=100_000, train_window=20_000, eval_episodes=64),
        # The CPU reference board (docs/reproduction.md): Easy only, where PPO's compact agents learn within the
        # budget and memory separates them from the control; docs/leaderboard/popgym-repeat-previous-cpu/.
        Preset("cpu", ("Easy",), seeds=3, total_steps=500_000, train_window=50_000, eval_episodes=100),
        # cpu's tuning sweep: half its budget (as the thesis's Table A.1 sweep is half its runs), seed 100.
        Preset("cpu-tune", ("Easy",), seeds=1, total_steps=250_000, train_window=50_000, eval_episodes=100,
               first_seed=100),
        Preset("standard", DIFFICULTIES, seeds=5, total_steps=2_000_000, train_window=100_000, eval_episodes=100),
    ),
    default_preset="standard",
    tuning_preset="cpu-tune",
    legend=(
        "Score: mean evaluation normalized return over difficulties [95% stratified bootstrap]; an episode's "
        "normalized return lies in [−1, 1] (1: every suit repeated correctly; a random policy scores −0.5). "
        "Cells: cells that ran ok / cells planned (difficulties × seeds); a failed cell counts as −1 (the worst "
        "normalized return) everywhere; an incomplete agent (planned cells never run) is not ranked and follows the "
        "complete ones. An agent whose code or config changed has one row per version (name@v2, …). "
        "Per difficulty: evaluation normalized return, mean ± standard error over seeds. "
        "Train: normalized return over the last training window. "
        "Repeats: extra results of already scored cells (not counted in the score). "
        "Flags: a collapsed cell (its last training window scores 0.5 or more below the best twentieth of the same "
        "run: it had learned, then lost it) and a difficulty where cells failed (each counted as −1)."
    ),
    reading=(
        "How to read it: −0.5 is what a random policy scores and 1.0 a perfect repeat of the card shown a few "
        "steps earlier, so the higher an agent stands above −0.5 the more of the recent cards it remembers."
    ),
    results_dir="leaderboard-results-popgym-repeat-previous",
    report_dir="docs/leaderboard-popgym-repeat-previous",
)


#: the board legend and reading of a track whose columns are POPGym tasks
POPGYM_TASKS_LEGEND = (
    "Score: mean evaluation normalized return over tasks [95% stratified bootstrap]. POPGym scales every task's "
    "rewards so that an episode's return lies in [−1, 1]; the board takes those returns as they are, averages "
    "a task's seeds, then the tasks unweighted, as POPGym's paper aggregates (it reports the best mean return "
    "over training, MMER; the board the trained policy's evaluation). IQM: rliable's interquartile mean over "
    "runs × tasks. "
    "Cells: cells that ran ok / cells planned (tasks × seeds); a failed cell counts as −1 (the worst normalized "
    "return) everywhere; an incomplete agent (planned cells never run) is not ranked and follows the complete "
    "ones. An agent whose code or config changed has one row per version (name@v2, …). "
    "Per task: evaluation normalized return, mean ± standard error over seeds. "
    "Train: normalized return over the last training window. "
    "Repeats: extra results of already scored cells (not counted in the score). "
    "Flags: a collapsed cell (its last training window scores 0.5 or more below the best twentieth of the same "
    "run: it had learned, then lost it) and a task where cells failed (each counted as −1)."
)
POPGYM_TASKS_READING = (
    "How to read it: 1.0 is a perfect episode on every task and −1.0 the worst; what a random policy scores "
    "differs by task (about −0.5 on the card tasks, where a memoryless policy guesses among four suits), so "
    "compare agents column by column, and against the memoryless control."
)


#: POPGym's groups of its task families, as popgym's README tags them (a family may carry two tags)
POPGYM_GROUPS: dict[str, tuple[str, ...]] = {
    "diagnostic": ("RepeatFirst", "RepeatPrevious", "Autoencode", "CountRecall"),
    "control": ("PositionOnlyCartPole", "VelocityOnlyCartPole", "NoisyPositionOnlyCartPole", "PositionOnlyPendulum",
                "NoisyPositionOnlyPendulum"),
    "noisy": ("CountRecall", "HigherLower", "MultiarmedBandit", "NoisyPositionOnlyCartPole", "NoisyPositionOnlyPendulum"),
    "game": ("Battleship", "Concentration", "HigherLower", "MineSweeper"),
    "navigation": ("LabyrinthEscape", "LabyrinthExplore"),
}
#: every task family of popgym 1.0.7, group by group
POPGYM_FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(family for group in POPGYM_GROUPS.values() for family in group))


def popgym_tasks_track(name: str, title: str, families: Sequence[str], check_task: str | None = None,
                       cpu_seeds: int = 3) -> Track:
    """A track whose columns are the POPGym tasks of ``families`` (every difficulty; presets ``smoke`` and ``cpu``
    (``cpu_seeds`` seeds) at Easy, ``standard`` at all three), scored by the normalized return averaged over tasks,
    both tiers; ``memgym leaderboard check`` runs ``check_task`` (default: the first family at Easy).

    Preset ``cpu-tune`` is ``cpu``'s tuning sweep (``memgym leaderboard tune``): the same tasks at half its
    budget (as the thesis's Table A.1 sweep is half its runs), one seed, 100, disjoint from the board's."""
    easy = tuple(family + "Easy" for family in families)
    every = tuple(family + difficulty for family in families for difficulty in DIFFICULTIES)
    return Track(
        name=name,
        title=title,
        sweep=Sweep(name="task", plural="tasks", choices=every),
        score=dataclasses.replace(POPGYM_SCORE, chance=None),
        **popgym_envs(),
        check_cell=(check_task or easy[0], None),
        presets=_presets(
            Preset("smoke", easy, seeds=2, total_steps=100_000, train_window=20_000, eval_episodes=64),
            Preset("cpu", easy, seeds=cpu_seeds, total_steps=500_000, train_window=50_000, eval_episodes=100),
            Preset("cpu-tune", easy, seeds=1, total_steps=250_000, train_window=50_000, eval_episodes=100,
                   first_seed=100),
            Preset("standard", every, seeds=5, total_steps=5_000_000, train_window=100_000, eval_episodes=100),
        ),
        default_preset="standard",
        tuning_preset="cpu-tune",
        legend=POPGYM_TASKS_LEGEND,
        reading=POPGYM_TASKS_READING,
        results_dir=f"leaderboard-results-{name}",
        report_dir=f"docs/leaderboard-{name}",
    )


#: the monoid paper's four tasks (its Figure 6); the CPU reference board (docs/leaderboard/popgym-cpu/) is its ``cpu``
#: preset, 5 seeds, in the JAX tier
POPGYM = popgym_tasks_track("popgym", "POPGym (the monoid paper's four tasks)", PAPER_TASKS,
                            check_task="RepeatPreviousEasy", cpu_seeds=5)
#: the whole suite, every family a column (track ``popgym-suite``)
POPGYM_SUITE = popgym_tasks_track("popgym-suite", "POPGym (every task family)", POPGYM_FAMILIES)
#: one track per POPGym group (``popgym-diagnostic``, ``popgym-control``, ``popgym-noisy``, ``popgym-game``,
#: ``popgym-navigation``)
POPGYM_GROUP_TRACKS: dict[str, Track] = {
    group: popgym_tasks_track(f"popgym-{group}", f"POPGym ({group} tasks)", families)
    for group, families in POPGYM_GROUPS.items()
}

TRACKS: dict[str, Track] = {track.name: track for track in (
    TMAZE, POPGYM_REPEAT_PREVIOUS, POPGYM, POPGYM_SUITE, *POPGYM_GROUP_TRACKS.values())}


def get(name: str) -> Track:
    """The registered track called ``name``."""
    if name not in TRACKS:
        raise ValueError(f"unknown track {name!r}; choose one of {', '.join(TRACKS)}")
    return TRACKS[name]
