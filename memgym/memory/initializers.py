"""Parameter initialisers that avoid LAPACK.

:func:`orthogonal` draws a Haar-random orthogonal matrix (Saxe et al. 2014) as the Q
factor, with a positive diagonal of R, of a Gaussian matrix — computed by classical
Gram–Schmidt with one re-orthogonalisation pass (CGS2) in plain ``jnp``.
``jax.nn.initializers.orthogonal`` does the same with a LAPACK QR; on the CPU
backend of jaxlib 0.10 several large batched QRs inside one ``jit(vmap(...))``
(e.g. initialising many seeds' networks at once) deadlock, so every network in
memgym uses this one.

The thesis initialises every network weight orthogonally (§5.1.2, after Saxe et al.);
:data:`HIDDEN` (gain :data:`HIDDEN_GAIN` = √2, as in the thesis authors' code) is the
initialiser of the layers followed by a non-linearity; ``docs/reproduction.md`` lists
the gain of every layer of the reference agents.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

HIDDEN_GAIN = math.sqrt(2.0)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _orthonormal_columns(key: jax.Array, tall: int, short: int) -> jax.Array:
    """A ``[tall, short]`` matrix (``tall ≥ short``) with Haar-random orthonormal columns.

    Jitted with the shape static, so initialising outside ``jit`` compiles once per
    shape: without it every call would compile (and keep) a new executable for its
    ``fori_loop``, and a process that builds thousands of layers eagerly runs out of
    memory mappings (the kernel's ``vm.max_map_count``) and aborts.
    """
    gaussian = jax.random.normal(key, (tall, short), jnp.float32)
    columns = jnp.arange(short)

    def next_column(j: int, q: jax.Array) -> jax.Array:
        v = jax.lax.dynamic_index_in_dim(gaussian, j, axis=1, keepdims=False)
        earlier = columns < j
        for _ in range(2):  # CGS2: a second pass removes what rounding left behind
            v = v - q @ jnp.where(earlier, q.T @ v, 0.0)
        return jax.lax.dynamic_update_index_in_dim(q, v / jnp.linalg.norm(v), j, axis=1)

    return jax.lax.fori_loop(0, short, next_column, jnp.zeros((tall, short), jnp.float32))


def orthogonal(scale: float = 1.0):
    """Initializer of ``scale`` × a random matrix with orthonormal rows or columns.

    For a kernel of shape ``(..., fan_out)``, the flattened ``[rows, cols]`` matrix has
    orthonormal columns when ``rows ≥ cols`` and orthonormal rows otherwise.
    """

    def init(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
        rows, cols = math.prod(shape[:-1]), shape[-1]
        q = _orthonormal_columns(key, max(rows, cols), min(rows, cols))
        if rows < cols:
            q = q.T
        return (scale * q).reshape(shape).astype(dtype)

    return init


HIDDEN = orthogonal(HIDDEN_GAIN)
