"""Leaderboard statistics: IQM, standard error, stratified bootstrap, headline score and L*."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym.leaderboard.boards.stats import (bootstrap_mean_of_means_interval, iqm, mean_of_means, standard_error,
                                            stratified_bootstrap, summarize)


def test_iqm_known_values():
    assert iqm(np.array([0.0, 1.0, 2.0, 100.0])) == pytest.approx(1.5)  # middle two of four
    assert iqm(np.arange(8.0)) == pytest.approx(np.mean([2, 3, 4, 5]))
    assert iqm(np.array([3.0])) == 3.0
    # n = 5: floor(5 / 4) = 1 value dropped at each end (rliable's, i.e. scipy's trim_mean, not a weighted quarter)
    assert iqm(np.array([0.0, 1.0, 2.0, 3.0, 40.0])) == pytest.approx(2.0)
    assert iqm(np.array([[0.0, 9.0, 1.0, 2.0], [5.0, 5.0, 5.0, 5.0]]), axis=1) == pytest.approx([1.5, 5.0])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1, 1), min_size=1, max_size=60))
def test_iqm_is_scipys_trimmed_mean(values):
    from scipy import stats

    assert iqm(np.array(values)) == pytest.approx(stats.trim_mean(values, 0.25), abs=1e-12)


@pytest.mark.parametrize("board", ["tmaze-cpu", "popgym-repeat-previous-cpu"])
def test_the_board_iqm_is_rliables_on_the_published_records(board):
    """A board's IQM column is ``rliable.metrics.aggregate_iqm`` of its cells (runs x tasks: seeds x values, a failed
    cell at the track's worst score), on the published records of both reference boards."""
    from collections import defaultdict

    from rliable import metrics

    from memgym.leaderboard.boards import report
    from memgym.leaderboard.running.planning import version_label
    from memgym.leaderboard.store import result_order
    from memgym.leaderboard.tracks import POPGYM_REPEAT_PREVIOUS, TMAZE

    track = TMAZE if board.startswith("tmaze") else POPGYM_REPEAT_PREVIOUS
    store = track.store(Path(__file__).resolve().parents[2] / "docs" / "leaderboard" / board)
    results = defaultdict(list)
    for record in track.records(store):
        row = version_label(record["agent"], record.get("version", 1))  # a version is a row of its own
        results[(row, record[track.sweep.name], record["seed"])].append(record)
    scores: dict[str, dict[tuple, float]] = defaultdict(dict)
    for (agent, value, seed), records in results.items():  # a cell counts with its first ok result, else fails
        counted = next((r for r in sorted(records, key=result_order) if r["status"] == "ok"), None)
        scores[agent][(value, seed)] = track.score.bounds[0] if counted is None else counted["eval"][track.score.name]
    entries = {e["agent"]: e for e in report.build_board(store, track)["entries"]}
    assert set(entries) == set(scores) and len(entries) >= 4
    for agent, cells in scores.items():
        values = sorted({v for v, _ in cells})
        seeds = sorted({s for _, s in cells})
        matrix = np.array([[cells[(v, s)] for v in values] for s in seeds])  # runs x tasks, as rliable takes them
        assert entries[agent]["eval"]["iqm"] == pytest.approx(metrics.aggregate_iqm(matrix), abs=1e-12), agent


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_iqm_lies_between_min_and_max_and_ignores_outliers(values):
    values = np.array(values)
    assert values.min() - 1e-12 <= iqm(values) <= values.max() + 1e-12


def test_standard_error():
    assert standard_error(np.array([1.0, 3.0])) == pytest.approx(1.0)
    assert np.isnan(standard_error(np.array([1.0])))


def test_bootstrap_interval_contains_mean_and_shrinks_with_data():
    rng = np.random.default_rng(0)
    small = rng.random(5)
    large = rng.random(500)
    lo_s, hi_s = stratified_bootstrap([small], lambda s: s[0].mean())
    lo_l, hi_l = stratified_bootstrap([large], lambda s: s[0].mean())
    assert lo_s <= small.mean() <= hi_s and lo_l <= large.mean() <= hi_l
    assert hi_l - lo_l < hi_s - lo_s


@settings(max_examples=80, deadline=None)
@given(sizes=st.one_of(st.tuples(st.integers(1, 12), st.integers(1, 6)).map(lambda nk: [nk[0]] * nk[1]),
                       st.lists(st.integers(1, 12), min_size=1, max_size=6)),
       data=st.data(), seed=st.integers(0, 2**16), samples=st.integers(1, 300))
def test_the_array_bootstrap_of_the_mean_of_means_is_the_loops_exactly(sizes, data, seed, samples):
    """Fast form == step-by-step reference: strata of one size (every resample at once) and of several sizes give
    the loop's interval bit for bit."""
    strata = [np.asarray(data.draw(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n))) for n in sizes]
    loop = stratified_bootstrap(strata, lambda ss: np.mean([s.mean() for s in ss]), samples=samples, seed=seed)
    assert bootstrap_mean_of_means_interval(strata, samples=samples, seed=seed) == loop


def test_the_array_bootstrap_is_the_loops_at_a_boards_size():
    """A published board's size: 2,000 resamples of 3 lengths × 5 seeds, and one length of 64 seeds."""
    rng = np.random.default_rng(7)
    for strata in ([rng.random(5) for _ in range(3)], [rng.random(64)]):
        assert bootstrap_mean_of_means_interval(strata) == stratified_bootstrap(strata, mean_of_means)


def test_stratified_resampling_never_mixes_strata():
    """Constant strata give a degenerate interval at the mean of the stratum means."""
    low, high = stratified_bootstrap([np.zeros(4), np.ones(7)], lambda ss: np.mean([s.mean() for s in ss]))
    assert low == high == 0.5


def test_summarize_score_and_longest_solved():
    board = summarize({120: [1.0, 1.0, 0.98], 140: [0.95, 1.0, 0.97], 160: [0.2, 0.9, 0.5], 180: [1.0, 1.0, 1.0]})
    assert board["score"] == pytest.approx(np.mean([np.mean(v) for v in ([1, 1, .98], [.95, 1, .97], [.2, .9, .5], [1, 1, 1])]))
    assert board["longest_solved"] == 180  # lower bound >= 0.9 at 180 even though 160 is not solved
    assert board["per_length"][160]["ci_low"] < 0.9
    assert summarize({10: [0.0, 0.1]})["longest_solved"] is None
    with pytest.raises(ValueError, match="at least one value"):
        summarize({})
