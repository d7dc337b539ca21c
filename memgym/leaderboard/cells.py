"""Deprecated: this module's names moved to the modules of their jobs — :mod:`.planning` (the unit of work and
the record of a cell), :mod:`.store` (the results store), :mod:`.code_identity` (which code an agent is) and :mod:`.any_tier`."""

from memgym.deprecation import forward

_NEW_HOMES = {
    **dict.fromkeys(("NUM_ENVS", "Task", "cell_record", "version_label"), "memgym.leaderboard.running.planning"),
    **dict.fromkeys(("CURVE_POINTS", "failure_reason"), "memgym.leaderboard.store"),
    **dict.fromkeys(("code_hash", "code_modules", "describe_agent", "describe_code"),
                    "memgym.leaderboard.running.code_identity"),
    "CellFailure": "memgym.leaderboard.running.any_tier",
}
__getattr__ = forward(__name__, {name: f"{module}.{name}" for name, module in _NEW_HOMES.items()})
