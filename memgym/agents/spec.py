"""What a trainer needs to know about an environment: :class:`EnvSpec`, and how host loops store observations.

A trainer builds its networks from an :class:`EnvSpec` — the size and dtype of a
stored observation, the shape of the image inside it (or None) and the number of
discrete actions — made either from a gymnax environment
and its params (:meth:`EnvSpec.from_env`) or from the spaces of a Gymnasium
environment (:meth:`EnvSpec.from_spaces`, through :class:`ObservationLayout`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np


class ObservationLayout:
    """How a host loop stores observations of ``space``: one flat vector of ``size`` entries of ``dtype`` each.

    * a 1-D ``Box`` is kept as it is, cast to float32;
    * a ``Dict`` with an ``"image"`` part (``Box`` of ``uint8``, ``(H, W, C)``) and
      other ``Box`` parts bounded in [0, 1] (e.g. Memory Maze's ``target_color``)
      becomes a ``uint8`` vector: the image bytes, then the other parts in key
      order, each scaled by 255 and rounded. One byte per entry keeps rollouts and
      replay buffers of images small;
      :class:`~memgym.agents.encoders.ObservationEncoder` (given
      :attr:`image_shape`) turns it back into an image and a vector.
    """

    def __init__(self, space: gym.Space):
        if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
            self.size, self.dtype, self.image_shape, self.keys = int(space.shape[0]), np.dtype(np.float32), None, None
            return
        if not isinstance(space, gym.spaces.Dict) or "image" not in space.spaces:
            raise ValueError(
                f"host loops need a flat Box observation space or a Dict with an 'image' part, got {space}"
            )
        image = space["image"]
        if not isinstance(image, gym.spaces.Box) or image.dtype != np.uint8 or len(image.shape) != 3:
            raise ValueError(f"observation part 'image' must be a uint8 Box of shape (H, W, C), got {image}")
        others = sorted(k for k in space.spaces if k != "image")
        for key in others:
            part = space[key]
            if (not isinstance(part, gym.spaces.Box) or not np.all(part.low >= 0.0)
                    or not np.all(part.high <= 1.0)):
                raise ValueError(f"observation part {key!r} must be a Box bounded in [0, 1] to be stored as bytes, "
                                 f"got {part}")
        self.image_shape = tuple(int(n) for n in image.shape)
        self.keys = ("image", *others)
        self.dtype = np.dtype(np.uint8)
        self.size = int(np.prod(self.image_shape)) + sum(int(np.prod(space[k].shape)) for k in others)

    def flatten(self, obs: Any) -> np.ndarray:
        """A batch of observations (``[N, ...]`` arrays, a dict of them for ``Dict``) -> ``[N, size]``."""
        if self.keys is None:
            return np.asarray(obs, np.float32)
        n = len(obs["image"])
        parts = [np.asarray(obs["image"], np.uint8).reshape(n, -1)]
        parts += [np.rint(np.asarray(obs[k], np.float64).reshape(n, -1) * 255.0).astype(np.uint8)
                  for k in self.keys[1:]]
        return np.concatenate(parts, axis=1)

    def flatten_one(self, obs: Any) -> np.ndarray:
        """One observation -> ``[size]``."""
        if self.keys is None:
            return np.asarray(obs, np.float32)
        return self.flatten({k: np.asarray(obs[k])[None] for k in self.keys})[0]


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """The environment as a trainer sees it.

    Attributes:
        obs_size: entries of one (flat) stored observation.
        obs_dtype: their dtype.
        num_actions: size of the discrete action space the trainer chooses in: ``n`` of a ``Discrete`` one, the
            number of action vectors ``prod(nvec)`` of a ``MultiDiscrete`` one (its vectors numbered in row-major
            order: :meth:`env_action`).
        image_shape: ``(H, W, C)`` of the image stored first in each observation
            (an image encoder goes in front of the memory), or None.
        action_nvec: ``nvec`` of a ``MultiDiscrete`` action space, or None.
        action_box: ``(low, high)`` of a flat ``Box`` action space (tuples of floats, one per entry; then
            ``num_actions`` is its size and the trainer's policy a Gaussian, as an actor-critic's can be), or None.
    """

    obs_size: int
    obs_dtype: np.dtype
    num_actions: int
    image_shape: tuple[int, int, int] | None = None
    action_nvec: tuple[int, ...] | None = None
    action_box: tuple[tuple[float, ...], tuple[float, ...]] | None = None

    def env_action(self, action: Any) -> Any:
        """The environment's action of the trainer's action ``action`` (any batch shape, JAX or NumPy): the index
        itself for a ``Discrete`` space; for a ``MultiDiscrete`` one the vector it numbers, row-major
        (``[..., len(nvec)]``, int32); for a ``Box`` one the sample clipped to the bounds (float32; the trainer
        learns from the sample itself)."""
        if self.action_nvec is None and self.action_box is None:
            return action
        xp = np if isinstance(action, np.ndarray | np.generic | int | float) else _jnp()
        if self.action_box is not None:
            low, high = (np.asarray(bound, np.float32) for bound in self.action_box)
            return xp.clip(action, low, high).astype(np.float32)
        return xp.stack(xp.unravel_index(action, self.action_nvec), axis=-1).astype(np.int32)

    @classmethod
    def from_env(cls, env: Any, params: Any = None) -> EnvSpec:
        """The spec of a gymnax environment (``params``: its default params if None)."""
        from memgym.envs.functional import gymnasium_space

        params = env.default_params if params is None else params
        space = gymnasium_space(env.observation_space(params))
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"trainers need a flat Box observation space, got {space}")
        actions = gymnasium_space(env.action_space(params))
        return cls(int(space.shape[0]), np.dtype(space.dtype), **_action_fields(actions))

    @classmethod
    def from_spaces(cls, observation_space: gym.Space, action_space: gym.Space) -> EnvSpec:
        """The spec of a Gymnasium environment, its observations stored by :class:`ObservationLayout`."""
        layout = ObservationLayout(observation_space)
        return cls(layout.size, layout.dtype, image_shape=layout.image_shape, **_action_fields(action_space))


def _action_fields(space: gym.Space) -> dict[str, Any]:
    """``num_actions`` and ``action_nvec`` / ``action_box`` of a ``Discrete`` or ``MultiDiscrete`` (values from 0)
    or flat, bounded ``Box`` action space."""
    if isinstance(space, gym.spaces.Discrete) and int(getattr(space, "start", 0)) == 0:
        return dict(num_actions=int(space.n))
    if isinstance(space, gym.spaces.MultiDiscrete) and space.nvec.ndim == 1 and not np.any(getattr(space, "start", 0)):
        nvec = tuple(int(n) for n in space.nvec)
        return dict(num_actions=int(np.prod(nvec)), action_nvec=nvec)
    if (isinstance(space, gym.spaces.Box) and len(space.shape) == 1 and np.all(np.isfinite(space.low))
            and np.all(np.isfinite(space.high))):
        bounds = tuple(tuple(float(v) for v in bound) for bound in (space.low, space.high))
        return dict(num_actions=int(space.shape[0]), action_box=bounds)
    raise ValueError(f"trainers need a Discrete or MultiDiscrete action space (values from 0) or a flat, bounded Box "
                     f"one, got {space}")


def _jnp() -> Any:
    import jax.numpy as jnp  # the host loop's NumPy side needs no JAX

    return jnp
