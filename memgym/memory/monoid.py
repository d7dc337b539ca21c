"""Memory monoids, the resettable transform and the scan that runs them over a tape.

Monoid paper (Morad et al., *Revisiting Recurrent RL with Memory Monoids*):

* Def. 3.1 — a monoid ``(H, •, H_I)``: an associative binary operator ``•`` on
  a set ``H`` with an identity element ``H_I``.
* Def. 3.2 — a *memory monoid* adds an encoder ``f`` (input → element of H)
  and a decoder ``g`` (updated state, input → output). A memory model
  computes ``A_t = A_{t-1} • f(x_t)`` and ``y_t = g(A_t, x_t)``.
* Thm. 3.4 — any monoid becomes *resettable*: on pairs ``(A, b)`` with a
  start flag ``b``,
  ``(A, b) ∘ (A', b') = ((A (1-b') + H_I b') • A', b ∨ b')``,
  so a scan over several concatenated episodes never lets information cross
  an episode start.

Here a monoid's elements are pytrees of arrays; :class:`Monoid.op` combines
two elements *batched along a leading axis* (what ``jax.lax.associative_scan``
needs). :func:`scan_monoid` runs a monoid over a tape ``elements[T, ...]``
with start flags ``start[T]`` from an incoming carry (prepended to the tape),
and returns every intermediate state and the outgoing carry.
:func:`run_memory_monoid` adds the encoder and decoder and optionally processes the
tape in checkpointed chunks, so a long tape never materialises all its states at
once (a linear-attention state is a ``d_h × d_h`` matrix per step).
:class:`memgym.memory.monoid_memory.MonoidMemory` builds the memory models on it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp

from memgym.validation import check_choice, check_optional_positive

PyTree = Any
ScanMethod = Literal["auto", "associative", "sequential"]


@dataclasses.dataclass(frozen=True)
class Monoid:
    """A monoid ``(H, •, H_I)`` over pytree elements (Def. 3.1).

    Attributes:
        op: ``op(a, b) -> a • b`` for elements batched along axis 0 (any shared
            leading size), elementwise over that axis.
        identity: ``identity(like) -> H_I`` with the shapes/dtypes of one
            (unbatched) element ``like``.
    """

    op: Callable[[PyTree, PyTree], PyTree]
    identity: Callable[[PyTree], PyTree]


def _broadcast_flag(flag: jax.Array, leaf: jax.Array) -> jax.Array:
    """Reshape ``flag[B]`` so it broadcasts against ``leaf[B, ...]``."""
    return flag.reshape(flag.shape + (1,) * (leaf.ndim - flag.ndim))


def resettable(monoid: Monoid) -> Monoid:
    """The resettable transform of Thm. 3.4, eq. (20)–(22).

    Elements are pairs ``(A, b)`` with ``b`` a bool array of the batch shape;
    where ``b'`` is set the left argument is replaced by the identity ``H_I``
    before applying ``•``. The identity is ``(H_I, False)``.
    """

    def op(left: tuple[PyTree, jax.Array], right: tuple[PyTree, jax.Array]):
        (a, b), (a_right, b_right) = left, right
        # A stand-in of the right shapes/dtypes: the batch can be empty (jax.lax.associative_scan
        # combines zero-length slices at some recursion levels), so ``leaf[0]`` may not exist.
        one = jax.tree.map(lambda leaf: jnp.zeros(leaf.shape[1:], leaf.dtype), a)
        ident = monoid.identity(one)
        a_reset = jax.tree.map(
            lambda x, i: jnp.where(_broadcast_flag(b_right, x), i[None], x), a, ident
        )
        return monoid.op(a_reset, a_right), jnp.logical_or(b, b_right)

    def identity(like: tuple[PyTree, jax.Array]):
        element, _ = like
        return monoid.identity(element), jnp.zeros((), bool)

    return Monoid(op=op, identity=identity)


def default_scan_method() -> Literal["associative", "sequential"]:
    """``associative`` on accelerators, ``sequential`` (``lax.scan``) on CPU.

    On an H100 the associative scan of the return monoid over 10k steps was measured
    ~1700× faster than ``lax.scan``; on a 2-core CPU ``lax.scan`` is 2–3× faster
    (fewer total operations, no parallel hardware to use; ``docs/scan_speed.md``).
    """
    return "sequential" if jax.default_backend() == "cpu" else "associative"


def scan_monoid(
    monoid: Monoid,
    elements: PyTree,
    start: jax.Array,
    carry: PyTree,
    *,
    reverse: bool = False,
    method: ScanMethod = "auto",
) -> tuple[PyTree, PyTree]:
    """Prefix products of a resettable monoid over a tape (Thm. 3.4 + Def. 3.2, eq. 7).

    Args:
        monoid: the (non-resettable) monoid; resets are applied here.
        elements: pytree of arrays ``[T, ...]``, the encoded inputs ``f(x_t)``.
        start: ``[T]`` bool, True where a new episode begins (the state is reset
            to ``H_I`` *before* that element is combined).
        carry: one unbatched element, the state before the tape (``A_{-1}``).
        reverse: scan from the end (return-to-go direction): then
            ``state_t = f(x_t) • state_{t+1}`` and ``start`` marks where a
            *backward* sequence begins (e.g. the last step of an episode).
        method: ``"associative"`` (``jax.lax.associative_scan``, O(log T)
            depth), ``"sequential"`` (``lax.scan``) or ``"auto"``
            (:func:`default_scan_method`). All give the same result.

    Returns:
        ``(states, carry_out)``: states ``[T, ...]`` (``A_0 … A_{T-1}``) and the
        last state (the first one when ``reverse``).
    """
    start = jnp.asarray(start, bool)
    length = start.shape[0]
    leaves = jax.tree.leaves(elements)
    if not leaves:
        raise ValueError("elements must contain at least one array")
    for leaf in leaves:
        if leaf.shape[:1] != (length,):
            raise ValueError(
                f"every leaf of elements needs leading dimension T = len(start) = {length}, got shape {leaf.shape}"
            )
    check_choice("method", method, ("auto", "associative", "sequential"))
    if method == "auto":
        method = default_scan_method()

    if reverse:
        # Return-to-go direction: scanning the flipped tape with the flipped operator
        # ``a •' b = b • a`` gives ``state_t = f(x_t) • state_{t+1}``; a flag at t resets
        # everything to its right, i.e. cuts the link between t and t+1.
        flipped = Monoid(op=lambda a, b: monoid.op(b, a), identity=monoid.identity)
        states, carry_out = scan_monoid(
            flipped, jax.tree.map(lambda x: jnp.flip(x, 0), elements), jnp.flip(start, 0), carry, method=method
        )
        return jax.tree.map(lambda x: jnp.flip(x, 0), states), carry_out

    if method == "sequential":
        # One step of the resettable monoid (eq. 20-22) written for a single element: the state is replaced
        # by the identity where the step starts an episode, then combined. Applying ``reset.op`` to
        # batches of one gives the same values, but its backward pass ran 2.6x slower on CPU (a 52-step
        # chunk of AReLiT's elements for 32 heads: 43 ms against 17 ms).
        def body(state, inputs):
            element, flag = inputs
            state = jax.tree.map(lambda s, i: jnp.where(flag, i, s), state, monoid.identity(element))
            new = monoid.op(state, element)
            return new, new

        carry_out, states = jax.lax.scan(body, carry, (elements, start))
        return states, carry_out

    reset = resettable(monoid)
    carry_b = jax.tree.map(lambda x: jnp.asarray(x)[None], carry)
    tape = jax.tree.map(lambda c, e: jnp.concatenate([c, e], axis=0), carry_b, elements)
    flags = jnp.concatenate([jnp.zeros((1,), bool), start])
    states, _ = jax.lax.associative_scan(reset.op, (tape, flags))
    states = jax.tree.map(lambda x: x[1:], states)
    return states, jax.tree.map(lambda x: x[-1], states)


def run_memory_monoid(
    monoid: Monoid,
    elements: PyTree,
    decode: Callable[[PyTree, PyTree], jax.Array],
    decode_inputs: PyTree,
    start: jax.Array,
    carry: PyTree,
    *,
    chunk_size: int | None = None,
    method: ScanMethod = "auto",
    encode: Callable[[PyTree], PyTree] | None = None,
) -> tuple[jax.Array, PyTree]:
    """A memory model over a tape (Def. 3.2, eq. 7–8) with resets (Thm. 3.4).

    ``A_t = A_{t-1} ∘ f(x_t)`` by :func:`scan_monoid`, then ``y_t = g(A_t, x_t)``
    with ``decode(states[K, ...], decode_inputs[K, ...]) -> y[K, ...]``.

    ``encode`` is the encoder ``f``: when given, ``elements`` holds its per-step inputs
    ``[T, ...]`` and ``encode(inputs[K, ...]) -> elements[K, ...]`` runs inside each chunk,
    so large elements (e.g. the ``d_h × η d_h`` outer products of ReLiT) exist for one
    chunk at a time, in the forward and (recomputed) in the backward pass.

    With ``chunk_size = K`` the tape is cut into ``⌈T/K⌉`` chunks of equal length (at most K steps), processed by
    a ``lax.scan`` over chunks whose body is rematerialised in the backward
    pass (``jax.checkpoint``): only the K states of one chunk and the chunk
    boundary states are alive at once, so memory is ``O(T/K + K)`` states
    instead of ``O(T)``. The tape is padded to a whole number of chunks (fewer
    than ``⌈T/K⌉`` steps of padding); padded steps are identity elements, which by
    the identity law leave the carry unchanged.

    Returns ``(y[T, ...], carry_out)``.
    """
    check_optional_positive("chunk_size", chunk_size, "one chunk")
    encode = (lambda inputs: inputs) if encode is None else encode
    length = start.shape[0]
    if chunk_size is None or chunk_size >= length:
        states, carry_out = scan_monoid(monoid, encode(elements), start, carry, method=method)
        return decode(states, decode_inputs), carry_out

    def body(state, chunk, valid):
        chunk_inputs, chunk_decode_inputs, chunk_start = chunk
        chunk_elements = encode(chunk_inputs)
        ident = monoid.identity(jax.tree.map(lambda e: e[0], chunk_elements))
        chunk_elements = jax.tree.map(
            lambda e, i: jnp.where(_broadcast_flag(valid, e), e, i[None]), chunk_elements, ident
        )
        states, state = scan_monoid(monoid, chunk_elements, chunk_start, state, method=method)
        return state, decode(states, chunk_decode_inputs)

    return scan_in_chunks(body, carry, (elements, decode_inputs, jnp.asarray(start, bool)), chunk_size)


def scan_in_chunks(
    body: Callable[[PyTree, PyTree, jax.Array], tuple[PyTree, PyTree]],
    carry: PyTree,
    xs: PyTree,
    chunk_size: int,
) -> tuple[PyTree, PyTree]:
    """``body`` over a tape cut into even chunks, sequentially, each chunk rematerialised in the backward pass.

    ``xs`` has leaves ``[T, ...]``. The tape is cut into ``⌈T/chunk_size⌉`` chunks of equal
    length ``K ≤ chunk_size`` (T = 257 in chunks of 64: five chunks of 52 and 3 padded steps,
    not 63), zero-padded at the end; ``body(carry, chunk [K, ...], valid [K] bool) ->
    (carry, outputs [K, ...])`` runs under ``jax.checkpoint`` in a ``lax.scan``, so only the
    carries at chunk boundaries are kept for the backward pass: memory is ``O(T/K)`` carries
    plus one chunk's intermediates. ``body`` must leave the carry unchanged on steps that are
    not ``valid``. Returns ``(outputs [T, ...], carry out)``.
    """
    length = jax.tree.leaves(xs)[0].shape[0]
    num_chunks = math.ceil(length / chunk_size)
    chunk_size = math.ceil(length / num_chunks)
    pad = num_chunks * chunk_size - length

    def pad_and_chunk(x: jax.Array) -> jax.Array:
        if pad:
            x = jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)], axis=0)
        return x.reshape((num_chunks, chunk_size) + x.shape[1:])

    chunked = jax.tree.map(pad_and_chunk, xs)
    valid = pad_and_chunk(jnp.ones(length, bool))

    @jax.checkpoint
    def step(state, inputs):
        chunk, chunk_valid = inputs
        return body(state, chunk, chunk_valid)

    carry_out, outputs = jax.lax.scan(step, carry, (chunked, valid))
    outputs = jax.tree.map(lambda y: y.reshape((num_chunks * chunk_size,) + y.shape[2:])[:length], outputs)
    return outputs, carry_out
