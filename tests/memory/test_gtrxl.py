"""GTrXL specifics: episode isolation, the M-input window, chunked tape == streaming, input checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.memory.gtrxl import GTrXL, WindowMemory, params_stamp, sinusoid_table, windowed_relative_attention

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


def test_carry_is_a_window_memory_per_layer():
    carry = GTrXL(features=128, num_layers=4, num_heads=4, head_dim=64, memory_size=256).initialize_carry()
    assert len(carry) == 4
    for layer in carry:
        assert isinstance(layer, WindowMemory)
        assert layer.mem.shape == (256, 128) and layer.mem.size == 32768
        assert layer.valid.shape == (256,) and layer.valid.dtype == jnp.bool_ and not layer.valid.any()
        assert layer.keys.shape == layer.values.shape == (256, 4, 64)
        assert layer.stamp.shape == (2,) and layer.stamp.dtype == jnp.uint32


def stream(apply, params, x, start, carry):
    """Step ``apply`` through the tape one row at a time: ``(outputs [T, d], carry)``."""
    outputs = []
    for t in range(len(x)):
        y, carry = apply(params, x[t : t + 1], start[t : t + 1], carry)
        outputs.append(y[0])
    return np.stack(outputs), carry


def test_streaming_rebuilds_the_key_value_cache_when_the_parameters_change(two_layers):
    """Acting after a training update must not use keys and values made by the old parameters."""
    model, params, apply = two_layers
    x, start = tape(7, 40, [0])
    _, carry = stream(apply, params, x[:20], start[:20], model.initialize_carry())
    updated = jax.tree.map(lambda p: p + 0.05 * jnp.sign(jnp.sin(jnp.arange(p.size).reshape(p.shape) + 1.0)), params)
    assert all(not np.array_equal(a.stamp, b.stamp) for a, b in zip(
        carry, apply(updated, x[20:21], start[20:21], carry)[1], strict=True))

    y_stream, carry_stream = stream(apply, updated, x[20:], start[20:], carry)
    y_tape, carry_tape = apply(updated, x[20:], start[20:], carry)  # a tape recomputes every key and value
    np.testing.assert_allclose(y_stream, y_tape, atol=ATOL, rtol=1e-3)
    for a, b in zip(jax.tree.leaves(carry_stream), jax.tree.leaves(carry_tape), strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=1e-3)


def test_streaming_without_the_cache_recomputes_and_agrees(two_layers):
    model, params, apply = two_layers
    x, start = tape(9, 25, [0, 11])
    _, carry = stream(apply, params, x[:10], start[:10], model.initialize_carry())
    cached, _ = stream(apply, params, x[10:], start[10:], carry)
    corrupted = tuple(layer._replace(keys=layer.keys + 1.0, values=-layer.values) for layer in carry)  # stamps valid
    uncached, _ = stream(jax.jit(model.clone(kv_cache=False).apply), params, x[10:], start[10:], corrupted)
    np.testing.assert_allclose(uncached, cached, atol=ATOL, rtol=1e-3)


def test_streaming_under_vmap_reads_the_cache_and_rebuilds_a_stale_one(two_layers):
    """With a matching stamp a step really reads the cached keys and values (garbage in, garbage out);
    with any stream's stamp stale, every stream rebuilds, under vmap as alone."""
    model, params, apply = two_layers
    x, start = tape(8, 30, [0])
    _, carry = stream(apply, params, x[:29], start[:29], model.initialize_carry())
    batched = jax.tree.map(lambda leaf: jnp.stack([leaf, leaf]), carry)
    step = jax.jit(jax.vmap(model.apply, in_axes=(None, None, None, 0)))
    truth = apply(params, x, start, model.initialize_carry())[0][29:]  # the tape: no cache involved

    garbage = tuple(layer._replace(keys=layer.keys + 3.0, values=-layer.values) for layer in batched)
    y_garbage, _ = step(params, x[29:], start[29:], garbage)
    assert not np.allclose(y_garbage[0], truth, atol=1e-3)

    one_stale = tuple(layer._replace(stamp=layer.stamp.at[1].set(0)) for layer in garbage)
    y_rebuilt, rebuilt = step(params, x[29:], start[29:], one_stale)
    for y in y_rebuilt:
        np.testing.assert_allclose(y, truth, atol=ATOL, rtol=1e-3)
    np.testing.assert_array_equal(rebuilt[0].stamp[0], carry[0].stamp)


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

    y_stream, carry = stream(apply, params, x, start, model.initialize_carry())
    np.testing.assert_allclose(y_stream, y_tape, atol=ATOL, rtol=1e-3)
    for a, b in zip(jax.tree.leaves(carry), jax.tree.leaves(carry_tape), strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=1e-3)


def test_chunked_attention_matches_a_dense_reference():
    rng = np.random.default_rng(6)
    memory_size, positions, heads, head_dim, chunk = 5, 12, 2, 3, 4
    q, u, w = (rng.normal(size=s).astype(np.float32) for s in [(positions, heads, head_dim), (heads, head_dim), (heads, head_dim)])
    k, v = (rng.normal(size=(memory_size + positions, heads, head_dim)).astype(np.float32) for _ in range(2))
    width = 6
    table = sinusoid_table(memory_size, width)
    position_kernel = rng.normal(size=(width, heads, head_dim)).astype(np.float32)
    rel = np.einsum("mD,Dhd->mhd", table, position_kernel)  # r_δ = W_R R_δ
    key_ok = np.ones(memory_size + positions, bool)
    key_ok[:2] = False
    floor = np.where(np.arange(positions) >= 7, memory_size + 7, 0)

    out = windowed_relative_attention(q, k, v, table, position_kernel, u, w, key_ok, floor, chunk=chunk)

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
    carry = (WindowMemory(jnp.zeros((3, 8)), jnp.zeros(3, bool), jnp.zeros((3, 1, 4)), jnp.zeros((3, 1, 4)),
                          jnp.zeros(2, jnp.uint32)),)
    with pytest.raises(ValueError, match=f"{field}=0"):
        model.init(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(2, bool), carry)


def test_bad_cache_flag_and_old_style_carry_are_rejected():
    model = GTrXL(features=8, num_layers=1, num_heads=1, head_dim=4, memory_size=3, kv_cache="yes")
    with pytest.raises(ValueError, match="kv_cache must be True or False, got kv_cache='yes'"):
        model.initialize_carry()
    model = model.clone(kv_cache=True)
    old_style = ((jnp.zeros((3, 8)), jnp.zeros(3, bool)),)  # (mem, valid) without the cache
    with pytest.raises(ValueError, match=r"carry\[0\] must be a WindowMemory .* got tuple of 2 entries"):
        model.init(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(2, bool), old_style)


def test_bad_tapes_are_rejected():
    model = GTrXL(features=8, num_layers=1, num_heads=1, head_dim=4, memory_size=3)
    carry = model.initialize_carry()
    with pytest.raises(ValueError, match=r"start.*\(3,\).*x.*\(2, 3\)"):
        model.init(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(3, bool), carry)
    with pytest.raises(ValueError, match=r"x must be a 2-D tape.*\(3,\)"):
        model.init(jax.random.key(0), jnp.zeros(IN), jnp.zeros(3, bool), carry)


def test_params_stamp_changes_with_any_value_or_position():
    base = {"a": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(4)}
    stamps = {tuple(np.asarray(params_stamp(base)))}
    stamps.add(tuple(np.asarray(params_stamp({**base, "b": base["b"].at[2].add(1e-7)}))))
    stamps.add(tuple(np.asarray(params_stamp({**base, "a": base["a"][:, ::-1]}))))  # same values, moved
    stamps.add(tuple(np.asarray(params_stamp({**base, "a": -base["a"]}))))
    assert len(stamps) == 4
    np.testing.assert_array_equal(params_stamp(base), jax.jit(params_stamp)(base))
