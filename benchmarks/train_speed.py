"""Training speed: environment steps per second of A2C on the T-Maze for every thesis memory model.

Each memory model is trained with the pure-JAX A2C trainer
(:class:`memgym.agents.a2c.A2CTrainer`) at the thesis T-Maze
setup: the :data:`~memgym.agents.config.MEMORY_PRESETS` sizes of Table A.2
(LSTM 600, GRU 680; GTrXL / ReLiT / AReLiT d = 128, 4 layers, 4 heads × 64,
η = 4, r = 1, GTrXL memory M = 128 or 256; S5 / LRU / FFM / linear attention
at the preset sizes), 8 environments × 256-step rollouts, learning rate and
entropy coefficient from :data:`~memgym.agents.config.THESIS_TMAZE_HPARAMS`,
on :class:`memgym.envs.tmaze_jax.TMazeJax` with corridor length 120.

Two measurements per model:

* ``single`` — one training run: ``trainer.run(state, env_params, K)`` (K
  updates = K rollouts + K gradient steps inside one ``lax.scan``), jitted with
  the runner state donated;
* ``vmap`` — ``jax.vmap`` of the same function over R independent runs (own
  seeds, own environments, own parameters), the way the leaderboard and
  ``memgym train --seeds`` train; steps/s is aggregated over the R runs.

Method: the function is lowered and compiled ahead of time (the compile time,
including tracing, is reported on its own), called once untimed (warm-up), then
called ``--repeats`` times, each call ended by ``block_until_ready``; the time is
the median call. env steps/s = runs × K × num_envs × rollout_length / time.
Every step of an update is counted: acting, environment stepping, the replay
with its backward pass and the Adam step all happen inside the timed call.

Memory: XLA's own estimate for the compiled function, from
``compiled.memory_analysis()`` — arguments + outputs + temporaries − donated
(aliased) buffers, i.e. what the call needs resident at its peak — which is
available on every backend and is the number compared between models. On a GPU
the device allocator's ``peak_bytes_in_use`` is reported as well; to make that
a per-model number each model runs in a fresh subprocess (``--no-isolate`` runs
them all in this process instead, and then the GPU peak is cumulative).

The last lines compare AReLiT with GTrXL-256 against the thesis (§5.2.3: AReLiT
+54 % FPS, −43 % memory), i.e. the targets steps/s ratio ≥ 1.5× and memory
ratio ≤ 0.6×, and, on an H100, AReLiT vmapped ≥ 700k steps/s.

    python benchmarks/train_speed.py [--smoke] [--models arelit gtrxl-256] [--updates K] [--runs R] [--json out.json]

``--smoke``: AReLiT and GTrXL-256 (unless ``--models`` names others) at tiny sizes (width 16, one
layer of 2 heads × 8, GTrXL memory 16), 2 environments × 8 steps on a corridor of 4, K = 1, R = 2, one timed call: every row, both
measurements and the comparison, mostly compilation (a check that the script runs, not a
measurement). Given flags win over these.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

MODELS = ["arelit", "relit", "gtrxl-128", "gtrxl-256", "lstm", "gru", "linear_attention", "s5", "lru", "ffm"]
# The same presets trained another way, for before/after rows measured in the same run:
# name -> (preset, memory model overrides, A2CConfig overrides).
VARIANTS = {
    # ``<preset>-recurrent`` trains with the step-by-step monoid scan instead of the chunkwise-parallel form.
    "relit-recurrent": ("relit", {"sub_chunk_size": None}, {}),
    "linear_attention-recurrent": ("linear_attention", {"sub_chunk_size": None}, {}),
    # ``gtrxl-*-uncached``: acting recomputes the memory rows' keys and values at every step.
    "gtrxl-128-uncached": ("gtrxl-128", {"kv_cache": False}, {}),
    "gtrxl-256-uncached": ("gtrxl-256", {"kv_cache": False}, {}),
    # ``<preset>-replay-<K>``: the replay for the gradient in checkpointed pieces of K steps (replay_chunk_size;
    # GTrXL refuses it: its window carries no gradients between pieces).
    **{f"{preset}-replay-{k}": (preset, {}, {"replay_chunk_size": k})
       for preset in ("arelit", "relit", "linear_attention", "lstm", "gru") for k in (16, 32, 64)},
}
RESULT_MARKER = "TRAIN_SPEED_RESULT "

# --smoke: the tiny value of every size option (memory sizes shrink 16-fold, so GTrXL-128 and -256 still differ).
SMOKE_SIZES = dict(features=16, num_layers=1, num_heads=2, head_dim=8, eta=2, state_size=16, context_size=2,
                   key_size=8, value_size=8)


def smoke_sizes(config: dict[str, Any]) -> dict[str, Any]:
    """The size options of a memory ``config`` at their tiny ``--smoke`` values (other options left out)."""
    small = {key: SMOKE_SIZES[key] for key in config if key in SMOKE_SIZES}
    if "memory_size" in config:
        small["memory_size"] = max(2, config["memory_size"] // 16)
    return small


# Thesis targets (issue / thesis §5.2.3).
TARGET_FPS_RATIO = 1.5
TARGET_MEMORY_RATIO = 0.6
TARGET_H100_VMAP_FPS = 700_000


# --- one model ---------------------------------------------------------------------------------


def memory_bytes(compiled: Any) -> dict[str, int | None]:
    """XLA's memory estimate of a compiled function (None entries where the backend gives none)."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - some backends do not implement it
        stats = None
    if stats is None:
        return {"xla_total_bytes": None, "xla_temp_bytes": None, "xla_argument_bytes": None, "xla_output_bytes": None}
    argument = int(stats.argument_size_in_bytes)
    output = int(stats.output_size_in_bytes)
    temp = int(stats.temp_size_in_bytes)
    alias = int(getattr(stats, "alias_size_in_bytes", 0) or 0)
    return {
        "xla_total_bytes": argument + output + temp - alias,
        "xla_temp_bytes": temp,
        "xla_argument_bytes": argument,
        "xla_output_bytes": output,
    }


def device_peak_bytes() -> int | None:
    import jax

    try:
        stats = jax.devices()[0].memory_stats()
    except Exception:  # noqa: BLE001 - CPU returns None or raises depending on the version
        return None
    if not stats:
        return None
    peak = stats.get("peak_bytes_in_use")
    return None if peak is None else int(peak)


def time_calls(call, state, env_params, repeats: int) -> tuple[float, list[float], Any]:
    """Warm-up call, then ``repeats`` timed calls threading the (donated) state; median seconds."""
    import jax

    state, metrics = call(state, env_params)
    jax.block_until_ready((state, metrics))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, metrics = call(state, env_params)
        jax.block_until_ready((state, metrics))
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, state


def bench_model(preset: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Single-run and vmapped A2C throughput and memory of one memory preset."""
    import jax
    import numpy as np

    from memgym.agents.a2c import A2CConfig, A2CTrainer
    from memgym.agents.config import MEMORY_PRESETS, THESIS_TMAZE_HPARAMS
    from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

    updates, runs, repeats = opts["updates"], opts["runs"], opts["repeats"]
    name = preset
    preset, overrides, trainer_overrides = VARIANTS.get(name, (name, {}, {}))
    learning_rate, entropy_coef = THESIS_TMAZE_HPARAMS.get(preset, (1e-4, 1e-3))
    if opts.get("smoke"):
        overrides = {**smoke_sizes(MEMORY_PRESETS[preset][1]), **overrides}
    config = A2CConfig(
        memory=preset, memory_config=json.dumps(overrides), learning_rate=learning_rate, entropy_coef=entropy_coef,
        num_envs=opts["num_envs"], rollout_length=opts["rollout_length"], **trainer_overrides,
    )
    steps_per_update = config.env_steps_per_update
    env = TMazeJax()
    env_params = tmaze_params(opts["corridor_length"], max_episode_steps=opts["max_episode_steps"])
    trainer = A2CTrainer(config, env, example_params=env_params)
    row: dict[str, Any] = {
        "model": name, "memory_model": MEMORY_PRESETS[preset][0], "memory_config": {**MEMORY_PRESETS[preset][1], **overrides},
        "trainer_config": trainer_overrides, "updates": updates, "steps_per_update": steps_per_update,
    }

    def k_updates(state, params):
        return trainer.run(state, params, updates)

    key = jax.random.key(opts["seed"])

    # Single run.
    state = jax.jit(trainer.init)(key, env_params)
    row["parameters"] = int(sum(x.size for x in jax.tree.leaves(state.params)))
    start = time.perf_counter()
    compiled = jax.jit(k_updates, donate_argnums=0).lower(state, env_params).compile()
    row["single_compile_s"] = time.perf_counter() - start
    row.update({f"single_{k}": v for k, v in memory_bytes(compiled).items()})
    seconds, times, state = time_calls(compiled, state, env_params, repeats)
    row["single_s"], row["single_times_s"] = seconds, times
    row["single_steps_per_s"] = updates * steps_per_update / seconds
    row["single_device_peak_bytes"] = device_peak_bytes()
    del state, compiled

    # vmap over independent runs.
    if runs > 0:
        batch_params = tmaze_params(np.full(runs, opts["corridor_length"]),
                                    max_episode_steps=np.full(runs, opts["max_episode_steps"]))
        states = jax.jit(jax.vmap(trainer.init))(jax.random.split(key, runs), batch_params)
        start = time.perf_counter()
        compiled = jax.jit(jax.vmap(k_updates), donate_argnums=0).lower(states, batch_params).compile()
        row["vmap_compile_s"] = time.perf_counter() - start
        row.update({f"vmap_{k}": v for k, v in memory_bytes(compiled).items()})
        seconds, times, states = time_calls(compiled, states, batch_params, repeats)
        row["runs"] = runs
        row["vmap_s"], row["vmap_times_s"] = seconds, times
        row["vmap_steps_per_s"] = runs * updates * steps_per_update / seconds
        row["vmap_device_peak_bytes"] = device_peak_bytes()
    return row


def run_isolated(preset: str, opts: dict[str, Any]) -> dict[str, Any]:
    """:func:`bench_model` in a fresh Python process (fresh device allocator, so the GPU peak is per model)."""
    command = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps({"model": preset, "opts": opts})]
    process = subprocess.run(command, capture_output=True, text=True)
    for line in reversed(process.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER):])
    tail = (process.stderr or process.stdout).strip().splitlines()[-5:]
    return {"model": preset, "error": f"worker exited with {process.returncode}: " + " | ".join(tail)}


def run_safely(preset: str, opts: dict[str, Any]) -> dict[str, Any]:
    try:
        return bench_model(preset, opts)
    except Exception as error:  # noqa: BLE001 - e.g. out of device memory: record it, go on
        return {"model": preset, "error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"}


# --- report ------------------------------------------------------------------------------------


def mib(value: int | None) -> str:
    return "—" if value is None else f"{value / 2**20:,.0f} MiB"


def rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    """A markdown table (paste-able into docs/train_speed.md)."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |")
    print("|" + "|".join(("-" * (w + 2)) if i == 0 else ("-" * (w + 1) + ":") for i, w in enumerate(widths)) + "|")
    for row in rows:
        print("| " + " | ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) + " |")


def print_results(rows: list[dict[str, Any]], opts: dict[str, Any], gpu: bool) -> None:
    runs = opts["runs"]
    per_update = opts["num_envs"] * opts["rollout_length"]
    print(f"\nA2C on T-Maze (corridor {opts['corridor_length']}), {opts['num_envs']} envs × {opts['rollout_length']} "
          f"steps per update ({per_update:,} env steps), K = {opts['updates']} update(s) per timed call, median of "
          f"{opts['repeats']} call(s) after a warm-up; vmap over R = {runs} runs (steps/s summed over runs). "
          "memory = XLA estimate of the compiled call (arguments + outputs + temporaries − donated)"
          + ("; GPU peak = device peak_bytes_in_use." if gpu else "."))
    headers = ["model", "params", "single steps/s", "single memory", "single compile"]
    if runs > 0:
        headers += [f"vmap×{runs} steps/s", f"vmap×{runs} memory", "vmap compile"]
    if gpu:
        headers += ["GPU peak single", f"GPU peak vmap×{runs}"] if runs > 0 else ["GPU peak single"]
    table = []
    for r in rows:
        if "error" in r:
            table.append([r["model"], "failed: " + r["error"][:80]] + [""] * (len(headers) - 2))
            continue
        cells = [r["model"], f"{r['parameters'] / 1e6:.2f}M", rate(r["single_steps_per_s"]),
                 mib(r["single_xla_total_bytes"]), f"{r['single_compile_s']:.0f} s"]
        if runs > 0:
            cells += [rate(r["vmap_steps_per_s"]), mib(r["vmap_xla_total_bytes"]), f"{r['vmap_compile_s']:.0f} s"]
        if gpu:
            cells.append(mib(r["single_device_peak_bytes"]))
            if runs > 0:
                cells.append(mib(r["vmap_device_peak_bytes"]))
        table.append(cells)
    print_table(headers, table)


def comparison(rows: list[dict[str, Any]], device_kind: str, gpu: bool) -> dict[str, Any] | None:
    """AReLiT vs GTrXL-256 ratios and the thesis targets; None when either is missing."""
    by_name = {r["model"]: r for r in rows if "error" not in r}
    if "arelit" not in by_name or "gtrxl-256" not in by_name:
        return None
    a, g = by_name["arelit"], by_name["gtrxl-256"]
    out: dict[str, Any] = {}
    for mode in ("single", "vmap"):
        if f"{mode}_steps_per_s" not in a or f"{mode}_steps_per_s" not in g:
            continue
        out[f"{mode}_fps_ratio"] = a[f"{mode}_steps_per_s"] / g[f"{mode}_steps_per_s"]
        if a[f"{mode}_xla_total_bytes"] and g[f"{mode}_xla_total_bytes"]:
            out[f"{mode}_memory_ratio"] = a[f"{mode}_xla_total_bytes"] / g[f"{mode}_xla_total_bytes"]
        if gpu and a.get(f"{mode}_device_peak_bytes") and g.get(f"{mode}_device_peak_bytes"):
            out[f"{mode}_gpu_peak_ratio"] = a[f"{mode}_device_peak_bytes"] / g[f"{mode}_device_peak_bytes"]
    if "vmap_steps_per_s" in a:
        out["arelit_vmap_steps_per_s"] = a["vmap_steps_per_s"]
    out["h100"] = "H100" in device_kind
    return out


def print_comparison(comp: dict[str, Any] | None) -> None:
    if comp is None:
        print("\nAReLiT vs GTrXL-256: not compared (run both models: --models arelit gtrxl-256)")
        return

    def verdict(ok: bool) -> str:
        return "meets" if ok else "misses"

    print("\nAReLiT vs GTrXL-256 (thesis §5.2.3: +54 % FPS, −43 % memory; targets ≥ 1.5× steps/s, ≤ 0.6× memory):")
    for mode, label in (("single", "single run"), ("vmap", "vmapped runs")):
        if f"{mode}_fps_ratio" not in comp:
            continue
        parts = [f"steps/s {comp[f'{mode}_fps_ratio']:.2f}× ({verdict(comp[f'{mode}_fps_ratio'] >= TARGET_FPS_RATIO)} "
                 f"≥ {TARGET_FPS_RATIO}×)"]
        if f"{mode}_memory_ratio" in comp:
            ratio = comp[f"{mode}_memory_ratio"]
            parts.append(f"XLA memory {ratio:.2f}× ({verdict(ratio <= TARGET_MEMORY_RATIO)} ≤ {TARGET_MEMORY_RATIO}×)")
        if f"{mode}_gpu_peak_ratio" in comp:
            ratio = comp[f"{mode}_gpu_peak_ratio"]
            parts.append(f"GPU peak {ratio:.2f}× ({verdict(ratio <= TARGET_MEMORY_RATIO)} ≤ {TARGET_MEMORY_RATIO}×)")
        print(f"  {label:<13}: " + ", ".join(parts))
    if "arelit_vmap_steps_per_s" in comp:
        fps = comp["arelit_vmap_steps_per_s"]
        if comp["h100"]:
            print(f"  AReLiT vmapped: {fps:,.0f} steps/s ({verdict(fps >= TARGET_H100_VMAP_FPS)} the H100 target "
                  f"≥ {TARGET_H100_VMAP_FPS:,})")
        else:
            print(f"  AReLiT vmapped: {fps:,.0f} steps/s (the ≥ {TARGET_H100_VMAP_FPS:,} target is for an H100; "
                  "not assessed on this device)")


def save_json(path: str, meta: dict[str, Any], rows: list[dict[str, Any]], comp: dict[str, Any] | None,
              wall_s: float, complete: bool) -> None:
    results = {"meta": dict(meta, wall_s=wall_s, complete=complete), "models": rows, "arelit_vs_gtrxl256": comp}
    temporary = path + ".tmp"
    with open(temporary, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(temporary, path)


# --- main --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny models, 2 envs × 8 steps, K = 1, R = 2, 1 timed call: every row, mostly compilation")
    parser.add_argument("--models", nargs="*", choices=MODELS + list(VARIANTS),
                        help="presets to time (default all MODELS; VARIANTS such as relit-recurrent on request)")
    parser.add_argument("--updates", "-K", type=int, help="updates per timed call (default 1 on CPU, 8 on GPU)")
    parser.add_argument("--runs", "-R", type=int,
                        help="runs vmapped together (default 4 on CPU, 64 on GPU; 0 skips the vmapped measurement)")
    parser.add_argument("--repeats", type=int, help="timed calls per measurement (default 3)")
    parser.add_argument("--corridor-length", type=int, default=120)
    parser.add_argument("--max-episode-steps", type=int, default=1000)
    parser.add_argument("--num-envs", type=int, default=8, help="environments per run (thesis: 8)")
    parser.add_argument("--rollout-length", type=int, default=256, help="steps per rollout (thesis: 256)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-isolate", dest="isolate", action="store_false",
                        help="time every model in this process instead of one fresh subprocess per model")
    parser.add_argument("--json", metavar="PATH", help="save the results as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    if parser.parse_known_args()[0].smoke:
        # two models: every code path (a monoid model, GTrXL, the comparison line), a fraction of the compiling
        parser.set_defaults(models=["arelit", "gtrxl-256"], updates=1, runs=2, repeats=1, corridor_length=4,
                            num_envs=2, rollout_length=8)
    args = parser.parse_args()

    if args.worker:  # child process of run_isolated
        job = json.loads(args.worker)
        print(RESULT_MARKER + json.dumps(run_safely(job["model"], job["opts"])), flush=True)
        return

    import jax

    device = jax.devices()[0]
    gpu = device.platform == "gpu"
    if args.updates is None:
        args.updates = 8 if gpu else 1
    if args.runs is None:
        args.runs = 64 if gpu else 4
    if args.repeats is None:
        args.repeats = 3
    if args.updates < 1 or args.runs < 0 or args.repeats < 1:
        parser.error("--updates and --repeats must be ≥ 1, --runs ≥ 0")
    models = args.models or MODELS
    opts = {k: getattr(args, k) for k in ("updates", "runs", "repeats", "corridor_length", "max_episode_steps",
                                           "num_envs", "rollout_length", "seed", "smoke")}

    header = (f"device: {device.device_kind} ({device.platform}, {jax.device_count()} device(s)), "
              f"host: {platform.machine()} ({os.cpu_count()} CPUs), jax {jax.__version__}, "
              f"python {platform.python_version()}")
    print(header)
    print(f"models: {', '.join(models)}; K = {args.updates}, R = {args.runs}, repeats = {args.repeats}, "
          f"{'one subprocess per model' if args.isolate else 'in-process'} (progress on stderr)")
    meta = {"device": str(device), "device_kind": device.device_kind, "platform": device.platform,
            "jax": jax.__version__, "machine": platform.machine(), "cpus": os.cpu_count(),
            "python": platform.python_version(), "options": opts, "isolate": args.isolate}
    started = time.perf_counter()
    rows = []
    for preset in models:
        t0 = time.perf_counter()
        row = run_isolated(preset, opts) if args.isolate else run_safely(preset, opts)
        rows.append(row)
        if "error" in row:
            print(f"  {preset:<16} failed: {row['error']}", file=sys.stderr, flush=True)
        else:
            vmap = f", vmap×{args.runs} {row['vmap_steps_per_s']:,.0f} steps/s" if args.runs > 0 else ""
            print(f"  {preset:<16} single {row['single_steps_per_s']:,.0f} steps/s{vmap} "
                  f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        if args.json:  # after every model, so an interrupted run keeps what it measured
            save_json(args.json, meta, rows, None, time.perf_counter() - started, complete=False)
    print_results(rows, opts, gpu)
    comp = comparison(rows, device.device_kind, gpu)
    print_comparison(comp)
    total = time.perf_counter() - started
    print(f"\ntotal wall time {total / 60:.1f} min")
    if args.json:
        save_json(args.json, meta, rows, comp, total, complete=True)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
