"""The leaderboard's tracks, one board each. A new track is a new entry here (see :class:`Track`).

* ``tmaze`` (default): T-Maze success rate across corridor lengths (thesis §5.1), both tiers.
* ``popgym-repeat-previous``: POPGym RepeatPrevious normalised return across Easy / Medium /
  Hard (monoid paper §6), any-framework tier (POPGym has no functional JAX env).
"""

from __future__ import annotations

from collections.abc import Sequence
import numpy as np

from memgym.envs import tmaze
from memgym.leaderboard.track import Preset, Score, Sweep, Track


def _presets(*presets: Preset) -> dict[str, Preset]:
    return {p.name: p for p in presets}


# --- T-Maze ----------------------------------------------------------------------------------


def _tmaze_env(corridor_length: int, max_episode_steps: int | None) -> tmaze.TMazeEnv:
    return tmaze.TMazeEnv(corridor_length=corridor_length,
                          max_episode_steps=max_episode_steps or tmaze.DEFAULT_MAX_EPISODE_STEPS)


def _tmaze_check(corridor_length: int, max_episode_steps: int | None) -> None:
    tmaze.validate_config(corridor_length, tmaze.DEFAULT_NUM_DISTRACTORS, tmaze.DEFAULT_GRAY_BITS,
                          max_episode_steps or tmaze.DEFAULT_MAX_EPISODE_STEPS)


def _tmaze_jax_env():
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
        # A 2-core CPU finishes this in a few minutes (the README's main job). 256 evaluation episodes: a
        # memoryless policy scores the share of evaluation cues on the side it prefers, within ±0.04 of 0.5.
        Preset("smoke", (4, 8, 12), seeds=2, total_steps=100_000, train_window=20_000, eval_episodes=256,
               max_episode_steps=100),
        Preset("standard", (20, 40, 60, 80, 100), seeds=5, total_steps=2_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
        # Thesis §5.1.2: corridor lengths 120-200, 10M steps, 50 seeds, success over the last 100K steps (GPU).
        Preset("thesis", THESIS_LENGTHS, seeds=50, total_steps=10_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
        # The same with 10 seeds: a fifth of the cost, wider intervals (not the thesis protocol).
        Preset("thesis-10-seeds", THESIS_LENGTHS, seeds=10, total_steps=10_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
        # Thesis Appendix A.1: the hyperparameter sweep's budget (`memgym leaderboard tune`), 5 seeds × 5M steps.
        Preset("tune", THESIS_LENGTHS, seeds=5, total_steps=5_000_000, train_window=100_000,
               eval_episodes=100, max_episode_steps=1000),
    ),
    default_preset="thesis",
    legend=(
        "Score: mean evaluation success over corridor lengths [95% stratified bootstrap]. "
        "Cells: cells that ran ok / cells planned (corridor lengths × seeds); a failed cell counts as success 0 "
        "everywhere; an incomplete agent (planned cells never run) is not ranked and follows the complete ones. "
        "An agent whose code or config changed has one row per version (name@v2, …). "
        "Per length: evaluation success, mean ± standard error over seeds. "
        "L*: longest corridor whose lower 95% bound is ≥ 0.9. "
        "Train: success over the last training window (the thesis metric). "
        "Repeats: extra results of already scored cells (not counted in the score)."
    ),
    reading=(
        "How to read it: 0.5 is chance — an agent that forgot the cue guesses the turn, as the memoryless control "
        "does — and 1.0 is a perfect memory, so an agent remembers the cue over a corridor of length L where its "
        "score at L is well above 0.5."
    ),
    results_dir="leaderboard-results",
    report_dir="docs/leaderboard",
)


# --- POPGym RepeatPrevious -------------------------------------------------------------------

DIFFICULTIES = ("Easy", "Medium", "Hard")


def _repeat_previous_env(difficulty: str, max_episode_steps: int | None):
    from memgym.envs import popgym

    limit = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    return popgym.make(f"RepeatPrevious{difficulty}", **limit)


POPGYM_REPEAT_PREVIOUS = Track(
    name="popgym-repeat-previous",
    title="POPGym RepeatPrevious",
    sweep=Sweep(name="difficulty", plural="difficulties", choices=DIFFICULTIES),
    score=Score(key="normalized_return", name="normalized_return", total="normalized_return_sum",
                label="normalized return", counted=False, bounds=(-1.0, 1.0), chance=-0.5),
    make_env=_repeat_previous_env,
    check_cell=("Easy", None),
    presets=_presets(
        Preset("smoke", DIFFICULTIES, seeds=2, total_steps=100_000, train_window=20_000, eval_episodes=64),
        Preset("standard", DIFFICULTIES, seeds=5, total_steps=2_000_000, train_window=100_000, eval_episodes=100),
    ),
    default_preset="standard",
    legend=(
        "Score: mean evaluation normalized return over difficulties [95% stratified bootstrap]; an episode's "
        "normalized return lies in [−1, 1] (1: every suit repeated correctly; a random policy scores −0.5). "
        "Cells: cells that ran ok / cells planned (difficulties × seeds); a failed cell counts as −1 (the worst "
        "normalized return) everywhere; an incomplete agent (planned cells never run) is not ranked and follows the "
        "complete ones. An agent whose code or config changed has one row per version (name@v2, …). "
        "Per difficulty: evaluation normalized return, mean ± standard error over seeds. "
        "Train: normalized return over the last training window. "
        "Repeats: extra results of already scored cells (not counted in the score). "
        "Any-framework agents only."
    ),
    reading=(
        "How to read it: −0.5 is what a random policy scores and 1.0 a perfect repeat of the card shown a few "
        "steps earlier, so the higher an agent stands above −0.5 the more of the recent cards it remembers."
    ),
    results_dir="leaderboard-results-popgym-repeat-previous",
    report_dir="docs/leaderboard-popgym-repeat-previous",
)


TRACKS: dict[str, Track] = {track.name: track for track in (TMAZE, POPGYM_REPEAT_PREVIOUS)}


def get(name: str) -> Track:
    """The registered track called ``name``."""
    if name not in TRACKS:
        raise ValueError(f"unknown track {name!r}; choose one of {', '.join(TRACKS)}")
    return TRACKS[name]
