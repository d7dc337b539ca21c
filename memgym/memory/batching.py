"""Branches that stay branches under ``vmap``.

Under ``jax.vmap`` a ``lax.cond`` on a batched predicate becomes a ``select`` that runs
both branches for every member of the batch. The collector's truncation bootstrap and
GTrXL's key/value cache each have a cheap common case and an expensive rare one; their
predicates come from :func:`any_in_batch`, so the expensive side runs only on the steps
where some member of the whole batch needs it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


@jax.custom_batching.custom_vmap
def any_in_batch(flags: jax.Array) -> jax.Array:
    """``any(flags)``, also over every ``vmap`` axis it is called under: an unbatched scalar.

    A ``lax.cond`` on this predicate stays a branch under ``vmap`` (module docstring).
    """
    return jnp.any(flags)


@any_in_batch.def_vmap
def _any_in_batch_batched(axis_size: int, in_batched: list[bool], flags: jax.Array):
    return any_in_batch(flags), False
