"""Environment throughput: steps per second of the T-Maze implementations.

Rows: the Gymnasium T-Maze as one env and as ``gymnasium.make_vec`` with 8 envs,
and the pure-JAX twin jitted and vmapped over 1, 1k and 64k environments
(random actions, ``lax.scan`` over steps, auto-reset on). Beside the JAX twin at 1k
and 64k environments, the floor: a minimal hand-written batched T-Maze step (the same
rules, observation and auto-reset, written on ``[N]`` arrays with one random word per
environment and step) that any implementation must pay; the ratio column is the
twin's rate over the floor's. Prints a table.

    python benchmarks/env_throughput.py [--smoke]

``--smoke``: a few hundred Gymnasium steps, the JAX rows at 1, 16 and 64 environments for 20
steps, one timed call each: every row in seconds (a check that the script runs, not a measurement).
"""

from __future__ import annotations

import argparse
import platform
import time

import gymnasium as gym
import numpy as np

import memgym  # noqa: F401  (registers the environments)


def gymnasium_single(steps: int) -> float:
    env = gym.make("memgym/TMaze-v0", corridor_length=200).unwrapped  # raw env, no checker wrappers
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, steps)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(int(action))
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def gymnasium_vector(steps: int, num_envs: int = 8) -> float:
    envs = gym.make_vec("memgym/TMaze-v0", num_envs=num_envs, corridor_length=200)
    envs.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 4, (steps // num_envs, num_envs))
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    return actions.size / (time.perf_counter() - start)


def _steps_per_second(run, total_steps: int, repeats: int) -> float:
    """``total_steps`` over the best of ``repeats`` timed calls of the jitted ``run(key)`` (compiled first)."""
    import jax

    run(jax.random.key(0)).block_until_ready()  # compile
    best = float("inf")
    for r in range(repeats):
        start = time.perf_counter()
        run(jax.random.key(r + 1)).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return total_steps / best


def jax_twin(num_envs: int, steps: int, repeats: int = 3) -> float:
    import jax
    import jax.numpy as jnp

    from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

    env = TMazeJax()
    params = tmaze_params(corridor_length=jnp.full((num_envs,), 200))

    @jax.jit
    def run(key):
        keys = jax.random.split(key, num_envs)
        obs, state = jax.vmap(env.reset)(keys, params)

        def body(carry, _):
            state, key = carry
            key, k_act, k_env = jax.random.split(key, 3)
            actions = jax.random.randint(k_act, (num_envs,), 0, 4)
            obs, state, reward, term, trunc, info = jax.vmap(env.step)(
                jax.random.split(k_env, num_envs), state, actions, params
            )
            return (state, key), (info["success"].sum(), obs.sum())  # the observations are used, not dead code

        (_, _), (successes, checksum) = jax.lax.scan(body, (state, key), None, length=steps)
        return successes.sum() + checksum.sum()

    return _steps_per_second(run, num_envs * steps, repeats)


def floor_tmaze(num_envs: int, steps: int, repeats: int = 3, corridor_length: int = 200,
                max_episode_steps: int = 1000, gymnax_keys: bool = False) -> float:
    """Steps/s of the least a batched T-Maze step can do: state ``[N]`` int32 arrays, one ``uint32`` random word
    per environment and step (bit 0: the goal of an episode that restarts, bits 1-6: the distractors), the gray
    code shifted out of the position, the auto-reset as ``where``; no gymnax, no per-environment keys.

    ``gymnax_keys``: the same step, but with the random words drawn as a gymnax environment under ``vmap`` draws
    them: a key per environment split from the step's key, split again inside ``step`` into a step and a reset
    key, one draw from each (the distractors, the next episode's goal)."""
    import jax
    import jax.numpy as jnp

    from memgym.envs import tmaze

    gray_shifts = jnp.arange(tmaze.DEFAULT_GRAY_BITS - 1, -1, -1, dtype=jnp.uint32)
    bit_shifts = jnp.arange(1, 1 + tmaze.DEFAULT_NUM_DISTRACTORS, dtype=jnp.uint32)
    junction = corridor_length - 1

    def observation(elapsed, position, goal, word):
        cue = jnp.where((elapsed == 0)[:, None], jnp.stack([goal, 1 - goal], axis=1), 0)
        gray = (position ^ (position >> 1)).astype(jnp.uint32)
        return jnp.concatenate([cue.astype(jnp.uint32), (gray[:, None] >> gray_shifts) & 1,
                                (word[:, None] >> bit_shifts) & 1], axis=1).astype(jnp.float32)

    @jax.jit
    def run(key):
        word = jax.random.bits(key, (num_envs,), jnp.uint32)
        zero = jnp.zeros(num_envs, jnp.int32)
        state = (zero, zero, (word & 1).astype(jnp.int32))

        def body(carry, _):
            (elapsed, position, goal), key = carry
            key, k_act, k_env = jax.random.split(key, 3)
            action = jax.random.randint(k_act, (num_envs,), 0, 4)
            if gymnax_keys:
                def draws(env_key):
                    k_step, k_reset = jax.random.split(env_key)
                    return jax.random.bits(k_step, (), jnp.uint32), jax.random.bits(k_reset, (), jnp.uint32)

                word, reset_word = jax.vmap(draws)(jax.random.split(k_env, num_envs))
                word = (word & ~jnp.uint32(1)) | (reset_word & 1)
            else:
                word = jax.random.bits(k_env, (num_envs,), jnp.uint32)
            at_junction = position == junction
            move = jnp.where(action == tmaze.UP, 1, jnp.where(action == tmaze.DOWN, -1, 0))
            position = jnp.clip(position + move, 0, junction)
            terminated = at_junction & (action >= tmaze.LEFT)
            success = terminated & (action - tmaze.LEFT == goal)
            elapsed = elapsed + 1
            done = terminated | (elapsed >= max_episode_steps)
            elapsed, position = jnp.where(done, 0, elapsed), jnp.where(done, 0, position)
            goal = jnp.where(done, (word & 1).astype(jnp.int32), goal)
            obs = observation(elapsed, position, goal, word)
            return ((elapsed, position, goal), key), (success.sum(), obs.sum())

        _, (successes, checksum) = jax.lax.scan(body, (state, key), None, length=steps)
        return successes.sum() + checksum.sum()

    return _steps_per_second(run, num_envs * steps, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="few steps, 1/16/64 JAX environments, 1 timed call: every row in seconds")
    args = parser.parse_args()
    import jax

    if args.smoke:
        single, vector, batches, repeats = 400, 160, ((1, 20), (16, 20), (64, 20)), 1
    else:
        single, vector, batches, repeats = 200_000, 80_000, ((1, 20_000), (1_000, 2_000), (65_536, 200)), 3
    rows = [
        ("Gymnasium TMaze, 1 env", gymnasium_single(single)),
        ("Gymnasium make_vec, 8 envs", gymnasium_vector(vector)),
    ]
    floors: dict[str, float] = {}  # row -> the floor it is compared with
    keyed_floors: dict[str, float] = {}  # twin row -> the floor that pays gymnax's keys
    for num_envs, steps in batches:
        name = f"JAX twin, jit+vmap, {num_envs} envs"
        rows.append((name, jax_twin(num_envs, steps, repeats)))
        if num_envs > 1:  # the floor, measured right after the twin on the same batch
            floor = floor_tmaze(num_envs, steps, repeats)
            floors[name] = floor
            rows.append((f"hand-written floor, {num_envs} envs", floor))
            keyed = f"floor + gymnax's keys, {num_envs} envs"
            floors[keyed] = floor
            keyed_rate = floor_tmaze(num_envs, steps, repeats, gymnax_keys=True)
            keyed_floors[name] = keyed_rate
            rows.append((keyed, keyed_rate))
    print(f"machine: {platform.processor() or platform.machine()}, jax backend: {jax.default_backend()}, "
          f"devices: {jax.devices()}")
    print(f"{'implementation':<36} {'steps/s':>14} {'/ floor':>8} {'/ floor + keys':>15}")
    for name, rate in rows:
        ratio = f"{rate / floors[name]:.2f}" if name in floors else ""
        keyed = f"{rate / keyed_floors[name]:.2f}" if name in keyed_floors else ""
        print(f"{name:<36} {rate:>14,.0f} {ratio:>8} {keyed:>15}")


if __name__ == "__main__":
    main()
