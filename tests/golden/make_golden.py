"""Fixed-seed fingerprints of the memory models and trainers: the behaviour a refactor must keep.

``python tests/golden/make_golden.py`` writes ``golden.json`` beside it;
``tests/golden/test_golden.py`` recomputes every fingerprint and compares.
Refactors must leave these computations unchanged (bit-identical on one machine
and JAX version; the test allows float round-off across versions and CPUs).

A leaf that is a hash of other values (:data:`HASH_LEAVES`) is no float: parameters that
agree to round-off hash to unrelated numbers, so it is left out of the fingerprints and
``test_golden.py`` checks what it means instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

GOLDEN = Path(__file__).with_name("golden.json")

MEMORY_CASES = {
    "linear_attention": dict(features=16, num_layers=2, num_heads=2, head_dim=8),
    "relit": dict(features=16, num_layers=2, num_heads=2, head_dim=8, eta=2),
    "arelit": dict(features=16, num_layers=2, num_heads=2, head_dim=8, eta=2, r=2),
    "s5": dict(features=16, state_size=8),
    "lru": dict(features=16, state_size=8),
    "ffm": dict(features=16, memory_size=8, context_size=4),
    "lstm": dict(features=16),
    "gru": dict(features=16),
    "gtrxl": dict(features=16, num_layers=2, num_heads=2, head_dim=8, memory_size=8),
    "mlp": dict(features=16),
}

# Names of leaves that hold a hash of other values: GTrXL's WindowMemory.stamp, a 64-bit hash of the bits of
# the parameters its key/value cache was made with (equal for equal parameters, unrelated otherwise).
HASH_LEAVES = frozenset({"stamp"})


def _name(path: tuple) -> str | None:
    """The name of the last step of a pytree path (a NamedTuple field or a dict key), if it has one."""
    last = path[-1] if path else None
    return getattr(last, "name", getattr(last, "key", None))


def hash_leaves(tree) -> list[np.ndarray]:
    """The leaves of ``tree`` named in :data:`HASH_LEAVES`, in tree order."""
    return [np.asarray(leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0] if _name(path) in HASH_LEAVES]


def _leaves(tree) -> list[float]:
    """Sum of absolute values (a plain sum of a zero-mean gradient is round-off alone), sum of squares and
    first entry of every leaf (real and imaginary parts), in tree order; hash leaves (:data:`HASH_LEAVES`)
    are left out."""
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if _name(path) in HASH_LEAVES:
            continue
        a = np.asarray(leaf)
        if a.dtype == bool or np.issubdtype(a.dtype, np.integer):
            a = a.astype(np.float64)
        for part in ((a.real, a.imag) if np.iscomplexobj(a) else (a,)):
            part = np.asarray(part, np.float64)
            out += [float(np.abs(part).sum()), float((part ** 2).sum()), float(part.reshape(-1)[0]) if part.size else 0.0]
    return out


class MemoryRun(NamedTuple):
    """One fixed-seed run of a memory model: a tape of 37 steps and 3 episodes from its initial carry."""

    model: Any
    params: Any
    x: jax.Array
    start: jax.Array
    carry: Any  # the initial carry
    y: jax.Array
    carry_out: Any
    grad: Any  # of sum(sin(y)) with respect to params


def memory_run(name: str) -> MemoryRun:
    from memgym import memory

    key = jax.random.key(0)
    x = jax.random.normal(jax.random.key(1), (37, 5))
    start = jnp.zeros(37, bool).at[0].set(True).at[11].set(True).at[30].set(True)
    model = memory.make(name, **MEMORY_CASES[name])
    carry = model.initialize_carry()
    params = model.init(key, x, start, carry)
    y, carry_out = model.apply(params, x, start, carry)
    grad = jax.grad(lambda p: jnp.sum(jnp.sin(model.apply(p, x, start, carry)[0])))(params)
    return MemoryRun(model, params, x, start, carry, y, carry_out, grad)


def memory_fingerprints() -> dict[str, list[float]]:
    out = {}
    for name in MEMORY_CASES:
        run = memory_run(name)
        out[name] = _leaves(run.params) + _leaves(run.y) + _leaves(run.carry_out) + _leaves(run.grad)
    return out


def trainer_fingerprints() -> dict[str, list[float]]:
    from memgym.agents import A2CConfig, DQNConfig, PPOConfig, make_train
    from memgym.envs.tmaze_jax import tmaze_params

    env_params = tmaze_params(5, max_episode_steps=40)
    cases = {
        "a2c-tiny-arelit": make_train(A2CConfig(memory="tiny-arelit", total_steps=4 * 32 * 3, num_envs=4,
                                                rollout_length=32, learning_rate=1e-3)),
        "a2c-tiny-gru": make_train(A2CConfig(memory="tiny-gru", total_steps=4 * 32 * 3, num_envs=4, rollout_length=32)),
        "ppo-tape-tiny-lstm": make_train(PPOConfig(memory="tiny-lstm", total_steps=4 * 16 * 2, num_envs=4,
                                                   rollout_length=16, num_minibatches=2, epochs=2)),
        "ppo-segment-ffm": make_train(PPOConfig(memory="ffm", batching="segment", segment_length=8,
                                                total_steps=4 * 16 * 2, num_envs=4, rollout_length=16,
                                                num_minibatches=2, epochs=2,
                                                memory_config='{"features": 16, "memory_size": 8, "context_size": 4}')),
        "dqn-tape-tiny-gru": make_train(DQNConfig(memory="tiny-gru", total_steps=4 * 60, num_envs=4, batch_size=32,
                                                  buffer_size=400, learning_starts=40)),
        "dqn-segment-lru": make_train(DQNConfig(memory="lru", batching="segment", segment_length=8, total_steps=4 * 60,
                                                num_envs=4, batch_size=32, buffer_size=400, learning_starts=40,
                                                memory_config='{"features": 16, "state_size": 8}')),
    }
    out = {}
    for name, train in cases.items():
        state, metrics = jax.jit(train)(jax.random.key(3), env_params)
        out[name] = _leaves(state.params) + _leaves({k: metrics[k] for k in sorted(metrics)})
    return out


def fingerprints() -> dict[str, dict[str, list[float]]]:
    return {"memory": memory_fingerprints(), "trainers": trainer_fingerprints()}


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(fingerprints(), indent=1))
    print(f"wrote {GOLDEN}")
