"""Checkpoints of a training run: every leaf of the train state (PRNG keys as their raw data), written atomically."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def save_checkpoint(path: Path, state: Any, update: int) -> None:
    """Leaves of ``state`` (PRNG keys as their raw data) plus the update count, written atomically."""
    leaves = [jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x
              for x in jax.tree.leaves(state)]
    temporary = path.with_suffix(".tmp.npz")
    np.savez(temporary, update=np.asarray(update), *[np.asarray(x) for x in leaves])
    os.replace(temporary, path)


def load_checkpoint(path: Path, like: Any) -> tuple[Any, int]:
    """Restore a state shaped like ``like`` from :func:`save_checkpoint`'s file."""
    with np.load(path) as data:
        stored = [data[f"arr_{i}"] for i in range(len(data.files) - 1)]
        update = int(data["update"])
    leaves, treedef = jax.tree.flatten(like)
    if len(stored) != len(leaves):
        raise ValueError(f"checkpoint {path} does not match this configuration ({len(stored)} vs {len(leaves)} arrays)")
    restored = [jax.random.wrap_key_data(jnp.asarray(s)) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key)
                else jnp.asarray(s, x.dtype) for s, x in zip(stored, leaves)]
    return jax.tree.unflatten(treedef, restored), update
