"""Plain per-step loops: the ground truth the return and GAE monoids (memgym.agents.returns) are tested
against, and the numpy baseline of benchmarks/scan_speed.py."""

from __future__ import annotations

import numpy as np


def discounted_return_reference(reward, terminated, truncated, next_value, gamma: float) -> np.ndarray:
    """Per-step backward loop over a tape; same contract as :func:`memgym.agents.returns.discounted_return`."""
    reward, next_value = np.asarray(reward, np.float64), np.asarray(next_value, np.float64)
    out = np.zeros_like(reward)
    following = next_value[-1]
    for t in reversed(range(len(reward))):
        if terminated[t]:
            following = 0.0
        elif truncated[t]:
            following = next_value[t]
        out[t] = reward[t] + gamma * following
        following = out[t]
    return out


def generalized_advantage_reference(
    reward, value, next_value, terminated, truncated, gamma: float, lam: float
) -> np.ndarray:
    """Per-step backward loop; same contract as :func:`memgym.agents.returns.generalized_advantage` (advantages only)."""
    reward, value, next_value = (np.asarray(x, np.float64) for x in (reward, value, next_value))
    out = np.zeros_like(reward)
    following = 0.0
    for t in reversed(range(len(reward))):
        done = bool(terminated[t]) or bool(truncated[t])
        delta = reward[t] + (0.0 if terminated[t] else gamma * next_value[t]) - value[t]
        out[t] = delta + (0.0 if done else gamma * lam * following)
        following = out[t]
    return out
