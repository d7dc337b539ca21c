"""Deprecated: the track types moved to :mod:`memgym.leaderboard.tracks`, with the built-in tracks."""

from memgym.deprecation import forward

__getattr__ = forward(__name__, {name: f"memgym.leaderboard.tracks.{name}"
                                 for name in ("EVALUATION_SEED", "Preset", "Score", "Sweep", "Track")})
