"""GTrXL specifics: episode isolation, the M-input window, chunked tape == streaming, input checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.memory.gtrxl import GTrXL, sinusoid_table, windowed_relative_attention

IN = 3
ATOL = 2e-4


class Built(NamedTuple):
    model: GTrXL
    params: Any
    apply: Callable  # jitted ``model.apply``, shared so each tape shape compiles once per module


def build(**config) -> Built:
    model = GTrXL(**{"features": 8, "num_layers": 2, "num_heads": 2, "head_dim": 4, **config})
    params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(2, bool), model.initialize_carry())
    return Built(model, params, jax.jit(model.apply))


@pytest.fixture(scope="module")
def two_layers() -> Built:
    return build(memory_size=7, chunk_size=16)


def tape(seed: int, length: int, starts: list[int]):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(length, IN)).astype(np.float32)
    start = np.zeros(length, bool)
    start[starts] = True
    return x, start


def test_carry_is_mem_and_valid_per_layer():
    carry = GTrXL(features=128, num_layers=4, memory_size=256).initialize_carry()
    assert len(carry) == 4
    for mem, valid in carry:
        assert mem.shape == (256, 128) and mem.size == 32768
        assert valid.shape == (256,) and valid.dtype == jnp.bool_ and not valid.any()


def test_no_attention_across_an_episode_start(two_layers):
    model, params, apply = two_layers
    length, boundary = 300, 150
    _, dirty = apply(params, *tape(1, length, [0]), model.initialize_carry())
    _, other_dirty = apply(params, *tape(2, length, [0]), model.initialize_carry())
    x, start = tape(3, length, [boundary])  # the first episode continues the one in the carry
    y, _ = apply(params, x, start, dirty)

    changed = x.copy()
    changed[:boundary] += 1.0
    y_changed, _ = apply(params, changed, start, dirty)
    np.testing.assert_allclose(y_changed[boundary:], y[boundary:], atol=ATOL)

    y_other, _ = apply(params, x, start, other_dirty)
    np.testing.assert_allclose(y_other[boundary:], y[boundary:], atol=ATOL)
    # The memory is really read while the episode continues.
    assert not np.allclose(y_other[:boundary], y[:boundary], atol=1e-3)


def test_window_is_the_current_input_and_the_m_minus_1_before():
    memory_size, length, split, t = 4, 16, 8, 9
    model, params, apply = build(num_layers=1, memory_size=memory_size)
    x, start = tape(4, length, [0])

    def outputs_at_t(x: np.ndarray) -> tuple[jax.Array, jax.Array]:
        """y[t] from one call over the tape, and from two calls split so x[t - M] … x[t - 2] sit in the memory."""
        y, _ = apply(params, x, start, model.initialize_carry())
        _, carry = apply(params, x[:split], start[:split], model.initialize_carry())
        y_split, _ = apply(params, x[split:], start[split:], carry)
        return y[t], y_split[t - split]

    base, base_split = outputs_at_t(x)
    np.testing.assert_allclose(base_split, base, atol=ATOL)
    just_outside = x.copy()
    just_outside[t - memory_size] += 3.0
    oldest_inside = x.copy()
    oldest_inside[t - memory_size + 1] += 3.0
    for y in outputs_at_t(just_outside):
        np.testing.assert_allclose(y, base, atol=1e-6)
    for y in outputs_at_t(oldest_inside):
        assert not np.allclose(y, base, atol=1e-4)


def test_chunked_tape_equals_streaming_and_one_big_chunk(two_layers):
    model, params, apply = two_layers
    assert (model.memory_size, model.chunk_size) == (7, 16)
    x, start = tape(5, 300, [0, 100, 137])
    y_tape, carry_tape = apply(params, x, start, model.initialize_carry())

    one_chunk = model.clone(chunk_size=300)
    y_whole, _ = jax.jit(one_chunk.apply)(params, x, start, model.initialize_carry())
    np.testing.assert_allclose(y_whole, y_tape, atol=ATOL, rtol=1e-3)

    carry, steps = model.initialize_carry(), []
    for t in range(300):
        y, carry = apply(params, x[t : t + 1], start[t : t + 1], carry)
        steps.append(y[0])
    np.testing.assert_allclose(np.stack(steps), y_tape, atol=ATOL, rtol=1e-3)
    for a, b in zip(jax.tree.leaves(carry), jax.tree.leaves(carry_tape), strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=1e-3)


def test_chunked_attention_matches_a_dense_reference():
    rng = np.random.default_rng(6)
    memory_size, positions, heads, head_dim, chunk = 5, 12, 2, 3, 4
    q, u, w = (rng.normal(size=s).astype(np.float32) for s in [(positions, heads, head_dim), (heads, head_dim), (heads, head_dim)])
    k, v = (rng.normal(size=(memory_size + positions, heads, head_dim)).astype(np.float32) for _ in range(2))
    rel = rng.normal(size=(memory_size, heads, head_dim)).astype(np.float32)
    key_ok = np.ones(memory_size + positions, bool)
    key_ok[:2] = False
    floor = np.where(np.arange(positions) >= 7, memory_size + 7, 0)

    out = windowed_relative_attention(q, k, v, rel, u, w, key_ok, floor, chunk=chunk)

    expected = np.zeros_like(q)
    for t in range(positions):
        i = memory_size + t
        keys = [j for j in range(memory_size + positions) if t < j <= i and j >= floor[t] and key_ok[j]]
        for h in range(heads):
            scores = np.array([(q[t, h] + u[h]) @ k[j, h] + (q[t, h] + w[h]) @ rel[i - j, h] for j in keys])
            weights = np.exp(scores / math.sqrt(head_dim) - np.max(scores / math.sqrt(head_dim)))
            expected[t, h] = (weights / weights.sum()) @ v[keys, h]
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=1e-4)


def test_sinusoid_table():
    table = sinusoid_table(4, 6)
    assert table.shape == (4, 6)
    np.testing.assert_allclose(table[0], [0, 1, 0, 1, 0, 1])
    np.testing.assert_allclose(table[3, 0], math.sin(3.0), rtol=1e-6)


@pytest.mark.parametrize("field", ["features", "num_layers", "num_heads", "head_dim", "memory_size"])
def test_bad_sizes_are_rejected(field):
    model = GTrXL(**{"features": 8, "num_layers": 1, "num_heads": 1, "head_dim": 4, "memory_size": 3, field: 0})
    with pytest.raises(ValueError, match=f"{field}=0"):
        model.initialize_carry()
    carry = ((jnp.zeros((3, 8)), jnp.zeros(3, bool)),)
    with pytest.raises(ValueError, match=f"{field}=0"):
        model.init(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(2, bool), carry)


def test_bad_tapes_are_rejected():
    model = GTrXL(features=8, num_layers=1, num_heads=1, head_dim=4, memory_size=3)
    carry = model.initialize_carry()
    with pytest.raises(ValueError, match=r"start.*\(3,\).*x.*\(2, 3\)"):
        model.init(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(3, bool), carry)
    with pytest.raises(ValueError, match=r"x must be a 2-D tape.*\(3,\)"):
        model.init(jax.random.key(0), jnp.zeros(IN), jnp.zeros(3, bool), carry)
