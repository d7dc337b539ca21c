"""memgym.buffers."""
