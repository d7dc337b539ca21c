"""Where an A2C update's time goes: acting, the replay's forward pass, and its backward pass.

For each memory preset at the thesis T-Maze setup of ``benchmarks/train_speed.py`` (8
environments × 256 steps, corridor 120, Table A.2 sizes), four jitted functions are timed
(median of ``--repeats`` calls after a warm-up, each ended by ``block_until_ready``):

* ``collect``: one rollout, 2,048 environment steps: the policy's streaming steps, the
  environment and the truncation bootstrap (:meth:`BaseTrainer.collect`);
* ``replay``: the forward pass over the rollout the learner replays (257 steps per
  environment, from the carries stored at its start);
* ``gradient``: the loss and its gradient, i.e. the replay's forward and backward passes;
* ``update``: the whole update (collect, gradient, clipping and the Adam step), as training runs it.

``backward`` is ``gradient − replay``. Figures move with the machine's load; compare rows
of one run.

    python benchmarks/update_time_split.py [--models arelit gtrxl-128] [--repeats 5] [--replay-chunk-size K] [--smoke]

``--smoke``: the same presets at tiny sizes (width 16, one layer of 2 heads × 8, GTrXL memory 8 or
16), 2 environments × 8 steps on a corridor of 4, one timed call: every row, mostly compilation
(a check that the script runs, not a measurement). Given flags win over these.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

# The thesis T-Maze setup and the tiny one of --smoke, shared with the memory profile.
from update_memory_profile import SMOKE, THESIS, smoke_sizes  # noqa: E402  (benchmarks/ is on sys.path)


def median_ms(function, *args, repeats: int) -> float:
    import jax

    jax.block_until_ready(function(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function(*args))
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def split(preset: str, repeats: int, replay_chunk_size: int, smoke: bool = False) -> dict[str, float]:
    import json

    import jax

    from memgym.agents.a2c import A2CConfig, A2CTrainer
    from memgym.agents.config import THESIS_TMAZE_HPARAMS
    from memgym.buffers.rollout import replay_inputs
    from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

    learning_rate, entropy_coef = THESIS_TMAZE_HPARAMS.get(preset, (1e-4, 1e-3))
    chunking = {"replay_chunk_size": replay_chunk_size} if replay_chunk_size else {}
    setup = SMOKE if smoke else THESIS
    config = A2CConfig(memory=preset, memory_config=json.dumps(smoke_sizes(preset) if smoke else {}),
                       learning_rate=learning_rate, entropy_coef=entropy_coef, num_envs=setup["num_envs"],
                       rollout_length=setup["rollout_length"], **chunking)
    env_params = tmaze_params(setup["corridor_length"], max_episode_steps=1000)
    trainer = A2CTrainer(config, TMazeJax(), example_params=env_params)
    state = jax.jit(trainer.init)(jax.random.key(0), env_params)
    collect = jax.jit(lambda s, p: trainer.collect(s, p, trainer.acting(s)[0]))
    after, trajectory, _ = collect(state, env_params)
    rollout = trainer.rollout(after, trajectory)
    obs, start = replay_inputs(rollout)
    replay = jax.jit(lambda params: trainer.replay(params, obs, start, rollout.carry))
    gradient = jax.jit(jax.grad(lambda params: trainer.loss(params, rollout)[0]))
    update = jax.jit(trainer.update)
    row = {
        "collect": median_ms(collect, state, env_params, repeats=repeats),
        "replay": median_ms(replay, state.params, repeats=repeats),
        "gradient": median_ms(gradient, state.params, repeats=repeats),
        "update": median_ms(update, state, env_params, repeats=repeats),
    }
    row["backward"] = row["gradient"] - row["replay"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["arelit", "gtrxl-128", "gtrxl-256"], help="memory presets")
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per function (median)")
    parser.add_argument("--replay-chunk-size", type=int, default=0, help="A2CConfig.replay_chunk_size (0: whole replay)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes, 2 envs × 8 steps on a corridor of 4, 1 timed call: every row, seconds")
    if parser.parse_known_args()[0].smoke:
        parser.set_defaults(repeats=1)
    args = parser.parse_args()

    import jax

    setup = SMOKE if args.smoke else THESIS
    print(f"# jax {jax.__version__} on {jax.devices()[0].device_kind}, {os.cpu_count()} CPUs, "
          f"load before {os.getloadavg()[0]:.1f}; A2C, T-Maze L = {setup['corridor_length']}, "
          f"{setup['num_envs']} envs x {setup['rollout_length']} steps per update"
          + ("; smoke sizes, not a measurement" if args.smoke else ""))
    print("| model | collect (ms) | replay forward | backward | update | collect share |")
    print("|---|---:|---:|---:|---:|---:|")
    for preset in args.models:
        row = split(preset, args.repeats, args.replay_chunk_size, args.smoke)
        print(f"| {preset} | {row['collect']:,.0f} | {row['replay']:,.0f} | {row['backward']:,.0f} | "
              f"{row['update']:,.0f} | {row['collect'] / row['update']:.0%} |", flush=True)
    print(f"# load after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
