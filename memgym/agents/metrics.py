"""Sums of finished-episode statistics, shared by both collectors, and the thesis's success metric."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np


def episode_sums(info: dict[str, Any]) -> dict[str, Any]:
    """Sums over the episodes that finished in one step of a batch of environments.

    ``info`` holds the statistics of :class:`~memgym.envs.functional.EpisodeStatistics`
    (``done``, ``success``, ``episode_return``, ``episode_length``, each ``[E]``) as JAX
    arrays (inside ``jit``) or NumPy arrays (a host loop, from
    :func:`~memgym.envs.functional.track_episodes`).
    """
    xp = np if isinstance(info["done"], np.ndarray) else jnp
    done = info["done"]
    return {
        "episodes": done.sum(),
        "successes": (done & info["success"]).sum(),
        "return_sum": xp.where(done, info["episode_return"], 0.0).sum(),
        "length_sum": xp.where(done, info["episode_length"], 0).sum(),
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
