"""Small (often hostile) leaderboard submissions for the integrity tests, written as docs/submitting.md says."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# --- any-framework tier ----------------------------------------------------------------------

CRASH_SEEDS = {1}  # the seeds on which `crash_on_hard_seeds` raises (tests change it to simulate a fixed agent)


class Oracle:
    """Remembers the cue, walks up until the junction's wall stops it, then turns to the cued side."""

    def __init__(self, num_envs: int):
        self.cue = np.zeros(num_envs, int)
        self.last = np.full(num_envs, -1)

    def act(self, obs, start):
        position = np.packbits(obs[:, 2:10].astype(np.uint8), axis=1)[:, 0]  # gray code: equal iff same cell
        self.cue = np.where(start, (obs[:, 0] == 1).astype(int), self.cue)
        turn = ~start & (position == self.last)  # "up" did not move: at the junction
        self.last = np.where(start, -1, position)
        return np.where(turn, 2 + self.cue, 0)

    def observe(self, *args):
        pass


class Crashing(Oracle):
    def act(self, obs, start):
        raise RuntimeError("crashed on a hard seed")


def oracle(context):
    return Oracle(context.num_envs)


def crash_on_hard_seeds(context):
    """A perfect agent, except that it crashes on the seeds in :data:`CRASH_SEEDS`."""
    return Crashing(context.num_envs) if context.seed in CRASH_SEEDS else Oracle(context.num_envs)


def raising_factory(context):
    raise RuntimeError("factory exploded")


# --- JAX tier ----------------------------------------------------------------------------------


class RandomTurn:
    """A JAX-tier agent that learns nothing: it walks up and, at the junction, turns with its key.

    Its carry is the previous position (the junction is where "up" does not move it); it
    never remembers the cue, so it succeeds in half the episodes, at random. ``mode``:
    ``"random"`` (turn left or right with the key), ``"left"`` (always left), or
    ``"invalid"`` (acts like ``"random"`` in training, but ``act`` emits action 9).
    """

    num_envs = 4

    def __init__(self, mode: str = "random"):
        self.mode = mode

    def initialize_carry(self):
        return jnp.full((8,), -1.0)

    def _policy(self, carry, obs, start, key):
        position = obs[2:10]
        junction = ~start & jnp.all(position == carry)
        turn = 2 + jax.random.bernoulli(key).astype(jnp.int32) if self.mode != "left" else jnp.int32(2)
        return jnp.where(junction, turn, 0).astype(jnp.int32), position

    def act(self, params, carry, obs, start, key):
        action, carry = self._policy(carry, obs, start, key)
        return (jnp.int32(9) if self.mode == "invalid" else action), carry

    def train(self, key, env, env_params, total_steps):
        n = self.num_envs
        key_reset, key_run = jax.random.split(key)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_reset, n), env_params)
        carry = jnp.broadcast_to(self.initialize_carry(), (n, 8))

        def step(loop, key):
            obs, start, carry, state = loop
            key_act, key_env = jax.random.split(key)
            action, carry = jax.vmap(self._policy)(carry, obs, start, jax.random.split(key_act, n))
            obs, state, _, terminated, truncated, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key_env, n), state, action, env_params)
            return (obs, terminated | truncated, carry, state), None

        (_, _, _, state), _ = jax.lax.scan(step, (obs, jnp.ones(n, bool), carry, state),
                                           jax.random.split(key_run, total_steps // n))
        return {"w": jnp.zeros(())}, state


def random_turn(context):
    return RandomTurn("random")


def always_left(context):
    return RandomTurn("left")


def invalid_in_evaluation(context):
    return RandomTurn("invalid")
