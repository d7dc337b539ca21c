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


def bootstrap_mean_interval(values: np.ndarray, *, samples: int = BOOTSTRAP_SAMPLES, confidence: float = CONFIDENCE,
                            seed: int = 0) -> tuple[float, float]:
    """:func:`stratified_bootstrap` of the mean of one stratum, every resample at once: the same interval.

    NumPy draws ``integers(0, n, (samples, n))`` in the order ``samples`` calls of ``integers(0, n, n)`` do,
    and a row's mean is the mean of that resample, so the draws, and the interval, are the loop's exactly
    (tests/leaderboard/test_stats.py checks it), in one array operation instead of ``samples`` NumPy calls.
    """
    values = np.asarray(values, np.float64)
    rng = np.random.default_rng(seed)
    draws = values[rng.integers(0, values.size, (samples, values.size))].mean(axis=1)
    return percentile_interval(draws, confidence)


def summarize_length(values: Sequence[float], *, seed: int = 0) -> dict[str, float]:
    """Mean, SE, IQM and the bootstrap interval of the mean of one corridor length's seeds."""
    values = np.asarray(values, np.float64)
    low, high = bootstrap_mean_interval(values, seed=seed)
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
    headline = float(np.mean([s.mean() for s in strata]))
    low, high = stratified_bootstrap(strata, lambda ss: np.mean([s.mean() for s in ss]), seed=seed)
    solved = [] if solved is None else [length for length in lengths if per_length[length]["ci_low"] >= solved]
    return {
        "per_length": per_length,
        "score": headline,
        "score_ci": [low, high],
        "iqm": float(iqm(np.concatenate(strata))),
        "longest_solved": solved[-1] if solved else None,
    }
