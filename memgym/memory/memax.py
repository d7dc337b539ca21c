"""memax models as memgym memory models, and memgym models in memax's convention.

memax (Morad; the monoid paper authors' library) implements recurrent models as the
recurrent algebras of the monoid paper (*Revisiting Recurrent RL with Memory Monoids*,
Morad et al.): a semigroup, scanned in parallel, or a set action, scanned in sequence,
wrapped in the resettable operator of the monoid paper (Thm. 3.4) so that a tape of
concatenated episodes can be processed in one call. Its Equinox side calls a model as

    model(h, (x[T, F], start[T]), key=None) -> (hs, y[T, out])

where ``hs`` holds the recurrent state after every step and ``model.latest_recurrent_state(hs)``
the last one. Two adapters live here:

* :class:`Memax` — a memax model (DeltaNet, GDN, S6, MGU, ...) as a ``flax.linen``
  memory model of :mod:`memgym.memory` (registered as ``"memax"``; ``make("memax:gdn", ...)``);
* :class:`MemaxConvention` — any memgym memory model with its parameters, callable in
  memax's convention (e.g. to run memgym's AReLiT through memax's training utilities).

memax needs Equinox; both are imported on first use only (``pip install "memgym[memax]"``).
docs/memax.md lists the memax models :class:`Memax` refuses and why.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from memgym.extras import missing
from memgym.memory.interface import check_tape
from memgym.validation import check_optional_positive, check_positive

PyTree = Any

#: memax models that break memgym's memory-model contract -> why (docs/memax.md).
REFUSED: dict[str, str] = {
    "Spherical": (
        "its initial recurrent state (SphericalMagma.initial_state) is a trainable parameter, so the state an "
        "episode starts from depends on the parameters and initialize_carry() cannot give it without them"
    ),
}


def _import_memax():
    """memax's Equinox side (``train_utils``) and ``equinox``, with an install hint when missing."""
    try:
        import equinox
        from memax.equinox import train_utils
    except ImportError as error:
        raise missing("a memax memory model", "memax", error) from error
    return train_utils, equinox


@functools.cache
def available_models() -> tuple[str, ...]:
    """The names ``memax.equinox.train_utils.get_residual_memory_models`` builds, refused ones included."""
    train_utils, eqx = _import_memax()
    shapes = eqx.filter_eval_shape(train_utils.get_residual_memory_models, 1, 4, 1, 1, "all", key=jax.random.key(0))
    return tuple(sorted(shapes))


def _normalise(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def canonical_name(model: str) -> str:
    """memax's spelling of ``model``, matched ignoring case, ``-`` and ``_`` (``gdn`` -> ``GDN``).

    Raises ``ValueError`` for an unknown name (listing the usable ones) or a refused one (saying why).
    """
    usable = [name for name in available_models() if name not in REFUSED]
    matches = [name for name in available_models() if isinstance(model, str) and _normalise(name) == _normalise(model)]
    if not matches:
        raise ValueError(f"model={model!r} is not a memax model; available: {', '.join(usable)}")
    if matches[0] in REFUSED:
        raise ValueError(
            f"model={model!r}: memax's {matches[0]} breaks memgym's memory-model contract: {REFUSED[matches[0]]} "
            f"(docs/memax.md); usable: {', '.join(usable)}"
        )
    return matches[0]


@functools.cache
def _skeleton(model: str, input_size: int, hidden: int, features: int, num_layers: int):
    """``(shapes, static, treedef)`` of the memax ResidualModel: its array leaves (as ShapeDtypeStructs,
    flattened), the non-array rest, and the tree structure of the array part. Nothing is computed."""
    train_utils, eqx = _import_memax()
    shaped = eqx.filter_eval_shape(
        train_utils.get_residual_memory_model, model, input_size, hidden, features, num_layers, key=jax.random.key(0)
    )
    arrays, static = eqx.partition(shaped, lambda leaf: isinstance(leaf, jax.ShapeDtypeStruct))
    shapes, treedef = jax.tree.flatten(arrays)
    return shapes, static, treedef


class Memax(nn.Module):
    """A memax model (``get_residual_memory_model``) with the interface of :mod:`memgym.memory`.

    The Equinox model is memax's ``ResidualModel``: a linear map of ``x`` to width ``hidden``,
    ``num_layers`` cells of kind ``model``, each followed by a dense + LayerNorm + leaky-ReLU
    block, and a linear map to ``features``. Its array leaves are this module's parameters, a
    flat dict ``{"000": leaf, "001": ..., ...}`` in Equinox's leaf order (initialised by memax
    itself from the ``params`` rng), so flax checkpoints and ``tree_map`` code see plain arrays.

    Attributes:
        model: memax model name, matched ignoring case, ``-`` and ``_`` (e.g. ``DeltaNet``/``deltanet``,
            ``GDN``, ``DeltaProduct``, ``S6``, ``LRU``, ``FFM``, ``MGU``, ``GRU``, ``LSTM``, ``Attention``);
            ``memgym.memory.memax.available_models()`` lists all, docs/memax.md the refused ones.
        features: output width ``d``.
        hidden: width memax's cells work at (their ``recurrent_size``; default None = ``features``).
            Some cells derive their state from it: DeltaNet, GDN, DeltaProduct, FART, FWP and
            PSpherical keep ``round(sqrt(hidden))``-sized keys, FFM ``hidden // 4`` contexts.
        num_layers: number of stacked memax cells (default 1).

    State of one stream: memax's recurrent state, a tuple with one ``(state, reset_flag)`` per layer
    (e.g. DeltaNet ``((M [k, k], X [k, k]), flag)``, S6 ``((a [hidden], b [hidden]), flag)``, MGU
    ``(h [hidden], flag)``). It depends on the fields only, never on ``x``'s width: memax maps
    ``x`` to ``hidden`` before the first cell. ``__call__(x [T, F], start [T] bool, carry)``
    returns ``(y [T, d], carry)``; memax's per-step states stay inside the call.
    """

    model: str
    features: int
    hidden: int | None = None
    num_layers: int = 1

    def _sizes(self) -> tuple[str, int]:
        """Checked fields: ``(memax name, hidden width)``."""
        check_positive(features=self.features, num_layers=self.num_layers)
        check_optional_positive("hidden", self.hidden, "features")
        return canonical_name(self.model), self.features if self.hidden is None else self.hidden

    def initialize_carry(self) -> PyTree:
        """memax's initial recurrent state (see the class docstring); needs no parameters."""
        name, hidden = self._sizes()
        shapes, static, treedef = _skeleton(name, 1, hidden, self.features, self.num_layers)
        _, eqx = _import_memax()
        # Cells build their initial state from their sizes, never their weights (Spherical, which does, is
        # refused), so the weightless skeleton can give it.
        return eqx.combine(jax.tree.unflatten(treedef, shapes), static).initialize_carry()

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: PyTree) -> tuple[jax.Array, PyTree]:
        name, hidden = self._sizes()
        x, start = jnp.asarray(x, jnp.float32), jnp.asarray(start, bool)
        check_tape(x, start)
        shapes, static, treedef = _skeleton(name, x.shape[1], hidden, self.features, self.num_layers)
        train_utils, eqx = _import_memax()
        keys = [f"{i:03d}" for i in range(len(shapes))]

        def init(rng: jax.Array) -> dict[str, jax.Array]:
            built = train_utils.get_residual_memory_model(name, x.shape[1], hidden, self.features, self.num_layers, key=rng)
            return dict(zip(keys, jax.tree.leaves(eqx.filter(built, eqx.is_array)), strict=True))

        if self.has_variable("params", "weights"):  # report a wrong width of x before flax's shape error
            found = {key: tuple(leaf.shape) for key, leaf in self.get_variable("params", "weights").items()}
            wanted = {key: tuple(shape.shape) for key, shape in zip(keys, shapes)}
            if found != wanted:  # only the input map's [hidden, F] kernel depends on x's width F
                initial = [found[key][-1] for key in keys if key in found and found[key] != wanted[key]]
                raise ValueError(
                    f"x has {x.shape[1]} features (x.shape = {tuple(x.shape)}) but memax's {name} was initialised "
                    f"for {initial[0] if initial else 'another width'}; pass x with that feature width"
                )
        weights = self.param("weights", init)
        leaves = [weights[key] for key in keys]
        module = eqx.combine(jax.tree.unflatten(treedef, leaves), static)
        states, y = module(carry, (x, start))
        return y, module.latest_recurrent_state(states)


class MemaxConvention(struct.PyTreeNode):
    """A memgym memory model with its parameters, callable in memax's convention.

    ``MemaxConvention(memgym.memory.make("arelit", ...), params)(h, (x[T, F], start[T]))`` returns
    ``(hs, y[T, features])`` for one stream, like a memax ``Module`` (Morad's memax; the resettable
    recurrence of the monoid paper, Morad et al.). memgym models return only their final carry, so
    ``hs`` is that carry with a leading time axis of length 1 (not the state after every step), and
    :meth:`latest_recurrent_state` takes ``hs[-1]`` as memax's do, giving the memgym carry back.
    ``key`` is accepted and ignored (memgym models are deterministic). ``params`` is a pytree child,
    so ``eqx.filter_grad`` / optax updates over this object train the model.
    """

    model: nn.Module = struct.field(pytree_node=False)
    params: PyTree

    def initialize_carry(self, key: jax.Array | None = None) -> PyTree:
        """The memgym model's initial carry (``key`` ignored)."""
        return self.model.initialize_carry()

    def __call__(
        self, h: PyTree, inputs: tuple[jax.Array, jax.Array], key: jax.Array | None = None
    ) -> tuple[PyTree, jax.Array]:
        """``(hs, y)``: ``hs`` the final carry with a leading axis of 1, ``y [T, features]``."""
        x, start = inputs
        y, carry = self.model.apply(self.params, x, start, h)
        return jax.tree.map(lambda leaf: jnp.expand_dims(leaf, 0), carry), y

    def latest_recurrent_state(self, hs: PyTree) -> PyTree:
        """The last state of ``hs`` (the memgym carry after the call)."""
        return jax.tree.map(lambda leaf: leaf[-1], hs)
