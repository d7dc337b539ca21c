"""Cost of memgym's POPGym wrapper: steps per second wrapped vs the raw popgym env.

For a few popgym tasks, the same pre-drawn random actions are played on the raw
upstream class (``popgym.envs.<Name>()``) and on :class:`memgym.envs.popgym.PopGymEnv`
around it (with and without the previous action in the observation), resetting
at each episode end; and, as users make them, popgym's own registered id
(``gymnasium.make("popgym-<Name>-v0")``) against memgym's
(``gymnasium.make("memgym/popgym-<Name>-v0")``). Both ids are registered with
``order_enforce=False``, so both ``make`` variants are the env inside the same
single ``PassiveEnvChecker`` (the script prints the two wrapper stacks and stops if
they differ): like with like. Runs alternate between the variants; the table shows
the median of the repeats and the wrapper's overhead per step (time wrapped /
time raw - 1, and the difference in microseconds per step).

    python benchmarks/popgym_overhead.py [--steps 5000] [--repeats 15] [--quick]

Needs the ``popgym`` extra.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
import warnings

import gymnasium as gym
import numpy as np

from memgym.envs.popgym import PopGymEnv, _popgym_class, popgym_env_id

DEFAULT_ENVS = (
    "RepeatFirstEasy",
    "RepeatPreviousEasy",
    "CountRecallEasy",
    "AutoencodeEasy",
    "MultiarmedBanditEasy",
    "HigherLowerEasy",
    "BattleshipEasy",
    "ConcentrationEasy",
    "MineSweeperEasy",
    "PositionOnlyCartPoleEasy",
    "NoisyPositionOnlyPendulumEasy",
)


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


def measure(name: str, steps: int, repeats: int) -> dict[str, float]:
    cls = _popgym_class(name)
    raw = cls()
    variants = {
        "raw": raw,
        "wrapped": PopGymEnv(cls(), prev_action=True),
        "wrapped, no prev action": PopGymEnv(cls(), prev_action=False),
        "popgym make": gym.make(f"popgym-{name}-v0"),  # registered by `import popgym`
        "memgym make": gym.make(popgym_env_id(name)),
    }
    stacks = [str(variants[key]).replace(f"popgym-{name}-v0", "<id>").replace("memgym/", "")
              for key in ("popgym make", "memgym make")]
    stacks = [stack.replace(f"<{name}<", "<ENV<").replace("<PopGymEnv<", "<ENV<") for stack in stacks]
    if stacks[0] != stacks[1]:
        raise RuntimeError(f"gymnasium.make wraps the two envs differently: {variants['popgym make']} "
                           f"vs {variants['memgym make']}")
    raw.action_space.seed(0)
    actions = [raw.action_space.sample() for _ in range(steps)]
    seconds: dict[str, list[float]] = {key: [] for key in variants}
    for key, env in variants.items():  # warm-up
        play(env, actions[: min(steps, 1000)])
    order = list(variants)
    for repeat in range(repeats):
        # Rotate the order each repeat so that load drifting on a shared machine hits all variants alike.
        for key in order[repeat % len(order) :] + order[: repeat % len(order)]:
            seconds[key].append(play(variants[key], actions))
    return {key: steps / statistics.median(values) for key, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5_000, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per variant (median)")
    parser.add_argument("--quick", action="store_true", help="2000 steps, 3 repeats")
    parser.add_argument("--envs", nargs="*", default=list(DEFAULT_ENVS), help="popgym class names")
    args = parser.parse_args()
    # gymnasium's passive checker warns about popgym's own CountRecall / MultiarmedBandit info dicts.
    warnings.filterwarnings("ignore", message=".*share an object.*")
    steps, repeats = (2000, 3) if args.quick else (args.steps, args.repeats)

    print(f"popgym wrapper overhead ({platform.processor() or platform.machine()}, numpy {np.__version__}); "
          f"{steps} random-action steps x {repeats} repeats, median")
    print("steps/s; 'wrapped' = PopGymEnv(prev_action=True) around the raw class; overhead = time ratio - 1")
    example = args.envs[0]
    _popgym_class(example)  # imports popgym, which registers its own ids
    print(f"make variants: {gym.make(f'popgym-{example}-v0')} vs {gym.make(popgym_env_id(example))}")
    header = (
        f"{'env':<30} {'raw':>9} {'wrapped':>9} {'overhead':>9} {'+us/step':>9} {'no prev act':>12} "
        f"{'overhead':>9} {'popgym make':>12} {'memgym make':>12} {'overhead':>9}"
    )
    print(header)
    print("-" * len(header))
    for name in args.envs:
        rates = measure(name, steps, repeats)
        raw, wrapped, bare = rates["raw"], rates["wrapped"], rates["wrapped, no prev action"]
        upstream_make, memgym_make = rates["popgym make"], rates["memgym make"]
        print(
            f"{name:<30} {raw:>9,.0f} {wrapped:>9,.0f} {raw / wrapped - 1:>9.1%} "
            f"{(1 / wrapped - 1 / raw) * 1e6:>9.2f} {bare:>12,.0f} {raw / bare - 1:>9.1%} "
            f"{upstream_make:>12,.0f} {memgym_make:>12,.0f} {upstream_make / memgym_make - 1:>9.1%}"
        )


if __name__ == "__main__":
    main()
