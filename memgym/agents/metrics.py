"""Episode statistics shared by every trainer, and the thesis's success metric."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


def episode_stats(info: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Sums over finished episodes from a batch of ``info`` dicts (FunctionalEnv's statistics)."""
    done = info["done"]
    return {
        "episodes": done.sum(),
        "successes": (done & info["success"]).sum(),
        "return_sum": jnp.where(done, info["episode_return"], 0.0).sum(),
        "length_sum": jnp.where(done, info["episode_length"], 0).sum(),
    }


def success_over_last(metrics: dict[str, np.ndarray], window_steps: int, steps_per_update: int) -> np.ndarray:
    """Success rate over the last ``window_steps`` environment steps (thesis §5.1.2: the last 100K).

    ``metrics`` are per-update trainer metrics stacked on the last axis (any leading batch
    axes, e.g. seeds); the window is rounded up to whole updates.
    """
    updates = max(1, math.ceil(window_steps / steps_per_update))
    episodes = np.asarray(metrics["episodes"])[..., -updates:].sum(-1)
    successes = np.asarray(metrics["successes"])[..., -updates:].sum(-1)
    return successes / np.maximum(episodes, 1)
