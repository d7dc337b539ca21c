"""Example leaderboard submissions (importable as ``examples.<module>:factory`` from the repository root)."""
