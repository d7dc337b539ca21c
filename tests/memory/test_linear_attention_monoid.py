"""The monoid paper's linear transformer (eq. 9–13, model and preset ``linear_attention_monoid``).

* Property: on a random tape with random episode starts and a random incoming carry, the
  model's outputs and final carry equal a float64 NumPy step-by-step implementation of
  eq. 9–13 written here (with the model's own parameters), for every chunk size and both
  scan methods;
* the safe denominator keeps the readout finite where ``s · q`` is exactly 0 (and its
  gradients too), and is the plain ratio where ``|s · q| ≥ ε``;
* the registry and the ``linear_attention_monoid`` preset build it; unknown or missing options are
  ``ValueError``\\ s that say what is wrong.

Streaming (``T = 1``) == the tape, carry across calls, reset isolation and long tapes are
checked for every registered model, this one included, in ``test_models.py``.
"""

from __future__ import annotations

import functools
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memgym import memory
from memgym.agents.config import MEMORY_PRESETS, resolve_memory
from memgym.memory.linear_attention_monoid import EPSILON, LinearAttentionMonoid, safe_denominator

IN, FEATURES, KEY, VALUE = 5, 7, 4, 3  # d_k ≠ d_v, so a transposed state cannot pass
LENGTHS = (1, 7)  # tape lengths (few, so the jitted model compiles a few times only)
CHUNK_SIZES = (None, 3)  # one chunk; chunks of 3 steps with padding
METHODS = ("sequential", "associative")


# ---------------------------------------------------------------- the reference: eq. 9–13 in float64


def gelu(z: np.ndarray) -> np.ndarray:
    """Flax's default GeLU (tanh approximation)."""
    return 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))


def reference(params, x, start, carry):
    """Eq. 9–13 step by step: ``(y [T, features], (C, s), cond [T])``.

    ``cond_t = Σ_i |s_i q_i| / max(|s·q|, ε)`` measures how much float32 rounding of
    ``s · q`` can move the readout (large where the sum nearly cancels).
    """
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params["params"])
    w_k, w_q, w_v = p["w_k"]["kernel"], p["w_q"]["kernel"], p["w_v"]["kernel"]
    c, s = (np.asarray(leaf, np.float64) for leaf in carry)
    ys, conds = [], []
    for t in range(len(start)):
        o = np.asarray(x[t], np.float64)
        if start[t]:  # a start flag: the state restarts from the identity (0, 0) of eq. 10
            c, s = np.zeros_like(c), np.zeros_like(s)
        k, q, v = o @ w_k, o @ w_q, o @ w_v
        c, s = c + np.outer(v, k), s + k  # eq. 11–12, C = Σ v kᵀ [d_v, d_k], s = Σ k
        z = s @ q
        den = (1.0 if z >= 0 else -1.0) * max(abs(z), EPSILON)
        readout = c @ q / den  # eq. 13
        hidden = gelu(readout @ p["mlp_hidden"]["kernel"] + p["mlp_hidden"]["bias"])
        ys.append(hidden @ p["mlp_out"]["kernel"] + p["mlp_out"]["bias"])
        conds.append(np.abs(s * q).sum() / max(abs(z), EPSILON))
    return np.stack(ys), (c, s), np.asarray(conds)


# ---------------------------------------------------------------- the model, jitted per (chunk size, method)


def model(chunk_size):
    return LinearAttentionMonoid(features=FEATURES, key_size=KEY, value_size=VALUE, chunk_size=chunk_size)


@functools.cache
def jitted_apply(chunk_size, method):
    """``apply`` of the model, compiled with ``method`` as the scan method (call it under :func:`scan_method`)."""
    return jax.jit(model(chunk_size).apply)


def scan_method(method):
    """Make every memory-monoid scan use ``method`` (the default picks ``sequential`` on CPU)."""
    return mock.patch("memgym.memory.monoid.default_scan_method", return_value=method)


@functools.cache
def jitted_init():
    m = model(None)
    return jax.jit(lambda key: m.init(key, jnp.zeros((2, IN)), jnp.zeros(2, bool), m.initialize_carry()))


def run(params, x, start, carry, chunk_size=None, method="sequential"):
    with scan_method(method):
        y, carry_out = jitted_apply(chunk_size, method)(params, jnp.asarray(x), jnp.asarray(start), carry)
    return np.asarray(y), carry_out


# ---------------------------------------------------------------- property: the model is eq. 9–13


@st.composite
def tapes(draw):
    """Parameters (a random init), ``x [T, IN]`` (some rows zero), start flags and an incoming carry."""
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    length = draw(st.sampled_from(LENGTHS), label="T")
    rng = np.random.default_rng(seed)
    params = jitted_init()(jax.random.key(seed))
    x = rng.normal(size=(length, IN)) * rng.choice([0.1, 1.0, 3.0])
    x[rng.random(length) < 0.125] = 0.0  # k = q = v = 0: s · q = 0 and C q = 0
    start = rng.random(length) < 0.3
    carry = (rng.normal(size=(VALUE, KEY)), rng.normal(size=(KEY,)))
    as32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
    return params, as32(x), start, tuple(jnp.asarray(as32(leaf)) for leaf in carry)


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=25, deadline=None)
@given(tape=tapes(), chunk_size=st.sampled_from(CHUNK_SIZES))
def test_model_is_equations_9_to_13(method, tape, chunk_size):
    params, x, start, carry = tape
    expected_y, (expected_c, expected_s), cond = reference(params, x, start, carry)
    # Where s · q nearly cancels, float32 and float64 may round it to different sides of the
    # ε bound; such tapes compare rounding, not the model.
    assume(cond.max() < 1e3)
    y, (c, s) = run(params, x, start, carry, chunk_size, method)
    scale = max(1.0, np.abs(expected_y).max())
    np.testing.assert_allclose(y, expected_y, rtol=1e-4, atol=1e-4 * scale)
    np.testing.assert_allclose(c, expected_c, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(expected_c).max()))
    np.testing.assert_allclose(s, expected_s, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(expected_s).max()))


# ---------------------------------------------------------------- the denominator


def test_safe_denominator_keeps_the_sign_and_bounds_the_magnitude():
    z = jnp.asarray([0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, EPSILON, -EPSILON, 2e-6, -2e-6, 3.0, -3.0, 1e30, -1e30])
    den = np.asarray(safe_denominator(z))
    eps = EPSILON
    expected = [eps, eps, eps, -eps, eps, -eps, eps, -eps, 2e-6, -2e-6, 3.0, -3.0, 1e30, -1e30]
    np.testing.assert_array_equal(den, np.asarray(expected, np.float32))
    assert np.all(np.abs(den) >= np.float32(EPSILON))
    # Gradient 0 where clamped, 1 where z itself (z = ±ε, a tie of max / min, left out).
    away = jnp.concatenate([z[:6], z[8:]])
    np.testing.assert_array_equal(jax.vmap(jax.grad(safe_denominator))(away), [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("chunk_size", CHUNK_SIZES)
def test_outputs_and_gradients_are_finite_where_s_dot_q_is_exactly_zero(chunk_size, method):
    """Without a feature map, ``x`` then ``−x`` cancel the key sum: ``s = k − k = 0`` exactly, while
    ``C = v kᵀ + (−v)(−k)ᵀ = 2 v kᵀ ≠ 0``, so at every second step ``s · q = 0`` and ``C q ≠ 0``."""
    params = jitted_init()(jax.random.key(0))
    u = np.random.default_rng(0).normal(size=IN).astype(np.float32)
    x = np.stack([u, -u, u, -u, u, -u, np.zeros(IN, np.float32)])  # the last row: q = 0 too
    start = np.zeros(7, bool)
    zero = LinearAttentionMonoid(features=FEATURES, key_size=KEY, value_size=VALUE).initialize_carry()
    y, (c, s) = run(params, x[:6], start[:6], zero, chunk_size, method)
    np.testing.assert_array_equal(s, np.zeros(KEY))  # the key sum cancelled exactly
    assert np.any(c != 0)
    expected_y, _, _ = reference(params, x[:6], start[:6], zero)
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y, expected_y, rtol=1e-4, atol=1e-4 * np.abs(expected_y).max())
    # An incoming carry whose key sum is 0 meets q = 0 (numerator and denominator both 0).
    y, _ = run(params, x[6:], start[6:], (c, s), chunk_size, method)
    assert np.all(np.isfinite(y))

    def loss(params, x):
        with scan_method(method):
            out, _ = model(chunk_size).apply(params, x, jnp.asarray(start), zero)
        return jnp.sum(out**2)

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(params, jnp.asarray(x))
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


def test_a_begin_flag_cuts_the_incoming_carry():
    """With a start flag at step 0 the outputs and carry are those of a fresh stream, bit for bit."""
    params = jitted_init()(jax.random.key(1))
    rng = np.random.default_rng(1)
    x = rng.normal(size=(7, IN)).astype(np.float32)
    start = np.asarray([True, False, False, True, False, False, False])
    dirty = (jnp.asarray(rng.normal(size=(VALUE, KEY)), jnp.float32), jnp.asarray(rng.normal(size=KEY), jnp.float32))
    fresh = model(None).initialize_carry()
    for chunk_size in CHUNK_SIZES:
        y, carry = run(params, x, start, dirty, chunk_size)
        y_fresh, carry_fresh = run(params, x, start, fresh, chunk_size)
        np.testing.assert_array_equal(y, y_fresh)
        for a, b in zip(carry, carry_fresh, strict=True):
            np.testing.assert_array_equal(a, b)
    # Without the flag the carry does flow in.
    y, _ = run(params, x, np.zeros(7, bool), dirty)
    assert not np.allclose(y[:3], y_fresh[:3])


# ---------------------------------------------------------------- registry and preset


def test_make_builds_it_and_names_bad_options():
    m = memory.make("linear_attention_monoid", features=8, key_size=4, value_size=2, chunk_size=None)
    assert isinstance(m, LinearAttentionMonoid)
    assert memory.model_class("linear_attention_monoid") is LinearAttentionMonoid
    c, s = m.initialize_carry()
    assert c.shape == (2, 4) and s.shape == (4,) and c.dtype == s.dtype == jnp.float32
    missing = r"memory model 'linear_attention_monoid' needs option\(s\) \['features'\] \(features: output width .*\)"
    with pytest.raises(ValueError, match=missing + r"; got \{'key_size': 4\}$"):
        memory.make("linear_attention_monoid", key_size=4)
    unknown = r"unknown option\(s\) \['head_dim'\] for memory model 'linear_attention_monoid'; allowed: "
    with pytest.raises(ValueError, match=unknown + r"\['chunk_size', 'features', 'key_size', 'value_size'\]$"):
        memory.make("linear_attention_monoid", features=8, head_dim=4)
    with pytest.raises(ValueError, match="key_size=0"):
        memory.make("linear_attention_monoid", features=8, key_size=0).initialize_carry()


def test_the_preset_resolves_and_runs():
    assert MEMORY_PRESETS["linear_attention_monoid"][0] == "linear_attention_monoid"
    name, config = resolve_memory("linear_attention_monoid")
    assert name == "linear_attention_monoid" and config["features"] == 256
    name, config = resolve_memory("linear_attention_monoid", '{"key_size": 8, "value_size": 4}')
    assert (name, config) == ("linear_attention_monoid", dict(features=256, key_size=8, value_size=4))
    m = memory.make(name, **config)
    x, start = jnp.ones((3, IN)), jnp.asarray([True, False, False])
    y, (c, s) = m.apply(m.init(jax.random.key(0), x, start, m.initialize_carry()), x, start, m.initialize_carry())
    assert y.shape == (3, 256) and c.shape == (4, 8) and s.shape == (8,) and np.all(np.isfinite(y))
    with pytest.raises(ValueError, match=r"memory_config: unknown option\(s\) \['memory_size'\] for memory model "
                                         r"'linear_attention_monoid'"):
        resolve_memory("linear_attention_monoid", {"memory_size": 8})
    with pytest.raises(ValueError, match=r"unknown memory 'linatn'; presets: .*linear_attention_monoid"):
        resolve_memory("linatn")
