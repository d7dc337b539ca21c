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


class Conv3x3(nn.Module):
    """A 3×3 convolution, stride 1, ``SAME`` zero padding: ``nn.Conv(features, (3, 3))``'s parameters
    (``kernel [3, 3, C, features]``, ``bias [features]``) and values, computed as one matrix product.

    The nine shifted copies of the padded input are concatenated along channels (``[N, H, W, 9C]``, in
    the kernel's ``(row, column, channel)`` order) and multiplied by the kernel reshaped to
    ``[9C, features]``. XLA's CPU backend runs a convolution's gradient inside a loop (PPO's scan over
    minibatches) 11-28× slower than outside one, while this form's gradient is slices and matrix
    products everywhere: ``benchmarks/encoder_speed.py``, docs/memory_maze.md.
    """

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        height, width, channels = x.shape[-3:]
        kernel = self.param("kernel", HIDDEN, (3, 3, channels, self.features))
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,))
        padded = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)])
        patches = jnp.concatenate([padded[..., row:row + height, column:column + width, :]
                                   for row in range(3) for column in range(3)], axis=-1)
        return patches @ kernel.reshape(9 * channels, self.features) + bias


class ResidualBlock(nn.Module):
    """``x + conv(relu(conv(relu(x))))`` with 3×3 convolutions that keep the channel count."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        channels = x.shape[-1]
        y = Conv3x3(channels, name="Conv_0")(nn.relu(x))
        y = Conv3x3(channels, name="Conv_1")(nn.relu(y))
        return x + y


class ImpalaResNet(nn.Module):
    """IMPALA's ResNet image encoder: ``image[N, H, W, C]`` in [0, 1] -> ``features[N, features]``."""

    channels: tuple[int, ...] = (16, 32, 32)
    features: int = 256

    @nn.compact
    def __call__(self, image: jax.Array) -> jax.Array:
        x = image
        for stage, channels in enumerate(self.channels):
            x = Conv3x3(channels, name=f"Conv_{stage}")(x)
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
