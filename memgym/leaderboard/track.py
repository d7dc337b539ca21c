"""Deprecated: the track types moved to :mod:`memgym.leaderboard.tracks`, with the built-in tracks."""

from memgym.leaderboard._moved import forward

__getattr__ = forward(__name__, dict.fromkeys(("EVALUATION_SEED", "Preset", "Score", "Sweep", "Track"),
                                              "memgym.leaderboard.tracks"))
