"""Agent networks: a memory model shared by an actor and a critic head, or a dueling Q head.

Thesis §5.1.2: "a shared representation learning layer followed by separate actor
and critic heads … a 2-layer neural network with tanh activations", "the hidden layer"
of width 128: one hidden tanh layer and the output layer (``head_layers=1``), as the thesis
authors' code builds its heads.
Heads use orthogonal initialisation (gain √2 for hidden layers, 0.01 for the
policy logits, 1 for the value), the usual A2C/PPO choice; the policy logits' gain is
an option (``policy_gain``: the thesis authors' code uses √2).

Observations pass an :class:`~memgym.agents.encoders.ObservationEncoder` first
(a ResNet when they hold an image). Both networks take one stream — ``obs[T, O]``, ``start[T]``, a memory carry — and
batch with ``jax.vmap``; ``T = 1`` acts, a tape replays.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym import memory as memory_lib
from memgym.agents.encoders import ObservationEncoder
from memgym.memory.initializers import HIDDEN, orthogonal
from memgym.memory.monoid import scan_in_chunks

Carry = Any


def mlp(width: int, layers: int, out: int, out_gain: float, name: str) -> nn.Module:
    """``layers`` tanh layers of ``width`` then a linear output of size ``out`` (orthogonal init)."""
    hidden = [nn.Dense(width, kernel_init=HIDDEN, name=f"{name}_{i}") for i in range(layers)]
    output = nn.Dense(out, kernel_init=orthogonal(out_gain), name=f"{name}_out")

    def apply(x: jax.Array) -> jax.Array:
        for layer in hidden:
            x = jnp.tanh(layer(x))
        return output(x)

    return apply


class ActorCritic(nn.Module):
    """``(obs[T, O], start[T], carry) -> (logits[T, A], value[T], carry)``; with ``gaussian`` the policy's
    ``[mean | log_std]`` (``[T, 2A]``) in place of the logits."""

    memory_name: str
    memory_config: tuple[tuple[str, Any], ...]
    num_actions: int
    head_width: int = 128
    head_layers: int = 1
    image_shape: tuple[int, int, int] | None = None  # observations hold an image (see agents.encoders)
    policy_gain: float = 0.01  # orthogonal gain of the policy logits (ActorCriticFields.policy_gain)
    gaussian: bool = False  # a Gaussian policy over num_actions real entries (a Box action space)

    def initialize_carry(self) -> Carry:
        return memory_carry(self.memory_name, self.memory_config)

    @nn.compact
    def __call__(self, obs: jax.Array, start: jax.Array, carry: Carry) -> tuple[jax.Array, jax.Array, Carry]:
        inputs = ObservationEncoder(self.image_shape, name="encoder")(obs)
        features, carry = memory_lib.model_class(self.memory_name)(**dict(self.memory_config), name="memory")(
            inputs, start, carry
        )
        logits = mlp(self.head_width, self.head_layers, self.num_actions, self.policy_gain, "actor")(features)
        if self.gaussian:  # the actor gives the mean; the log standard deviations are learned, one per entry
            log_std = self.param("log_std", nn.initializers.zeros, (self.num_actions,))
            logits = jnp.concatenate([logits, jnp.broadcast_to(log_std, logits.shape)], axis=-1)
        value = mlp(self.head_width, self.head_layers, 1, 1.0, "critic")(features)[:, 0]
        return logits, value, carry


class DuelingQNetwork(nn.Module):
    """``(obs[T, O], start[T], carry) -> (q[T, A], carry)`` with ``Q = V + A − mean(A)`` (Wang et al. 2016)."""

    memory_name: str
    memory_config: tuple[tuple[str, Any], ...]
    num_actions: int
    head_width: int = 128
    image_shape: tuple[int, int, int] | None = None

    def initialize_carry(self) -> Carry:
        return memory_carry(self.memory_name, self.memory_config)

    @nn.compact
    def __call__(self, obs: jax.Array, start: jax.Array, carry: Carry) -> tuple[jax.Array, Carry]:
        inputs = ObservationEncoder(self.image_shape, name="encoder")(obs)
        features, carry = memory_lib.model_class(self.memory_name)(**dict(self.memory_config), name="memory")(
            inputs, start, carry
        )
        value = mlp(self.head_width, 1, 1, 1.0, "value")(features)
        advantage = mlp(self.head_width, 1, self.num_actions, 1.0, "advantage")(features)
        return value + advantage - advantage.mean(axis=-1, keepdims=True), carry


def replay_in_chunks(apply, obs: jax.Array, start: jax.Array, carry: Carry, chunk_size: int):
    """The outputs of ``apply(obs[T, ...], start[T], carry) -> (outputs [T, ...], carry)`` over one stream's tape,
    computed in checkpointed pieces of at most ``chunk_size`` steps.

    The tape is cut into even pieces (:func:`~memgym.memory.monoid.scan_in_chunks`) run one after
    the other, each from the carry the previous one ended with, so the outputs equal one call on
    the whole tape: that is the memory-model contract (a tape's outputs do not depend on where it is
    cut). In the backward pass each piece is recomputed from its incoming carry, so only the
    carries at piece boundaries and one piece's activations are alive at once: the memory of the
    activations falls from ``T`` steps to ``chunk_size`` for one more forward pass. A recurrent
    model whose carry is small (AReLiT's vectors) gains the most. Gradients flow from a piece to
    the ones before it through the carry, so a model whose carry enters a call without gradients
    (``carry_passes_gradients = False``: GTrXL) would train differently; the trainers refuse it.
    Padding steps after the tape cannot change its outputs (every model is causal), so the carry
    after the tape is not returned.
    """

    def body(carry, piece, _valid):
        piece_obs, piece_start = piece
        outputs, carry = apply(piece_obs, piece_start, carry)
        return carry, outputs

    outputs, _ = scan_in_chunks(body, carry, (obs, start), chunk_size)
    return outputs


def memory_carry(name: str, config: tuple[tuple[str, Any], ...]) -> Carry:
    """The initial carry of memory model ``name`` (built outside any parent module)."""
    return memory_lib.model_class(name)(**dict(config), parent=None).initialize_carry()


def frozen_config(config: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A hashable form of a memory config (flax module fields must be hashable)."""
    return tuple(sorted(config.items()))
