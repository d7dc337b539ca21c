"""Stage 2, running: a run planned into the cells it lacks, and each cell trained and evaluated in its tier.

:mod:`.runner` drives a run (``memgym leaderboard run``): :mod:`.planning` turns the track, the agents and the
results already stored into :class:`~.planning.Task` s, each for one version of its agent (:mod:`.code_identity`:
the code an agent is and what it computes), then each task runs in :mod:`.jax_tier` or :mod:`.any_tier`, on this
machine or on a Ray cluster (:mod:`.ray_backend`), with :mod:`.progress` reporting. :mod:`.migration` stamps
records made before the computation hash.
"""
