"""A complete any-framework leaderboard submission in plain NumPy.

Tabular Q-learning whose memory is explicit: the agent remembers the cue bits of
an episode's first observation and learns Q-values over (remembered cue, gray-coded
position). Distractor bits are ignored. Submit it with

    memgym leaderboard check examples.numpy_agent:factory
    memgym leaderboard run --agent examples.numpy_agent:factory --preset smoke

(run from the repository root so that ``examples`` is importable).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

CUE_BITS = 2
GRAY_BITS = 8


class TabularCueAgent:
    """ε-greedy Q-learning on ``(cue, position code)`` keys; one memory slot per environment."""

    def __init__(self, num_envs: int, num_actions: int, seed: int, *, lr=0.5, gamma=0.99, epsilon=0.1):
        self.rng = np.random.default_rng(seed)
        self.num_actions, self.lr, self.gamma, self.epsilon = num_actions, lr, gamma, epsilon
        self.q: defaultdict[tuple, np.ndarray] = defaultdict(lambda: np.zeros(num_actions))
        self.cue = [(0, 0)] * num_envs
        self.keys: list[tuple] = [()] * num_envs

    def _key(self, i: int, obs: np.ndarray) -> tuple:
        return self.cue[i] + tuple(int(b) for b in obs[CUE_BITS : CUE_BITS + GRAY_BITS])

    def act(self, obs: np.ndarray, start: np.ndarray) -> np.ndarray:
        actions = np.empty(len(obs), np.int64)
        for i, (o, b) in enumerate(zip(obs, start)):
            if b:  # the first observation shows the cue: store it
                self.cue[i] = (int(o[0]), int(o[1]))
            self.keys[i] = self._key(i, o)
            if self.rng.random() < self.epsilon:
                actions[i] = self.rng.integers(self.num_actions)
            else:
                values = self.q[self.keys[i]]
                actions[i] = self.rng.choice(np.flatnonzero(values == values.max()))
        return actions

    def observe(self, action, reward, next_obs, terminated, truncated) -> None:
        for i in range(len(action)):
            target = reward[i]
            if not terminated[i]:
                target += self.gamma * self.q[self._key(i, next_obs[i])].max()
            values = self.q[self.keys[i]]
            values[action[i]] += self.lr * (target - values[action[i]])


def factory(context) -> TabularCueAgent:
    """The entry the harness calls with a :class:`memgym.leaderboard.protocol.AgentContext`."""
    return TabularCueAgent(context.num_envs, int(context.action_space.n), context.seed)
