"""memgym.memory."""
