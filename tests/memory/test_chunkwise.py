"""The chunkwise-parallel training form of gated linear attention equals the recurrence it unrolls.

``memgym.memory.chunkwise`` computes linear attention (thesis Alg. 4) and ReLiT (Alg. 5,
eq. 3.5–3.6) in attention form inside sub-chunks, carrying only chunk-boundary states. Checked
against the recurrence itself, step by step:

* outputs ``a_t`` and the outgoing state ``(C, s)`` equal a float64 NumPy loop, on random tapes
  with random episode starts, an incoming state, decays with exact 0 and 1 entries, and chunk
  and sub-chunk sizes that do and do not divide ``T``;
* gradients with respect to every input and the incoming state equal those of the recurrence
  written as a ``lax.scan`` in float64;
* the registered models (``relit``, ``linear_attention``) give the same outputs, carries and
  parameter gradients in both forms, and so do 100k-step episodes (ReLiT, and AReLiT's
  phase ``cos(ω_k t)`` at ``t`` past 100k, which stays in the recurrent form).
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym import memory
from memgym.memory.chunkwise import GatedHead, chunkwise_attention
from memgym.memory.monoid_memory import Tape

EPS = 1e-6
N, M = 3, 5  # value width n, key width m
LENGTHS = (1, 6, 23, 40)
CHUNKS = (None, 5, 16)
SUB_CHUNKS = (1, 3, 4, 8)
SETTINGS = settings(max_examples=30, deadline=None)


def draw_head(seed: int, length: int, gated: bool) -> dict[str, np.ndarray]:
    """Random float32 inputs: queries and keys in [0.25, 2] (denominators away from 0), values in [−2, 2],
    decays in [0, 1] with about one entry in six exactly 0 or 1, start flags, and an incoming state."""
    rng = np.random.default_rng(seed)

    def decay(shape):
        values = rng.uniform(0.0, 1.0, shape)
        edges = rng.random(shape)
        return np.where(edges < 0.08, 0.0, np.where(edges < 0.16, 1.0, values))

    arrays = dict(
        q=rng.uniform(0.25, 2.0, (length, M)),
        k=rng.uniform(0.25, 2.0, (length, M)),
        v=rng.uniform(-2.0, 2.0, (length, N)),
        key_decay=decay((length, M)) if gated else None,
        value_decay=decay((length, N)) if gated else None,
        c=rng.uniform(-2.0, 2.0, (N, M)),
        s=rng.uniform(0.0, 2.0, M),
        start=rng.random(length) < 0.15,
    )
    return {key: value if value is None or key == "start" else value.astype(np.float32) for key, value in arrays.items()}


def recurrence_numpy(head: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The recurrence in float64: ``C_t = (u_t ⊗ w_t) ⊙ C_{t−1} + v_t ⊗ k_t``, ``s_t = w_t ⊙ s_{t−1} + k_t``,
    ``a_t = C_t q_t / (s_t · q_t + ε)``; a start flag zeroes the state first."""
    c, s = head["c"].astype(np.float64), head["s"].astype(np.float64)
    outputs = []
    for t in range(len(head["start"])):
        if head["start"][t]:
            c, s = np.zeros_like(c), np.zeros_like(s)
        w = np.ones(M) if head["key_decay"] is None else head["key_decay"][t].astype(np.float64)
        u = np.ones(N) if head["value_decay"] is None else head["value_decay"][t].astype(np.float64)
        q, k, v = (head[name][t].astype(np.float64) for name in "qkv")
        c = np.outer(u, w) * c + np.outer(v, k)
        s = w * s + k
        outputs.append(c @ q / (s @ q + EPS))
    return np.stack(outputs), c, s


def chunkwise(head: dict, chunk_size, sub_chunk_size) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    fields = ("q", "k", "v", "key_decay", "value_decay")
    inputs = {name: head[name] for name in fields if head[name] is not None}

    def features(chunk: dict, valid: jax.Array) -> GatedHead:
        keep = valid[:, None]
        return GatedHead(
            q=chunk["q"],
            k=jnp.where(keep, chunk["k"], 0.0),
            v=jnp.where(keep, chunk["v"], 0.0),
            key_decay=None if "key_decay" not in chunk else jnp.where(keep, chunk["key_decay"], 1.0),
            value_decay=None if "value_decay" not in chunk else jnp.where(keep, chunk["value_decay"], 1.0),
        )

    return chunkwise_attention(
        features, inputs, jnp.asarray(head["start"]), (jnp.asarray(head["c"]), jnp.asarray(head["s"])),
        chunk_size=chunk_size, sub_chunk_size=sub_chunk_size, epsilon=EPS,
    )


@pytest.mark.slow
@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    length=st.sampled_from(LENGTHS),
    chunk_size=st.sampled_from(CHUNKS),
    sub_chunk_size=st.sampled_from(SUB_CHUNKS),
    gated=st.booleans(),
)
def test_chunkwise_form_equals_the_float64_recurrence(seed, length, chunk_size, sub_chunk_size, gated):
    head = draw_head(seed, length, gated)
    expected, c, s = recurrence_numpy(head)
    outputs, (c_out, s_out) = jax.jit(chunkwise, static_argnums=(1, 2))(head, chunk_size, sub_chunk_size)
    np.testing.assert_allclose(outputs, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c_out, c, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(s_out, s, rtol=1e-4, atol=1e-4)


def recurrence_jax(q, k, v, key_decay, value_decay, c, s, start):
    """The same recurrence as a ``lax.scan`` (differentiable; run in float64 for the reference)."""

    def step(state, xs):
        c, s = state
        q, k, v, w, u, start = xs
        c, s = jnp.where(start, 0.0, c), jnp.where(start, 0.0, s)
        c = u[:, None] * w[None, :] * c + v[:, None] * k[None, :]
        s = w * s + k
        return (c, s), c @ q / (s @ q + EPS)

    (c, s), outputs = jax.lax.scan(step, (c, s), (q, k, v, key_decay, value_decay, start))
    return outputs, (c, s)


GRADIENT_NAMES = ("q", "k", "v", "key_decay", "value_decay", "c", "s")


def weighted_loss(outputs, c, s, weights):
    return jnp.sum(outputs * weights[0]) + jnp.sum(c * weights[1]) + jnp.sum(s * weights[2])


@functools.partial(jax.jit, static_argnums=(3, 4))
def chunkwise_gradients(arrays, start, weights, chunk_size, sub_chunk_size):
    def loss(arrays):
        outputs, (c, s) = chunkwise({**arrays, "start": start}, chunk_size, sub_chunk_size)
        return weighted_loss(outputs, c, s, weights)

    return jax.grad(loss)(arrays)


@jax.jit
def recurrence_gradients(arrays, start, weights):
    def loss(arrays):
        outputs, (c, s) = recurrence_jax(*(arrays[name] for name in GRADIENT_NAMES), start)
        return weighted_loss(outputs, c, s, weights)

    return jax.grad(loss)(arrays)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    chunk_size=st.sampled_from((None, 5)),
    sub_chunk_size=st.sampled_from((3, 4)),
)
def test_chunkwise_gradients_equal_the_recurrences(seed, chunk_size, sub_chunk_size):
    """d(loss)/d(q, k, v, w, u, C, s) of the chunkwise form == of the recurrence (float64 ``lax.scan``)."""
    length = 23
    head = draw_head(seed, length, gated=True)
    rng = np.random.default_rng(seed + 1)
    weights = (rng.normal(size=(length, N)), rng.normal(size=(N, M)), rng.normal(size=M))
    arrays = {name: jnp.asarray(head[name]) for name in GRADIENT_NAMES}
    start = jnp.asarray(head["start"])
    grads = chunkwise_gradients(arrays, start, tuple(jnp.asarray(w, jnp.float32) for w in weights), chunk_size, sub_chunk_size)
    with jax.enable_x64(True):
        expected = recurrence_gradients(
            {name: jnp.asarray(head[name], jnp.float64) for name in GRADIENT_NAMES},
            start,
            tuple(jnp.asarray(w, jnp.float64) for w in weights),
        )
        expected = {name: np.asarray(value) for name, value in expected.items()}
    for name in GRADIENT_NAMES:
        scale = max(1.0, float(np.max(np.abs(expected[name]))))
        np.testing.assert_allclose(grads[name], expected[name], rtol=1e-3, atol=2e-4 * scale, err_msg=name)


MODEL_CONFIGS = {
    "relit": dict(features=12, num_layers=1, num_heads=2, head_dim=4, eta=2),
    "linear_attention": dict(features=12, num_layers=1, num_heads=2, head_dim=4),
}


@pytest.mark.parametrize("name", sorted(MODEL_CONFIGS))
@pytest.mark.parametrize(("length", "chunk_size", "sub_chunk_size"), [(1, 8, 4), (37, None, 5), (257, 64, 16)])
@pytest.mark.slow
def test_models_train_the_same_in_both_forms(name, length, chunk_size, sub_chunk_size):
    """A registered model's outputs, carry and parameter gradients: chunkwise form == recurrent form
    (``sub_chunk_size=None``), with an incoming carry and episode starts on the tape."""
    config = MODEL_CONFIGS[name]
    parallel = memory.make(name, **config, chunk_size=chunk_size, sub_chunk_size=sub_chunk_size)
    recurrent = memory.make(name, **config, chunk_size=chunk_size, sub_chunk_size=None)
    rng = np.random.default_rng(length)
    x = jnp.asarray(rng.normal(size=(length, 5)), jnp.float32)
    start = jnp.asarray(rng.random(length) < 0.1)
    params = parallel.init(jax.random.key(0), x, start, parallel.initialize_carry())
    _, carry = recurrent.apply(params, jnp.flip(x, 0), jnp.zeros(length, bool), parallel.initialize_carry())

    def run(model, params):
        y, carry_out = model.apply(params, x, start, carry)
        return jnp.sum(jnp.sin(y)) + sum(jnp.sum(jnp.cos(leaf)) for leaf in jax.tree.leaves(carry_out)), (y, carry_out)

    (_, (y_par, carry_par)), grads_par = jax.jit(jax.value_and_grad(lambda p: run(parallel, p), has_aux=True))(params)
    (_, (y_rec, carry_rec)), grads_rec = jax.jit(jax.value_and_grad(lambda p: run(recurrent, p), has_aux=True))(params)
    np.testing.assert_allclose(y_par, y_rec, rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(carry_par), jax.tree.leaves(carry_rec), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(grads_par), jax.tree.leaves(grads_rec), strict=True):
        scale = max(1.0, float(np.max(np.abs(b))))
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4 * scale)


def test_sub_chunk_size_is_validated():
    message = r"sub_chunk_size must be None \(the recurrent scan\) or a positive integer, got sub_chunk_size="
    for name in MODEL_CONFIGS:
        for bad in (0, -3, 2.5, True):
            with pytest.raises(ValueError, match=message + re.escape(repr(bad))):
                model = memory.make(name, **MODEL_CONFIGS[name], sub_chunk_size=bad)
                model.init(jax.random.key(0), jnp.zeros((3, 2)), jnp.zeros(3, bool), model.initialize_carry())


LONG = 100_003  # steps of the long tape: one episode from step 7 to the end


@pytest.mark.parametrize("name", ["relit", "arelit"])
def test_a_100k_step_episode_matches_the_float64_recurrence(name):
    """One head over a 100,003-step tape whose episode runs 99,996 steps, as training runs it (ReLiT:
    chunkwise form; AReLiT: chunked monoid scan with ``cos(2πk t / r)`` from ``t mod r``), against the
    float64 recurrence (thesis eq. 3.5–3.6 / 4.20–4.21, Alg. 5 / 6 readouts) with ``t`` past 100k."""
    options = dict(features=4, num_layers=1, num_heads=1, head_dim=2, eta=1, chunk_size=64)
    if name == "arelit":
        options["r"] = 3
    mixer = memory.make(name, **options).mixer(parent=None)
    rng = np.random.default_rng(0)
    f32 = lambda *shape, low, high: rng.uniform(low, high, shape).astype(np.float32)  # noqa: E731
    v, beta = f32(LONG, 2, low=-2, high=2), f32(LONG, 2, low=0, high=0.02)
    k_pair, q_pair = (f32(LONG, 1, low=0.25, high=2), f32(LONG, 2, low=0.25, high=2)), (f32(LONG, 1, low=0.25, high=2), f32(LONG, 2, low=0.25, high=2))
    gamma_pair = (f32(LONG, 1, low=0.5, high=1), f32(LONG, 2, low=0, high=0.02))
    start = np.zeros(LONG, bool)
    start[7] = True
    step_in = 5
    inputs = (v, k_pair, beta, gamma_pair)
    if name == "arelit":
        steps = np.where(np.arange(LONG) >= 7, np.arange(LONG) - 7, step_in + np.arange(LONG)).astype(np.int32)
        inputs = (*inputs, steps)
    head_carry = jax.tree.map(lambda leaf: jnp.asarray(rng.uniform(0, 1, leaf.shape), jnp.float32), mixer.initial_head_carry())
    readout, carry = jax.jit(lambda inputs, queries, start, carry: mixer.head_scan(
        mixer.monoid(), Tape(inputs, queries), start, carry))(inputs, q_pair, jnp.asarray(start), head_carry)

    # The recurrence in float64, step by step.
    k = np.einsum("ti,tj->tij", *k_pair).reshape(LONG, 2).astype(np.float64)
    q = np.einsum("ti,tj->tij", *q_pair).reshape(LONG, 2).astype(np.float64)
    gamma = np.einsum("ti,tj->tij", *gamma_pair).reshape(LONG, 2).astype(np.float64)
    v, beta = v.astype(np.float64), beta.astype(np.float64)
    state = [np.asarray(leaf, np.float64) for leaf in head_carry]
    expected = np.empty((LONG, 2))
    r = options.get("r", 1)
    for t in range(LONG):
        if start[t]:
            state = [np.zeros_like(leaf) for leaf in state]
        gk, bv = gamma[t] * k[t], beta[t] * v[t]
        if name == "relit":
            c, s = state
            state = [np.outer(1 - beta[t], 1 - gamma[t]) * c + np.outer(bv, gk), (1 - gamma[t]) * s + gk]
            expected[t] = state[0] @ q[t] / (state[1] @ q[t] + EPS)
        else:
            cos = np.cos(2 * np.pi * np.arange(r + 1) * float(steps[t]) / r)[:, None]
            vt, kt, s = state
            state = [(1 - beta[t]) * vt + cos * bv, (1 - gamma[t]) * kt + cos * gk, (1 - gamma[t]) * s + gk]
            expected[t] = state[0].T @ (state[1] @ q[t]) / (2 * r * (state[2] @ q[t]) + EPS)
    np.testing.assert_allclose(readout, expected, rtol=1e-3, atol=1e-4)
    for actual, wanted in zip(jax.tree.leaves(mixer.carry_from_element(mixer.element_from_carry(carry))), state, strict=True):
        np.testing.assert_allclose(actual, wanted, rtol=1e-3, atol=1e-4)
