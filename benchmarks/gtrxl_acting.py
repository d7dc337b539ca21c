"""GTrXL acting cost: one streaming step and one A2C collect, with and without the key/value cache.

For the thesis GTrXL (d = 128, 4 layers, 4 heads × 64) with memory M = 128 and 256, this
times, side by side in one process:

* ``step`` — one streaming step (``T = 1``) of the memory model, vmapped over 8 streams, as
  the collector calls it: a ``lax.scan`` of 64 steps, jitted, median of ``--repeats`` calls
  after a warm-up, divided by 64;
* ``collect`` — ``A2CTrainer.collect`` of 8 environments × 256 steps on the T-Maze
  (corridor 120), the acting half of an A2C update.

``cached`` is the default (``kv_cache=True``: a step projects only its new row and reads the
memory rows' keys and values from the carry); ``recomputing`` is ``kv_cache=False``. The
cached steps start from a carry whose stamp matches the parameters, so they time the
common case; the rebuild after a parameter change is one recomputing step.

    python benchmarks/gtrxl_acting.py [--repeats 5] [--smoke]

``--smoke``: a GTrXL of width 16 (1 layer, 2 heads × 8) with memory M = 8 and 16, scans of 8
steps, collects of 2 environments × 16 steps, one timed call: every row in seconds (a check that
the script runs, not a measurement).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp

from memgym import memory
from memgym.agents.a2c import A2CConfig, A2CTrainer
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

THESIS_GTRXL = dict(features=128, num_layers=4, num_heads=4, head_dim=64)  # Table A.2
STREAMS, OBSERVATION = 8, 16


@dataclasses.dataclass(frozen=True)
class Setup:
    """What is timed: the model's sizes (without M), its memory sizes, the scan and the collect."""

    model: dict = dataclasses.field(default_factory=lambda: dict(THESIS_GTRXL))
    memory_sizes: tuple[int, ...] = (128, 256)
    scan_steps: int = 64
    num_envs: int = 8
    rollout_length: int = 256
    corridor_length: int = 120


THESIS = Setup()
SMOKE = Setup(model=dict(features=16, num_layers=1, num_heads=2, head_dim=8), memory_sizes=(8, 16), scan_steps=8,
              num_envs=2, rollout_length=16, corridor_length=8)


def median_seconds(call, repeats: int) -> float:
    jax.block_until_ready(call())  # warm-up (and compilation)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def step_ms(setup: Setup, memory_size: int, kv_cache: bool, repeats: int) -> float:
    model = memory.make("gtrxl", **setup.model, memory_size=memory_size, kv_cache=kv_cache)
    carry = model.initialize_carry()
    x, start = jnp.ones((STREAMS, 1, OBSERVATION)), jnp.zeros((STREAMS, 1), bool)
    params = model.init(jax.random.key(0), x[0], start[0], carry)
    step = jax.vmap(model.apply, in_axes=(None, 0, 0, 0))

    @jax.jit
    def steps(carries):
        def body(carries, _):
            y, carries = step(params, x, start, carries)
            return carries, y

        return jax.lax.scan(body, carries, None, setup.scan_steps)

    carries = jax.tree.map(lambda leaf: jnp.stack([leaf] * STREAMS), carry)
    carries, _ = steps(carries)  # a filled memory whose cache matches the parameters
    return median_seconds(lambda: steps(carries), repeats) / setup.scan_steps * 1e3


def collect_ms(setup: Setup, memory_size: int, kv_cache: bool, repeats: int) -> float:
    config = A2CConfig(
        memory="gtrxl", memory_config=json.dumps({**setup.model, "memory_size": memory_size, "kv_cache": kv_cache}),
        num_envs=setup.num_envs, rollout_length=setup.rollout_length,
    )
    env_params = tmaze_params(setup.corridor_length, max_episode_steps=1000)
    trainer = A2CTrainer(config, TMazeJax(), example_params=env_params)
    state = jax.jit(trainer.init)(jax.random.key(0), env_params)
    collect = jax.jit(lambda state: trainer.collect(state, env_params, trainer.acting(state)[0]))
    return median_seconds(lambda: collect(state), repeats) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per measurement (median)")
    parser.add_argument("--smoke", action="store_true",
                        help="a GTrXL of width 16 with M = 8, 16, short scans and collects, 1 timed call: seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(repeats=1)
    args = parser.parse_args()
    setup = SMOKE if args.smoke else THESIS
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; GTrXL {setup.model}")
    collect = f"collect of {setup.num_envs} × {setup.rollout_length} steps (ms)"
    print(f"| M | form | step of {STREAMS} streams (ms) | {collect} |")
    print("|---:|---|---:|---:|")
    for memory_size in setup.memory_sizes:
        results = {}
        for kv_cache in (False, True):
            results[kv_cache] = (step_ms(setup, memory_size, kv_cache, args.repeats),
                                 collect_ms(setup, memory_size, kv_cache, args.repeats))
            form = "cached" if kv_cache else "recomputing"
            step, collect = results[kv_cache]
            print(f"| {memory_size} | {form} | {step:.2f} | {collect:,.0f} |", flush=True)
        (step_off, collect_off), (step_on, collect_on) = results[False], results[True]
        print(f"| {memory_size} | cache speed-up | {step_off / step_on:.2f}× | {collect_off / collect_on:.2f}× |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
