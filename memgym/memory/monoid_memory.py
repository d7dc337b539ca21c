"""One module type for every memory model that is a memory monoid (monoid paper Def. 3.2, Thm. 3.4).

A memory monoid is a monoid ``(H, •, H_I)`` with an encoder ``f`` and a decoder ``g``:

    A_t = A_{t−1} • f(x_t),     y_t = g(A_t, x_t)                          (eq. 7–8)

and Thm. 3.4 makes any monoid resettable, so one scan runs over a tape of concatenated
episodes while no information crosses an episode start. :class:`MonoidMemory` is that model:
a subclass supplies the parts (``check``, ``initialize_carry``, ``monoid``, ``project``,
``encode``, ``read``, ``decode``, ``element_from_carry`` / ``carry_from_element``; see each
method) and the one ``__call__`` here runs them over a tape in checkpointed chunks
(:func:`~memgym.memory.monoid.run_memory_monoid`). ``encode``, ``read`` and the carry
conversions run once per chunk and must be pure functions of their arguments; the parts that
create parameters run once per call on the whole tape (docs/memory_models.md).

:class:`~memgym.memory.diagonal_ssm.DiagonalSSM` (S5, LRU) and
:class:`~memgym.memory.ffm.FFM` are subclasses; multi-head monoid attention
(:class:`~memgym.memory.attention.MultiHeadMonoidAttention`) runs the same parts per head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.interface import check_tape
from memgym.memory.monoid import Monoid, run_memory_monoid

PyTree = Any


class Tape(NamedTuple):
    """What :meth:`MonoidMemory.project` makes of a tape of ``T`` steps.

    Attributes:
        inputs: encoder inputs, leaves ``[T, ...]``; :meth:`MonoidMemory.encode` turns a
            chunk of them into monoid elements.
        queries: decoder inputs, leaves ``[T, ...]``, read with the states of their step
            by :meth:`MonoidMemory.read` (``()``: none).
        weights: arrays :meth:`MonoidMemory.read` uses at every step, e.g. a readout
            matrix (``()``: none); not cut into chunks.
    """

    inputs: PyTree
    queries: PyTree = ()
    weights: PyTree = ()


class MonoidMemory(nn.Module):
    """A memory model defined by a memory monoid: ``x[T, F]`` → ``y[T, features]`` (see the module docstring).

    Subclasses declare the option ``chunk_size`` (``None``: the whole tape in one chunk)
    and override the parts; ``encode``, ``element_from_carry`` and ``carry_from_element``
    default to the identity, ``check`` to no check.
    """

    if TYPE_CHECKING:  # a dataclass field of every subclass (declared there to keep their field order)
        chunk_size: int | None

    def check(self) -> None:
        """Raise ``ValueError`` naming the first bad option."""

    def initialize_carry(self) -> PyTree:
        """The carry of one stream before any input (callable on the unbound module)."""
        raise NotImplementedError

    def monoid(self) -> Monoid:
        """The monoid ``(H, •, H_I)`` (Def. 3.1). Called first in ``__call__``, so it may create parameters."""
        raise NotImplementedError

    def project(self, x: jax.Array, start: jax.Array, carry: PyTree) -> Tape:
        """Module scope, whole tape: encoder inputs, decoder inputs and read weights of ``x[T, F]``."""
        raise NotImplementedError

    def encode(self, inputs: PyTree) -> PyTree:
        """The encoder ``f`` on one chunk: encoder inputs ``[K, ...]`` → monoid elements ``[K, ...]``."""
        return inputs

    def read(self, states: PyTree, queries: PyTree, weights: PyTree) -> jax.Array:
        """The decoder ``g`` on one chunk, as far as it needs the states: ``[K, ...]`` → readout ``[K, ...]``."""
        raise NotImplementedError

    def decode(self, readout: jax.Array, x: jax.Array) -> jax.Array:
        """The rest of the decoder ``g``, whole tape (module scope): readout ``[T, ...]`` and ``x[T, F]`` → ``y``."""
        return readout

    def element_from_carry(self, carry: PyTree) -> PyTree:
        """The monoid element (one, unbatched) whose state is ``carry``: the scan's ``A_{−1}``."""
        return carry

    def carry_from_element(self, element: PyTree) -> PyTree:
        """The part of the last scanned element that a stream keeps (inverse of :meth:`element_from_carry`)."""
        return element

    def scan(self, monoid: Monoid, tape: Tape, start: jax.Array, carry: PyTree) -> tuple[jax.Array, PyTree]:
        """``A_t = A_{t−1} ∘ f(x_t)`` of the resettable monoid (Thm. 3.4) from ``carry``, read step by step.

        Returns ``(readout [T, ...], carry out)``; chunks of ``chunk_size`` steps, scan method
        :func:`~memgym.memory.monoid.default_scan_method`.
        """
        readout, last = run_memory_monoid(
            monoid,
            tape.inputs,
            lambda states, queries: self.read(states, queries, tape.weights),
            tape.queries,
            start,
            self.element_from_carry(carry),
            chunk_size=self.chunk_size,
            encode=self.encode,
        )
        return readout, self.carry_from_element(last)

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: PyTree) -> tuple[jax.Array, PyTree]:
        """One stream: ``x[T, F]``, start flags ``start[T]`` and the carry in → ``(y[T, features], carry out)``."""
        self.check()
        start = jnp.asarray(start, bool)
        check_tape(x, start, self)
        x = jnp.asarray(x, jnp.float32)
        monoid = self.monoid()
        tape = self.project(x, start, carry)
        readout, carry = self.scan(monoid, tape, start, carry)
        return self.decode(readout, x), carry
