"""The smallest any-framework submission: uniformly random actions, for any track.

It learns nothing, so it scores chance: 0.5 success on T-Maze, about −0.5
normalized return on POPGym RepeatPrevious. It acts in whatever space the track
has (``Discrete``, ``MultiDiscrete`` or ``Box``: the POPGym Pendulums, Battleship,
MineSweeper). Submit it with

    memgym leaderboard check examples.random_agent:factory --track popgym-repeat-previous
    memgym leaderboard run --agent examples.random_agent:factory --track popgym-repeat-previous --preset smoke

(run from the repository root so that ``examples`` is importable).
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np


class RandomAgent:
    """``act`` draws one action per environment from the track's action space, seeded by the context's seed;
    ``observe`` ignores the step."""

    def __init__(self, action_space: gym.Space, seed: int):
        self.action_space = copy.deepcopy(action_space)  # its own generator: the track's space is shared
        self.action_space.seed(seed)

    def act(self, obs: np.ndarray, start: np.ndarray) -> np.ndarray:
        return np.stack([self.action_space.sample() for _ in range(len(obs))])

    def observe(self, action, reward, next_obs, terminated, truncated) -> None:
        pass


def factory(context) -> RandomAgent:
    """The entry the harness calls with a :class:`memgym.leaderboard.protocol.AgentContext`."""
    return RandomAgent(context.action_space, context.seed)
