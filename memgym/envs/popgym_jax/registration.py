"""The ids of the POPGym tasks in JAX (:mod:`memgym.envs.popgym_jax`): importing this module registers every
task with gymnax (through :mod:`memgym.envs.gymnax_compat`), and its functions are the Gymnasium entry points
that :mod:`memgym.envs` registers lazily (``memgym/popgym-<Name>Jax-v0``)."""

from __future__ import annotations

import importlib
from typing import Any

from memgym.envs import gymnax_compat
from memgym.envs.functional import GymnasiumAdapter, GymnasiumVectorAdapter, check_not_forked
from memgym.envs.popgym_jax import FAMILIES, gymnasium_id, jax_id, task_names


def task_class(name: str) -> type:
    """The JAX class of popgym task ``name`` (``"RepeatPreviousEasy"``)."""
    for module, families in FAMILIES.items():
        if any(name.startswith(family) and name[len(family):] in ("Easy", "Medium", "Hard") for family in families):
            return getattr(importlib.import_module(module), name)
    raise ValueError(f"name={name!r} is not a POPGym task written in JAX; allowed: {', '.join(task_names())}")


def make_gymnasium(name: str, render_mode: str | None = None, **config: Any) -> GymnasiumAdapter:
    """``gymnasium.make("memgym/popgym-<name>Jax-v0", **config)``: the JAX task behind Gymnasium's API;
    ``config`` goes to the task's constructor (``prev_action=False``)."""
    check_not_forked(gymnasium_id(name))
    env = task_class(name)(**config)
    return GymnasiumAdapter(env, env.default_params, render_mode=render_mode)


def make_gymnasium_vector(name: str, num_envs: int = 1, render_mode: str | None = None,
                          **config: Any) -> GymnasiumVectorAdapter:
    """``gymnasium.make_vec("memgym/popgym-<name>Jax-v0", num_envs=N)``: one vmapped JAX task."""
    check_not_forked(gymnasium_id(name))
    env = task_class(name)(**config)
    return GymnasiumVectorAdapter(env, env.default_params, num_envs=num_envs, render_mode=render_mode)


for _name in task_names():
    gymnax_compat.register(jax_id(_name), task_class(_name))
