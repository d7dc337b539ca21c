"""memgym.agents."""
