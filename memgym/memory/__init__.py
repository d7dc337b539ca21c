"""Memory models: a tape ``x[T, F]`` with start flags ``start[T]`` and a carry in,
outputs ``y[T, F']`` and the carry out.

Every model is a ``flax.linen.Module`` with

* ``initialize_carry() -> carry`` — the state of one stream before any input
  (callable on the unbound module; it needs no parameters);
* ``__call__(x[T, F], start[T], carry) -> (y[T, features], carry)`` — one stream;
  batch with ``jax.vmap`` over ``apply``. ``T = 1`` is streaming inference; a
  tape of concatenated episodes (``start`` marking each first step) trains,
  and no information crosses an episode start.

Build any model by name with :func:`make`.

Most models are memory monoids (monoid paper Def. 3.2): S5, LRU, FFM and the monoid
paper's single-layer linear transformer (eq. 9–13, ``linear_attention_monoid``) are
:class:`~memgym.memory.monoid_memory.MonoidMemory` subclasses, and the linear-attention,
ReLiT and AReLiT transformers stack multi-head monoid attention
(:mod:`memgym.memory.attention`) in the gated transformer of
:mod:`memgym.memory.transformer`, which GTrXL shares with its windowed attention.
"""

from __future__ import annotations

import importlib
from typing import Any

from memgym.memory.options import option_descriptions, options, required_options

# name -> "module:class" (imported on first use, so `import memgym.memory` stays light)
MODELS: dict[str, str] = {
    "linear_attention": "memgym.memory.linear_attention:LinearAttentionTransformer",
    "linear_attention_monoid": "memgym.memory.linear_attention_monoid:LinearAttentionMonoid",
    "relit": "memgym.memory.relit:ReLiTTransformer",
    "arelit": "memgym.memory.arelit:AReLiTTransformer",
    "s5": "memgym.memory.s5:S5",
    "lru": "memgym.memory.lru:LRU",
    "ffm": "memgym.memory.ffm:FFM",
    "lstm": "memgym.memory.rnn:LSTM",
    "gru": "memgym.memory.rnn:GRU",
    "gtrxl": "memgym.memory.gtrxl:GTrXL",
    "mlp": "memgym.memory.mlp:MLP",  # memoryless baseline: y[t] depends on x[t] only
    "memax": "memgym.memory.memax:Memax",  # memax's models (DeltaNet, GDN, S6, MGU, ...); needs memgym[memax]
}

# name -> the option that a "name:VALUE" spelling sets ("memax:gdn" is model "memax" with model="gdn")
NAME_OPTIONS: dict[str, str] = {"memax": "model"}


def split_name(name: str) -> tuple[str, dict[str, Any]]:
    """``(model name, options)`` of a name that may carry an option: ``"memax:gdn"`` -> ``("memax", {"model": "gdn"})``.

    Only the models of :data:`NAME_OPTIONS` take a ``:VALUE`` suffix; any other name comes back
    unchanged with no options (so an unknown one is reported by :func:`model_class`).
    """
    base, colon, value = name.partition(":") if isinstance(name, str) else (name, "", "")
    if not colon or base not in NAME_OPTIONS:
        return name, {}
    return base, {NAME_OPTIONS[base]: value}


def model_class(name: str) -> type:
    """The class registered under ``name``."""
    if name not in MODELS:
        raise ValueError(f"unknown memory model name {name!r}; available: {', '.join(sorted(MODELS))}")
    module, cls = MODELS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make(name: str, **config: Any):
    """Build the memory model registered as ``name`` with ``config`` (its dataclass fields).

    ``name`` may carry an option (:func:`split_name`): ``make("memax:gdn", features=32)`` is
    ``make("memax", model="gdn", features=32)``. Raises ``ValueError`` for an unknown name, an
    unknown option, an option given twice, or a missing required option (named, with what it means).
    """
    name, named = split_name(name)
    twice = sorted(set(named) & set(config))
    if twice:
        raise ValueError(f"option(s) {twice} given both in the name and as keyword(s): {named!r} and {config!r}")
    config = {**named, **config}
    cls = model_class(name)
    fields = set(options(cls))
    unknown = set(config) - fields
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} for memory model {name!r}; allowed: {sorted(fields)}")
    missing = [option for option in required_options(cls) if option not in config]
    if missing:
        descriptions = option_descriptions(cls)
        meaning = "; ".join(f"{option}: {descriptions.get(option, 'undocumented')}" for option in missing)
        raise ValueError(f"memory model {name!r} needs option(s) {missing} ({meaning}); got {config!r}")
    return cls(**config)
