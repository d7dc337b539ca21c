"""JAX's persistent compilation cache for memgym's commands: compiled code reused across runs.

``memgym train``, ``memgym leaderboard run`` (and ``tune``, ``check``; not ``verify``, which
compiles what it checks itself) and ``memgym experiment run`` store what XLA compiles in a
cache folder, so that running the same agent again loads its training function instead of
compiling it (the smoke board's three agents compile in most of its time on a CPU). Where the
cache lives:

* ``MEMGYM_COMPILATION_CACHE=DIR`` puts it in ``DIR``; ``MEMGYM_COMPILATION_CACHE=off``
  (or ``0``, ``false``, ``no``, empty) turns it off;
* else JAX's own ``JAX_COMPILATION_CACHE_DIR``, when set, is used as it is;
* else ``$XDG_CACHE_HOME/memgym/jax``, by default ``~/.cache/memgym/jax``: a per-user
  folder, never a results folder, so nothing of it is published with a board.

The cache changes no result: an executable loaded from it is the one XLA compiled for the
same computation, backend and flags (JAX's cache key covers them). JAX does not store an
executable that calls back into Python; the leaderboard's in-flight progress reports are
such callbacks, so a training call reports progress from inside only when its cells are
long enough for compilation to be a small share of their time
(:data:`memgym.leaderboard.running.jax_tier.IN_FLIGHT_PROGRESS_STEPS`). Only executables that took
at least JAX's ``jax_persistent_cache_min_compile_time_secs`` (1 s by default) are stored.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "MEMGYM_COMPILATION_CACHE"
OFF = ("off", "0", "false", "no", "")


def default_dir() -> Path:
    """``$XDG_CACHE_HOME/memgym/jax``, or ``~/.cache/memgym/jax`` when ``XDG_CACHE_HOME`` is unset."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memgym" / "jax"


def cache_dir() -> Path | None:
    """The folder the cache uses under the current environment variables, or None when it is off."""
    setting = os.environ.get(ENV_VAR)
    if setting is not None:
        return None if setting.strip().lower() in OFF else Path(setting).expanduser()
    jax_own = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    return Path(jax_own) if jax_own else default_dir()


def enable() -> Path | None:
    """Point JAX's persistent compilation cache at :func:`cache_dir` (creating it); returns the folder, or
    None when the cache is off. A folder that cannot be used (a file is in its place, it cannot be created,
    or it is not writable) is a ``ValueError`` naming the variable, rather than a run that JAX's warnings
    say, entry by entry, it could not cache."""
    folder = cache_dir()
    if folder is None:
        return None
    problem = None
    if folder.exists() and not folder.is_dir():
        problem = "it is a file, not a folder"
    else:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            problem = f"it cannot be created ({error.strerror})"
        else:
            if not os.access(folder, os.W_OK | os.X_OK):
                problem = "it is not writable"
    if problem is not None:
        raise ValueError(
            f"the compilation cache folder {str(folder)!r} cannot be used: {problem}; set {ENV_VAR} to a writable "
            f"folder, or {ENV_VAR}=off to compile without a cache"
        )
    import jax

    jax.config.update("jax_compilation_cache_dir", str(folder))
    return folder
