"""Observation encoders: the "representation layer" in front of the memory model (thesis §2.3, Fig. 2.1).

Vector observations (T-Maze, POPGym) go to the memory model as they are: every
memory model starts with its own input projection. Image observations (Memory
Maze) first pass a convolutional network, as in thesis §5.2.2, which adapts the
DMLab architecture of Sample Factory (Petrenko et al. 2020): the ResNet of
IMPALA (Espeholt et al. 2018) — three stages of a 3×3 convolution, a 3×3 max
pool with stride 2 and two residual blocks, with 16, 32 and 32 channels — then a
ReLU dense layer of 256 features.

Host loops keep observations that hold an image as one flat ``uint8`` vector per
step (image bytes first, then the other parts quantised to bytes; see
:class:`~memgym.agents.spec.ObservationLayout`), so rollouts and replay buffers
cost 1 byte per pixel. :class:`ObservationEncoder` undoes that layout inside the
network: it reshapes the first ``H·W·C`` entries into the image, scales
everything to [0, 1] and concatenates the image features with the remaining
entries.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.initializers import HIDDEN


class ResidualBlock(nn.Module):
    """``x + conv(relu(conv(relu(x))))`` with 3×3 convolutions that keep the channel count."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        y = nn.Conv(channels, (3, 3), padding="SAME", kernel_init=HIDDEN)(nn.relu(x))
        y = nn.Conv(channels, (3, 3), padding="SAME", kernel_init=HIDDEN)(nn.relu(y))
        return x + y


class ImpalaResNet(nn.Module):
    """IMPALA's ResNet image encoder: ``image[N, H, W, C]`` in [0, 1] -> ``features[N, features]``."""

    channels: tuple[int, ...] = (16, 32, 32)
    features: int = 256

    @nn.compact
    def __call__(self, image: jax.Array) -> jax.Array:
        x = image
        for channels in self.channels:
            x = nn.Conv(channels, (3, 3), padding="SAME", kernel_init=HIDDEN)(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = ResidualBlock()(x)
            x = ResidualBlock()(x)
        x = nn.relu(x).reshape(x.shape[0], -1)
        return nn.relu(nn.Dense(self.features, kernel_init=HIDDEN)(x))


class ObservationEncoder(nn.Module):
    """``obs[T, D] -> inputs[T, F]`` for the memory model.

    With ``image_shape = None`` the observation is only cast to float32. With an
    ``image_shape`` ``(H, W, C)`` the observation is the byte layout described in
    the module docstring and ``F = 256 + D − H·W·C``.
    """

    image_shape: tuple[int, int, int] | None = None

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        if self.image_shape is None:
            return obs.astype(jnp.float32)
        pixels = math.prod(self.image_shape)
        if obs.shape[-1] < pixels:
            raise ValueError(f"observations of size {obs.shape[-1]} cannot hold an image of shape {self.image_shape}")
        scaled = obs.astype(jnp.float32) / 255.0
        image = scaled[:, :pixels].reshape((obs.shape[0],) + tuple(self.image_shape))
        return jnp.concatenate([ImpalaResNet(name="resnet")(image), scaled[:, pixels:]], axis=-1)
