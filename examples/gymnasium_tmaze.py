"""memgym's T-Maze through Gymnasium alone (``pip install memgym``: gymnasium and numpy, no JAX).

Two scripted policies walk the corridor to the junction: one remembers the cue of the first observation, one
forgets it and guesses. The first succeeds every time, the second half the time: the task is a test of memory.
The same policies run on ``gymnasium.make_vec``'s vector environment.

    python examples/gymnasium_tmaze.py --corridor-length 120 --episodes 200
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import memgym  # noqa: F401  (registers the memgym/ environments)

UP, LEFT, RIGHT = 0, 2, 3


def act(cue: np.ndarray, at_junction: np.ndarray, remember: bool, rng: np.random.Generator) -> np.ndarray:
    """Forward along the corridor; at the junction, the cue's side (``remember``) or a guess."""
    guess = rng.integers(0, 2, size=np.shape(cue))
    side = np.where(remember, cue, guess)
    return np.where(at_junction, np.where(side == 0, LEFT, RIGHT), UP)


def play(corridor_length: int, episodes: int, remember: bool, seed: int = 0) -> float:
    """Success rate of a scripted policy over ``episodes`` episodes of one environment."""
    env, rng, successes = gym.make("memgym/TMaze-v0", corridor_length=corridor_length), np.random.default_rng(seed), 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        cue = 0 if obs[1] == 1 else 1  # cue 01: the reward is on the left, 10: on the right
        position, done = 0, False
        while not done:
            action = int(act(np.asarray(cue), np.asarray(position == corridor_length - 1), remember, rng))
            obs, _, terminated, truncated, info = env.step(action)
            position = min(position + 1, corridor_length - 1)
            done = terminated or truncated
        successes += bool(info["success"])
    return successes / episodes


def play_vector(corridor_length: int, num_envs: int, remember: bool, seed: int = 0) -> float:
    """Success rate of the same policy over ``num_envs`` environments stepped together (one episode each)."""
    envs = gym.make_vec("memgym/TMaze-v0", num_envs=num_envs, corridor_length=corridor_length)
    obs, _ = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    cue, position = np.where(obs[:, 1] == 1, 0, 1), np.zeros(num_envs, int)
    finished, successes = np.zeros(num_envs, bool), np.zeros(num_envs, bool)
    while not finished.all():
        actions = act(cue, position == corridor_length - 1, remember, rng)
        obs, _, terminated, truncated, info = envs.step(actions)
        ended = (terminated | truncated) & ~finished
        successes |= ended & np.asarray(info["success"], bool)
        finished |= ended
        position = np.minimum(position + 1, corridor_length - 1)
    envs.close()
    return float(successes.mean())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corridor-length", type=int, default=120)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args(argv)
    for remember in (True, False):
        name = "remembers the cue" if remember else "forgets the cue "
        print(f"{name}: success {play(args.corridor_length, args.episodes, remember):.2f} (one env), "
              f"{play_vector(args.corridor_length, args.episodes, remember):.2f} ({args.episodes} vector envs)")


if __name__ == "__main__":
    main()
