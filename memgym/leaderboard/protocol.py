"""How an agent is submitted to the leaderboard: two tiers, one factory (docs/submitting.md).

A submission is an importable ``"package.module:factory"`` string or the name of an entry point in the
group ``memgym.agents``, optionally followed by options in brackets (:func:`parse_spec`). The harness
calls ``factory(context: AgentContext)`` and tells the tier by what comes back (:func:`tier`): a JAX-tier
agent (``num_envs``, ``train``, ``initialize_carry``, ``act``: pure functions the harness ``jit``/``vmap``s)
or an any-framework agent (``act``, ``observe``: any framework; the harness steps a Gymnasium vector env).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import sys
import warnings
from collections.abc import Callable
from importlib import metadata
from typing import Any

import gymnasium as gym

ENTRY_POINT_GROUP = "memgym.agents"
JAX_TIER_ATTRIBUTES = ("num_envs", "train", "initialize_carry", "act")
#: Protocol names renamed in memgym 0.2 (old -> new); the old ones work, with a DeprecationWarning, until 0.3.
RENAMED_ATTRIBUTES = {"init_carry": "initialize_carry"}
ANY_TIER_ATTRIBUTES = ("act", "observe")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AgentContext:
    """What the harness tells a factory (keyword construction).

    Attributes:
        observation_space, action_space: of one environment of the track.
        num_envs: environments in the vector env the harness drives (any-framework tier).
        seed: the run's seed (any-framework tier: seed your own randomness with it).
        total_steps: the training budget in environment steps (0: none; the agent is evaluated from its first act).
        track: the track's name (``"tmaze"``).
        parameter: the name of the track's swept parameter (``"corridor_length"``).
        parameter_value: its value in the cell the agent is built for (any-framework tier);
            None when the agent serves every value (JAX tier, tier detection).
        jax_env: whether the track has a functional JAX env, i.e. runs JAX-tier agents; False: it
            runs any-framework agents only (an agent that can be either picks by this).
    """

    observation_space: gym.Space
    action_space: gym.Space
    num_envs: int = 8
    seed: int = 0
    total_steps: int = 0
    track: str = "tmaze"
    parameter: str = "corridor_length"
    parameter_value: Any = None
    jax_env: bool = True


def entry_points() -> dict[str, metadata.EntryPoint]:
    """Agents registered in the ``memgym.agents`` entry-point group, by name."""
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


_NUMBER = re.compile(r"[+-]?(?:\d+(?P<real>\.\d*(?:[eE][+-]?\d+)?|[eE][+-]?\d+)?|(?P<fraction>\.\d+(?:[eE][+-]?\d+)?))")
_OPTIONS = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<options>[^\[\]]*)\]$")


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"NAME[key=value,...]"`` → ``(NAME, {key: value})``; a spec without brackets has no options.

    A value is read as JSON where it is JSON (``1e-4``, ``0.01``, ``8``, ``true``), as a number where it
    is one in Python's spelling (``.5``, ``+1``, ``1.``) and as a string otherwise (``tiny-gru``).
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"agent must be 'package.module:factory' or a registered name, got {spec!r}")
    if "[" not in spec and "]" not in spec:
        return spec, {}
    match = _OPTIONS.match(spec)
    if match is None:
        raise ValueError(f"agent {spec!r}: options go in one pair of brackets at the end, e.g. "
                         f"'a2c-arelit[learning_rate=0.0005,entropy_coef=0.01]'")
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in match["options"].split(","))):
        key, equals, text = (part.strip() for part in item.partition("="))
        if not equals or not key.isidentifier() or not text:
            raise ValueError(f"agent {spec!r}: option {item!r} is not key=value")
        if key in options:
            raise ValueError(f"agent {spec!r}: option {key!r} is given twice")
        try:
            options[key] = json.loads(text)
        except json.JSONDecodeError:
            number = _NUMBER.fullmatch(text)
            options[key] = (text if number is None else float(text) if number["real"] or number["fraction"] else int(text))
    return match["base"].strip(), options


def canonical_spec(spec: str) -> str:
    """The one spelling of ``spec`` that the store and the board key an agent by.

    Each option's value is written back as :func:`parse_spec` reads it (``1e-3``, ``0.0010`` and
    ``0.001`` are all ``0.001``), empty brackets are dropped (``NAME[]`` is ``NAME``) and spaces around
    ``,`` and ``=`` go; the options keep the order they were given in.
    """
    return format_spec(*parse_spec(spec))


def format_spec(base: str, options: dict[str, Any]) -> str:
    """``NAME[key=value,...]`` in :func:`canonical_spec`'s spelling; ``NAME`` alone without options."""
    if not options:
        return base
    return f"{base}[{','.join(f'{key}={_option_text(value)}' for key, value in options.items())}]"


def same_agent(spec: str, other: str) -> bool:
    """Whether two specs name one agent: the same base and options, in any order and any spelling of a value
    (``x[learning_rate=1e-3,entropy_coef=0.01]`` and ``x[entropy_coef=1e-2,learning_rate=0.001]``)."""
    def identity(text: str) -> tuple[str, frozenset[tuple[str, str]]]:
        base, options = parse_spec(text)
        return base, frozenset((key, _option_text(value)) for key, value in options.items())

    try:
        return identity(spec) == identity(other)
    except ValueError:
        return spec == other


def _option_text(value: Any) -> str:
    """``value`` as an option is written: JSON, except a string that reads back as itself unquoted."""
    if isinstance(value, str) and value == value.strip() and value and not set(value) & set(",[]") \
            and not _NUMBER.fullmatch(value):
        try:
            json.loads(value)
        except json.JSONDecodeError:
            return value
    return json.dumps(value)


def load_factory(spec: str) -> Callable[[AgentContext], Any]:
    """The factory named by ``spec``: ``"package.module:attribute"`` or an entry-point name, with options."""
    base, options = parse_spec(spec)
    factory = _load_base(base)
    if not options:
        return factory
    with_options = getattr(factory, "with_options", None)
    if not callable(with_options):
        raise ValueError(f"agent {spec!r}: {base!r} takes no options (its factory has no with_options method)")
    try:
        return with_options(**options)
    except (TypeError, ValueError) as error:
        raise ValueError(f"agent {spec!r}: {error}") from None


def unavailable(spec: str) -> ImportError | None:
    """Why agent ``spec`` cannot run in this installation (an optional extra or a package it imports is
    missing), or None. Loads its factory and, where the factory exposes ``config()`` (the reference
    agents), builds its config; nothing is trained."""
    try:
        factory = load_factory(spec)
        config = getattr(factory, "config", None)
        if callable(config):
            config()
    except ImportError as error:
        return error
    except ValueError as error:
        if isinstance(error.__cause__, ImportError):
            return error.__cause__
        raise
    return None


def _load_base(spec: str) -> Callable[[AgentContext], Any]:
    if ":" in spec:
        module_name, _, attribute = spec.partition(":")
        if os.getcwd() not in sys.path:  # submissions are usually modules of the user's current project
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ValueError(f"agent {spec!r}: cannot import module {module_name!r} ({error})") from error
        factory = module
        for part in attribute.split("."):
            if not hasattr(factory, part):
                raise ValueError(f"agent {spec!r}: module {module_name!r} has no attribute {attribute!r}")
            factory = getattr(factory, part)
    else:
        registered = entry_points()
        if spec not in registered:
            raise ValueError(
                f"agent {spec!r} is not a 'package.module:factory' string nor a registered agent; "
                f"registered: {', '.join(sorted(registered)) or '(none)'}"
            )
        factory = registered[spec].load()
    if not callable(factory):
        raise ValueError(f"agent {spec!r} resolves to {factory!r}, which is not callable")
    return factory


def _has(agent: Any, name: str) -> bool:
    """Whether ``agent`` has protocol attribute ``name``, under its current or its deprecated name."""
    return hasattr(agent, name) or any(hasattr(agent, old) for old, new in RENAMED_ATTRIBUTES.items() if new == name)


def initialize_carry(agent: Any) -> Any:
    """A JAX-tier agent's ``initialize_carry()``; an agent written for memgym 0.1 (``init_carry``) gets a warning."""
    method = getattr(agent, "initialize_carry", None)
    if method is None and hasattr(agent, "init_carry"):
        warnings.warn(
            f"{type(agent).__name__}.init_carry is deprecated and stops working in memgym 0.3: rename it to "
            "initialize_carry (the name gymnax, flax and memax use; docs/submitting.md)",
            DeprecationWarning, stacklevel=2,
        )
        method = agent.init_carry
    return method()


def tier(agent: Any) -> str:
    """``"jax"`` or ``"any"``; raises ``TypeError`` listing what is missing otherwise."""
    if all(_has(agent, name) for name in JAX_TIER_ATTRIBUTES):
        return "jax"
    if all(_has(agent, name) for name in ANY_TIER_ATTRIBUTES):
        return "any"
    missing_jax = [n for n in JAX_TIER_ATTRIBUTES if not _has(agent, n)]
    missing_any = [n for n in ANY_TIER_ATTRIBUTES if not hasattr(agent, n)]
    raise TypeError(
        f"{type(agent).__name__!r} object is neither a JAX-tier agent (missing {missing_jax}) "
        f"nor an any-framework agent (missing {missing_any}); see docs/submitting.md"
    )


def agent_id(spec: str) -> str:
    """A file-system-safe name for an agent spec (the results store's directory)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec).strip("_") or "agent"
