"""memgym.leaderboard: boards that score any agent, by track, with harness-owned counting.

The package is grouped by the stages a cell goes through, in order:

1. :mod:`.tracks`: what a board scores (``Track``, ``Sweep``, ``Score``, ``Preset``, the built-in tracks).
2. :mod:`.running`: a run planned into tasks and each cell trained and evaluated, in the JAX or the
   any-framework tier, here or on Ray.
3. :mod:`.scoring`: the harness's counting of a JAX-tier agent's episodes.
4. :mod:`.store`: the results store, one append-only record per cell, and the cell's stored policy.
5. :mod:`.boards`: the board and its statistics; tuning by the board's score.
6. :mod:`.submissions`: an agent sent by pull request, checked, re-run in a sandbox, compared and given a verdict.

Beside them: :mod:`.protocol` is what an agent is (the two tiers, ``AgentContext``); :mod:`.limits` the ranges of
the command line's numbers; :mod:`.reference` the built-in agents. docs/architecture.md draws the stages, their
imports and the path of one cell.
"""

from memgym.deprecation import forward_modules

#: Modules that moved into the stage subpackages (memgym 0.2): their old paths import, with a warning, until 0.3.
MOVED_MODULES = {
    f"{__name__}.{old}": f"{__name__}.{new}"
    for old, new in {
        **{name: f"running.{name}" for name in ("any_tier", "code_identity", "jax_tier", "migration", "planning",
                                               "progress", "ray_backend", "runner")},
        "policies": "store.policies",
        **{name: f"boards.{name}" for name in ("report", "stats", "tuning")},
        "submission": "submissions.format",
        **{name: f"submissions.{name}" for name in ("check", "comparison", "isolation", "sandbox", "verdict",
                                                   "verification")},
    }.items()
}
forward_modules(MOVED_MODULES)
