"""Inference cost of every memory model: recurrent-state size and XLA-counted FLOPs of one streaming step.

For each model of :data:`memgym.memory.MODELS` at the thesis T-Maze sizes
(Table A.2) — or, for S5 / LRU / FFM, which the thesis does not use, at sizes
chosen here — this prints:

* parameters;
* recurrent-state floats per head and layer, and in the whole carry, counted
  from the real ``initialize_carry()`` pytree (complex values count as two
  floats; integer counters, bool masks and GTrXL's key/value cache are listed
  apart, not counted);
* FLOPs of one streaming step (``T = 1``) of the whole model, counted by XLA:
  ``jax.jit(apply).lower(...).compile().cost_analysis()``;
* FLOPs per layer (stacked models: ``(F(L=4) − F(L=1)) / 3``, so the input
  embedding is excluded) and FLOPs of one layer's self-attention per head;
* thesis Table 5.1 for comparison (operations and space per head).

memax's models (registered as ``memax``, an optional extra: ``pip install "memgym[memax]"``)
get one row each for the four CPU presets of docs/memax.md (``tiny-deltanet``, ``tiny-gdn``,
``tiny-s6``, ``tiny-mgu``: one memax cell 64 wide); without the extra those rows are skipped
and the script says so. Every other registered model must have a row, or the script stops.

Self-attention of ReLiT / AReLiT / linear attention is the real mixer module of
a layer (:meth:`~memgym.memory.transformer.MonoidAttentionTransformer.mixer`), including its output projection.
GTrXL's attention is not a separate module, so it is measured as a whole
:class:`~memgym.memory.gtrxl.GTrXLBlock` minus the block's other sub-layers
(attention gate, layer norm, feed-forward, feed-forward gate) built from the
same flax modules.

    python benchmarks/inference_cost.py [--json PATH] [--smoke]

``--smoke`` measures every row at tiny sizes (width 16, at most 2 layers of 2 heads): a check
that the script runs, in seconds; its figures are not the documented ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym import memory
from memgym.memory.gtrxl import GTrXLBlock
from memgym.memory.transformer import GRUGate

OBSERVATION = 16  # T-Maze observation bits: cue 2 + gray code 8 + distractors 6 (thesis §5.1)
TRANSFORMER = dict(features=128, num_layers=4, num_heads=4, head_dim=64)  # thesis Table A.2


@dataclasses.dataclass(frozen=True)
class Spec:
    label: str
    name: str  # key of memgym.memory.MODELS
    config: dict[str, Any]
    thesis_ops: float | None = None  # Table 5.1, operations per head for one observation
    thesis_space: int | None = None  # Table 5.1, floats per head


SPECS = (
    Spec("ReLiT", "relit", dict(TRANSFORMER, eta=4), 2.1e5, 16640),
    Spec("AReLiT", "arelit", dict(TRANSFORMER, eta=4, r=1), 6.7e4, 896),
    Spec("GTrXL-128", "gtrxl", dict(TRANSFORMER, memory_size=128)),
    Spec("GTrXL-256", "gtrxl", dict(TRANSFORMER, memory_size=256), 8.4e6, 32768),
    Spec("GTrXL-256, no K/V cache", "gtrxl", dict(TRANSFORMER, memory_size=256, kv_cache=False), 8.4e6, 32768),
    Spec("linear attention", "linear_attention", dict(TRANSFORMER)),
    Spec("LSTM", "lstm", dict(features=600)),  # Table A.2
    Spec("GRU", "gru", dict(features=680)),  # Table A.2
    # Not in the thesis; one layer of width 128 with 256 complex state channels (512 floats) each.
    Spec("S5", "s5", dict(features=128, state_size=256)),
    Spec("LRU", "lru", dict(features=128, state_size=256)),
    Spec("FFM", "ffm", dict(features=128, memory_size=64, context_size=4)),
    # Not in the thesis: the monoid paper's one-layer linear transformer, at its `linattn` preset sizes.
    Spec("linear transformer (monoid paper)", "linear_attention_monoid", dict(features=256, key_size=128, value_size=128)),
    Spec("MLP (no memory)", "mlp", dict(features=128)),  # the memoryless control
)

# memax's models at the sizes of memgym's CPU presets tiny-deltanet, tiny-gdn, tiny-s6 and tiny-mgu (docs/memax.md:
# one memax cell, 64 wide; DeltaNet and GDN keep 8 × 8 key/value matrices, round(sqrt(64)) = 8).
MEMAX_SPECS = tuple(
    Spec(f"{model} (memax)", "memax", dict(model=model, features=64)) for model in ("DeltaNet", "GDN", "S6", "MGU")
)

# --smoke: tiny sizes for every option that sets one (the structure of each row is kept: stacked models keep
# 2 layers, so the per-layer difference is still taken; memory sizes shrink 16-fold, so GTrXL-128 and -256 differ).
SMOKE_SIZES = dict(features=16, num_layers=2, num_heads=2, head_dim=8, eta=2, state_size=16, context_size=2,
                   key_size=8, value_size=8)


def smoke_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every size option replaced by its tiny ``--smoke`` value (other options kept)."""
    small = dict(config)
    for key, value in config.items():
        if key == "memory_size":
            small[key] = max(2, value // 16)
        elif key in SMOKE_SIZES:
            small[key] = SMOKE_SIZES[key]
    return small


def memax_missing() -> str | None:
    """Why the memax rows cannot be measured here (the extra is not installed), or None when they can."""
    try:
        from memgym.memory.memax import available_models

        available_models()
    except ImportError as error:
        return str(error)
    return None


def specs(smoke: bool = False) -> tuple[tuple[Spec, ...], dict[str, str]]:
    """The rows to measure and ``{model name: why it has no row}`` for registered models left out.

    Raises ``RuntimeError`` when a registered model of :data:`memgym.memory.MODELS` has neither.
    """
    chosen, skipped = list(SPECS), {}
    reason = memax_missing()
    if reason is None:
        chosen += MEMAX_SPECS
    else:
        skipped["memax"] = f"skipped: the memax extra is missing ({reason})"
    if smoke:
        chosen = [dataclasses.replace(spec, config=smoke_config(spec.config)) for spec in chosen]
    missing = set(memory.MODELS) - {spec.name for spec in chosen} - set(skipped)
    if missing:
        raise RuntimeError(f"models without a row: {sorted(missing)}")
    return tuple(chosen), skipped


def cost(fn, *args) -> dict[str, float]:
    """XLA's cost analysis of ``jax.jit(fn)(*args)``: flops and transcendentals.

    ``Compiled.cost_analysis()`` returns a dict in recent jax and a list of dicts
    (one per computation) in older versions; both are summed here.
    """
    analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
    if analysis is None:
        raise RuntimeError("this backend gives no cost analysis")
    entries = analysis if isinstance(analysis, (list, tuple)) else [analysis]
    return {key: float(sum(entry.get(key, 0.0) for entry in entries)) for key in ("flops", "transcendentals")}


def carry_floats(tree) -> int:
    """Floating-point values among the leaves (complex leaves count twice)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        if jnp.issubdtype(leaf.dtype, jnp.complexfloating):
            total += 2 * leaf.size
        elif jnp.issubdtype(leaf.dtype, jnp.floating):
            total += leaf.size
    return total


def bookkeeping(tree) -> str:
    """The non-float leaves, e.g. ``4× int32[]``."""
    kinds: dict[str, int] = {}
    for leaf in jax.tree.leaves(tree):
        if not jnp.issubdtype(leaf.dtype, jnp.inexact):
            kind = f"{leaf.dtype}[{','.join(map(str, leaf.shape))}]"
            kinds[kind] = kinds.get(kind, 0) + 1
    return ", ".join(f"{n}× {kind}" for kind, n in kinds.items()) or "—"


def step_inputs(width: int = OBSERVATION) -> tuple[jax.Array, jax.Array]:
    return jnp.zeros((1, width)), jnp.zeros((1,), bool)


def model_step_flops(name: str, config: dict[str, Any]) -> tuple[dict[str, float], int, Any]:
    """Cost of one streaming step of the whole model, its parameter count, and its carry."""
    model = memory.make(name, **config)
    x, start = step_inputs()
    carry = model.initialize_carry()
    params = model.init(jax.random.key(0), x, start, carry)
    step = cost(lambda p, x, s, c: model.apply(p, x, s, c), params, x, start, carry)
    return step, sum(leaf.size for leaf in jax.tree.leaves(params)), carry


def mixer_flops(name: str, config: dict[str, Any]) -> float:
    """One layer's self-attention (the real mixer module) for one step, all heads."""
    mixer = memory.make(name, **config).mixer(parent=None)
    x, start = step_inputs(config["features"])
    carry = mixer.initialize_carry()
    params = mixer.init(jax.random.key(0), x, start, carry)
    return cost(lambda p, x, s, c: mixer.apply(p, x, s, c), params, x, start, carry)["flops"]


class GTrXLNonAttention(nn.Module):
    """The sub-layers of a GTrXL block other than self-attention, as in :class:`GTrXLBlock`."""

    ff_size: int
    gate_bias: float

    @nn.compact
    def __call__(self, e: jax.Array, attended: jax.Array) -> jax.Array:
        e = GRUGate(self.gate_bias, fused=True, name="attention_gate")(e, jax.nn.relu(attended))
        f = nn.LayerNorm(name="feedforward_norm")(e)
        f = nn.Dense(e.shape[-1], name="feedforward_out")(jax.nn.relu(nn.Dense(self.ff_size, name="feedforward_in")(f)))
        return GRUGate(self.gate_bias, fused=True, name="feedforward_gate")(e, jax.nn.relu(f))


def gtrxl_attention_flops(config: dict[str, Any]) -> float:
    """One GTrXL layer's self-attention for one step, all heads: block minus its other sub-layers."""
    model = memory.make("gtrxl", **config)
    d = config["features"]
    block = GTrXLBlock(
        num_heads=config["num_heads"],
        head_dim=config["head_dim"],
        memory_size=model.memory_size,
        ff_size=model.ff_size or d,
        gate_bias=model.gate_bias,
        chunk_size=model.chunk_size,
        kv_cache=model.kv_cache,
    )
    x, start = step_inputs(d)
    layer_carry = model.initialize_carry()[0]
    params = block.init(jax.random.key(0), x, start, layer_carry)
    whole = cost(lambda p, x, s, c: block.apply(p, x, s, c), params, x, start, layer_carry)["flops"]
    rest = GTrXLNonAttention(model.ff_size or d, model.gate_bias)
    rest_params = rest.init(jax.random.key(0), x, x)
    return whole - cost(lambda p, e, a: rest.apply(p, e, a), rest_params, x, x)["flops"]


def gtrxl_rebuild_flops(config: dict[str, Any]) -> float:
    """One layer's key/value cache rebuild: layer norm and key and value projections of the M memory rows.

    A cached streaming step holds the rebuild in one branch of a ``lax.cond`` that runs only
    on the first step after the parameters changed; XLA's static count adds it to every step,
    so it is subtracted to give the cost of a step with a valid cache.
    """
    model = memory.make("gtrxl", **config)
    rows = jnp.zeros((model.memory_size, config["features"]))
    norm = nn.LayerNorm()
    project = nn.DenseGeneral((config["num_heads"], config["head_dim"]), use_bias=False)
    keys = [jax.random.key(i) for i in range(3)]
    params = norm.init(keys[0], rows), project.init(keys[1], rows), project.init(keys[2], rows)

    def rebuild(params, rows):
        norm_params, key_params, value_params = params
        normed = norm.apply(norm_params, rows)
        return project.apply(key_params, normed), project.apply(value_params, normed)

    return cost(rebuild, params, rows)["flops"]


def measure(spec: Spec) -> dict[str, Any]:
    step, params, carry = model_step_flops(spec.name, spec.config)
    layers = spec.config.get("num_layers", 1)
    heads = spec.config.get("num_heads")
    row: dict[str, Any] = dict(
        model=spec.label,
        name=spec.name,
        config=spec.config,
        params=params,
        carry_floats=carry_floats(carry),
        bookkeeping=bookkeeping(carry),
        step_flops=step["flops"],
        step_transcendentals=step["transcendentals"],
        thesis_ops_per_head=spec.thesis_ops,
        thesis_space_per_head=spec.thesis_space,
    )
    if heads is None:  # one recurrent layer without heads
        row.update(state_per_head_layer=None, layer_flops=step["flops"], attention_flops_per_head=None)
        return row
    one_layer, _, _ = model_step_flops(spec.name, dict(spec.config, num_layers=1))
    row["layer_flops"] = (step["flops"] - one_layer["flops"]) / (layers - 1) if layers > 1 else one_layer["flops"]
    if spec.name == "gtrxl":
        # One mem [M, d] per layer, shared by every head (Table 5.1 lists it "per head"); the keys
        # and values cached beside it are derived from mem and the parameters, listed apart.
        row["state_per_head_layer"] = carry_floats(carry[0].mem)
        row["carry_floats"] = carry_floats([layer.mem for layer in carry])
        cache = carry_floats([(layer.keys, layer.values) for layer in carry])
        row["bookkeeping"] = f"{row['bookkeeping']}, key/value cache {cache:,} floats"
        attention = gtrxl_attention_flops(spec.config)
        if spec.config.get("kv_cache", True):  # count a step with a valid cache (see gtrxl_rebuild_flops)
            rebuild = gtrxl_rebuild_flops(spec.config)
            attention -= rebuild
            row["step_flops"] -= layers * rebuild
            row["layer_flops"] -= rebuild
        row["attention_flops_per_head"] = attention / heads
    else:
        heads_carry, _ = carry[0]
        assert all(leaf.shape[0] == heads for leaf in jax.tree.leaves(heads_carry)), "expected a leading head axis"
        row["state_per_head_layer"] = carry_floats(heads_carry) // heads
        row["attention_flops_per_head"] = mixer_flops(spec.name, spec.config) / heads
    return row


def fmt(value: float | int | None, integer: bool = False) -> str:
    if value is None:
        return "—"
    return f"{int(value)}" if integer else f"{value:.3g}"


def table(rows: list[dict[str, Any]]) -> str:
    header = (
        "| model | params | state floats / head / layer | carry floats | non-float carry | "
        "FLOPs / step | FLOPs / layer | self-attn FLOPs / head | Table 5.1 ops / head | Table 5.1 space / head |"
    )
    lines = [header, "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['params']:,} | {fmt(row['state_per_head_layer'], True)} | "
            f"{row['carry_floats']:,} | {row['bookkeeping']} | {fmt(row['step_flops'])} | {fmt(row['layer_flops'])} | "
            f"{fmt(row['attention_flops_per_head'])} | {fmt(row['thesis_ops_per_head'])} | "
            f"{fmt(row['thesis_space_per_head'], True)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the rows (and the machine) as JSON to this path")
    parser.add_argument("--smoke", action="store_true",
                        help="every row at tiny sizes (width 16, 2 layers of 2 heads): a check that runs in seconds")
    args = parser.parse_args()

    chosen, skipped = specs(args.smoke)
    for name, why in skipped.items():
        print(f"no {name} row: {why}", file=sys.stderr)
    rows = [measure(spec) for spec in chosen]
    machine = f"{platform.machine()} {jax.default_backend()} ({jax.devices()[0].device_kind}), jax {jax.__version__}"
    print(f"One streaming step (T = 1, input {OBSERVATION} floats), XLA cost analysis on {machine}"
          + (" — smoke sizes, not the documented figures" if args.smoke else ""))
    print(table(rows))
    for name, why in skipped.items():
        print(f"\nno {name} row: {why}")
    print(
        "\nGTrXL keeps one mem [M, d] per layer, shared by its heads: its state column is per layer "
        "(as Table 5.1's GTrXL entry). Self-attention FLOPs include the layer's output projection."
    )
    print("\nconfigs:")
    for row in rows:
        print(f"  {row['model']}: {row['config']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(dict(machine=machine, smoke=args.smoke, rows=rows, skipped=skipped), indent=2,
                                        default=float))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
