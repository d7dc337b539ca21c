"""memgym.leaderboard: boards that score any agent, by track, with harness-owned counting.

What a board is (data): :mod:`.tracks` (``Track``, ``Sweep``, ``Score``, ``Preset`` and the
registered tracks: T-Maze; POPGym RepeatPrevious). What an agent is: :mod:`.protocol` (the two
tiers, ``AgentContext``, loading a submission) and :mod:`.code_identity` (which code it is). A
run: :mod:`.runner` (the driver) → :mod:`.planning` (the missing cells, as tasks) →
:mod:`.jax_tier` / :mod:`.any_tier` (train and evaluate; :mod:`.scoring` counts JAX-tier
episodes) → :mod:`.store` (the records, append-only), with :mod:`.progress` on the way and
:mod:`.ray_backend` for a cluster. The board: :mod:`.report` with :mod:`.stats`.
:mod:`.check` is the conformance check; :mod:`.reference` the built-in agents.
"""
