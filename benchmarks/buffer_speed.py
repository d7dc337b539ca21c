"""Replay throughput: tape-based (TBB) vs segment-based (SBB) batching, and SBB's padding.

Both buffers hold the same number of transition slots (``--capacity``, default 1M):
:class:`memgym.buffers.tape.TapeReplay` with that capacity and
:class:`memgym.buffers.segment.SegmentReplay` with ``capacity // L`` rows of length
``L`` (monoid paper §4.1 and §5). A transition is a POPGym-sized record (an
8-float observation, an action, a reward and a done flag).

* ``add``: the jitted ``add`` of one ``--batch``-sized chunk (default 1000)
  into a full buffer (the state is donated, so the buffer is updated in place),
  in transitions per second. The chunks hold episodes of ``--episode-length``
  steps (default 51, POPGym RepeatFirst/CountRecall Easy), crossing chunk
  boundaries as a collector would produce them.
* ``sample``: the jitted ``sample`` of a batch of ``--batch`` transitions (SBB:
  ``batch // L`` segments, rounded down), in transitions per second, and the
  *useful* rate — real (unpadded) transitions per second, the rate that matters
  to a learner.
* ``padding``: the fraction of SBB's stored slots that are padding after the
  buffer was filled with episodes of each POPGym task's length (read from the
  stored masks, not computed), for the episode lengths of RepeatFirst and
  CountRecall (Easy/Medium/Hard; measured with ``memgym.envs.popgym`` when
  popgym is installed, otherwise the known lengths of popgym 1.0.7). TBB stores
  no padding.

Times are medians of at least five calls (about 0.5 s per measurement) after a
warm-up call, each ended by ``block_until_ready``.

    python benchmarks/buffer_speed.py [--capacity 1000000] [--batch 1000] [--json out.json] [--smoke]

``--smoke``: capacity 10,000 (the least that holds a batch of 100 in every SBB), batch 100, two timed
calls per measurement, padding read after 2 episodes (episodes of one length pad alike): every
table in seconds, a check that the script runs rather than a measurement.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from memgym.buffers.segment import SegmentReplay
from memgym.buffers.tape import TapeReplay

SEGMENT_LENGTHS = (10, 20, 50, 100)
# popgym 1.0.7 episode lengths (steps until the episode ends), used if popgym is not installed.
POPGYM_LENGTHS = {
    "RepeatFirstEasy": 51, "RepeatFirstMedium": 415, "RepeatFirstHard": 831,
    "CountRecallEasy": 51, "CountRecallMedium": 103, "CountRecallHard": 207,
}


def measured_popgym_lengths() -> tuple[dict[str, int], str]:
    """Episode length of each task, from one episode of the wrapped env (they are fixed per task)."""
    try:
        import gymnasium

        import memgym.envs.popgym  # noqa: F401  (registers the tasks)
    except ImportError:
        return dict(POPGYM_LENGTHS), "popgym 1.0.7 (not installed here: known lengths)"
    lengths = {}
    for name in POPGYM_LENGTHS:
        env = gymnasium.make(f"memgym/popgym-{name}-v0")
        env.reset(seed=0)
        env.action_space.seed(0)
        steps, done = 0, False
        while not done:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            steps, done = steps + 1, terminated or truncated
        lengths[name] = steps
        env.close()
    return lengths, "measured from the wrapped popgym envs"


def transitions(n: int, offset: int, episode_length: int) -> tuple[dict, jax.Array]:
    """``n`` transitions of a stream of ``episode_length``-step episodes, from stream step ``offset``."""
    t = np.arange(offset, offset + n)
    start = t % episode_length == 0
    data = {
        "obs": np.random.default_rng(offset).standard_normal((n, 8)).astype(np.float32),
        "action": (t % 4).astype(np.int32),
        "reward": np.zeros(n, np.float32),
        "done": (t % episode_length) == episode_length - 1,
    }
    return jax.device_put(data), jnp.asarray(start)


def example() -> dict:
    return {"obs": np.zeros(8, np.float32), "action": np.int32(0), "reward": np.float32(0), "done": False}


def fill(buffer, state, episode_length: int, chunk: int, total: int):
    add = jax.jit(buffer.add, donate_argnums=0)
    offset = 0
    while offset < total:
        data, start = transitions(chunk, offset, episode_length)
        state = add(state, data, start)
        offset += chunk
    return jax.block_until_ready(state), offset


def timed(call, *, min_calls: int = 5, min_seconds: float = 0.5) -> float:
    """Median seconds per ``call()`` (``call`` blocks on its result)."""
    call()
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - started < min_seconds:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def throughput(buffer, capacity: int, batch: int, episode_length: int, **timing) -> dict:
    """Add and sample rates of ``buffer`` once it is full (``timing``: :func:`timed`'s keywords)."""
    state, offset = fill(buffer, buffer.init(example()), episode_length, batch, capacity)
    add = jax.jit(buffer.add, donate_argnums=0)
    chunks = [transitions(batch, offset + i * batch, episode_length) for i in range(8)]
    holder = {"state": state, "i": 0}

    def add_once():
        data, start = chunks[holder["i"] % len(chunks)]
        holder["state"] = jax.block_until_ready(add(holder["state"], data, start))
        holder["i"] += 1

    add_seconds = timed(add_once, **timing)
    state = holder["state"]
    segment = getattr(buffer, "segment_length", None)
    size = batch if segment is None else (batch // segment) * segment
    sample = jax.jit(lambda s, k: buffer.sample(s, k, size))
    keys = iter(jax.random.split(jax.random.key(0), 100_000))
    last = {}

    def sample_once():
        last["batch"] = jax.block_until_ready(sample(state, next(keys)))

    sample_seconds = timed(sample_once, **timing)
    real = float(np.asarray(last["batch"].mask).sum())
    return {
        "add_per_s": batch / add_seconds,
        "sample_per_s": size / sample_seconds,
        "useful_sample_per_s": real / sample_seconds,
        "add_ms": 1e3 * add_seconds,
        "sample_ms": 1e3 * sample_seconds,
    }


def padding(segment_length: int, episode_length: int, slots: int = 100_000, max_episodes: int | None = None) -> float:
    """Fraction of stored SBB slots that are padding, read from the masks after filling.

    The buffer is filled with whole episodes, at most ``max_episodes`` of them (default: as many as fit);
    episodes of one length all pad alike, so a few give the same fraction as a full buffer.
    """
    rows = slots // segment_length
    buffer = SegmentReplay(rows, segment_length)
    # Whole episodes only, and no more rows than the buffer has (nothing overwritten).
    per_episode = -(-episode_length // segment_length)
    episodes = max(rows // per_episode, 1)
    if max_episodes is not None:
        episodes = min(episodes, max_episodes)
    state, _ = fill(buffer, buffer.init(example()), episode_length, episode_length, episodes * episode_length)
    used = min(int(state.rows_used), rows)
    return 1.0 - float(np.asarray(state.mask[:used]).sum()) / (used * segment_length)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=int, default=1_000_000, help="transition slots per buffer")
    parser.add_argument("--batch", type=int, default=1000, help="transitions per add and per sample")
    parser.add_argument("--episode-length", type=int, default=51, help="episode length while timing")
    parser.add_argument("--json", default=None, help="also write the results here")
    parser.add_argument("--smoke", action="store_true",
                        help="capacity 10,000, batch 100, 2 timed calls, padding from 2 episodes: a run of seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(capacity=10_000, batch=100)
    args = parser.parse_args()
    timing = dict(min_calls=2, min_seconds=0.0) if args.smoke else {}
    fill_episodes = 2 if args.smoke else None
    for name in ("capacity", "batch", "episode_length"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")

    device = jax.devices()[0]
    print(f"# {platform.machine()} {platform.processor() or ''} · jax {jax.__version__} · {device.platform} "
          f"({device.device_kind}) · capacity {args.capacity:,} · batch {args.batch:,} · "
          f"episode length {args.episode_length}")
    rows = {"TBB": throughput(TapeReplay(args.capacity), args.capacity, args.batch, args.episode_length, **timing)}
    for length in SEGMENT_LENGTHS:
        buffer = SegmentReplay(args.capacity // length, length)
        rows[f"SBB L={length}"] = throughput(buffer, args.capacity, args.batch, args.episode_length, **timing)
    print("\n| buffer | add (transitions/s) | add (ms/call) | sample (transitions/s) | sample (ms/call) "
          "| useful sample (real transitions/s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['add_per_s']:,.0f} | {r['add_ms']:.2f} | {r['sample_per_s']:,.0f} | "
              f"{r['sample_ms']:.3f} | {r['useful_sample_per_s']:,.0f} |")

    lengths, source = measured_popgym_lengths()
    pads = {task: {length: padding(length, steps, max_episodes=fill_episodes) for length in SEGMENT_LENGTHS}
            for task, steps in lengths.items()}
    print(f"\nSBB padding: fraction of stored slots that are padding (episode lengths {source}; TBB: 0)\n")
    print("| task | episode length | " + " | ".join(f"L={length}" for length in SEGMENT_LENGTHS) + " |")
    print("|---|---:|" + "---:|" * len(SEGMENT_LENGTHS))
    for task, steps in lengths.items():
        print(f"| {task} | {steps} | " + " | ".join(f"{pads[task][length]:.1%}" for length in SEGMENT_LENGTHS) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"throughput": rows, "padding": pads, "episode_lengths": lengths, "device": str(device),
                       "capacity": args.capacity, "batch": args.batch}, f, indent=2)


if __name__ == "__main__":
    main()
