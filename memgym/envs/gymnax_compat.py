"""The two gymnax contracts memgym supports, decided once from the gymnax that is installed.

gymnax 1.0.x (what memgym is written against) and gymnax 0.0.9 (still pinned by
PureJaxRL- and memorax-style code) differ in what an environment's ``step`` returns:

=================  ==============================================  ===========================================
                   gymnax 1.0.x                                    gymnax 0.0.9
=================  ==============================================  ===========================================
``step``           ``obs, state, reward, terminated, truncated,    ``obs, state, reward, done, info``
                   info`` (auto-reset where either is True)        (auto-reset where ``done``)
``step_env``       ``obs, state, reward, terminated, info``;       ``obs, state, reward, done, info``
                   ``is_truncated(state, params)`` is the limit
``step``'s info    adds ``terminated``, ``truncated``,             what ``step_env`` returned
                   ``final_observation``
registration       ``gymnax.register`` / ``gymnax.make``           a fixed list inside ``gymnax.make``
=================  ==============================================  ===========================================

memgym's environments give each gymnax what it expects: :func:`step_returns` and
:func:`step_env_returns` turn memgym's six values into the installed contract. Under
gymnax 0.0.9 their ``done`` is ``terminated | truncated`` and their ``info`` carries
``terminated``, ``truncated`` and ``final_observation`` (the keys gymnax 1.0's ``step``
adds), so the truncation signal and the last observation of an episode survive
0.0.9's auto-reset. memgym's own code (wrappers, trainers, Gymnasium adapters) always
works with six values: it steps an environment through :func:`step` and :func:`step_env`,
which read them back from either contract. :func:`register` and :func:`make` are
gymnax's registration where it has one (1.0) and memgym's own table where it does not
(0.0.9, whose ``gymnax.make`` knows only gymnax's environments).
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any, Callable

import gymnax

#: the installed gymnax's version string
GYMNAX_VERSION: str = version("gymnax")

#: True under gymnax 0.0.x: ``step``/``step_env`` return five values, with ``done`` fourth
FIVE_VALUE_STEP: bool = int(GYMNAX_VERSION.split(".")[0]) < 1

#: the ``info`` keys gymnax 1.0's ``step`` adds; under 0.0.9 memgym's environments add them in ``step_env``
STEP_INFO_KEYS = ("terminated", "truncated", "final_observation")

# gymnax 0.0.9 has no register: memgym's environments by id, for make()
_FACTORIES: dict[str, Callable[..., Any]] = {}


def register(env_id: str, factory: Callable[..., Any]) -> None:
    """Make ``make(env_id, **config)`` build ``factory(**config)`` (idempotent); under gymnax 1.0 this is
    ``gymnax.register``, so ``gymnax.make(env_id)`` works too."""
    if FIVE_VALUE_STEP:
        _FACTORIES.setdefault(env_id, factory)
    elif env_id not in gymnax.registered_envs:
        gymnax.register(env_id, factory)


def make(env_id: str, **config: Any) -> tuple[Any, Any]:
    """``(env, env.default_params)`` of a registered environment, like ``gymnax.make``."""
    if FIVE_VALUE_STEP:
        if env_id not in _FACTORIES:
            raise ValueError(f"env_id={env_id!r} is not a memgym JAX environment; registered: {sorted(_FACTORIES)}")
        env = _FACTORIES[env_id](**config)
        return env, env.default_params
    return gymnax.make(env_id, **config)


def step_returns(obs: Any, state: Any, reward: Any, terminated: Any, truncated: Any,
                 info: dict[str, Any]) -> tuple:
    """What an environment's auto-resetting ``step`` returns under the installed gymnax (``info``: the
    wrapped ``step``'s, which under gymnax 0.0.9 already holds :data:`STEP_INFO_KEYS`)."""
    if FIVE_VALUE_STEP:
        return obs, state, reward, terminated | truncated, info
    return obs, state, reward, terminated, truncated, info


def step_env_returns(obs: Any, state: Any, reward: Any, terminated: Any, truncated: Any,
                     info: dict[str, Any]) -> tuple:
    """What an environment's ``step_env`` (one transition, no reset) returns under the installed gymnax:
    1.0 leaves ``truncated`` to ``is_truncated``; 0.0.9 gets ``done`` and the flags and ``obs`` in ``info``."""
    if FIVE_VALUE_STEP:
        flags = {"terminated": terminated, "truncated": truncated, "final_observation": obs}
        return obs, state, reward, terminated | truncated, {**info, **flags}
    return obs, state, reward, terminated, info


def _flags(env: Any, info: dict[str, Any]) -> tuple[Any, Any]:
    """``(terminated, truncated)`` from the ``info`` of a gymnax 0.0.9 step of a memgym environment."""
    missing = [key for key in STEP_INFO_KEYS if key not in info]
    if missing:
        raise ValueError(
            f"env={type(env).__name__}: under gymnax {GYMNAX_VERSION} (five-value step) memgym reads termination, "
            f"truncation and the final observation from info, which has no {missing}; memgym's environments and "
            f"wrappers add them (build the environment with memgym.envs.make_jax or wrap a memgym environment)"
        )
    return info["terminated"], info["truncated"]


def step(env: Any, key: Any, state: Any, action: Any, params: Any = None) -> tuple:
    """``env.step`` (auto-reset) as six values ``(obs, state, reward, terminated, truncated, info)`` under
    either gymnax; ``info`` holds :data:`STEP_INFO_KEYS`, as gymnax 1.0's ``step`` gives them."""
    if FIVE_VALUE_STEP:
        obs, state, reward, _, info = env.step(key, state, action, params)
        return (obs, state, reward, *_flags(env, info), info)
    return env.step(key, state, action, params)


def step_env(env: Any, key: Any, state: Any, action: Any, params: Any) -> tuple:
    """One transition without reset, ``env.step_env``, as six values ``(obs, state, reward, terminated,
    truncated, info)`` under either gymnax; ``info`` is the environment's own, as under gymnax 1.0."""
    if FIVE_VALUE_STEP:
        obs, state, reward, _, info = env.step_env(key, state, action, params)
        terminated, truncated = _flags(env, info)
        return obs, state, reward, terminated, truncated, {k: v for k, v in info.items() if k not in STEP_INFO_KEYS}
    obs, state, reward, terminated, info = env.step_env(key, state, action, params)
    return obs, state, reward, terminated, env.is_truncated(state, params), info
