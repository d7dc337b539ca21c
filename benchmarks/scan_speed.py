"""Scan speed: the return/GAE monoids against loops, and every memory model's training pass.

Part 1 — discounted return and GAE (monoid paper Thm. 3.3, App. D.1; Fig. 4 and
§3 report the speed-up) over one tape of random episodes, three ways:

* ``associative`` — :func:`memgym.agents.returns.discounted_return` /
  :func:`~memgym.agents.returns.generalized_advantage` jitted with
  ``method="associative"`` (``jax.lax.associative_scan`` over the resettable
  affine monoid);
* ``lax.scan`` — the same functions with ``method="sequential"``;
* ``episode loop`` — the baseline of the paper's Fig. 4 ("the standard way of
  iterating through a batch": jit-compiled, but a Python ``for`` loop over
  episodes because their lengths differ). The host finds the episode
  boundaries from the done flags, then makes one call per episode to a jitted
  function that slices that episode out of the device tape, runs a reverse
  ``lax.scan`` over it and writes the result into a (donated) output tape. The
  function is compiled once per distinct episode length during the warm-up.

An extra column times the plain per-step numpy loop that the unit tests use as
ground truth (``*_reference`` in ``tests/agents/return_oracles.py``).

Episodes have lengths drawn uniformly from ``1 … 2·mean − 1`` (the paper draws
them uniformly from one to a maximum length); each finished episode ends
terminated or truncated (time limit, bootstrapped from ``next_value``), and the
last one is cut off by the end of the tape. All methods are checked to agree.

Part 2 — every registered memory model (``memgym.memory.MODELS``) at width
``d`` (default 64), ``jax.vmap`` over a batch of streams (default 8): jitted
forward pass, and jitted forward + backward (gradient of the sum of outputs
w.r.t. the parameters), per call and in env steps per second, plus XLA's
temporary-buffer estimate of the backward pass. The monoid models have no
scan-method option (they call :func:`memgym.memory.monoid.scan_monoid` with
``method="auto"``), so this script times them twice, forcing each method by
overriding :func:`memgym.memory.monoid.default_scan_method` while tracing; the
row ``auto`` resolves to on this backend is marked ``*``.

Times are medians over at least three repeats (about 0.5 s of repeats per
measurement), each ended by ``block_until_ready``, after an untimed warm-up call
(the model functions are compiled ahead of time instead, and their compile time
is reported).

    python benchmarks/scan_speed.py [--smoke] [--json results.json] [--plot fig.png]

``--smoke``: tapes of 200 and 1,000 steps (episodes of mean length 4, the episode loop timed over
the first 500 steps and extrapolated), every model at width 8 on tapes of 16 steps, 2 streams,
one timed call per measurement: both parts in seconds plus compilation (a check that the script
runs, not a measurement). Given flags win over these.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from memgym import memory
from memgym.agents.returns import discounted_return, generalized_advantage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the per-step loops live in tests/
from tests.agents.return_oracles import discounted_return_reference, generalized_advantage_reference  # noqa: E402
from inference_cost import memax_missing  # noqa: E402  (benchmarks/ is on sys.path)
from memgym.memory import monoid as monoid_module

GAMMA, LAM = 0.99, 0.95

# --- timing ------------------------------------------------------------------------------------


def median_time(
    fn: Callable[[], Any], *, target_s: float, min_repeats: int, max_repeats: int, warmup: bool = True
) -> tuple[float, int]:
    """Median wall time of ``fn()`` (blocked until ready) and the repeat count.

    One untimed warm-up call first (it compiles a jitted function; skipped with
    ``warmup=False`` for functions compiled ahead of time). Repeats until about
    ``target_s`` seconds are spent, within ``[min_repeats, max_repeats]``.
    """
    if warmup:
        jax.block_until_ready(fn())
    times: list[float] = []
    while True:
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
        if len(times) >= max_repeats or (len(times) >= min_repeats and sum(times) >= target_s):
            return statistics.median(times), len(times)


def format_time(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def format_ratio(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "—"
    return f"{ratio:,.0f}×" if ratio >= 100 else f"{ratio:.2g}×" if ratio < 10 else f"{ratio:.1f}×"


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    print(line(headers))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))


# --- part 1: returns ---------------------------------------------------------------------------


def random_episode_tape(seed: int, length: int, mean_episode: int) -> dict[str, np.ndarray]:
    """A ``[length]`` tape of concatenated random episodes (numpy, float32 / bool).

    Episode lengths ~ uniform ``1 … 2·mean_episode − 1``; a finished episode ends
    terminated (70 %) or truncated (30 %); the tape's last episode is unfinished.
    """
    rng = np.random.default_rng(seed)
    done = np.zeros(length, bool)
    position = -1
    while True:
        position += int(rng.integers(1, 2 * mean_episode))
        if position >= length:
            break
        done[position] = True
    terminated = done & (rng.random(length) < 0.7)
    return {
        "reward": rng.normal(size=length).astype(np.float32),
        "value": rng.normal(size=length).astype(np.float32),
        "next_value": rng.normal(size=length).astype(np.float32),
        "terminated": terminated,
        "truncated": done & ~terminated,
    }


def episode_bounds(terminated: np.ndarray, truncated: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(start, length)`` of every episode on the tape (host side, from the done flags)."""
    ends = np.flatnonzero(terminated | truncated) + 1
    if ends.size == 0 or ends[-1] != terminated.size:
        ends = np.append(ends, terminated.size)
    begins = np.concatenate([[0], ends[:-1]])
    return begins, ends - begins


@functools.partial(jax.jit, static_argnames="length", donate_argnums=0)
def _episode_return(out, reward, next_value, terminated, start, gamma, *, length: int):
    """One episode's return-to-go by a reverse ``lax.scan``, written into ``out`` at ``start``."""
    rewards = jax.lax.dynamic_slice_in_dim(reward, start, length)
    last = start + length - 1
    following = jnp.where(terminated[last], 0.0, next_value[last])  # V after the episode's last step

    def step(following, r):
        g = r + gamma * following
        return g, g

    _, returns = jax.lax.scan(step, following, rewards, reverse=True)
    return jax.lax.dynamic_update_slice_in_dim(out, returns, start, 0)


@functools.partial(jax.jit, static_argnames="length", donate_argnums=0)
def _episode_gae(out, reward, value, next_value, terminated, start, gamma, lam, *, length: int):
    """One episode's GAE advantages by a reverse ``lax.scan``, written into ``out`` at ``start``."""
    piece = lambda x: jax.lax.dynamic_slice_in_dim(x, start, length)  # noqa: E731
    bootstrap = jnp.ones(length).at[-1].set(jnp.where(terminated[start + length - 1], 0.0, 1.0))
    delta = piece(reward) + gamma * bootstrap * piece(next_value) - piece(value)

    def step(following, d):
        a = d + gamma * lam * following
        return a, a

    _, advantages = jax.lax.scan(step, jnp.zeros(()), delta, reverse=True)
    return jax.lax.dynamic_update_slice_in_dim(out, advantages, start, 0)


def episode_loop(kind: str, tape: dict[str, jax.Array], done_host: tuple[np.ndarray, np.ndarray], num_episodes: int | None):
    """The Fig. 4 baseline: a Python loop of one jitted call per episode (the first ``num_episodes``)."""
    begins, lengths = episode_bounds(*done_host)
    if num_episodes is not None:
        begins, lengths = begins[:num_episodes], lengths[:num_episodes]
    out = jnp.zeros_like(tape["reward"])
    for start, length in zip(begins.tolist(), lengths.tolist()):
        if kind == "return":
            out = _episode_return(
                out, tape["reward"], tape["next_value"], tape["terminated"], start, GAMMA, length=length
            )
        else:
            out = _episode_gae(
                out, tape["reward"], tape["value"], tape["next_value"], tape["terminated"], start, GAMMA, LAM,
                length=length,
            )
    return out


def bench_returns(args: argparse.Namespace) -> list[dict[str, Any]]:
    monoid = {
        ("return", method): jax.jit(
            lambda t, m=method: discounted_return(t["reward"], t["terminated"], t["truncated"], t["next_value"], GAMMA, method=m)
        )
        for method in ("associative", "sequential")
    } | {
        ("gae", method): jax.jit(
            lambda t, m=method: generalized_advantage(
                t["reward"], t["value"], t["next_value"], t["terminated"], t["truncated"], GAMMA, LAM, method=m
            )[0]
        )
        for method in ("associative", "sequential")
    }
    timing = dict(target_s=args.target_s, min_repeats=args.min_repeats, max_repeats=args.max_repeats)
    rows = []
    for length in args.lengths:
        host = random_episode_tape(args.seed, length, args.mean_episode)
        tape = {k: jnp.asarray(v) for k, v in host.items()}
        done_host = (host["terminated"], host["truncated"])
        begins, lengths = episode_bounds(*done_host)
        # Cap the per-episode loop: time the episodes inside the first --loop-max-steps steps and
        # extrapolate linearly in steps.
        capped = args.loop_max_steps > 0 and length > args.loop_max_steps
        loop_episodes = int(np.searchsorted(begins + lengths, args.loop_max_steps, side="right")) if capped else None
        loop_steps = int((begins + lengths)[loop_episodes - 1]) if capped else length
        for kind in ("return", "gae"):
            row: dict[str, Any] = {"kind": kind, "length": length, "episodes": int(begins.size)}
            results = {}
            for method in ("associative", "sequential"):
                fn = monoid[(kind, method)]
                results[method] = np.asarray(fn(tape))
                row[method + "_s"], row[method + "_repeats"] = median_time(lambda: fn(tape), **timing)
            loop = lambda: episode_loop(kind, tape, done_host, loop_episodes)  # noqa: E731
            results["loop"] = np.asarray(loop())[:loop_steps]
            seconds, row["loop_repeats"] = median_time(loop, **timing)
            row["loop_timed_steps"] = loop_steps
            row["loop_timed_episodes"] = int(begins.size if loop_episodes is None else loop_episodes)
            row["loop_extrapolated"] = capped
            row["loop_s"] = seconds * length / loop_steps
            if length <= args.numpy_max_steps:
                if kind == "return":
                    reference = lambda: discounted_return_reference(  # noqa: E731
                        host["reward"], host["terminated"], host["truncated"], host["next_value"], GAMMA
                    )
                else:
                    reference = lambda: generalized_advantage_reference(  # noqa: E731
                        host["reward"], host["value"], host["next_value"], host["terminated"], host["truncated"], GAMMA, LAM
                    )
                results["numpy"] = reference()
                row["numpy_s"], row["numpy_repeats"] = median_time(reference, target_s=args.target_s, min_repeats=1, max_repeats=3)
            else:
                row["numpy_s"] = None
            want = results["sequential"]
            for name, got in results.items():
                np.testing.assert_allclose(got, want[: got.size], rtol=1e-3, atol=1e-3, err_msg=f"{kind} {name} length {length}")
            row["speedup_vs_loop"] = row["loop_s"] / row["associative_s"]
            row["speedup_vs_lax_scan"] = row["sequential_s"] / row["associative_s"]
            rows.append(row)
            print(f"  {kind:<6} T={length:>9,}: assoc {format_time(row['associative_s'])}, lax.scan "
                  f"{format_time(row['sequential_s'])}, loop {format_time(row['loop_s'])}"
                  f"{' (extrapolated)' if capped else ''}", file=sys.stderr, flush=True)
    return rows


def print_returns(rows: list[dict[str, Any]]) -> None:
    for kind, title in (("return", "Discounted return (γ = 0.99)"), ("gae", "GAE (γ = 0.99, λ = 0.95)")):
        print(f"\n{title}: median time per call; speed-up = other time / associative time")
        table = []
        for r in (r for r in rows if r["kind"] == kind):
            loop = format_time(r["loop_s"]) + (f" (≈, {r['loop_timed_episodes']:,} ep. timed)" if r["loop_extrapolated"] else "")
            table.append([
                f"{r['length']:,}", f"{r['episodes']:,}", format_time(r["associative_s"]), format_time(r["sequential_s"]),
                loop, format_time(r["numpy_s"]), format_ratio(r["speedup_vs_loop"]), format_ratio(r["speedup_vs_lax_scan"]),
            ])
        print_table(
            ["T", "episodes", "(a) associative", "(b) lax.scan", "(c) episode loop", "numpy per-step",
             "(a) vs (c)", "(a) vs (b)"],
            table,
        )


# --- part 2: memory models ---------------------------------------------------------------------


def model_configs(d: int) -> dict[str, dict[str, Any]]:
    """Moderate sizes of every registered model at width ``d``; chunk sizes stay at their defaults."""
    heads = 4
    attention = dict(features=d, num_layers=2, num_heads=heads, head_dim=d // heads)
    return {
        "linear_attention": dict(attention),
        "relit": dict(attention, eta=4),
        "arelit": dict(attention, eta=4, r=1),
        "s5": dict(features=d, state_size=d),
        "lru": dict(features=d, state_size=d),
        "ffm": dict(features=d, memory_size=32, context_size=4),
        "lstm": dict(features=d),
        "gru": dict(features=d),
        "gtrxl": dict(attention, memory_size=64),
        "mlp": dict(features=d),
        # the monoid paper's one-layer linear transformer (eq. 9–13); keys and values half the width, as its preset
        "linear_attention_monoid": dict(features=d, key_size=d // 2, value_size=d // 2),
        # memax's Gated DeltaNet (needs memgym[memax]), its own scan; hidden width d, keys round(sqrt(d)) wide.
        "memax": dict(model="GDN", features=d),
    }


@contextlib.contextmanager
def forced_scan_method(method: str | None) -> Iterator[list[str]]:
    """While active, ``scan_monoid(method="auto")`` resolves to ``method`` (``None``: the normal rule).

    Yields a list that records every resolution (so a trace shows whether a model uses the monoid scan).
    """
    original = monoid_module.default_scan_method
    calls: list[str] = []

    def resolve():
        calls.append(choice := method or original())
        return choice

    monoid_module.default_scan_method = resolve
    try:
        yield calls
    finally:
        monoid_module.default_scan_method = original


def episode_starts(seed: int, length: int, mean_episode: int) -> np.ndarray:
    """``start[length]`` start flags of a random episode tape: the step after each episode end, and step 0."""
    tape = random_episode_tape(seed, length, mean_episode)
    start = np.roll(tape["terminated"] | tape["truncated"], 1)
    start[0] = True
    return start


# models without a monoid scan
DEFAULT_LABEL = {"lstm": "lax.scan", "gru": "lax.scan", "gtrxl": "chunked attn", "mlp": "no scan",
                 "memax": "memax scan"}


def bench_models(args: argparse.Namespace) -> list[dict[str, Any]]:
    configs = model_configs(args.features)
    missing = set(memory.MODELS) - set(configs)
    if missing:
        raise RuntimeError(f"registered models without a size in model_configs: {sorted(missing)}")
    names = [n for n in memory.MODELS if not args.models or n in args.models]
    if "memax" in names and (why := memax_missing()) is not None:
        print(f"\nno memax rows: the memax extra is missing ({why})")
        names.remove("memax")
    auto = monoid_module.default_scan_method()
    timing = dict(target_s=args.target_s, min_repeats=args.min_repeats, max_repeats=args.max_repeats)
    rows = []
    for name in names:
        model = memory.make(name, **configs[name])
        carry = model.initialize_carry()
        batch_carry = jax.tree.map(lambda c: jnp.broadcast_to(c, (args.batch,) + jnp.shape(c)), carry)
        params = model.init(jax.random.key(0), jnp.zeros((2, args.in_features)), jnp.zeros(2, bool), carry)
        num_params = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(params))
        with forced_scan_method(None) as calls:
            jax.eval_shape(model.apply, params, jnp.zeros((4, args.in_features)), jnp.zeros(4, bool), carry)
        methods = ["associative", "sequential"] if calls else [None]
        batched = jax.vmap(model.apply, in_axes=(None, 0, 0, 0))

        def forward(params, x, start):
            return batched(params, x, start, batch_carry)[0]

        def loss(params, x, start):
            return jnp.sum(forward(params, x, start))

        for length in args.model_lengths:
            rng = np.random.default_rng(args.seed)
            x = jnp.asarray(rng.normal(size=(args.batch, length, args.in_features)).astype(np.float32))
            start = jnp.asarray(np.stack([episode_starts(args.seed + i, length, args.mean_episode) for i in range(args.batch)]))
            for method in methods:
                row: dict[str, Any] = {
                    "model": name, "config": configs[name], "params": num_params, "length": length, "batch": args.batch,
                    "method": method or DEFAULT_LABEL.get(name, "default"),
                    "auto": method is None or method == auto,
                }
                with forced_scan_method(method):  # the method is fixed when the function is traced
                    tic = time.perf_counter()
                    grad = jax.jit(jax.grad(loss)).lower(params, x, start).compile()
                    row["compile_backward_s"] = time.perf_counter() - tic
                    if args.forward:
                        fwd = jax.jit(forward).lower(params, x, start).compile()
                stats = grad.memory_analysis()
                row["backward_temp_bytes"] = int(stats.temp_size_in_bytes) if stats is not None else None
                row["forward_s"] = None
                if args.forward:
                    row["forward_s"], _ = median_time(lambda: fwd(params, x, start), warmup=False, **timing)
                row["backward_s"], row["backward_repeats"] = median_time(lambda: grad(params, x, start), warmup=False, **timing)
                row["steps_per_s"] = args.batch * length / row["backward_s"]
                rows.append(row)
                print(f"  {name:<16} T={length:>5} {row['method']:<11}: fwd {format_time(row['forward_s'])}, "
                      f"fwd+bwd {format_time(row['backward_s'])}", file=sys.stderr, flush=True)
    return rows


def print_models(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\nMemory models, d = {args.features}, vmap over {args.batch} streams, input width {args.in_features}: "
          "median time per call; steps/s = streams · T / (fwd+bwd time); temp = XLA's temporary buffers of the "
          "fwd+bwd function; compile = its compile time; * = the method `auto` picks here")
    table = [
        [
            r["model"], f"{r['length']:,}", r["method"] + (" *" if r["auto"] and r["method"] in ("associative", "sequential") else ""),
            format_time(r["forward_s"]), format_time(r["backward_s"]), f"{r['steps_per_s']:,.0f}",
            "—" if r["forward_s"] is None else f"{r['backward_s'] / r['forward_s']:.1f}",
            "—" if r["backward_temp_bytes"] is None else f"{r['backward_temp_bytes'] / 2**20:,.1f} MiB",
            f"{r['compile_backward_s']:.1f} s",
        ]
        for r in rows
    ]
    print_table(["model", "T", "scan", "forward", "fwd+bwd", "steps/s", "bwd/fwd", "temp", "compile"], table)


# --- plot, main --------------------------------------------------------------------------------


def plot_returns(rows: list[dict[str, Any]], path: str, header: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (kind, title) in zip(axes, (("return", "discounted return"), ("gae", "GAE"))):
        data = [r for r in rows if r["kind"] == kind]
        lengths = [r["length"] for r in data]
        ax.loglog(lengths, [r["associative_s"] for r in data], "o-", label="(a) associative scan (jit)")
        ax.loglog(lengths, [r["sequential_s"] for r in data], "s-", label="(b) lax.scan (jit)")
        ax.loglog(lengths, [r["loop_s"] for r in data], "^-", label="(c) per-episode loop of jitted calls")
        extrapolated = [r for r in data if r["loop_extrapolated"]]
        if extrapolated:
            ax.loglog([r["length"] for r in extrapolated], [r["loop_s"] for r in extrapolated], "^", color="white",
                      markeredgecolor="C2", label="(c) extrapolated")
        ax.set_title(title)
        ax.set_xlabel("tape length T (steps)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("median time per call (s)")
    axes[0].legend(fontsize=8)
    fig.suptitle(header, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nwrote {path}")


def int_list(text: str) -> list[int]:
    try:
        values = [int(float(v)) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="tiny tapes and models, one timed call each: both parts in seconds (plus compilation)")
    parser.add_argument("--lengths", type=int_list, default=[1_000, 10_000, 100_000, 1_000_000],
                        help="return/GAE tape lengths (default 1000,10000,100000,1000000)")
    parser.add_argument("--model-lengths", type=int_list, default=[256, 1024, 4096],
                        help="memory-model tape lengths (default 256,1024,4096)")
    parser.add_argument("--models", nargs="*", choices=sorted(memory.MODELS), help="models to time (default all)")
    parser.add_argument("--skip-returns", action="store_true", help="skip part 1")
    parser.add_argument("--skip-models", action="store_true", help="skip part 2")
    parser.add_argument("--mean-episode", type=int, default=100, help="mean episode length (default 100)")
    parser.add_argument("--loop-max-steps", type=int, default=0,
                        help="time the per-episode loop over the episodes in the first this-many steps only and "
                             "extrapolate linearly in steps (marked ≈ in the table); 0 (default): time the whole tape")
    parser.add_argument("--numpy-max-steps", type=int, default=1_000_000, help="longest tape for the numpy loop")
    parser.add_argument("--features", type=int, default=64, help="model width d (default 64)")
    parser.add_argument("--in-features", type=int, default=64, help="input width of the model tapes (default 64)")
    parser.add_argument("--batch", type=int, default=8, help="streams vmapped per model call (default 8)")
    parser.add_argument("--no-forward", dest="forward", action="store_false", help="skip the forward-only model timings")
    parser.add_argument("--target-s", type=float, default=0.5,
                        help="time to spend per measurement (default 0.5 s; at least --min-repeats calls)")
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument("--max-repeats", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="PATH", help="save the results as JSON")
    parser.add_argument("--plot", metavar="PATH", help="save a log-log plot of the return/GAE times (PNG)")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(lengths=[200, 1_000], model_lengths=[16], mean_episode=4, loop_max_steps=500, features=8,
                            in_features=8, batch=2, target_s=0.0, min_repeats=1, max_repeats=1)
    args = parser.parse_args()

    device = jax.devices()[0]
    header = (f"device: {device.device_kind} ({device.platform}, {jax.device_count()} device(s)), "
              f"host: {platform.machine()}, jax {jax.__version__}, python {platform.python_version()}")
    print(header)
    print(f"scan_monoid(method='auto') resolves to {monoid_module.default_scan_method()!r} on this backend")
    results: dict[str, Any] = {
        "meta": {"device": str(device), "device_kind": device.device_kind, "platform": device.platform,
                 "jax": jax.__version__, "machine": platform.machine(), "python": platform.python_version(),
                 "args": {k: v for k, v in vars(args).items() if k not in ("json", "plot")}},
    }
    if not args.skip_returns:
        print("\nPart 1: return monoid and GAE (progress on stderr)")
        results["returns"] = bench_returns(args)
        print_returns(results["returns"])
        if args.plot:
            plot_returns(results["returns"], args.plot, header)
    if not args.skip_models:
        print("\nPart 2: memory models (progress on stderr)")
        results["models"] = bench_models(args)
        print_models(results["models"], args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
