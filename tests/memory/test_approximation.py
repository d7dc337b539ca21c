"""AReLiT's approximation of ReLiT's state improves as r grows (thesis §4.3, Fig. 4.1; eq. 4.14–4.22).

A small version of the §4.3 study (d = 32, 50 steps, 5 runs, fixed seed) run by
the study's own code, ``benchmarks/approximation_study.py``: keys and values
~ N(0, I), constant gates c, Frobenius error ``‖C_t − C̃_t‖_F`` at the last step.
§4.3 reports that the error decreases with r and shows periodic bands; both are
checked, together with the closed form behind them and the model's decoder.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from memgym import memory
from memgym.memory.arelit import AReLiTAttention, approximate_state, cosine_table

STUDY_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "approximation_study.py"


def load_study():
    spec = importlib.util.spec_from_file_location("approximation_study", STUDY_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


study = load_study()
SMALL = dict(d=32, steps=50, runs=5, seed=0)


@pytest.fixture(scope="module")
def small_study():
    return study.approximation_errors(**SMALL, rs=(1, 2, 4, 6, 7, 8, 16), gates=(0.1, 0.5, 0.9))


def test_error_is_finite_and_decreases_as_r_doubles(small_study):
    error = small_study.mean_error  # [r, c]
    assert np.all(np.isfinite(error)) and np.all(error >= 0)
    doubling = [small_study.rs.index(r) for r in (1, 2, 4, 8, 16)]
    for j, c in enumerate(small_study.gates):
        curve = error[doubling, j]
        assert np.all(np.diff(curve) < 0), f"c = {c}: error along r = 1, 2, 4, 8, 16 is {curve}"
        assert curve[-1] < curve[0] / 4, f"c = {c}: r = 16 should be far better than r = 1, got {curve}"


def test_periodic_band_when_r_divides_twice_the_step(small_study):
    """At t = 49, r = 7 divides 2t, so the newest term v_t ⊗ k_t is counted (2 + 2/r) times instead of once.

    With a fast-decaying gate (c = 0.9) the newest term dominates C_t, so r = 7 is much worse than its
    neighbours: the periodic bands of Fig. 4.1. The error falls with r only as a trend.
    """
    error = small_study.mean_error[:, small_study.gates.index(0.9)]
    at = {r: error[small_study.rs.index(r)] for r in (6, 7, 8)}
    assert at[7] > 2 * at[6] and at[7] > 2 * at[8]


@pytest.mark.parametrize("r", [1, 2, 3, 5, 20])
def test_states_match_the_cosine_kernel_closed_form(r):
    """C_t = Σ_ij δ_ij a_i ⊗ b_j and C̃_t = Σ_ij w_ij a_i ⊗ b_j (eq. 4.14–4.16), with decayed inputs
    ``a_i = Π_{l>i}(1−β_l) β_i v_i``, ``b_j = Π_{l>j}(1−γ_l) γ_j k_j`` and
    ``w_ij = (2/r) Σ_{k=0..r} cos(2πki/r) cos(2πkj/r) = [r | i−j] + [r | i+j] + 2/r``.
    """
    rng = np.random.default_rng(r)
    steps, dv, dk = 9, 3, 4
    v, k = rng.normal(size=(steps, dv)), rng.normal(size=(steps, dk))
    beta, gamma = rng.uniform(0.05, 0.95, (steps, dv)), rng.uniform(0.05, 0.95, (steps, dk))

    def decayed(x, gate):
        keep = np.cumprod((1.0 - gate)[::-1], axis=0)[::-1]  # Π_{l ≥ i} (1 − gate_l)
        after = np.concatenate([keep[1:], np.ones((1, x.shape[1]))])  # Π_{l > i}
        return after * gate * x

    a, b = decayed(v, beta), decayed(k, gamma)
    i, j = np.arange(steps)[:, None], np.arange(steps)[None, :]
    omega = 2.0 * np.pi * np.arange(r + 1) / r
    weights = (2.0 / r) * np.einsum("ik,jk->ij", np.cos(np.outer(i[:, 0], omega)), np.cos(np.outer(j[0], omega)))
    aliased = ((i - j) % r == 0).astype(float) + ((i + j) % r == 0) + 2.0 / r
    np.testing.assert_allclose(weights, aliased, atol=1e-12)

    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    exact = study.exact_state(f32(v), f32(k), f32(beta), f32(gamma))
    approx = study.approximate_final_state(f32(v), f32(k), f32(beta), f32(gamma), r)
    np.testing.assert_allclose(exact, np.einsum("ip,jq,ij->pq", a, b, np.eye(steps)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(approx, np.einsum("ip,jq,ij->pq", a, b, aliased), rtol=1e-4, atol=1e-5)


def test_model_decoder_reads_the_approximate_state_scaled_by_a_quarter():
    """Alg. 6 divides by 2r (s·q) where eq. 4.19's C̃ carries 2/r: a_t = C̃_t q_t / (4 s_t·q_t) for every r."""
    rng = np.random.default_rng(0)
    steps, head_dim, eta, r = 3, 4, 2, 5
    v = jnp.asarray(rng.normal(size=(steps, r + 1, head_dim)), jnp.float32)
    k = jnp.asarray(rng.normal(size=(steps, r + 1, eta * head_dim)), jnp.float32)
    s = jnp.asarray(rng.uniform(0.5, 1.0, (steps, eta * head_dim)), jnp.float32)
    q_pair = tuple(jnp.asarray(rng.uniform(0.5, 1.0, (steps, n)), jnp.float32) for n in (eta, head_dim))
    q = (q_pair[0][:, :, None] * q_pair[1][:, None, :]).reshape(steps, eta * head_dim)  # the query, flatten(a ⊗ b)
    states = (jnp.ones((steps, head_dim)), jnp.ones((steps, eta * head_dim)), v, k, s)
    attention = AReLiTAttention(features=8, num_heads=1, head_dim=head_dim, eta=eta, r=r)
    expected = jnp.einsum("tij,tj->ti", approximate_state(v, k, r), q) / (4.0 * jnp.sum(s * q, -1, keepdims=True))
    np.testing.assert_allclose(attention.read(states, q_pair, ()), expected, rtol=1e-4)


def test_approximate_state_rejects_mismatched_r():
    with pytest.raises(ValueError, match="need 3 rows on axis -2 \\(r=2, frequencies='thesis'\\)"):
        approximate_state(jnp.zeros((2, 4)), jnp.zeros((2, 8)), 2)
    with pytest.raises(ValueError, match="need 2 rows on axis -2 \\(r=2, frequencies='authors'\\)"):
        approximate_state(jnp.zeros((3, 4)), jnp.zeros((3, 8)), 2, "authors")


@pytest.mark.parametrize("r", [1, 2])
def test_with_r_1_the_readout_ignores_keys_and_queries(r):
    """With r = 1 (Table A.2) both frequencies are ω = 0 and 2π, so cos(ω_k t) = 1 at every integer t: k̃_t^0 =
    k̃_t^1 = s_t (from an episode start), and a_t = Σ_k ṽ_t^k (k̃_t^k · q_t) / (2 (s_t · q_t) + ε) = ṽ_t (s_t · q_t) / (s_t · q_t + ε/2):
    the values' gated elementwise recurrence, whatever the keys and queries (ε aside). With r = 2 they matter.
    (docs/reproduction.md: why a compact AReLiT outlearns ReLiT on the T-Maze.)"""
    from memgym.memory.arelit import arelit_elements, arelit_monoid
    from memgym.memory.attention import EPSILON
    from memgym.memory.monoid import scan_monoid

    rng = np.random.default_rng(r)
    steps, dv, dk = 30, 4, 6
    v, k, q = (jnp.asarray(rng.normal(size=(steps, n)), jnp.float32) for n in (dv, dk, dk))
    k, q = jnp.abs(k), jnp.abs(q)  # ReLU features
    beta, gamma = (jnp.asarray(rng.uniform(0.05, 0.95, size=(steps, n)), jnp.float32) for n in (dv, dk))
    elements = arelit_elements(v, k, beta, gamma, jnp.arange(steps), r)
    zero = (jnp.ones(dv), jnp.ones(dk), jnp.zeros((r + 1, dv)), jnp.zeros((r + 1, dk)), jnp.zeros(dk))
    states, _ = scan_monoid(arelit_monoid(), elements, jnp.zeros(steps, bool), zero)
    mixer = AReLiTAttention(features=8, num_heads=1, head_dim=dv, eta=1, r=r)
    ones = jnp.ones((steps, 1))
    readout = mixer.read(states, (ones, q))  # q_t = outer_flat(1, q_t)
    values, normaliser = states[2][:, 0], jnp.sum(states[4] * q, axis=-1, keepdims=True)
    gated_values = values * normaliser / (normaliser + EPSILON / 2)
    if r == 1:
        np.testing.assert_allclose(readout, gated_values, rtol=1e-5, atol=1e-6)
    else:
        assert np.abs(np.asarray(readout - gated_values)).max() > 1e-2


def readout(r: int, frequencies: str, steps: jnp.ndarray, seed: int = 0, keys: jnp.ndarray | None = None):
    """One head's AReLiT readout ``a_t`` over a random 30-step tape whose cosines use ``steps`` as ``t``."""
    from memgym.memory.arelit import arelit_elements, arelit_monoid, frequency_count
    from memgym.memory.monoid import scan_monoid

    rng = np.random.default_rng(seed)
    dv, dk = 4, 6
    v, k, q = (jnp.asarray(rng.normal(size=(len(steps), n)), jnp.float32) for n in (dv, dk, dk))
    k, q = jnp.abs(k if keys is None else keys), jnp.abs(q)  # ReLU features
    beta, gamma = (jnp.asarray(rng.uniform(0.05, 0.95, size=(len(steps), n)), jnp.float32) for n in (dv, dk))
    count = frequency_count(r, frequencies)
    zero = (jnp.ones(dv), jnp.ones(dk), jnp.zeros((count, dv)), jnp.zeros((count, dk)), jnp.zeros(dk))
    elements = arelit_elements(v, k, beta, gamma, steps, r, frequencies)
    states, _ = scan_monoid(arelit_monoid(), elements, jnp.zeros(len(steps), bool), zero)
    mixer = AReLiTAttention(features=8, num_heads=1, head_dim=dv, eta=1, r=r, frequencies=frequencies)
    return mixer.read(states, (jnp.ones((len(steps), 1)), q))


@pytest.mark.parametrize("r", [1, 2, 3, 4, 7])
def test_the_authors_frequencies_are_r_evenly_spaced_from_minus_pi_to_pi(r):
    """Their code's ``ω = linspace(−π, π, r)`` (−π alone for r = 1): the table gives cos(ω_k t) for any t."""
    table, t = cosine_table(r, "authors"), np.arange(500)
    assert table.shape[1] == r
    np.testing.assert_allclose(table[t % len(table)], np.cos(np.outer(t, np.linspace(-np.pi, np.pi, r))), atol=1e-6)
    thesis = np.cos(np.outer(t, 2 * np.pi * np.arange(r + 1) / r))  # eq. 4.19's, r + 1 of them
    np.testing.assert_allclose(cosine_table(r)[t % r], thesis, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(offset=st.integers(0, 10**6), r=st.sampled_from([1, 2]), seed=st.integers(0, 2**16))
def test_with_the_authors_frequencies_at_r_up_to_2_where_t_starts_does_not_matter(offset, r, seed):
    """Their code counts t over the whole stream, memgym per episode. With ±π alone, cos(ω (t + o)) =
    (−1)^o cos(ω t): the sign appears in ṽ and k̃ alike and cancels in the readout, so both counts are one model."""
    steps = jnp.arange(30)
    np.testing.assert_allclose(readout(r, "authors", steps + offset, seed), readout(r, "authors", steps, seed),
                               rtol=1e-5, atol=1e-6)


def test_with_the_authors_frequencies_at_r_1_the_keys_and_queries_count():
    """Eq. 4.19's r = 1 reads the values alone (above); the code's cos(πt) = (−1)^t gives the keys a part."""
    steps = jnp.arange(30)
    other_keys = jnp.asarray(np.random.default_rng(9).normal(size=(30, 6)), jnp.float32)
    for frequencies, changes in (("thesis", False), ("authors", True)):
        moved = np.abs(np.asarray(readout(1, frequencies, steps) - readout(1, frequencies, steps, keys=other_keys)))
        assert (moved.max() > 1e-2) == changes, (frequencies, moved.max())


def test_unknown_frequencies_are_refused_by_name():
    model = memory.make("arelit", features=8, num_layers=1, num_heads=1, head_dim=8, frequencies="paper")
    with pytest.raises(ValueError, match="frequencies must be one of 'thesis', 'authors', got frequencies='paper'"):
        model.initialize_carry()
