"""Cost of memgym's POPGym wrapper: steps/s of raw popgym envs, of the wrapper now and of the
wrapper at another git revision, side by side in one run.

For each task the same pre-drawn random actions are played on the raw upstream class
(``popgym.envs.<Name>()``), on this checkout's :class:`memgym.envs.popgym.PopGymEnv`
around it and, with ``--compare-ref REF``, on ``PopGymEnv`` as ``memgym/envs/popgym.py``
was at ``REF`` (read with ``git show REF:memgym/envs/popgym.py`` and loaded as a module
of its own), resetting at each episode end. The two wrappers must produce the same
observations, rewards and ends for the same seed and actions (checked first). Timed runs
alternate between the variants (the order rotates every repeat) so that load drifting on
a shared machine hits all alike; the table shows medians.

End to end: a tiny agent (a jitted JAX GRU cell of 64 units and a linear head, batch 1,
the cheapest realistic per-step policy call of a host loop) is timed on each task's
observations, and ``agent + env`` steps/s is reported for both wrappers.

    python benchmarks/popgym_overhead.py --compare-ref 28c9c7b [--steps 5000] [--repeats 9] [--quick]

Needs the ``popgym`` extra (and JAX for the agent column; ``--no-agent`` skips it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

from memgym.envs.popgym import PopGymEnv, _popgym_class

DEFAULT_ENVS = ("RepeatPreviousEasy", "RepeatFirstEasy", "CountRecallEasy", "AutoencodeEasy",
                "BattleshipEasy", "PositionOnlyCartPoleEasy")
MODULE_PATH = "memgym/envs/popgym.py"


def load_module_at(ref: str) -> types.ModuleType:
    """``memgym/envs/popgym.py`` as it was at git revision ``ref``, as a separate module."""
    root = Path(__file__).resolve().parent.parent
    shown = subprocess.run(["git", "show", f"{ref}:{MODULE_PATH}"], cwd=root, capture_output=True, text=True,
                           check=False)
    if shown.returncode != 0:
        raise SystemExit(f"--compare-ref {ref}: git show failed: {shown.stderr.strip()}")
    name = f"memgym_popgym_at_{ref.replace('/', '_').replace('~', '_').replace('^', '_')}"
    module = types.ModuleType(name)
    module.__file__ = f"{ref}:{MODULE_PATH}"
    sys.modules[name] = module
    exec(compile(shown.stdout, module.__file__, "exec"), module.__dict__)  # noqa: S102  (our own file at REF)
    return module


def play(env, actions: list) -> float:
    """Seconds to play ``actions`` on ``env`` (reset at episode ends)."""
    env.reset(seed=0)
    step, reset = env.step, env.reset
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            reset()
    return time.perf_counter() - start


def check_same_episodes(first, second, actions: list) -> None:
    """Both wrapped envs give the same observations, rewards and ends for the same seed and actions."""
    a, _ = first.reset(seed=0)
    b, _ = second.reset(seed=0)
    for action in actions:
        if not np.array_equal(a, b):
            raise RuntimeError(f"the wrappers disagree: {a} vs {b}")
        a, ra, ta, ua, _ = first.step(action)
        b, rb, tb, ub, _ = second.step(action)
        if (ra, ta, ua) != (rb, tb, ub):
            raise RuntimeError(f"the wrappers disagree: {(ra, ta, ua)} vs {(rb, tb, ub)}")
        if ta or ua:
            a, _ = first.reset(seed=1)
            b, _ = second.reset(seed=1)


def tiny_agent(obs_size: int, hidden: int = 64):
    """``act(obs) -> int``: one jitted GRU step (Cho et al. 2014) and a linear head, batch 1."""
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.key(0), 3)
    params = {
        "input": jax.random.normal(keys[0], (obs_size, 3 * hidden)) / np.sqrt(obs_size),
        "recurrent": jax.random.normal(keys[1], (hidden, 3 * hidden)) / np.sqrt(hidden),
        "head": jax.random.normal(keys[2], (hidden, 4)) / np.sqrt(hidden),
    }

    @jax.jit
    def step(params, h, x):
        gx, gh = x @ params["input"], h @ params["recurrent"]
        z = jax.nn.sigmoid(gx[:hidden] + gh[:hidden])  # update gate
        r = jax.nn.sigmoid(gx[hidden : 2 * hidden] + gh[hidden : 2 * hidden])  # reset gate
        n = jnp.tanh(gx[2 * hidden :] + r * gh[2 * hidden :])
        h = (1 - z) * n + z * h
        return h, jnp.argmax(h @ params["head"])

    state = {"h": jnp.zeros(hidden)}

    def act(obs) -> int:
        state["h"], action = step(params, state["h"], jnp.asarray(obs))
        return int(action)  # waits for the result, as a host loop must

    return act


def play_with_agent(env, agent, actions: list) -> float:
    """Seconds to play ``actions`` on ``env`` with ``agent`` called on every observation
    (its output is discarded: the pre-drawn actions keep the episodes identical)."""
    obs, _ = env.reset(seed=0)
    step, reset = env.step, env.reset
    start = time.perf_counter()
    for action in actions:
        agent(obs)
        obs, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            obs, _ = reset()
    return time.perf_counter() - start


def measure(name: str, old: types.ModuleType | None, steps: int, repeats: int, agent: bool) -> dict[str, float]:
    cls = _popgym_class(name)
    raw = cls()
    variants = {"raw": raw, "after": PopGymEnv(cls())}
    if old is not None:
        variants["before"] = old.PopGymEnv(cls())
    raw.action_space.seed(0)
    actions = [raw.action_space.sample() for _ in range(steps)]
    if old is not None:
        check_same_episodes(variants["before"], variants["after"], actions[:2000])
    runs = {key: (play, env, None) for key, env in variants.items()}
    if agent:
        act = tiny_agent(variants["after"].observation_space.shape[0])
        act(variants["after"].reset(seed=0)[0])  # compile
        runs.update({f"agent+{key}": (play_with_agent, variants[key], act) for key in variants if key != "raw"})
    seconds: dict[str, list[float]] = {key: [] for key in runs}

    def run(key: str, actions: list) -> float:
        how, env, act = runs[key]
        return how(env, actions) if act is None else how(env, act, actions)

    for key in runs:  # warm-up
        run(key, actions[: min(steps, 500)])
    order = list(runs)
    for repeat in range(repeats):
        for key in order[repeat % len(order) :] + order[: repeat % len(order)]:
            seconds[key].append(run(key, actions))
    return {key: steps / statistics.median(values) for key, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare-ref", metavar="GIT_REF", help="also time PopGymEnv as it was at this revision")
    parser.add_argument("--steps", type=int, default=5_000, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=9, help="timed runs per variant (median)")
    parser.add_argument("--quick", action="store_true", help="1000 steps, 3 repeats")
    parser.add_argument("--no-agent", action="store_true", help="skip the end-to-end column (no JAX)")
    parser.add_argument("--envs", nargs="*", default=list(DEFAULT_ENVS), help="popgym class names")
    args = parser.parse_args()
    steps, repeats = (1000, 3) if args.quick else (args.steps, args.repeats)
    old = load_module_at(args.compare_ref) if args.compare_ref else None
    agent = not args.no_agent

    load_before = os.getloadavg()
    print(f"popgym wrapper cost ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"numpy {np.__version__}); {steps} random-action steps x {repeats} repeats, median steps/s; "
          f"before = PopGymEnv at {args.compare_ref or '(not measured)'}, after = this checkout\n")
    head = "| task | raw popgym | after | µs added/step (after) |"
    rule = "|---|---:|---:|---:|"
    if old is not None:
        head += " before | µs added/step (before) | after / before |"
        rule += "---:|---:|---:|"
    if agent:
        head += " agent + after |" + (" agent + before | end to end after / before |" if old is not None else "")
        rule += "---:|" + ("---:|---:|" if old is not None else "")
    print(head)
    print(rule)
    for name in args.envs:
        rates = measure(name, old, steps, repeats, agent)
        raw, after = rates["raw"], rates["after"]
        row = f"| {name} | {raw:,.0f} | {after:,.0f} | {(1 / after - 1 / raw) * 1e6:.2f} |"
        if old is not None:
            before = rates["before"]
            row += f" {before:,.0f} | {(1 / before - 1 / raw) * 1e6:.2f} | {after / before:.2f} |"
        if agent:
            row += f" {rates['agent+after']:,.0f} |"
            if old is not None:
                row += f" {rates['agent+before']:,.0f} | {rates['agent+after'] / rates['agent+before']:.3f} |"
        print(row, flush=True)
    load_after = os.getloadavg()
    print(f"\nload average (1, 5, 15 min): before {', '.join(f'{x:.2f}' for x in load_before)}; "
          f"after {', '.join(f'{x:.2f}' for x in load_after)}")


if __name__ == "__main__":
    main()
