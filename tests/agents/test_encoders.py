"""Observation layouts of host loops and the image encoder in front of the memory (thesis §5.2.2)."""

from __future__ import annotations

import gymnasium as gym
import jax
import flax.linen as nn
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.agents.a2c import A2CConfig
from memgym.agents.dqn import DQNConfig
from memgym.agents.ppo import PPOConfig
from memgym.agents.encoders import ImpalaResNet, ObservationEncoder
from memgym.agents.spec import EnvSpec, ObservationLayout

IMAGE = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)
PIXEL_SPACE = gym.spaces.Dict(image=IMAGE, target_color=gym.spaces.Box(0.0, 1.0, (3,), np.float32))


def test_vector_layout_is_float32_passthrough():
    layout = ObservationLayout(gym.spaces.Box(-1.0, 1.0, (5,), np.float64))
    assert (layout.size, layout.dtype, layout.image_shape) == (5, np.float32, None)
    batch = np.arange(10, dtype=np.float64).reshape(2, 5)
    np.testing.assert_array_equal(layout.flatten(batch), batch.astype(np.float32))
    assert layout.flatten(batch).dtype == np.float32


def test_pixel_layout_stores_bytes_image_first():
    layout = ObservationLayout(PIXEL_SPACE)
    assert layout.image_shape == (16, 16, 3) and layout.dtype == np.uint8 and layout.size == 16 * 16 * 3 + 3
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (4, 16, 16, 3), dtype=np.uint8)
    color = np.array([[1.0, 0.0, 0.5]] * 4, np.float32)
    flat = layout.flatten({"image": image, "target_color": color})
    assert flat.shape == (4, layout.size) and flat.dtype == np.uint8
    np.testing.assert_array_equal(flat[:, :768].reshape(image.shape), image)
    np.testing.assert_array_equal(flat[:, 768:], [[255, 0, 128]] * 4)
    np.testing.assert_array_equal(layout.flatten_one({"image": image[1], "target_color": color[1]}), flat[1])
    assert flat[0].shape == (layout.size,) and flat[0].dtype == layout.dtype


@pytest.mark.parametrize("space, match", [
    (gym.spaces.Box(0, 1, (2, 2), np.float32), "flat Box"),
    (gym.spaces.Dict(x=gym.spaces.Box(0, 1, (2,), np.float32)), "'image' part"),
    (gym.spaces.Dict(image=gym.spaces.Box(0, 1, (4, 4, 3), np.float32)), "uint8 Box"),
    (gym.spaces.Dict(image=IMAGE, speed=gym.spaces.Box(-2.0, 2.0, (1,), np.float32)), "'speed'"),
])
def test_unsupported_observation_spaces_are_named(space, match):
    with pytest.raises(ValueError, match=match):
        ObservationLayout(space)


def test_host_spaces_need_discrete_or_bounded_box_actions():
    spec = EnvSpec.from_spaces(PIXEL_SPACE, gym.spaces.Box(-1, 1, (2,), np.float32))
    assert spec.action_box == ((-1.0, -1.0), (1.0, 1.0)) and spec.image_shape is not None
    with pytest.raises(ValueError, match="Discrete or MultiDiscrete action space"):
        EnvSpec.from_spaces(PIXEL_SPACE, gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))


@pytest.mark.slow(seconds=14)
def test_resnet_downsamples_three_times():
    encoder = ImpalaResNet()
    image = jnp.zeros((2, 64, 64, 3))
    params = encoder.init(jax.random.key(0), image)
    assert encoder.apply(params, image).shape == (2, 256)
    # 64 -> 32 -> 16 -> 8 pixels, 32 channels into the dense layer.
    assert params["params"]["Dense_0"]["kernel"].shape == (8 * 8 * 32, 256)


@pytest.mark.slow
def test_encoder_reads_both_the_image_and_the_vector_part():
    encoder = ObservationEncoder((16, 16, 3))
    rng = np.random.default_rng(1)
    obs = rng.integers(0, 256, (3, 16 * 16 * 3 + 3)).astype(np.uint8)
    params = encoder.init(jax.random.key(0), obs)
    out = encoder.apply(params, obs)
    assert out.shape == (3, 256 + 3) and out.dtype == jnp.float32
    np.testing.assert_allclose(out[:, 256:], obs[:, -3:] / 255.0, rtol=1e-6)
    changed = obs.copy()
    changed[:, :768] = 255 - changed[:, :768]
    assert not np.allclose(encoder.apply(params, changed)[:, :256], out[:, :256])
    grads = jax.grad(lambda p: encoder.apply(p, obs).sum())(params)
    assert all(np.isfinite(g).all() for g in jax.tree.leaves(grads))
    assert any(np.abs(g).sum() > 0 for g in jax.tree.leaves(grads))


def test_encoder_without_image_only_casts():
    obs = np.arange(6, dtype=np.float32).reshape(2, 3)
    encoder = ObservationEncoder()
    params = encoder.init(jax.random.key(0), obs)
    assert jax.tree.leaves(params) == []
    np.testing.assert_array_equal(encoder.apply(params, obs), obs)


@pytest.mark.parametrize("config", [
    A2CConfig(memory="tiny-gru", num_envs=2, rollout_length=4, total_steps=8),
    PPOConfig(memory="tiny-gru", num_envs=2, rollout_length=4, total_steps=8, num_minibatches=2),
    DQNConfig(memory="tiny-gru", num_envs=2, batch_size=8, buffer_size=64, learning_starts=0, total_steps=8),
])
def test_trainers_put_the_resnet_in_front_of_the_memory_for_images(config):
    from memgym.agents.registry import make_trainer

    trainer = make_trainer(config, EnvSpec.from_spaces(PIXEL_SPACE, gym.spaces.Discrete(6)))
    assert trainer.spec.image_shape == (16, 16, 3) and trainer.spec.obs_dtype == np.uint8
    params = trainer.init_params(jax.random.key(0))
    assert "resnet" in params["params"]["encoder"]


def test_patch_convolution_equals_flax_conv_and_its_gradient():
    """Conv3x3 (one matrix product over shifted copies) has nn.Conv's parameters, initial values, outputs
    and gradients (SAME padding, stride 1), also with extra leading batch axes."""
    from memgym.agents.encoders import Conv3x3
    from memgym.memory.initializers import HIDDEN

    x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 3, 9, 7, 5)), jnp.float32)
    ours, flax_conv = Conv3x3(6), nn.Conv(6, (3, 3), padding="SAME", kernel_init=HIDDEN)
    params = ours.init(jax.random.key(3), x)
    reference = flax_conv.init(jax.random.key(3), x)
    assert jax.tree.map(jnp.shape, params) == jax.tree.map(jnp.shape, reference)
    np.testing.assert_array_equal(params["params"]["kernel"], reference["params"]["kernel"])
    params = jax.tree.map(lambda p: p + 0.1, params)  # a non-zero bias too
    np.testing.assert_allclose(ours.apply(params, x), flax_conv.apply(params, x), rtol=1e-5, atol=1e-5)

    def loss(module, p):
        return (jnp.tanh(module.apply(p, x)) ** 2).sum()

    got, want = jax.grad(loss, argnums=1)(ours, params), jax.grad(loss, argnums=1)(flax_conv, params)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
