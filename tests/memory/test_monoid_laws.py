"""Property tests of the memory monoids and the machinery that runs them (monoid paper §3, App. E).

* Def. 3.1 — every operator is associative and has a two-sided identity: the model monoids
  (S5, LRU, FFM, the monoid paper's linear transformer (eq. 9–11), and the per-head monoids of
  the linear-attention, ReLiT and AReLiT mixers, taken from the registered models themselves)
  and simple reference monoids (additive, affine, 2×2 matrix product).
* Thm. 3.4 — the resettable transform is again a monoid, and a start flag on the right
  replaces the left state by the identity (reset isolation).
* ``scan_monoid`` — the associative scan, ``lax.scan`` and a plain Python loop give the
  same states and carry, forwards and in reverse, with random start flags and carry;
  ``run_memory_monoid`` gives the same outputs for any chunk size;
* the S5 / LRU / FFM monoids, scanned, compute the linear recurrences they encode, and so do
  the linear-attention, ReLiT (thesis Alg. 5, eq. 3.5–3.6) and AReLiT (Alg. 6, eq. 4.20–4.21) ones.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym import memory
from memgym.memory.attention import episode_steps
from memgym.memory.ffm import ffm_monoid
from memgym.memory.monoid import Monoid, resettable, run_memory_monoid, scan_monoid

SETTINGS = settings(max_examples=25, deadline=None)
TOL = dict(rtol=1e-4, atol=1e-4)
STATE = 3  # state width of the test elements


# Arrays come from a numpy generator seeded by hypothesis (drawing every entry through hypothesis
# is ~10x slower); about one entry in eight is an edge value (0 or a bound) instead.
SEEDS = st.integers(0, 2**32 - 1)
EDGE_RATE = 0.125


def uniform_with_edges(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    """Uniform on ``[low, high]``; some entries replaced by ``low``, ``high`` or ``0`` (when inside)."""
    edges = np.array([low, high] + ([0.0] if low < 0.0 < high else []))
    values = np.where(rng.random(shape) < EDGE_RATE, rng.choice(edges, shape), rng.uniform(low, high, shape))
    return values.astype(np.float32)


def real_array(shape: tuple[int, ...], bound: float = 2.0) -> st.SearchStrategy[np.ndarray]:
    """Float32 arrays with entries in ``[−bound, bound]``."""
    return SEEDS.map(lambda seed: uniform_with_edges(np.random.default_rng(seed), shape, -bound, bound))


def int_array(shape: tuple[int, ...], high: int) -> st.SearchStrategy[np.ndarray]:
    """Int32 arrays with entries in ``[0, high]``."""
    return SEEDS.map(lambda seed: np.random.default_rng(seed).integers(0, high + 1, shape).astype(np.int32))


def bool_array(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    return SEEDS.map(lambda seed: np.random.default_rng(seed).random(shape) < 0.5)


def complex_array(shape: tuple[int, ...], max_modulus: float) -> st.SearchStrategy[np.ndarray]:
    """Complex64 arrays with modulus ``≤ max_modulus`` (polar form)."""

    def make(seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        modulus = uniform_with_edges(rng, shape, 0.0, max_modulus)
        phase = rng.uniform(-np.pi, np.pi, shape)
        return flush_subnormals((modulus * np.exp(1j * phase)).astype(np.complex64))

    return SEEDS.map(make)


def flush_subnormals(z: np.ndarray) -> np.ndarray:
    """Zero subnormal real and imaginary parts: XLA on CPU may flush them to zero, which would
    break the exact identity checks."""
    tiny = np.finfo(np.float32).tiny
    clean = lambda part: np.where(np.abs(part) < tiny, np.float32(0), part)  # noqa: E731
    return (clean(z.real) + 1j * clean(z.imag)).astype(np.complex64)


# ---------------------------------------------------------------- reference monoids


def additive_monoid() -> Monoid:
    """``(u, v) • (u', v') = (u + u', v + v')``, identity zeros."""
    return Monoid(op=lambda a, b: jax.tree.map(jnp.add, a, b), identity=lambda like: jax.tree.map(jnp.zeros_like, like))


def affine_monoid() -> Monoid:
    """Composition of elementwise affine maps ``z ↦ s z + c``, left one first: ``(s' s, s' c + c')``."""
    return Monoid(
        op=lambda a, b: (b[0] * a[0], b[0] * a[1] + b[1]),
        identity=lambda like: (jnp.ones_like(like[0]), jnp.zeros_like(like[1])),
    )


def matrix_monoid() -> Monoid:
    """Products of 2×2 matrices (non-commutative in every component), identity ``I``."""
    return Monoid(op=lambda a, b: a @ b, identity=lambda like: jnp.eye(2, dtype=like.dtype))


# Shapes of one head for the attention monoids: value width D, key width E = η·D (non-square,
# so a transposed outer product cannot pass) and R = r + 1 AReLiT components.
HEAD_DIM, KEY_WIDTH, COMPONENTS = STATE, 2 * STATE, 3
ATTENTION_CONFIGS = {
    "linear_attention": dict(features=8, num_layers=1, num_heads=1, head_dim=HEAD_DIM),
    "relit": dict(features=8, num_layers=1, num_heads=1, head_dim=HEAD_DIM, eta=KEY_WIDTH // HEAD_DIM),
    # the thesis authors' code's gating, 1 − β ⊗ γ (memgym.memory.relit's docstring)
    "relit-convex": dict(features=8, num_layers=1, num_heads=1, head_dim=HEAD_DIM, eta=KEY_WIDTH // HEAD_DIM,
                         decay="convex"),
    "arelit": dict(features=8, num_layers=1, num_heads=1, head_dim=HEAD_DIM, eta=KEY_WIDTH // HEAD_DIM, r=COMPONENTS - 1),
}


def attention_model(name: str) -> str:
    """The registered model of an ``ATTENTION_CONFIGS`` key (``relit-convex`` is ``relit`` with an option)."""
    return name.split("-")[0]


def attention_monoid(name: str) -> Callable[[], Monoid]:
    """The monoid a registered linear-attention model's mixer really scans (``mixer.monoid()``)."""
    return lambda: memory.make(attention_model(name), **ATTENTION_CONFIGS[name]).mixer(parent=None).monoid()


BUILDERS: dict[str, Callable[..., Monoid]] = {
    "additive": additive_monoid,
    "affine": affine_monoid,
    "matrix": matrix_monoid,
    "s5": lambda: memory.make("s5").monoid(),  # S5 and LRU scan the diagonal linear monoid (eq. 62–64 / 67–69)
    "lru": lambda: memory.make("lru").monoid(),
    "ffm": ffm_monoid,
    **{name: attention_monoid(name) for name in ATTENTION_CONFIGS},
    "linear_attention_monoid": lambda: memory.make(
        "linear_attention_monoid", features=8, key_size=KEY_WIDTH, value_size=HEAD_DIM
    ).monoid(),
}


def build(name: str, params: tuple) -> Monoid:
    """The monoid ``name`` with its parameters (FFM: ``(alpha, omega)``; the others take none)."""
    return BUILDERS[name](*params)


@dataclasses.dataclass(frozen=True)
class Case:
    """A monoid under test: a strategy for its parameters and one for ``[B]``-batched elements."""

    name: str
    params: st.SearchStrategy[tuple]
    elements: Callable[[int], st.SearchStrategy]

    def draw_monoid(self, data: st.DataObject) -> tuple[Monoid, tuple]:
        params = tuple(jnp.asarray(p) for p in data.draw(self.params, label="params"))
        return build(self.name, params), params


def diagonal_elements(batch: int) -> st.SearchStrategy:
    # |A| ≤ 1 as for a stable S5 / LRU recurrence.
    return st.tuples(complex_array((batch, STATE), 1.0), complex_array((batch, STATE), 3.0))


def decay_array(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Gate complements ``1 − β``, ``1 − γ`` of ReLiT / AReLiT: entries in ``[0, 1]``."""
    return SEEDS.map(lambda seed: uniform_with_edges(np.random.default_rng(seed), shape, 0.0, 1.0))


def linear_attention_element_strategy(batch: int) -> st.SearchStrategy:
    # (C [D, D], s [D]): the running sums of v ⊗ φ(k) and φ(k).
    return st.tuples(real_array((batch, HEAD_DIM, HEAD_DIM), 10.0), real_array((batch, HEAD_DIM), 10.0))


def linear_attention_monoid_element_strategy(batch: int) -> st.SearchStrategy:
    # (C [D, E], s [E]): the running sums of v kᵀ and k (eq. 9–12; keys and values of any sign).
    return st.tuples(real_array((batch, HEAD_DIM, KEY_WIDTH), 10.0), real_array((batch, KEY_WIDTH), 10.0))


def relit_element_strategy(batch: int) -> st.SearchStrategy:
    # (u [D], w [E], C [D, E], s [E]): value / key decays, state, normaliser.
    return st.tuples(
        decay_array((batch, HEAD_DIM)),
        decay_array((batch, KEY_WIDTH)),
        real_array((batch, HEAD_DIM, KEY_WIDTH), 3.0),
        real_array((batch, KEY_WIDTH), 3.0),
    )


def relit_convex_element_strategy(batch: int) -> st.SearchStrategy:
    # (D [D, E], w [E], C [D, E], s [E]): the whole decay of C (1 − β ⊗ γ), the key decay, state, normaliser.
    return st.tuples(
        decay_array((batch, HEAD_DIM, KEY_WIDTH)),
        decay_array((batch, KEY_WIDTH)),
        real_array((batch, HEAD_DIM, KEY_WIDTH), 3.0),
        real_array((batch, KEY_WIDTH), 3.0),
    )


def arelit_element_strategy(batch: int) -> st.SearchStrategy:
    # (u [D], w [E], V [R, D], K [R, E], s [E]): decays, the r + 1 value / key components, normaliser.
    return st.tuples(
        decay_array((batch, HEAD_DIM)),
        decay_array((batch, KEY_WIDTH)),
        real_array((batch, COMPONENTS, HEAD_DIM), 3.0),
        real_array((batch, COMPONENTS, KEY_WIDTH), 3.0),
        real_array((batch, KEY_WIDTH), 3.0),
    )


NO_PARAMS = st.just(())
CASES = [
    Case("additive", NO_PARAMS, lambda b: st.tuples(real_array((b, STATE), 10.0), real_array((b,), 10.0))),
    Case("affine", NO_PARAMS, lambda b: st.tuples(real_array((b, STATE)), real_array((b, STATE)))),
    Case("matrix", NO_PARAMS, lambda b: real_array((b, 2, 2))),
    Case("s5", NO_PARAMS, diagonal_elements),
    Case("lru", NO_PARAMS, diagonal_elements),
    Case(
        "ffm",
        st.tuples(real_array((STATE,), 2.0), real_array((2,), 4.0)),  # alpha[m], omega[c]
        lambda b: st.tuples(
            complex_array((b, STATE, 2), 3.0), int_array((b,), 20)
        ),
    ),
    Case("linear_attention", NO_PARAMS, linear_attention_element_strategy),
    Case("linear_attention_monoid", NO_PARAMS, linear_attention_monoid_element_strategy),
    Case("relit", NO_PARAMS, relit_element_strategy),
    Case("relit-convex", NO_PARAMS, relit_convex_element_strategy),
    Case("arelit", NO_PARAMS, arelit_element_strategy),
]
# Scans: the affine monoid (non-commutative, so direction matters), S5 (complex; LRU shares its
# operator), FFM (time-varying, integer leaf) and ReLiT (outer-product decays; AReLiT's operator
# has the same structure and is scanned in test_attention_monoids_compute_their_recurrences).
# Few cases and lengths keep the compiles cheap.
SCAN_CASES = [case for case in CASES if case.name in ("affine", "s5", "ffm", "relit")]
BY_NAME = pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)


def assert_trees_close(actual: Any, expected: Any, exact: bool = False) -> None:
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        assert np.shape(a) == np.shape(e)
        if exact:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(e))
        else:
            np.testing.assert_allclose(np.asarray(a), np.asarray(e), **TOL)


def batched(monoid: Monoid, element: Any, size: int) -> Any:
    """The identity ``H_I`` broadcast to ``size`` rows, shaped like ``element``'s rows."""
    one = jax.tree.map(lambda leaf: leaf[0], element)
    return jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (size,) + leaf.shape), monoid.identity(one))


# ---------------------------------------------------------------- Def. 3.1: the monoid laws


@BY_NAME
@SETTINGS
@given(data=st.data())
def test_operator_is_associative(case: Case, data: st.DataObject):
    monoid, _ = case.draw_monoid(data)
    a, b, c = (data.draw(case.elements(4)) for _ in range(3))
    assert_trees_close(monoid.op(monoid.op(a, b), c), monoid.op(a, monoid.op(b, c)))


@BY_NAME
@SETTINGS
@given(data=st.data())
def test_identity_is_exact_on_both_sides(case: Case, data: st.DataObject):
    monoid, _ = case.draw_monoid(data)
    a = jax.tree.map(jnp.asarray, data.draw(case.elements(4)))
    ident = batched(monoid, a, 4)
    assert_trees_close(monoid.op(ident, a), a, exact=True)
    assert_trees_close(monoid.op(a, ident), a, exact=True)


# ---------------------------------------------------------------- Thm. 3.4: the resettable transform


def with_flags(case: Case, batch: int) -> st.SearchStrategy:
    return st.tuples(case.elements(batch), bool_array((batch,)))


@BY_NAME
@SETTINGS
@given(data=st.data())
def test_resettable_operator_is_a_monoid(case: Case, data: st.DataObject):
    reset = resettable(case.draw_monoid(data)[0])
    x, y, z = (jax.tree.map(jnp.asarray, data.draw(with_flags(case, 5))) for _ in range(3))
    left, right = reset.op(reset.op(x, y), z), reset.op(x, reset.op(y, z))
    assert_trees_close(left[0], right[0])
    np.testing.assert_array_equal(left[1], right[1])
    ident = batched(reset, x, 5)
    assert_trees_close(reset.op(ident, x), x, exact=True)
    assert_trees_close(reset.op(x, ident), x, exact=True)


@BY_NAME
@SETTINGS
@given(data=st.data())
def test_begin_flag_isolates_the_right_element(case: Case, data: st.DataObject):
    """``(x, b) ∘ (y, True) == (H_I • y, True)`` whatever ``x`` and ``b`` hold."""
    monoid, _ = case.draw_monoid(data)
    reset = resettable(monoid)
    x, y = (jax.tree.map(jnp.asarray, data.draw(case.elements(4))) for _ in range(2))
    flags = jnp.asarray(data.draw(bool_array((4,))))
    state, flag = reset.op((x, flags), (y, jnp.ones(4, bool)))
    assert_trees_close(state, monoid.op(batched(monoid, y, 4), y), exact=True)
    np.testing.assert_array_equal(flag, np.ones(4, bool))
    # With the flag down, the left state does flow in.
    state, flag = reset.op((x, flags), (y, jnp.zeros(4, bool)))
    assert_trees_close(state, monoid.op(x, y), exact=True)
    np.testing.assert_array_equal(flag, flags)


# ---------------------------------------------------------------- scan_monoid and run_memory_monoid


def loop_reference(monoid: Monoid, elements: Any, start: np.ndarray, carry: Any, reverse: bool) -> tuple[Any, Any]:
    """States by a plain Python loop: forwards ``s_t = (H_I if start_t else s_{t−1}) • e_t``,
    in reverse ``s_t = e_t • (H_I if start_t else s_{t+1})``; the carry is ``s_{−1}`` / ``s_T``."""
    row = lambda tree, t: jax.tree.map(lambda leaf: leaf[t : t + 1], tree)  # noqa: E731
    state = jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], carry)
    ident = monoid.identity(carry)
    ident = jax.tree.map(lambda leaf: jnp.asarray(leaf)[None], ident)
    length = len(start)
    states: list[Any] = [None] * length
    for t in reversed(range(length)) if reverse else range(length):
        previous = ident if start[t] else state
        state = monoid.op(row(elements, t), previous) if reverse else monoid.op(previous, row(elements, t))
        states[t] = state
    stacked = jax.tree.map(lambda *rows: jnp.concatenate(rows, axis=0), *states)
    return stacked, jax.tree.map(lambda leaf: leaf[0], state)


LENGTHS = (1, 2, 5, 8)  # tape lengths T (a few, so the jitted scans compile once per length)
METHODS = ("associative", "sequential")


def draw_tape(
    case: Case, data: st.DataObject, lengths: tuple[int, ...] = LENGTHS
) -> tuple[Monoid, tuple, Any, np.ndarray, Any]:
    """A monoid (and its parameters), elements ``[T]``, start flags ``[T]`` and a carry."""
    monoid, params = case.draw_monoid(data)
    length = data.draw(st.sampled_from(lengths), label="T")
    elements = jax.tree.map(jnp.asarray, data.draw(case.elements(length), label="elements"))
    start = np.asarray(data.draw(st.lists(st.booleans(), min_size=length, max_size=length), label="start"), bool)
    carry = jax.tree.map(lambda leaf: jnp.asarray(leaf)[0], data.draw(case.elements(1), label="carry"))
    return monoid, params, elements, start, carry


@functools.partial(jax.jit, static_argnames=("name", "reverse"))
def scans(params: tuple, elements: Any, start: jax.Array, carry: Any, *, name: str, reverse: bool) -> tuple:
    """``scan_monoid`` by every method (jitted; the monoid is picked by its static name)."""
    monoid = build(name, params)
    return tuple(scan_monoid(monoid, elements, start, carry, reverse=reverse, method=method) for method in METHODS)


def decode_sum(states: Any, inputs: jax.Array) -> jax.Array:
    """A per-step readout ``g(state_t, input_t)``: the sum of the real parts of all state entries, plus the input."""
    flat = [jnp.real(leaf).reshape(leaf.shape[0], -1).astype(jnp.float32) for leaf in jax.tree.leaves(states)]
    return jnp.concatenate(flat, axis=1).sum(axis=1) + inputs


@functools.partial(jax.jit, static_argnames=("name", "chunk_size"))
def chunked_runs(params: tuple, elements: Any, start: jax.Array, carry: Any, *, name: str, chunk_size: int) -> tuple:
    """``run_memory_monoid`` with ``decode_sum`` and inputs ``0 … T−1``, by every method."""
    monoid = build(name, params)
    inputs = jnp.arange(start.shape[0], dtype=jnp.float32)
    return tuple(
        run_memory_monoid(monoid, elements, decode_sum, inputs, start, carry, chunk_size=chunk_size, method=method)
        for method in METHODS
    )


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("case", SCAN_CASES, ids=lambda case: case.name)
@SETTINGS
@given(data=st.data())
@pytest.mark.slow
def test_scan_methods_agree_with_a_python_loop(case: Case, reverse: bool, data: st.DataObject):
    monoid, params, elements, start, carry = draw_tape(case, data)
    expected_states, expected_carry = loop_reference(monoid, elements, start, carry, reverse)
    for states, carry_out in scans(params, elements, jnp.asarray(start), carry, name=case.name, reverse=reverse):
        assert_trees_close(states, expected_states)
        assert_trees_close(carry_out, expected_carry)


@pytest.mark.parametrize("case", SCAN_CASES, ids=lambda case: case.name)
@SETTINGS
@given(data=st.data())
@pytest.mark.slow
def test_chunked_run_equals_one_scan(case: Case, data: st.DataObject):
    """``run_memory_monoid`` with chunks (padded with identities where needed) == the plain loop."""
    monoid, params, elements, start, carry = draw_tape(case, data, lengths=(5, 8))
    chunk_size = data.draw(st.sampled_from([1, 3, 4]), label="chunk_size")
    expected_states, expected_carry = loop_reference(monoid, elements, start, carry, reverse=False)
    expected_y = decode_sum(expected_states, jnp.arange(len(start), dtype=jnp.float32))
    runs = chunked_runs(params, elements, jnp.asarray(start), carry, name=case.name, chunk_size=chunk_size)
    for y, carry_out in runs:
        np.testing.assert_allclose(y, expected_y, **TOL)
        assert_trees_close(carry_out, expected_carry)


@pytest.mark.parametrize("name", ["s5", "lru", "ffm"])
@SETTINGS
@given(data=st.data())
def test_model_monoids_compute_their_recurrences(name: str, data: st.DataObject):
    """The scanned model monoids are the recurrences they stand for (no resets, carry ``a_{−1}``):
    S5 / LRU ``a_t = A_t ⊙ a_{t−1} + b_t``; FFM ``S_t = γ ⊙ S_{t−1} + x_t``, ``γ = exp(−|α| ⊕ iω)``."""
    length = data.draw(st.sampled_from(LENGTHS), label="T")
    start = jnp.zeros(length, bool)
    if name == "ffm":
        ffm_case = next(case for case in CASES if case.name == "ffm")
        alpha, omega = (jnp.asarray(p) for p in data.draw(ffm_case.params, label="params"))
        inputs = data.draw(complex_array((length, STATE, 2), 3.0), label="inputs")
        carry = data.draw(complex_array((STATE, 2), 3.0), label="carry")
        elements = (jnp.asarray(inputs), jnp.ones(length, jnp.int32))
        params: tuple = (alpha, omega)
        gamma = np.exp(-np.abs(np.asarray(alpha))[:, None] + 1j * np.asarray(omega)[None, :])
        decays = np.broadcast_to(gamma, inputs.shape)
        carry_element: Any = (jnp.asarray(carry), jnp.zeros((), jnp.int32))
    else:
        decays = data.draw(complex_array((length, STATE), 1.0), label="A")
        inputs = data.draw(complex_array((length, STATE), 3.0), label="b")
        carry = data.draw(complex_array((STATE,), 3.0), label="carry")
        elements, params = (jnp.asarray(decays), jnp.asarray(inputs)), ()
        carry_element = (jnp.ones(STATE, jnp.complex64), jnp.asarray(carry))
    expected, state = [], carry.astype(np.complex128)
    for t in range(length):
        state = decays[t] * state + inputs[t]
        expected.append(state)
    for states, _ in scans(params, elements, start, carry_element, name=name, reverse=False):
        np.testing.assert_allclose(states[0] if name == "ffm" else states[1], np.stack(expected), **TOL)


def attention_mixer(name: str):
    """The (unbound) self-attention module of one layer of the registered model ``name``."""
    return memory.make(attention_model(name), **ATTENTION_CONFIGS[name]).mixer(parent=None)


@functools.partial(jax.jit, static_argnames="name")
def attention_scans(inputs: tuple, start: jax.Array, head_carry: Any, *, name: str) -> tuple:
    """One head of the mixer of ``name``: its encoder ``f`` on ``inputs``, then ``scan_monoid`` by every method."""
    mixer = attention_mixer(name)
    elements = mixer.encode(inputs)
    return tuple(
        scan_monoid(mixer.monoid(), elements, start, mixer.element_from_carry(head_carry), method=method) for method in METHODS
    )


@pytest.mark.parametrize("name", sorted(ATTENTION_CONFIGS))
@SETTINGS
@given(data=st.data())
def test_attention_monoids_compute_their_recurrences(name: str, data: st.DataObject):
    """The mixers' encoder + monoid, scanned with start flags and an incoming carry, are the
    recurrences of the thesis, computed here step by step in float64 (a start flag zeroes the
    previous state first; AReLiT's step ``t`` restarts at 0 there):

    * linear attention (Alg. 4): ``C_t = C_{t−1} + v_t ⊗ k_t``, ``s_t = s_{t−1} + k_t``;
    * ReLiT (Alg. 5, eq. 3.5–3.6): ``C_t = ((1−β_t) ⊗ (1−γ_t)) ⊙ C_{t−1} + (β_t ⊙ v_t) ⊗ (γ_t ⊙ k_t)``,
      ``s_t = (1−γ_t) ⊙ s_{t−1} + γ_t ⊙ k_t``; with the thesis authors' code's gating (``relit-convex``)
      ``C_t = (1 − β_t ⊗ γ_t) ⊙ C_{t−1} + (β_t ⊙ v_t) ⊗ (γ_t ⊙ k_t)``;
    * AReLiT (Alg. 6, eq. 4.20–4.21): for ``k = 0 … r``, ``ṽ_t^k = (1−β_t) ⊙ ṽ_{t−1}^k + cos(2πkt/r) β_t ⊙ v_t``,
      ``k̃_t^k = (1−γ_t) ⊙ k̃_{t−1}^k + cos(2πkt/r) γ_t ⊙ k_t``, and ``s_t`` as in ReLiT.
    """
    length = data.draw(st.sampled_from(LENGTHS), label="T")
    start = np.asarray(data.draw(bool_array((length,)), label="start"))
    v = data.draw(real_array((length, HEAD_DIM), 3.0), label="v").astype(np.float64)
    if name == "linear_attention":
        k = data.draw(real_array((length, HEAD_DIM), 3.0), label="k").astype(np.float64)
        inputs: tuple = (v, k)
        carry = tuple(data.draw(real_array(shape, 3.0)) for shape in [(HEAD_DIM, HEAD_DIM), (HEAD_DIM,)])
    else:
        # ReLiT's keys and key gates come as factor pairs (a [η], b [d_h]); the feature is flatten(a ⊗ b).
        eta = KEY_WIDTH // HEAD_DIM
        k_pair = tuple(data.draw(real_array((length, n), 3.0), label=f"k{i}").astype(np.float64)
                       for i, n in enumerate((eta, HEAD_DIM)))
        gamma_pair = tuple(data.draw(decay_array((length, n)), label=f"gamma{i}").astype(np.float64)
                           for i, n in enumerate((eta, HEAD_DIM)))
        k, gamma = (np.einsum("ti,tj->tij", *pair).reshape(length, KEY_WIDTH) for pair in (k_pair, gamma_pair))
        beta = data.draw(decay_array((length, HEAD_DIM)), label="beta").astype(np.float64)
        inputs = (v, k_pair, beta, gamma_pair)
        if name.startswith("relit"):
            carry = tuple(data.draw(real_array(shape, 3.0)) for shape in [(HEAD_DIM, KEY_WIDTH), (KEY_WIDTH,)])
        else:
            carry = tuple(
                data.draw(real_array(shape, 3.0))
                for shape in [(COMPONENTS, HEAD_DIM), (COMPONENTS, KEY_WIDTH), (KEY_WIDTH,)]
            )

    # The recurrence, step by step.
    state = [np.asarray(leaf, np.float64) for leaf in carry]
    step_in = data.draw(st.integers(0, 50), label="step_in")  # AReLiT: the carry's step counter
    expected, steps = [], []
    r = COMPONENTS - 1
    t = step_in
    for i in range(length):
        if start[i]:
            state, t = [np.zeros_like(leaf) for leaf in state], 0
        steps.append(t)
        if name == "linear_attention":
            state = [state[0] + np.outer(v[i], k[i]), state[1] + k[i]]
        elif name.startswith("relit"):
            if name == "relit-convex":
                decay = 1.0 - np.outer(beta[i], gamma[i])
            else:
                decay = np.outer(1.0 - beta[i], 1.0 - gamma[i])
            gated_v, gated_k = beta[i] * v[i], gamma[i] * k[i]
            state = [decay * state[0] + np.outer(gated_v, gated_k), (1.0 - gamma[i]) * state[1] + gated_k]
        else:
            cos = np.cos(2.0 * np.pi * np.arange(r + 1) * t / r)[:, None]
            state = [
                (1.0 - beta[i]) * state[0] + cos * (beta[i] * v[i]),
                (1.0 - gamma[i]) * state[1] + cos * (gamma[i] * k[i]),
                (1.0 - gamma[i]) * state[2] + gamma[i] * k[i],
            ]
        expected.append(state)
        t += 1
    expected_states = [np.stack([s[j] for s in expected]) for j in range(len(carry))]

    as32 = lambda tree: jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), tree)  # noqa: E731
    if name == "arelit":
        np.testing.assert_array_equal(episode_steps(jnp.asarray(start), jnp.int32(step_in)), steps)
        inputs = (*inputs, jnp.asarray(steps, jnp.int32))
        call_inputs = (*as32(inputs[:4]), inputs[4])
    else:
        call_inputs = as32(inputs)
    mixer = attention_mixer(name)
    for states, carry_out in attention_scans(call_inputs, jnp.asarray(start), as32(carry), name=name):
        assert_trees_close(mixer.carry_from_element(states), expected_states)
        assert_trees_close(mixer.carry_from_element(carry_out), [leaf[-1] for leaf in expected_states])


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 8])
def test_encoding_inside_chunks_equals_encoding_first(chunk_size):
    """``run_memory_monoid(encode=f)`` on raw inputs == the same run on ``f(inputs)``."""
    rng = np.random.default_rng(0)
    raw = (jnp.asarray(rng.normal(size=(11, 3)), jnp.float32), jnp.asarray(rng.normal(size=(11, 2)), jnp.float32))
    start = jnp.asarray(rng.random(11) < 0.3)
    additive = Monoid(op=lambda a, b: jax.tree.map(jnp.add, a, b), identity=lambda like: jax.tree.map(jnp.zeros_like, like))

    def encode(inputs):
        v, k = inputs
        return v[..., :, None] * k[..., None, :], k

    def decode(states, q):
        return states[0].sum(-1) + q

    carry = (jnp.ones((3, 2)), jnp.ones(2))
    first = run_memory_monoid(additive, encode(raw), decode, raw[0], start, carry, chunk_size=chunk_size)
    inside = run_memory_monoid(additive, raw, decode, raw[0], start, carry, chunk_size=chunk_size, encode=encode)
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(inside)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_an_unknown_scan_method_is_named():
    additive = Monoid(op=lambda a, b: a + b, identity=jnp.zeros_like)
    for run in (lambda: scan_monoid(additive, jnp.ones(3), jnp.zeros(3, bool), jnp.zeros(()), method="parallel"),
                lambda: run_memory_monoid(additive, jnp.ones(3), lambda s, q: s, (), jnp.zeros(3, bool), jnp.zeros(()),
                                          method="parallel")):
        with pytest.raises(ValueError, match="^method must be one of 'auto', 'associative', 'sequential', got "
                                             "method='parallel'$"):
            run()
