"""Discounted return and GAE monoids (monoid paper Thm. 3.3, App. D.1) against plain loops.

Tapes of random episodes with random terminations, time-limit truncations and an
unfinished last episode; both scan methods; the affine monoid's laws; bad input.
GAE of a whole rollout, per environment.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym.agents.returns import AFFINE_MONOID, advantages, discounted_return, generalized_advantage, next_values
from tests.agents.return_oracles import discounted_return_reference, generalized_advantage_reference
from tests.buffers.test_rollout import E, random_rollout

SETTINGS = settings(max_examples=30, deadline=None)
LENGTHS = st.sampled_from([1, 2, 7, 33, 80])  # a few tape lengths: each one compiles once


def random_tape(seed: int, length: int):
    """Rewards, values and episode ends; about one step in eight ends an episode."""
    rng = np.random.default_rng(seed)
    end = rng.random(length) < 0.125
    terminated = end & (rng.random(length) < 0.5)
    truncated = end & ~terminated
    reward = rng.normal(size=length).astype(np.float32)
    value = rng.normal(size=length).astype(np.float32)
    next_value = rng.normal(size=length).astype(np.float32)
    return reward, value, next_value, terminated, truncated


@pytest.mark.slow
@SETTINGS
@given(st.integers(0, 2**32 - 1), LENGTHS, st.floats(0.0, 1.0), st.sampled_from(["associative", "sequential"]))
def test_discounted_return_matches_loop(seed, length, gamma, method):
    reward, _, next_value, terminated, truncated = random_tape(seed, length)
    got = discounted_return(reward, terminated, truncated, next_value, gamma, method=method)
    want = discounted_return_reference(reward, terminated, truncated, next_value, gamma)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


@SETTINGS
@given(
    st.integers(0, 2**32 - 1),
    LENGTHS,
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.sampled_from(["associative", "sequential"]),
)
@pytest.mark.slow(seconds=56)
def test_gae_matches_loop(seed, length, gamma, lam, method):
    reward, value, next_value, terminated, truncated = random_tape(seed, length)
    adv, target = generalized_advantage(reward, value, next_value, terminated, truncated, gamma, lam, method=method)
    want = generalized_advantage_reference(reward, value, next_value, terminated, truncated, gamma, lam)
    np.testing.assert_allclose(np.asarray(adv), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(target), want + value, rtol=1e-4, atol=1e-4)


def test_known_values():
    """Hand-computed: two episodes, the first terminated, the second truncated, then an unfinished one."""
    reward = np.array([1.0, 1.0, 1.0, 2.0, 5.0], np.float32)
    terminated = np.array([False, True, False, False, False])
    truncated = np.array([False, False, False, True, False])
    next_value = np.array([9.0, 9.0, 9.0, 10.0, 20.0], np.float32)
    g = np.asarray(discounted_return(reward, terminated, truncated, next_value, 0.5))
    # episode 1: G1 = 1, G0 = 1 + .5; episode 2: G3 = 2 + .5·10 = 7, G2 = 1 + 3.5; tail: 5 + .5·20.
    np.testing.assert_allclose(g, [1.5, 1.0, 4.5, 7.0, 15.0])


def test_lambda_one_gae_is_return_minus_value():
    """GAE with λ = 1 telescopes to ``G_t − V(s_t)`` when values are consistent (``V(s_{t+1})``
    is the next step's ``V`` inside an episode)."""
    reward, value, next_value, terminated, truncated = random_tape(3, 200)
    inside = ~(terminated | truncated)[:-1]
    next_value[:-1] = np.where(inside, value[1:], next_value[:-1])
    adv, _ = generalized_advantage(reward, value, next_value, terminated, truncated, 0.97, 1.0)
    ret = discounted_return(reward, terminated, truncated, next_value, 0.97)
    np.testing.assert_allclose(np.asarray(adv), np.asarray(ret) - value, rtol=1e-4, atol=1e-4)


def test_reset_isolation():
    """Changing anything after an episode's last step never changes that episode's returns."""
    reward, value, next_value, terminated, truncated = random_tape(7, 60)
    terminated[29] = True
    truncated[29] = False
    before = np.asarray(generalized_advantage(reward, value, next_value, terminated, truncated, 0.9, 0.8)[0])
    reward[30:] += 100.0
    value[30:] -= 3.0
    after = np.asarray(generalized_advantage(reward, value, next_value, terminated, truncated, 0.9, 0.8)[0])
    np.testing.assert_array_equal(before[:30], after[:30])


def test_affine_monoid_laws():
    rng = np.random.default_rng(0)
    x, y, z = [(jnp.asarray(rng.normal(size=5)), jnp.asarray(rng.normal(size=5))) for _ in range(3)]
    op = AFFINE_MONOID.op
    left, right = op(op(x, y), z), op(x, op(y, z))
    for u, v in zip(left, right):
        np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)
    ident = jax.tree.map(lambda i: jnp.broadcast_to(i, (5,)), AFFINE_MONOID.identity((x[0][0], x[1][0])))
    for u, v in zip(op(ident, x), x):
        np.testing.assert_allclose(u, v)
    for u, v in zip(op(x, ident), x):
        np.testing.assert_allclose(u, v)


def test_jit_and_vmap():
    tapes = [random_tape(s, 40) for s in range(4)]
    reward, value, next_value, terminated, truncated = (np.stack(parts) for parts in zip(*tapes))
    batched = jax.jit(jax.vmap(lambda r, v, n, te, tr: generalized_advantage(r, v, n, te, tr, 0.99, 0.95)[0]))
    got = np.asarray(batched(reward, value, next_value, terminated, truncated))
    for i, tape in enumerate(tapes):
        want = generalized_advantage_reference(*tape, 0.99, 0.95)
        np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-4)


def test_traced_gamma():
    """Discounts may be traced (a vmapped hyperparameter sweep)."""
    reward, _, next_value, terminated, truncated = random_tape(1, 30)
    gammas = jnp.array([0.5, 0.9])
    got = jax.vmap(lambda g: discounted_return(reward, terminated, truncated, next_value, g))(gammas)
    for i, g in enumerate([0.5, 0.9]):
        want = discounted_return_reference(reward, terminated, truncated, next_value, g)
        np.testing.assert_allclose(np.asarray(got[i]), want, rtol=1e-4, atol=1e-4)


def test_bad_input():
    reward, value, next_value, terminated, truncated = random_tape(0, 10)
    with pytest.raises(ValueError, match=r"gamma must be a number in \[0, 1\]"):
        discounted_return(reward, terminated, truncated, next_value, 1.5)
    with pytest.raises(ValueError, match=r"lam must be a number in \[0, 1\]"):
        generalized_advantage(reward, value, next_value, terminated, truncated, 0.9, -0.1)
    with pytest.raises(ValueError, match="same T"):
        discounted_return(reward, terminated[:5], truncated, next_value, 0.9)


# --- on rollouts (tests.buffers.test_rollout.random_rollout) ----------------------------------


def test_next_values_bootstrap_from_final_value_on_truncation():
    rollout, values = random_rollout(1)
    nv = np.asarray(next_values(rollout, jnp.asarray(values)))
    trunc = np.asarray(rollout.truncated)
    np.testing.assert_array_equal(nv[trunc], np.asarray(rollout.final_value)[trunc])
    np.testing.assert_array_equal(nv[~trunc], values[:, 1:][~trunc])
    with pytest.raises(ValueError, match=r"\[E, T \+ 1\]"):
        next_values(rollout, jnp.asarray(values[:, :-1]))


@pytest.mark.parametrize("seed", range(4))
def test_advantages_per_env_match_loop(seed):
    rollout, values = random_rollout(seed)
    adv, target = advantages(rollout, jnp.asarray(values), 0.99, 0.95)
    nv = np.asarray(next_values(rollout, jnp.asarray(values)))
    for e in range(E):
        want = generalized_advantage_reference(
            rollout.reward[e], values[e, :-1], nv[e], rollout.terminated[e], rollout.truncated[e], 0.99, 0.95
        )
        np.testing.assert_allclose(np.asarray(adv[e]), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(target), np.asarray(adv) + values[:, :-1], rtol=1e-5, atol=1e-5)

