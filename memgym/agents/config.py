"""Agent configurations and the thesis's architecture presets.

Every option of an agent is a field of a frozen dataclass, so a config is hashable
(it is closed over by jitted functions), printable, and the ``memgym train``
command exposes each field as a flag whose help is the field's docstring (the
string literal right under it, :func:`field_docs`). In every config
``steps_per_update`` is the number of environment steps *per environment* in one
update (A2C/PPO: the rollout length) and ``env_steps_per_update`` the number over
all environments.

:data:`MEMORY_PRESETS` are thesis Table A.2 (T-Maze, ≈1.6M parameters per agent):
LSTM d = 600, GRU d = 680 (and the table's larger sizes, ``lstm-1200`` and
``gru-1360``); GTrXL, ReLiT and AReLiT with d = 128, 4 layers, 4 heads × 64,
η = 4, r = 1, GTrXL memory M = 128 or 256. The monoid paper's models get sizes in
the same range, width 256: S5, LRU, FFM and its linear transformer (``linattn``: the
single-layer form of eq. 9–13, keys and values of 128; ``linear_attention`` is the
thesis's gated 4-layer stack).
:data:`THESIS_TMAZE_HPARAMS` are the learning rate / entropy coefficient per
model from the thesis authors' published configs (picked from the Table A.1 grid).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

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
    "linattn": ("linear_attention_monoid", dict(features=256, key_size=128, value_size=128)),
    # Small models for smoke runs on a laptop CPU.
    "tiny-arelit": ("arelit", dict(features=32, num_layers=1, num_heads=2, head_dim=16, eta=2, r=1)),
    "tiny-gru": ("gru", dict(features=64)),
    "tiny-lstm": ("lstm", dict(features=64)),
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
    algorithm="ppo", num_envs=64, rollout_length=200, batching="segment", segment_length=100, num_minibatches=4,
    epochs=1, clip_eps=0.1, value_clip=1.0, max_grad_norm=4.0, value_coef=0.5, gamma=0.99, gae_lambda=0.95,
    learning_rate=2.5e-4, entropy_coef=3e-3, total_steps=100_000_000,
)

#: ``memgym train --preset NAME`` -> (agent, default env, config fields). Flags given on the command
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
    from memgym.memory.validation import option_descriptions, options, required_options

    if isinstance(memory_config, str):
        try:
            memory_config = json.loads(memory_config) if memory_config.strip() else {}
        except json.JSONDecodeError as error:
            raise ValueError(f"memory_config must be a JSON object, got {memory_config!r}: {error}") from None
        if not isinstance(memory_config, dict):
            raise ValueError(f"memory_config must be a JSON object, got {memory_config!r}")
    overrides = dict(memory_config or {})
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


def _check_interval(config: Any, low: float, high: float, *names: str, include_low: bool = True) -> None:
    """Real-valued fields in ``[low, high]`` (``(low, high]`` without ``include_low``)."""
    for name in names:
        value = getattr(config, name)
        inside = (low <= value if include_low else low < value) and value <= high
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not inside:
            bounds = f"{'[' if include_low else '('}{low}, {high}]"
            raise ValueError(f"{name} must be in {bounds}, got {name}={value!r}")


def _check_positive(config: Any, *names: str) -> None:
    """Integer fields >= 1 (:func:`memgym.memory.validation.check_positive`)."""
    from memgym.validation import check_positive

    check_positive(**{name: getattr(config, name) for name in names})


class _Schedule:
    """How many updates a run takes; ``steps_per_update`` means the same in every config."""

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


INF = float("inf")


@dataclasses.dataclass(frozen=True)
class ActorCriticConfig(_Schedule):
    """A2C (thesis §2.2.1, §5.1.2, Table A.1) or recurrent PPO (§2.2.2).

    Defaults are the thesis T-Maze A2C setup: 8 environments × 256-step rollouts,
    γ 0.99, GAE λ 0.95, value coefficient 0.5, actor/critic heads 2 × 128 tanh.
    The PPO-only fields default to common recurrent-PPO values (4 epochs, 4 minibatches);
    the thesis's Memory Maze PPO (Table A.3) is :data:`MEMORY_MAZE_PPO`, the
    ``memory-maze-*`` presets of ``memgym train`` (:data:`TRAIN_PRESETS`).
    """

    algorithm: str = "a2c"
    """"a2c" (one gradient step per rollout) or "ppo" (clipped epochs over minibatches)"""
    memory: str = "arelit"
    """memory model: a MEMORY_PRESETS name (e.g. arelit, gtrxl-256, tiny-gru) or a memgym.memory model name"""
    memory_config: str = ""
    """JSON object of memory model options overriding the preset's, e.g. '{"features": 64}'"""
    total_steps: int = 1_000_000
    """environment steps of the whole run, over all environments"""
    num_envs: int = 8
    """environments stepped in parallel"""
    rollout_length: int = 256
    """environment steps per environment in one rollout, i.e. per update (= steps_per_update)"""
    learning_rate: float = 1e-4
    """Adam learning rate"""
    entropy_coef: float = 1e-3
    """weight of the entropy bonus in the loss"""
    value_coef: float = 0.5
    """weight of the critic's squared TD(λ) error in the loss"""
    gamma: float = 0.99
    """discount factor γ"""
    gae_lambda: float = 0.95
    """GAE λ"""
    max_grad_norm: float = 0.5
    """gradients are clipped to this global norm"""
    head_width: int = 128
    """width of the actor and critic heads' hidden layers"""
    head_layers: int = 2
    """hidden tanh layers of the actor and critic heads"""
    bootstrap_truncated: bool = True
    """on a time-limit truncation bootstrap from the value of the cut-off observation
    (else treat it as terminal)"""
    epochs: int = 4
    """PPO: passes over each rollout"""
    num_minibatches: int = 4
    """PPO: minibatches per epoch (must divide the environments, or the segments, of a rollout)"""
    clip_eps: float = 0.1
    """PPO: ratio clipping ε"""
    value_clip: float = 1.0
    """PPO: values may move at most this far from the acting-time values"""
    batching: str = "tape"
    """PPO minibatches: "tape" (whole environment streams replayed from stored carries, full BPTT)
    or "segment" (segment_length-step segments from a fresh carry, truncated BPTT)"""
    segment_length: int = 64
    """PPO with batching="segment": steps per segment (must divide rollout_length)"""

    def __post_init__(self) -> None:
        if self.algorithm not in ("a2c", "ppo"):
            raise ValueError(f"algorithm must be 'a2c' or 'ppo', got algorithm={self.algorithm!r}")
        if self.batching not in ("tape", "segment"):
            raise ValueError(f"batching must be 'tape' or 'segment', got batching={self.batching!r}")
        _check_positive(self, "total_steps", "num_envs", "rollout_length", "head_width", "head_layers", "epochs",
                        "num_minibatches", "segment_length")
        _check_interval(self, 0.0, INF, "learning_rate", "max_grad_norm", "clip_eps", "value_clip", include_low=False)
        _check_interval(self, 0.0, 1.0, "gamma", "gae_lambda")
        _check_interval(self, 0.0, INF, "entropy_coef", "value_coef")
        if self.total_steps < self.env_steps_per_update:
            raise ValueError(
                f"total_steps={self.total_steps} is less than one update (num_envs × rollout_length = "
                f"{self.env_steps_per_update})"
            )
        if self.algorithm == "ppo":
            rows = self.num_envs if self.batching == "tape" else self.num_envs * self.rollout_length // self.segment_length
            if self.batching == "segment" and self.rollout_length % self.segment_length:
                raise ValueError(
                    f"rollout_length={self.rollout_length} must be a multiple of segment_length={self.segment_length}"
                )
            if rows % self.num_minibatches:
                raise ValueError(
                    f"num_minibatches={self.num_minibatches} must divide the {rows} "
                    f"{'environments' if self.batching == 'tape' else 'segments'} of a rollout"
                )
        resolve_memory(self.memory, self.memory_config)

    @property
    def steps_per_update(self) -> int:
        """Environment steps per environment in one update: the rollout length."""
        return self.rollout_length


@dataclasses.dataclass(frozen=True)
class DQNConfig(_Schedule):
    """Double DQN with a dueling head over a memory model, TBB or SBB replay (monoid paper §5.3, Alg. 1–2)."""

    memory: str = "ffm"
    """memory model: a MEMORY_PRESETS name (e.g. arelit, gtrxl-256, tiny-gru) or a memgym.memory model name"""
    memory_config: str = ""
    """JSON object of memory model options overriding the preset's, e.g. '{"features": 64}'"""
    total_steps: int = 200_000
    """environment steps of the whole run, over all environments"""
    num_envs: int = 8
    """environments stepped in parallel, each with its own replay"""
    steps_per_update: int = 1
    """environment steps per environment between gradient updates"""
    batching: str = "tape"
    """replay: "tape" (TBB: whole episodes concatenated, full BPTT) or "segment"
    (SBB: zero-padded segments of segment_length)"""
    segment_length: int = 20
    """SBB: transitions per stored segment"""
    batch_size: int = 1000
    """transitions per gradient update (SBB: batch_size // segment_length segments)"""
    buffer_size: int = 100_000
    """replay capacity in transitions, split evenly across the environments' replays"""
    learning_starts: int = 5_000
    """environment steps (over all environments) before the first gradient update"""
    learning_rate: float = 1e-4
    """Adam learning rate"""
    gamma: float = 0.99
    """discount factor γ"""
    target_rate: float = 0.995
    """Polyak β of the target network: target ← β·target + (1 − β)·online after every update"""
    epsilon_start: float = 1.0
    """ε of ε-greedy exploration at the start"""
    epsilon_end: float = 0.05
    """ε after annealing"""
    epsilon_fraction: float = 0.2
    """fraction of total_steps over which ε falls linearly from epsilon_start to epsilon_end"""
    max_grad_norm: float = 10.0
    """gradients are clipped to this global norm"""
    head_width: int = 128
    """width of the dueling value and advantage heads"""

    def __post_init__(self) -> None:
        if self.batching not in ("tape", "segment"):
            raise ValueError(f"batching must be 'tape' or 'segment', got batching={self.batching!r}")
        _check_positive(self, "total_steps", "num_envs", "steps_per_update", "segment_length", "batch_size",
                        "buffer_size", "head_width")
        _check_interval(self, 0.0, INF, "learning_rate", "max_grad_norm", "epsilon_fraction", include_low=False)
        _check_interval(self, 0.0, 1.0, "gamma", "target_rate", "epsilon_start", "epsilon_end")
        starts = self.learning_starts
        if isinstance(starts, bool) or not isinstance(starts, int) or starts < 0:
            raise ValueError(f"learning_starts must be a non-negative integer, got learning_starts={starts!r}")
        if self.total_steps < self.env_steps_per_update:
            raise ValueError(
                f"total_steps={self.total_steps} is less than one update "
                f"(num_envs × steps_per_update = {self.env_steps_per_update})"
            )
        # Each environment keeps its own replay (a tape, or rows of segments); a batch draws from all of them.
        if self.batching == "segment" and self.batch_size % self.segment_length:
            raise ValueError(
                f"batch_size={self.batch_size} must be a multiple of segment_length={self.segment_length}"
            )
        per_env = self.buffer_size // self.num_envs
        if per_env < self.steps_per_update:
            raise ValueError(
                f"buffer_size={self.buffer_size} is too small for num_envs={self.num_envs} × "
                f"steps_per_update={self.steps_per_update}"
            )
        if self.batching == "segment" and per_env // self.segment_length < self.steps_per_update:
            raise ValueError(
                f"buffer_size={self.buffer_size} is too small: each of the num_envs={self.num_envs} environments "
                f"needs at least steps_per_update={self.steps_per_update} rows of segment_length={self.segment_length}"
            )
        resolve_memory(self.memory, self.memory_config)


#: ``memgym train --agent NAME`` -> (config class, the fields NAME fixes). The trainer of each
#: config class is :data:`memgym.agents.registry.TRAINERS`.
AGENTS: dict[str, tuple[type, dict[str, Any]]] = {
    "a2c": (ActorCriticConfig, {"algorithm": "a2c"}),
    "ppo": (ActorCriticConfig, {"algorithm": "ppo"}),
    "dqn": (DQNConfig, {}),
}


def field_docs(cls: type) -> dict[str, str]:
    """The docstring of each field of dataclass ``cls``: the string literal right under the field.

    Read from the class's source (the CleanRL/tyro convention), so it is empty when
    the source is not available.
    """
    import ast
    import inspect
    import textwrap

    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0].body
    docs = {}
    for field, following in zip(body, body[1:]):
        if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[field.target.id] = " ".join(following.value.value.split())
    return docs
