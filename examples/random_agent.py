"""The smallest any-framework submission: uniformly random actions, for any track.

It learns nothing, so it scores chance: 0.5 success on T-Maze, about −0.5
normalized return on POPGym RepeatPrevious. Submit it with

    memgym leaderboard check examples.random_agent:factory --track popgym-repeat-previous
    memgym leaderboard run --agent examples.random_agent:factory --track popgym-repeat-previous --preset smoke

(run from the repository root so that ``examples`` is importable).
"""

from __future__ import annotations

import numpy as np


class RandomAgent:
    """``act`` draws one action per environment from the context's seed; ``observe`` ignores the step."""

    def __init__(self, num_actions: int, seed: int):
        self.num_actions = num_actions
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray, start: np.ndarray) -> np.ndarray:
        return self.rng.integers(self.num_actions, size=len(obs))

    def observe(self, action, reward, next_obs, terminated, truncated) -> None:
        pass


def factory(context) -> RandomAgent:
    """The entry the harness calls with a :class:`memgym.leaderboard.protocol.AgentContext`."""
    return RandomAgent(int(context.action_space.n), context.seed)
