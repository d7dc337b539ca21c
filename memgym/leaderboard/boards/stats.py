"""Statistics of a leaderboard: per value of the swept parameter (a corridor length) and overall.

* mean ± standard error over seeds — the thesis's statistic (Fig. 5.2, 5.3);
* interquartile mean (IQM) and 95% *stratified* bootstrap intervals — the
  recommendation of Agarwal et al. (2021, "Deep RL at the edge of the statistical
  precipice", the ``rliable`` library): seeds are resampled with replacement
  *within* each value (the strata), never across them;
* the headline score: the mean score over values (T-Maze: success over corridor lengths);
* ``longest_solved`` (T-Maze ``L*``): the last value whose lower 95% bound is at least 0.9.

The summaries keep the T-Maze names ``per_length`` and ``longest_solved`` for every track.

Pure numpy; the bootstrap uses an explicit seed, so a board is reproducible.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

BOOTSTRAP_SAMPLES = 2000
CONFIDENCE = 0.95
SOLVED = 0.9


def iqm(values: np.ndarray, axis: int = -1) -> np.ndarray:
    """Interquartile mean as rliable defines it (Agarwal et al. 2021; ``rliable.metrics.aggregate_iqm``, which is
    ``scipy.stats.trim_mean(scores, 0.25)`` over every run of every task): with the ``n`` values along ``axis``
    sorted, the lowest and the highest ``floor(n/4)`` are dropped and the rest averaged (so for ``n < 4`` it is
    the mean; tests/leaderboard/test_stats.py checks it against rliable on the published boards' records).
    """
    values = np.sort(np.asarray(values, np.float64), axis=axis)
    n = values.shape[axis]
    if n == 0:
        raise ValueError("iqm needs at least one value")
    cut = int(0.25 * n)
    return np.take(values, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def standard_error(values: np.ndarray) -> float:
    values = np.asarray(values, np.float64)
    if values.size < 2:
        return float("nan")
    return float(values.std(ddof=1) / np.sqrt(values.size))


def stratified_bootstrap(
    strata: Sequence[np.ndarray],
    statistic,
    *,
    samples: int = BOOTSTRAP_SAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of ``statistic(list of resampled strata)``; each stratum resampled on its own."""
    rng = np.random.default_rng(seed)
    strata = [np.asarray(s, np.float64) for s in strata]
    draws = np.empty(samples)
    for i in range(samples):
        draws[i] = statistic([s[rng.integers(0, s.size, s.size)] for s in strata])
    return percentile_interval(draws, confidence)


def percentile_interval(draws: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` interval of the bootstrap ``draws`` (their percentiles)."""
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return float(low), float(high)


def mean_of_means(strata: Sequence[np.ndarray]) -> float:
    """The headline statistic: the mean over strata (corridor lengths) of each stratum's mean (over seeds)."""
    return float(np.mean([s.mean() for s in strata]))


def bootstrap_mean_of_means_interval(strata: Sequence[np.ndarray], *, samples: int = BOOTSTRAP_SAMPLES,
                                     confidence: float = CONFIDENCE, seed: int = 0) -> tuple[float, float]:
    """:func:`stratified_bootstrap` of :func:`mean_of_means`, every resample at once where it can be: the same
    interval, draw for draw.

    With every stratum of one size ``n`` (a complete row: as many seeds at every length), the loop calls
    ``integers(0, n, n)`` once per stratum per resample, all with the same bound, and NumPy draws
    ``integers(0, n, (samples, strata, n))`` in that order; a resample's stratum means and their mean are
    reductions along contiguous rows, as the loop's are. So the draws, and the interval, are the loop's
    exactly (tests/leaderboard/test_stats.py checks it), in a few array operations instead of
    ``samples × strata`` NumPy calls. Strata of different sizes draw with different bounds, interleaved
    resample by resample; they take the loop.
    """
    strata = [np.asarray(s, np.float64) for s in strata]
    sizes = {s.size for s in strata}
    if len(sizes) != 1:
        return stratified_bootstrap(strata, mean_of_means, samples=samples, confidence=confidence, seed=seed)
    n = sizes.pop()
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, (samples, len(strata), n))
    resampled = np.take_along_axis(np.stack(strata)[None], picks, axis=2)
    return percentile_interval(resampled.mean(axis=2).mean(axis=1), confidence)


def summarize_length(values: Sequence[float], *, seed: int = 0) -> dict[str, float]:
    """Mean, SE, IQM and the bootstrap interval of the mean of one corridor length's seeds."""
    values = np.asarray(values, np.float64)
    low, high = bootstrap_mean_of_means_interval([values], seed=seed)
    return {
        "n": int(values.size),
        "mean": float(values.mean()),
        "se": standard_error(values),
        "iqm": float(iqm(values)),
        "ci_low": low,
        "ci_high": high,
    }


def summarize(by_length: Mapping[Any, Sequence[float]], *, seed: int = 0, order: Callable[[Any], Any] | None = None,
              solved: float | None = SOLVED) -> dict:
    """Per-value summaries, the headline score with its stratified interval, overall IQM and ``L*``.

    Values are ordered by ``order`` (a sort key; default: their own order); ``longest_solved``
    is the last one whose lower 95% bound reaches ``solved`` (None: never set).
    """
    if not by_length:
        raise ValueError("summarize needs results for at least one value (corridor length)")
    lengths = sorted(by_length, key=order)
    per_length = {length: summarize_length(by_length[length], seed=seed + i) for i, length in enumerate(lengths)}
    strata = [np.asarray(by_length[length], np.float64) for length in lengths]
    headline = mean_of_means(strata)
    low, high = bootstrap_mean_of_means_interval(strata, seed=seed)
    solved = [] if solved is None else [length for length in lengths if per_length[length]["ci_low"] >= solved]
    return {
        "per_length": per_length,
        "score": headline,
        "score_ci": [low, high],
        "iqm": float(iqm(np.concatenate(strata))),
        "longest_solved": solved[-1] if solved else None,
    }
