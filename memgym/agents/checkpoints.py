"""Checkpoints of a training run: every leaf of the train state (PRNG keys as their raw data), written atomically."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def save_checkpoint(path: Path, state: Any, update: int, seconds: float | None = None) -> None:
    """Leaves of ``state`` (PRNG keys as their raw data) plus the update count and, where given, the seconds the
    run has trained so far (:func:`checkpoint_seconds`), written atomically."""
    leaves = [jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
              for x in jax.tree.leaves(state)]
    temporary = path.with_suffix(".tmp.npz")
    extra = {} if seconds is None else {"seconds": np.asarray(seconds, np.float64)}
    np.savez(temporary, *[np.asarray(x) for x in leaves], update=np.asarray(update), **extra)
    os.replace(temporary, path)


def checkpoint_seconds(path: Path) -> float:
    """The seconds a run had trained when :func:`save_checkpoint` wrote ``path`` (its earlier sittings, for a
    resumed run's wall time); 0 where the file holds none or cannot be read."""
    try:
        with np.load(path) as data:
            return float(data["seconds"]) if "seconds" in data.files else 0.0
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return 0.0


def load_checkpoint(path: Path, like: Any) -> tuple[Any, int]:
    """Restore a state shaped like ``like`` from :func:`save_checkpoint`'s file."""
    with np.load(path) as data:
        stored = [data[f"arr_{i}"] for i in range(sum(name.startswith("arr_") for name in data.files))]
        update = int(data["update"])
    leaves, treedef = jax.tree.flatten(like)
    if len(stored) != len(leaves):
        raise ValueError(f"checkpoint {path} does not match this configuration ({len(stored)} vs {len(leaves)} arrays)")
    restored = [jax.random.wrap_key_data(jnp.asarray(s)) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
                else jnp.asarray(s, x.dtype) for s, x in zip(stored, leaves)]
    return jax.tree.unflatten(treedef, restored), update
