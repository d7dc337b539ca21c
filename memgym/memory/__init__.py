"""Memory models: a tape ``x[T, F]`` with begin flags ``start[T]`` and a carry in,
outputs ``y[T, F']`` and the carry out (DESIGN.md, "Memory models").

Every model is a ``flax.linen.Module`` with

* ``initialize_carry() -> carry`` — the state of one stream before any input
  (callable on the unbound module; it needs no parameters);
* ``__call__(x[T, F], start[T], carry) -> (y[T, features], carry)`` — one stream;
  batch with ``jax.vmap`` over ``apply``. ``T = 1`` is streaming inference; a
  tape of concatenated episodes (``start`` marking each first step) trains,
  and no information crosses an episode start.

Build any model by name with :func:`make`.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> "module:class" (imported on first use, so `import memgym.memory` stays light)
MODELS: dict[str, str] = {
    "linear_attention": "memgym.memory.linear_attention:LinearAttentionTransformer",
    "relit": "memgym.memory.relit:ReLiTTransformer",
    "arelit": "memgym.memory.arelit:AReLiTTransformer",
    "s5": "memgym.memory.s5:S5",
    "lru": "memgym.memory.lru:LRU",
    "ffm": "memgym.memory.ffm:FFM",
    "lstm": "memgym.memory.rnn:LSTM",
    "gru": "memgym.memory.rnn:GRU",
    "gtrxl": "memgym.memory.gtrxl:GTrXL",
    "mlp": "memgym.memory.mlp:MLP",  # memoryless baseline: y[t] depends on x[t] only
}


def model_class(name: str) -> type:
    """The class registered under ``name``."""
    if name not in MODELS:
        raise ValueError(f"unknown memory model name {name!r}; available: {', '.join(sorted(MODELS))}")
    module, cls = MODELS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make(name: str, **config: Any):
    """Build the memory model registered as ``name`` with ``config`` (its dataclass fields)."""
    cls = model_class(name)
    fields = set(cls.__dataclass_fields__) - {"parent", "name"}
    unknown = set(config) - fields
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)} for memory model {name!r}; allowed: {sorted(fields)}")
    return cls(**config)
