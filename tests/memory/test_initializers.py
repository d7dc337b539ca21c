"""The LAPACK-free orthogonal initialiser."""

from __future__ import annotations

import flax.linen as nn
import jax
import numpy as np
import pytest

from memgym.memory.initializers import _orthonormal_columns, orthogonal


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


def test_eager_initialisation_compiles_once_per_shape():
    """Building many layers outside ``jit`` reuses one executable per kernel shape.

    Before, every call compiled and kept a fresh executable for its loop; a test
    process that initialised a few thousand layers ran out of memory mappings
    (``vm.max_map_count``) and XLA aborted the interpreter.
    """
    shape = (37, 23)  # a shape no other test uses
    before = _orthonormal_columns._cache_size()
    mats = [np.asarray(orthogonal(2.0)(jax.random.key(i), shape)) for i in range(25)]
    assert _orthonormal_columns._cache_size() == before + 1
    assert len({m.tobytes() for m in mats}) == 25
    dense = nn.Dense(23, kernel_init=orthogonal())
    for i in range(5):
        dense.init(jax.random.key(i), np.zeros((1, 37), np.float32))
    assert _orthonormal_columns._cache_size() == before + 1
