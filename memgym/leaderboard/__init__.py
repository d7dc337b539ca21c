"""memgym.leaderboard."""
