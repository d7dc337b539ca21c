"""What every algorithm's config shares: the memory presets, :func:`resolve_memory` and the :class:`Schedule`.

Each algorithm's config is a frozen dataclass in the algorithm's own module
(:class:`~memgym.agents.a2c.A2CConfig`, :class:`~memgym.agents.ppo.PPOConfig`,
:class:`~memgym.agents.dqn.DQNConfig`): hashable (closed over by jitted functions),
printable, and ``memgym train`` makes each field a flag whose help is the field's
docstring (:func:`field_docs`).

:data:`MEMORY_PRESETS` are thesis Table A.2 (T-Maze, ≈1.6M parameters per agent):
LSTM d = 600, GRU d = 680 (and ``lstm-1200``, ``gru-1360``); GTrXL, ReLiT and AReLiT
with d = 128, 4 layers, 4 heads × 64, η = 4, r = 1, GTrXL memory M = 128 or 256. The
monoid paper's models get width 256: S5, LRU, FFM and its single-layer linear
transformer (``linear_attention_monoid``, eq. 9–13; ``linear_attention`` is the
thesis's gated 4-layer stack, Alg. 4).
"""

from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Mapping
from typing import Any

from memgym.deprecation import forward

#: name -> (memory model name in memgym.memory.MODELS, its config)
MEMORY_PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "lstm": ("lstm", dict(features=600)),
    "lstm-1200": ("lstm", dict(features=1200)),
    "gru": ("gru", dict(features=680)),
    "gru-1360": ("gru", dict(features=1360)),
    "gtrxl-128": ("gtrxl", dict(features=128, num_layers=4, num_heads=4, head_dim=64, memory_size=128)),
    "gtrxl-256": ("gtrxl", dict(features=128, num_layers=4, num_heads=4, head_dim=64, memory_size=256)),
    "relit": ("relit", dict(features=128, num_layers=4, num_heads=4, head_dim=64, eta=4)),
    "arelit": ("arelit", dict(features=128, num_layers=4, num_heads=4, head_dim=64, eta=4, r=1)),
    "linear_attention": ("linear_attention", dict(features=128, num_layers=4, num_heads=4, head_dim=64)),
    "s5": ("s5", dict(features=256, state_size=256)),
    "lru": ("lru", dict(features=256, state_size=256)),
    "ffm": ("ffm", dict(features=256, memory_size=64, context_size=8)),
    "linear_attention_monoid": ("linear_attention_monoid", dict(features=256, key_size=128, value_size=128)),
    # Compact models of every family (the CPU reference board, docs/reproduction.md): one-layer gated transformers
    # of width 32 (2 heads × 16), GTrXL with a window shorter (32) and longer (128) than the board's longest
    # corridor (the thesis's 128 vs 256 contrast, scaled; 128 and 256 for the long-corridor board); RNNs and SSMs
    # of width 64.
    "tiny-arelit": ("arelit", dict(features=32, num_layers=1, num_heads=2, head_dim=16, eta=2, r=1)),
    "tiny-relit": ("relit", dict(features=32, num_layers=1, num_heads=2, head_dim=16, eta=2)),
    # ReLiT with the thesis authors' code's state gate, 1 − β ⊗ γ (memgym.memory.relit; docs/reproduction.md)
    "tiny-relit-convex": ("relit", dict(features=32, num_layers=1, num_heads=2, head_dim=16, eta=2, decay="convex")),
    "tiny-linear_attention": ("linear_attention", dict(features=32, num_layers=1, num_heads=2, head_dim=16)),
    **{f"tiny-gtrxl-{m}": ("gtrxl", dict(features=32, num_layers=1, num_heads=2, head_dim=16, memory_size=m))
       for m in (32, 128, 256)},
    "tiny-gru": ("gru", dict(features=64)),
    "tiny-lstm": ("lstm", dict(features=64)),
    "tiny-s5": ("s5", dict(features=64, state_size=64)),
    "tiny-lru": ("lru", dict(features=64, state_size=64)),
    "tiny-ffm": ("ffm", dict(features=64, memory_size=16, context_size=4)),
    # memax's models (docs/memax.md; needs memgym[memax]).
    "tiny-deltanet": ("memax", dict(model="DeltaNet", features=64)),
    "tiny-gdn": ("memax", dict(model="GDN", features=64)),
    "tiny-s6": ("memax", dict(model="S6", features=64)),
    "tiny-mgu": ("memax", dict(model="MGU", features=64)),
    # Memoryless baselines (same heads, no memory): show what memory adds.
    "mlp": ("mlp", dict(features=128)),
    "tiny-mlp": ("mlp", dict(features=64)),
    # Thesis Table A.4 (Memory Maze, ≈22M parameters with the ResNet encoder).
    "memory-maze-lstm": ("lstm", dict(features=768)),
    **{f"memory-maze-gtrxl-{m}": ("gtrxl", dict(features=256, num_layers=4, num_heads=8, head_dim=64, memory_size=m))
       for m in (64, 128, 256)},
    "memory-maze-arelit": ("arelit", dict(features=256, num_layers=4, num_heads=8, head_dim=64, eta=4, r=7)),
}

#: Preset names renamed in memgym 0.2 (old -> new): the old ones work, with a DeprecationWarning, until 0.3.
RENAMED_PRESETS = {"linattn": "linear_attention_monoid"}

#: preset -> (learning rate, entropy coefficient) of the thesis authors' published T-Maze A2C configs (one
#: point each of the Table A.1 grid; the thesis text does not list the selected values). Other presets
#: default to (1e-4, 1e-3), untuned; ``memgym leaderboard tune`` runs the thesis's selection
#: (docs/reproduction.md says where every reference agent's values come from).
THESIS_TMAZE_HPARAMS: dict[str, tuple[float, float]] = {
    "relit": (1e-4, 1e-3),
    "arelit": (1e-4, 1e-3),
    "lstm": (1e-4, 1e-3),
    "gru": (5e-4, 1e-2),
    "gtrxl-128": (5e-4, 1e-2),
    "gtrxl-256": (5e-4, 1e-3),
}


#: Thesis Table A.3: the Memory Maze PPO settings. 32 workers × 2 envs = 64 environments; a rollout of
#: 200 steps per environment is cut into sequences of 100 (segment minibatches, truncated BPTT) and
#: a batch of 3,200 steps is 32 sequences, so 4 minibatches per epoch. The thesis sweeps the learning
#: rate over [2.5e-3, 2.5e-4, 2.5e-5] and the entropy coefficient over [0.03, 0.003, 0.0003] but does
#: not say which it selected: these are the middle values of both grids.
MEMORY_MAZE_PPO: dict[str, Any] = dict(
    num_envs=64, rollout_length=200, batching="segment", segment_length=100, num_minibatches=4,
    epochs=1, clip_eps=0.1, value_clip=1.0, max_grad_norm=4.0, value_coef=0.5, gamma=0.99, gae_lambda=0.95,
    learning_rate=2.5e-4, entropy_coef=3e-3, total_steps=100_000_000,
)

#: ``memgym train --preset NAME`` -> (algorithm, default env, config fields). Flags given on the command
#: line override a preset's fields. Thesis Appendix A.2: PPO (Table A.3) with the Table A.4 models on
#: Memory Maze (the sweep ran on 11×11; the results cover 9×9 to 15×15).
TRAIN_PRESETS: dict[str, tuple[str, str, dict[str, Any]]] = {
    name: ("ppo", "memgym/MemoryMaze-11x11-v0", dict(MEMORY_MAZE_PPO, memory=name))
    for name in ("memory-maze-lstm", "memory-maze-gtrxl-64", "memory-maze-gtrxl-128", "memory-maze-gtrxl-256",
                 "memory-maze-arelit")
}


def resolve_memory(memory: str, memory_config: Mapping[str, Any] | str | None = None) -> tuple[str, dict[str, Any]]:
    """``(model name, config)`` for a preset name or a raw model name plus overrides.

    ``memory_config`` may be a mapping or a JSON object string (from the command line);
    its entries override the preset's.
    """
    from memgym import memory as memory_lib
    from memgym.memory.options import option_descriptions, options, required_options

    if isinstance(memory_config, str):
        try:
            memory_config = json.loads(memory_config) if memory_config.strip() else {}
        except json.JSONDecodeError as error:
            raise ValueError(f"memory_config must be a JSON object, got {memory_config!r}: {error}") from None
        if not isinstance(memory_config, dict):
            raise ValueError(f"memory_config must be a JSON object, got {memory_config!r}")
    overrides = dict(memory_config or {})
    if memory in RENAMED_PRESETS:
        warnings.warn(f"memory preset {memory!r} is now {RENAMED_PRESETS[memory]!r}; the old name stops working in "
                      "memgym 0.3", DeprecationWarning, stacklevel=2)
        memory = RENAMED_PRESETS[memory]
    if memory in MEMORY_PRESETS:
        name, config = MEMORY_PRESETS[memory]
        config = {**config, **overrides}
    elif memory_lib.split_name(memory)[0] in memory_lib.MODELS:  # a model name, or "memax:NAME"
        name, config = memory_lib.split_name(memory)
        config = {**config, **overrides}
    else:
        raise ValueError(
            f"unknown memory {memory!r}; presets: {', '.join(MEMORY_PRESETS)}; models: {', '.join(memory_lib.MODELS)}"
        )
    cls = memory_lib.model_class(name)
    fields = set(options(cls))
    unknown = sorted(set(config) - fields)
    if unknown:
        raise ValueError(f"memory_config: unknown option(s) {unknown} for memory model {name!r}; allowed: {sorted(fields)}")
    missing = [option for option in required_options(cls) if option not in config]
    if missing:
        descriptions = option_descriptions(cls)
        meaning = "; ".join(f"{option}: {descriptions.get(option, 'undocumented')}" for option in missing)
        raise ValueError(
            f"memory={memory!r} is a model, not a preset, and needs option(s) {missing} ({meaning}): give them in "
            f"memory_config (--memory-config '{{\"{missing[0]}\": ...}}'), or use a preset ({', '.join(MEMORY_PRESETS)})"
        )
    cls(**config, parent=None).initialize_carry()  # the model's own checks of its options (e.g. an unknown memax model)
    return name, config


class Schedule:
    """How many updates a run takes; ``steps_per_update`` means the same in every algorithm's config."""

    num_envs: int
    steps_per_update: int
    total_steps: int

    @property
    def env_steps_per_update(self) -> int:
        """Environment steps of one update over all environments (``num_envs × steps_per_update``)."""
        return self.num_envs * self.steps_per_update

    @property
    def num_updates(self) -> int:
        """Updates in a run of ``total_steps`` environment steps (rounded down)."""
        return self.total_steps // self.env_steps_per_update

    def check_schedule(self) -> None:
        """``total_steps`` covers at least one update."""
        if self.total_steps < self.env_steps_per_update:
            raise ValueError(
                f"total_steps={self.total_steps} is less than one update (num_envs × steps_per_update = "
                f"{self.num_envs} × {self.steps_per_update} = {self.env_steps_per_update})"
            )


def field_docs(cls: type) -> dict[str, str]:
    """The docstring of each field of dataclass ``cls``: the string literal right under the field.

    Read from the source of ``cls`` and of the classes it inherits fields from (the
    CleanRL/tyro convention; a subclass's docstring of a field wins), so a class whose
    source is not available contributes nothing.
    """
    import ast
    import inspect
    import textwrap

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body
        for field, following in zip(body, body[1:]):
            if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                    and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                docs[field.target.id] = " ".join(following.value.value.split())
    return docs


__getattr__ = forward(__name__, {
    "ActorCriticConfig": ("A2CConfig (memgym.agents.a2c) or PPOConfig (memgym.agents.ppo)",
                          lambda: importlib.import_module("memgym.agents.registry").actor_critic_config),
    "DQNConfig": "memgym.agents.dqn.DQNConfig",
    "AGENTS": "memgym.agents.registry.ALGORITHMS",
})
