"""Cost of memgym's POPGym wrapper: steps/s of raw popgym envs, of the wrapper now and of the
wrapper at another git revision, side by side in one run.

For each task the same pre-drawn random actions are played on the raw upstream class
(``popgym.envs.<Name>()``), on this checkout's :class:`memgym.envs.popgym.PopGymEnv`
around it and, with ``--compare-ref REF``, on ``PopGymEnv`` as ``memgym/envs/popgym.py``
was at ``REF`` (read with ``git show REF:memgym/envs/popgym.py`` and loaded as a module
of its own), resetting at each episode end. The two wrappers must produce the same
observations, rewards and ends for the same seed and actions (checked first). Timed runs
alternate between the variants (the order rotates every repeat) so that load drifting on
a shared machine hits all alike; the table shows the best run of each (on a busy machine
the least disturbed one; ``--median`` shows medians).

End to end: a tiny agent (a jitted JAX GRU cell of 64 units and a linear head, batch 1,
the cheapest realistic per-step policy call of a host loop) is timed alone and called on
every observation (``agent + env`` steps/s, both wrappers); and with ``--compare-ref``
memgym's own host training loop (PPO with the ``tiny-gru`` memory on 8 envs) is timed
with each wrapper, alternating updates.

    python benchmarks/popgym_overhead.py --compare-ref 28c9c7b [--steps 500] [--repeats 60] [--smoke]

``--smoke``: 50 steps, 1 repeat, 1 timed training update per wrapper, and ``--compare-ref HEAD``
unless a revision is given, so every column and both tables run, in seconds (a check that the
script runs, not a measurement). Given flags win over these.

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
                "BattleshipEasy", "PositionOnlyCartPoleEasy", "NoisyPositionOnlyPendulumEasy")
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


def agent_alone(obs, agent, actions: list) -> float:
    """Seconds for ``len(actions)`` agent steps on one observation."""
    start = time.perf_counter()
    for _ in actions:
        agent(obs)
    return time.perf_counter() - start


def measure(name: str, old: types.ModuleType | None, steps: int, repeats: int, agent: bool,
            median: bool) -> dict[str, float]:
    """Steps/s of each variant: ``raw``, ``after``, ``before`` and, with ``agent``, ``agent``
    (the tiny agent alone) and ``agent+after`` / ``agent+before``."""
    cls = _popgym_class(name)
    envs = {"raw": cls(), "after": PopGymEnv(cls())}
    if old is not None:
        envs["before"] = old.PopGymEnv(cls())
    envs["raw"].action_space.seed(0)
    actions = [envs["raw"].action_space.sample() for _ in range(steps)]
    if old is not None:
        check_same_episodes(envs["before"], envs["after"], actions[:2000])
    runs = {key: (play, (env,)) for key, env in envs.items()}
    if agent:
        act = tiny_agent(envs["after"].observation_space.shape[0])
        first = envs["after"].reset(seed=0)[0]
        act(first)  # compile
        runs["agent"] = (agent_alone, (first, act))
        runs.update({f"agent+{key}": (play_with_agent, (envs[key], act)) for key in envs if key != "raw"})
    seconds: dict[str, list[float]] = {key: [] for key in runs}
    for how, arguments in runs.values():  # warm-up
        how(*arguments, actions[: min(steps, 500)])
    order = list(runs)
    for repeat in range(repeats):
        for key in order[repeat % len(order) :] + order[: repeat % len(order)]:
            how, arguments = runs[key]
            seconds[key].append(how(*arguments, actions))
    pick = statistics.median if median else min
    return {key: steps / pick(values) for key, values in seconds.items()}


def measure_training(name: str, module_of: dict[str, types.ModuleType], updates: int, memory: str = "tiny-gru",
                     num_envs: int = 8, rollout_length: int = 32) -> dict[str, float]:
    """Environment steps/s of memgym's host training loop (PPO with ``memory``, ``num_envs`` envs in a
    ``SyncVectorEnv``) on task ``name``, for each wrapper module in ``module_of``; updates
    alternate between the wrappers (the order rotating), after one compiling update each."""
    import gymnasium as gym

    from memgym.agents.host import HostLoop
    from memgym.agents.ppo import PPOConfig

    config = PPOConfig(memory=memory, num_envs=num_envs, rollout_length=rollout_length, total_steps=10**9)
    loops = {}
    for key, module in module_of.items():
        envs = gym.vector.SyncVectorEnv([lambda module=module: module.PopGymEnv(name)] * num_envs,
                                        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
        loops[key] = HostLoop.for_config(config, envs)
        loops[key].update()  # compiles
    seconds: dict[str, list[float]] = {key: [] for key in loops}
    order = list(loops)
    for update in range(updates):
        for key in order[update % len(order) :] + order[: update % len(order)]:
            start = time.perf_counter()
            loops[key].update()
            seconds[key].append(time.perf_counter() - start)
    return {key: num_envs * rollout_length / min(values) for key, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare-ref", metavar="GIT_REF", help="also time PopGymEnv as it was at this revision")
    parser.add_argument("--steps", type=int, default=500, help="steps per timed run (short runs: more of them undisturbed)")
    parser.add_argument("--repeats", type=int, default=60, help="timed runs per variant (the best is shown)")
    parser.add_argument("--median", action="store_true", help="show the median run instead of the best")
    parser.add_argument("--smoke", action="store_true",
                        help="50 steps, 1 repeat, 1 training update, --compare-ref HEAD: every table in seconds")
    parser.add_argument("--no-agent", action="store_true", help="skip the end-to-end columns (no JAX)")
    parser.add_argument("--envs", nargs="*", default=list(DEFAULT_ENVS), help="popgym class names")
    parser.add_argument("--train", nargs="*", default=["RepeatPreviousEasy", "CountRecallEasy"], metavar="NAME",
                        help="tasks of the training-loop comparison (with --compare-ref; none: skip it)")
    parser.add_argument("--train-updates", type=int, default=40, help="timed PPO updates per wrapper (best shown)")
    parser.add_argument("--train-memory", default="tiny-gru", help="memory model of the training loop")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(steps=50, repeats=1, train_updates=1, compare_ref="HEAD")
    args = parser.parse_args()
    steps, repeats = args.steps, args.repeats
    old = load_module_at(args.compare_ref) if args.compare_ref else None
    agent = not args.no_agent

    load_before = os.getloadavg()
    print(f"popgym wrapper cost ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"numpy {np.__version__}); {steps} random-action steps x {repeats} repeats, "
          f"{'median' if args.median else 'best'} run; before = PopGymEnv at {args.compare_ref or '(not measured)'}, "
          "after = this checkout; steps/s unless marked\n")
    columns = ["task", "raw popgym"] + (["before"] if old else []) + ["after"]
    columns += (["after / before", "µs added/step, before"] if old else []) + ["µs added/step, after"]
    if agent:
        columns += (["agent + before"] if old else []) + ["agent + after"]
        columns += ["end to end after / before", "(after − before) / agent step"] if old else []
    print("| " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * (len(columns) - 1))
    agent_us = []
    for name in args.envs:
        rate = measure(name, old, steps, repeats, agent, args.median)
        added = {key: (1 / rate[key] - 1 / rate["raw"]) * 1e6 for key in ("before", "after") if key in rate}
        cells = [name.removesuffix("Easy") if name.endswith("Easy") else name, f"{rate['raw']:,.0f}"]
        cells += ([f"{rate['before']:,.0f}"] if old else []) + [f"{rate['after']:,.0f}"]
        cells += [f"{rate['after'] / rate['before']:.2f}", f"{added['before']:.2f}"] if old else []
        cells += [f"{added['after']:.2f}"]
        if agent:
            agent_us.append(1e6 / rate["agent"])
            cells += ([f"{rate['agent+before']:,.0f}"] if old else []) + [f"{rate['agent+after']:,.0f}"]
            if old:
                cells += [f"{rate['agent+after'] / rate['agent+before']:.3f}",
                          f"{(added['after'] - added['before']) / agent_us[-1]:.1%}"]
        print("| " + " | ".join(cells) + " |", flush=True)
    if old is not None and args.train:
        print(f"\nmemgym's host training loop (PPO, {args.train_memory}, 8 envs x 32 steps an update), "
              "env steps/s, best update:\n")
        print("| task | before | after | after / before |\n|---|---:|---:|---:|")
        for name in args.train:
            rate = measure_training(name, {"before": old, "after": sys.modules[PopGymEnv.__module__]},
                                    args.train_updates, args.train_memory)
            label = name.removesuffix("Easy") if name.endswith("Easy") else name
            print(f"| {label} | {rate['before']:,.0f} | {rate['after']:,.0f} | {rate['after'] / rate['before']:.3f} |",
                  flush=True)
    load_after = os.getloadavg()
    if agent:
        print(f"\ntiny agent alone (jitted GRU-64 + head, batch 1): {min(agent_us):.1f} µs a step at best, "
              f"{statistics.median(agent_us):.1f} µs median over the tasks")
    print(f"load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{', '.join(f'{x:.2f}' for x in load_after)} after; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
