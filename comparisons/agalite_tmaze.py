#!/usr/bin/env python
"""Train the thesis authors' own A2C on their T-Maze and write its learning curve (docs/reproduction.md,
"memgym beside the authors' code").

The authors' implementation (github.com/subho406/agalite, commit 101acbe) is run as an external program: this
script builds their hydra config from ``config/tmaze/<model>.yaml`` plus the overrides given here, seeds as their
``trainer.py`` does, steps their ``ControlTrainer`` and reads the episodes their agent finishes from the ``infos``
it returns. Nothing of theirs is copied or changed. Three things are supplied around it:

* stubs for ``wandb`` and ``memory_gym``, imported at the top of their trainer module and unused on the T-Maze
  path with ``use_wandb=false`` and no evaluation interval;
* a default for flax's ``GRUCell.features``: their GRU passes none (flax < 0.7), their LSTM passes one
  (flax ≥ 0.7); with flax 0.8.5 the cell takes its width from its carry, as before, so the GRU is unchanged;
* optionally (``--numpy-episode-metric``) their per-episode logging metric in numpy: theirs is jitted and
  recompiles for every new episode length. It feeds their log only, never the learner.

Install (a venv of its own; their code predates gymnasium 1.0 and jax 0.5)::

    git clone https://github.com/subho406/agalite && git -C agalite checkout 101acbe
    python3.11 -m venv agalite-venv && agalite-venv/bin/pip install jax==0.4.30 jaxlib==0.4.30 flax==0.8.5 \\
        optax==0.2.3 rlax==0.1.6 chex==0.1.86 distrax==0.1.5 tensorflow-probability==0.24.0 \\
        orbax-checkpoint==0.5.20 gymnasium==0.29.1 numpy==1.26.4 scipy==1.13.1 hydra-core==1.3.2 \\
        omegaconf==2.3.0 tqdm pytz
    agalite-venv/bin/python comparisons/agalite_tmaze.py --repo agalite --model relit --csv runs/relit-s1.csv \\
        --seed 1 --corridor 64 --steps 2000000 --lr 1e-3 --ent 1e-3 --rollout 128 \\
        --n-layers 1 --d-model 32 --d-head 16 --n-heads 2 --d-ffc 32 --nu 2

CSV columns: ``env_steps`` (all environments together), ``mean_return`` (undiscounted, over the episodes that
ended since the last row), ``success_rate`` (the fraction of them whose last reward was +4), ``episodes``,
``mean_length``, ``wall_s``, ``steps_per_s``.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import os
import random
import sys
import time
import types

#: flag -> their hydra key (None values are left at their yaml's)
OVERRIDES = {
    "seed": "seed", "corridor": "task.corridor_len", "steps": "steps", "lr": "trainer.optimizer.learning_rate",
    "ent": "trainer.entropy_coef", "rollout": "trainer.rollout_len", "num_envs": "trainer.num_envs",
    "n_layers": "trainer.seq_model.n_layers", "d_model": "trainer.seq_model.d_model",
    "d_head": "trainer.seq_model.d_head", "n_heads": "trainer.seq_model.n_heads", "d_ffc": "trainer.seq_model.d_ffc",
    "eta": "trainer.seq_model.eta", "r": "trainer.seq_model.r", "nu": "trainer.seq_model.kernel.nu",
    "d_actor": "trainer.d_actor", "d_critic": "trainer.d_critic",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", required=True, help="a checkout of subho406/agalite (commit 101acbe)")
    p.add_argument("--model", default="arelit", help="their config/tmaze/<model>.yaml: arelit, relit, gru, lstm, ...")
    p.add_argument("--csv", required=True, help="where the learning curve goes")
    for flag, key in OVERRIDES.items():
        p.add_argument("--" + flag.replace("_", "-"), type=float if flag in ("lr", "ent") else int, help=key)
    p.add_argument("--log-every", type=int, default=50_000, help="a CSV row every this many environment steps")
    p.add_argument("--numpy-episode-metric", action="store_true",
                   help="their per-episode logging metric in numpy (no recompilation per episode length)")
    return p.parse_args(argv)


def install_shims() -> None:
    """The stubs and the GRUCell default of the module docstring."""
    for name in ("wandb", "memory_gym"):
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = types.ModuleType(name)
    import flax.linen as nn

    class GRUCell(nn.GRUCell):
        features: int = -1  # unused by the cell's __call__ (its width is the carry's)

    nn.GRUCell = GRUCell


def numpy_episode_metric(rewards, gamma):
    """Their logging metric (mean reward, mean discounted reward-to-go of an episode), in numpy."""
    import numpy as np

    rewards = np.asarray(rewards, np.float64)
    to_go = np.zeros_like(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        to_go[t] = running
    return np.float32(rewards.mean()), np.float32(to_go.mean())


def main(argv=None) -> None:
    args = parse_args(argv)
    csv_path, repo = os.path.abspath(args.csv), os.path.abspath(args.repo)
    install_shims()
    sys.path.insert(0, repo)
    os.chdir(repo)  # their modules import `src.…`
    from hydra import compose, initialize_config_dir

    overrides = [f"+tmaze={args.model}", "use_wandb=false", f"log_interval={args.log_every}",
                 "+trainer.env_pool=sync"]  # their default (async) runs the same envs in subprocesses
    overrides += [f"{key}={getattr(args, flag)}" for flag, key in OVERRIDES.items() if getattr(args, flag) is not None]
    with initialize_config_dir(config_dir=os.path.join(repo, "config"), version_base=None):
        config = compose(config_name="default_config", overrides=overrides)

    import jax
    import numpy as np
    import src.trainers.trainers_control as trainers

    if args.numpy_episode_metric:
        trainers.average_reward_and_return_in_episode = numpy_episode_metric
    key = jax.random.PRNGKey(config.seed)  # as their trainer.py seeds
    np.random.seed(config.seed)
    random.seed(config.seed)
    trainer = trainers.ControlTrainer(global_args=config, trainer_config=config.trainer, env_config=config.task,
                                      seed=config.seed, key=key, wandb_run=None)

    episodes: list[tuple[float, float, int]] = []  # (return, success, length) since the last row
    step = trainer.agent.step

    def step_and_read(random_key):
        out = step(random_key)
        for info in out[2]:  # gymnasium 0.29's final_info of each finished episode, as their trainer reads it
            if "_final_info" in info:
                for ended in info["final_info"][info["_final_info"]]:
                    rewards = np.asarray(ended["rewards"], np.float64)
                    episodes.append((rewards.sum(), float(np.isclose(rewards[-1], 4.0)), len(rewards)))
        return out

    trainer.agent.step = step_and_read
    os.makedirs(os.path.dirname(csv_path) or ".", exist_ok=True)
    with open(csv_path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["env_steps", "mean_return", "success_rate", "episodes", "mean_length", "wall_s", "steps_per_s"])
        started = last_time = time.time()
        done = last_done = 0
        next_row = args.log_every
        while done < config.steps:
            _, _, done = trainer.step()
            if done >= next_row or done >= config.steps:
                now = time.time()
                ended = np.array(episodes).reshape(-1, 3)
                means = ended.mean(axis=0) if len(ended) else [math.nan] * 3
                writer.writerow([done, f"{means[0]:.6g}", f"{means[1]:.6g}", len(ended), f"{means[2]:.6g}",
                                 f"{now - started:.1f}", f"{(done - last_done) / max(now - last_time, 1e-9):.0f}"])
                file.flush()
                print(f"{done:,} steps: success {means[1]:.3f} over {len(ended)} episodes, return {means[0]:.2f}",
                      flush=True)
                episodes.clear()
                last_time, last_done = now, done
                while next_row <= done:
                    next_row += args.log_every
    trainer.agent.env.close()


if __name__ == "__main__":
    main()
