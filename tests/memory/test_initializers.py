"""The LAPACK-free orthogonal initialiser."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from memgym.memory.initializers import orthogonal


@pytest.mark.parametrize("shape", [(64, 64), (16, 128), (128, 4), (3, 5, 7)])
def test_orthonormal_rows_or_columns(shape):
    w = np.asarray(orthogonal(1.5)(jax.random.key(0), shape))
    assert w.shape == shape
    m = w.reshape(-1, shape[-1])
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, 1.5**2 * np.eye(gram.shape[0]), atol=1e-4)


def test_jit_vmap_over_keys_gives_distinct_deterministic_matrices():
    init = jax.jit(jax.vmap(lambda k: orthogonal()(k, (32, 32))))
    a = np.asarray(init(jax.random.split(jax.random.key(1), 3)))
    b = np.asarray(init(jax.random.split(jax.random.key(1), 3)))
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], a[1])
