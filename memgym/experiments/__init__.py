"""Studies from the papers, runnable as one command each (``memgym experiment …``).

* :mod:`.tbb_vs_sbb` — the monoid paper's comparison of tape-based and
  segment-based batching for recurrent DQN (§6: Fig. 3, Fig. 5–6, Table 1).

A study is a grid of agents trained and scored by the leaderboard harness
(:func:`memgym.leaderboard.running.runner.run`), so its results live in the same
append-only, resumable results store with provenance, plus the study's own
report.
"""
