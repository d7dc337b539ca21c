"""Where the memory of a compiled A2C update goes: XLA's estimate and its biggest temporary buffers.

For each memory preset, the A2C update of ``benchmarks/train_speed.py`` (thesis
T-Maze setup: 8 environments × 256 steps, corridor 120) is compiled, not run:
``trainer.run(state, env_params, 1)``, jitted with the state donated. Two things
are read from the compiled function:

* ``compiled.memory_analysis()``: arguments + outputs + temporaries − donated
  buffers, the number ``train_speed.py`` compares;
* XLA's buffer assignment (``--xla_dump_to``; the ``*buffer-assignment.txt`` of the
  update's module). All temporaries share one preallocated block, in which values
  with disjoint lifetimes reuse offsets. The script groups the block's values by
  shape and reports, per shape, the distinct offsets it occupies times its size.
  That is an upper bound on what the shape holds at once, which ranks the buffers
  that dominate.

Each model compiles in a fresh process (the dump flag is per process).
Compilation only, so the figures do not depend on the machine's load.

    python benchmarks/update_memory_profile.py [--models arelit relit gtrxl-256] [--top 8] [--smoke]

``--smoke``: the same presets at tiny sizes (width 16, one layer of 2 heads × 8, GTrXL memory 16),
2 environments × 8 steps on a corridor of 4: every table, mostly compilation (a check that the
script runs, not a measurement).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import json, sys, jax
from memgym.agents.a2c import A2CConfig, A2CTrainer
from memgym.agents.config import THESIS_TMAZE_HPARAMS
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params
job = json.loads(sys.argv[1])
preset = job["preset"]
learning_rate, entropy_coef = THESIS_TMAZE_HPARAMS.get(preset, (1e-4, 1e-3))
config = A2CConfig(memory=preset, memory_config=json.dumps(job["memory_config"]), learning_rate=learning_rate,
                   entropy_coef=entropy_coef, num_envs=job["num_envs"], rollout_length=job["rollout_length"])
params = tmaze_params(job["corridor_length"], max_episode_steps=1000)
trainer = A2CTrainer(config, TMazeJax(), example_params=params)
state = jax.jit(trainer.init)(jax.random.key(0), params)
compiled = jax.jit(lambda s, p: trainer.run(s, p, 1), donate_argnums=0).lower(state, params).compile()
stats = compiled.memory_analysis()
print("PROFILE " + json.dumps({
    "temp": stats.temp_size_in_bytes, "arguments": stats.argument_size_in_bytes,
    "outputs": stats.output_size_in_bytes, "aliased": stats.alias_size_in_bytes}))
"""


def biggest_buffers(dump: Path, top: int) -> list[dict]:
    """The shapes holding the most of the update's preallocated temporary block (see module docstring)."""
    files = sorted(dump.glob("*jit__lambda*buffer-assignment.txt"))
    if not files:
        return []
    text = files[-1].read_text()
    blocks = re.findall(r"allocation (\d+): size (\d+), preallocated-temp", text)
    if not blocks:
        return []
    number = max(blocks, key=lambda b: int(b[1]))[0]
    block = text[text.index(f"allocation {number}:"):].split("\nallocation ")[0]
    values = re.findall(r"value: <\d+ (\S+) @\d+> \(size=(\d+),offset=(\d+)\): (\S+)", block)
    by_shape: dict[str, dict] = collections.defaultdict(lambda: {"offsets": set(), "size": 0, "example": ""})
    for name, size, offset, shape in values:
        entry = by_shape[re.sub(r"\{.*", "", shape)]
        entry["offsets"].add(int(offset))
        entry["size"], entry["example"] = int(size), entry["example"] or name
    rows = [{"shape": shape, "size": e["size"], "offsets": len(e["offsets"]), "bound": e["size"] * len(e["offsets"]),
             "example": e["example"]} for shape, e in by_shape.items()]
    return sorted(rows, key=lambda r: -r["bound"])[:top]


#: The thesis T-Maze setup of train_speed.py, and the tiny one of --smoke.
THESIS = dict(num_envs=8, rollout_length=256, corridor_length=120)
SMOKE = dict(num_envs=2, rollout_length=8, corridor_length=4)
SMOKE_SIZES = dict(features=16, num_layers=1, num_heads=2, head_dim=8, eta=2, state_size=16, context_size=2,
                   key_size=8, value_size=8)


def smoke_sizes(preset: str) -> dict:
    """The size options of memory ``preset`` at their tiny ``--smoke`` values (memory sizes shrink 16-fold)."""
    from memgym.agents.config import MEMORY_PRESETS

    config = MEMORY_PRESETS[preset][1]
    small = {key: SMOKE_SIZES[key] for key in config if key in SMOKE_SIZES}
    if "memory_size" in config:
        small["memory_size"] = max(2, config["memory_size"] // 16)
    return small


def profile(model: str, top: int, smoke: bool = False) -> dict:
    job = dict(SMOKE if smoke else THESIS, preset=model, memory_config=smoke_sizes(model) if smoke else {})
    with tempfile.TemporaryDirectory() as dump:
        env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}".strip())
        done = subprocess.run([sys.executable, "-c", WORKER, json.dumps(job)], env=env, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("PROFILE ")]
        if done.returncode or not lines:
            raise RuntimeError(f"{model}: {done.stderr[-2000:]}")
        result = json.loads(lines[-1][len("PROFILE "):])
        result["buffers"] = biggest_buffers(Path(dump), top)
    result["total"] = result["temp"] + result["arguments"] + result["outputs"] - result["aliased"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["arelit", "relit", "gtrxl-256"])
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, 2 envs × 8 steps on a corridor of 4: every table, mostly compilation")
    args = parser.parse_args()
    mib = 2**20
    results = {model: profile(model, args.top, args.smoke) for model in args.models}
    print("| model | XLA memory (MiB) | temporaries (MiB) |")
    print("|---|---:|---:|")
    for model, r in results.items():
        print(f"| {model} | {r['total'] / mib:.1f} | {r['temp'] / mib:.1f} |")
    for model, r in results.items():
        print(f"\n{model}: biggest temporaries by shape (size × distinct offsets = an upper bound)")
        print("| shape | size (MiB) | offsets | bound (MiB) | e.g. |")
        print("|---|---:|---:|---:|---|")
        for row in r["buffers"]:
            print(f"| `{row['shape']}` | {row['size'] / mib:.2f} | {row['offsets']} | {row['bound'] / mib:.1f} | "
                  f"{row['example']} |")
    if "arelit" in results and "gtrxl-256" in results:
        print(f"\nAReLiT / GTrXL-256 XLA memory: {results['arelit']['total'] / results['gtrxl-256']['total']:.2f}×")


if __name__ == "__main__":
    main()
