"""The shared model machinery: MonoidMemory's one ``__call__``, the gated-transformer stack and its gate.

* A new memory monoid needs only its parts: a running mean, written in a few lines as a
  :class:`MonoidMemory`, gets resets, the carry, chunking and streaming from the base.
* Every memory-monoid model of the registry is a :class:`MonoidMemory`, and every gated
  transformer (linear attention, ReLiT, AReLiT, GTrXL) runs the one layer loop.
* :class:`GRUGate`'s two parameter layouts compute the same gate.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym import memory
from memgym.memory.attention import MultiHeadMonoidAttention
from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import MonoidMemory, Tape
from memgym.memory.transformer import GatedTransformer, GRUGate


class RunningMean(MonoidMemory):
    """``y_t`` = the mean of ``W x`` over the episode so far: the monoid of (sum, count) pairs."""

    features: int = 3
    chunk_size: int | None = None

    def initialize_carry(self):
        return jnp.zeros((self.features,)), jnp.zeros(())

    def monoid(self) -> Monoid:
        return Monoid(op=lambda a, b: jax.tree.map(jnp.add, a, b), identity=lambda like: jax.tree.map(jnp.zeros_like, like))

    def project(self, x, start, carry) -> Tape:
        return Tape(inputs=nn.Dense(self.features, use_bias=False, name="w")(x))

    def encode(self, inputs):
        return inputs, jnp.ones(inputs.shape[0])

    def read(self, states, queries, weights):
        total, count = states
        return total / count[:, None]


def reference_mean(projected: np.ndarray, start: np.ndarray, carry: tuple[np.ndarray, float]) -> np.ndarray:
    total, count = np.asarray(carry[0], np.float64), float(carry[1])
    out = []
    for t in range(len(start)):
        if start[t]:
            total, count = np.zeros_like(total), 0.0
        total, count = total + projected[t], count + 1.0
        out.append(total / count)
    return np.stack(out)


@pytest.mark.parametrize("chunk_size", [None, 1, 4])
def test_a_new_memory_monoid_needs_only_its_parts(chunk_size):
    model = RunningMean(chunk_size=chunk_size)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(11, 2)), jnp.float32)
    start = np.zeros(11, bool)
    start[[0, 6]] = True
    carry_in = (jnp.ones(3), jnp.asarray(2.0))
    params = model.init(jax.random.key(0), x, start, model.initialize_carry())
    y, (total, count) = model.apply(params, x, start, carry_in)
    projected = np.asarray(x) @ np.asarray(params["params"]["w"]["kernel"])
    np.testing.assert_allclose(y, reference_mean(projected, start, carry_in), rtol=1e-5, atol=1e-6)
    assert float(count) == 5.0  # steps since the last episode start
    # Without a start flag at step 0 the carry flows in; streaming gives the same outputs.
    start[0] = False
    y, _ = model.apply(params, x, start, carry_in)
    np.testing.assert_allclose(y, reference_mean(projected, start, carry_in), rtol=1e-5, atol=1e-6)
    carry, steps = carry_in, []
    for t in range(11):
        y_t, carry = model.apply(params, x[t : t + 1], start[t : t + 1], carry)
        steps.append(y_t[0])
    np.testing.assert_allclose(np.stack(steps), y, rtol=1e-5, atol=1e-6)


def test_models_share_the_machinery():
    for name in ("s5", "lru", "ffm", "linear_attention_monoid"):
        assert issubclass(memory.model_class(name), MonoidMemory), name
    for name in ("linear_attention", "relit", "arelit", "gtrxl"):
        cls = memory.model_class(name)
        assert issubclass(cls, GatedTransformer) and "__call__" not in cls.__dict__, name
    for name in ("linear_attention", "relit", "arelit"):
        mixer = memory.make(name, features=8, num_heads=2, head_dim=4).mixer(parent=None)
        assert isinstance(mixer, MultiHeadMonoidAttention) and isinstance(mixer, MonoidMemory), name


def test_gate_layouts_compute_the_same_gate():
    """``fused`` only lays out the parameters differently: W = [W_r | W_z | W_g], U = [U_r | U_z]."""
    rng = np.random.default_rng(1)
    d = 4
    x, y = (jnp.asarray(rng.normal(size=(5, d)), jnp.float32) for _ in range(2))
    fused = GRUGate(1.5, fused=True)
    p = fused.init(jax.random.key(0), x, y)["params"]
    w_kernel, u_kernel = np.split(p["W"]["kernel"], 3, axis=1), np.split(p["U"]["kernel"], 2, axis=1)
    separate = {
        **{name: {"kernel": w_kernel[i]} for i, name in enumerate(("w_r", "w_z", "w_g"))},
        "u_r": {"kernel": u_kernel[0]},
        "u_z": {"kernel": u_kernel[1]},
        "u_g": {"kernel": p["U_g"]["kernel"]},
        "b_g": p["b_g"],
    }
    assert jax.tree.structure(GRUGate(1.5).init(jax.random.key(0), x, y)["params"]) == jax.tree.structure(separate)
    np.testing.assert_allclose(
        GRUGate(1.5).apply({"params": separate}, x, y), fused.apply({"params": p}, x, y), rtol=1e-5, atol=1e-6
    )
    # With a large gate bias the gate is the identity on the residual stream.
    np.testing.assert_allclose(GRUGate(1e4).apply({"params": {**separate, "b_g": jnp.full(d, 1e4)}}, x, y), x,
                               atol=1e-6)


def test_gate_is_parisottos_bias_free_matrices_and_a_learned_gate_bias():
    """Parisotto et al. eq. 6–9: no bias on any W or U; ``b_g`` a learned vector that starts at ``gate_bias``;
    the gate computed from those parameters by the equations, written out here in NumPy."""
    rng = np.random.default_rng(2)
    d = 6
    x, y = (rng.normal(size=(3, d)).astype(np.float32) for _ in range(2))
    for fused in (False, True):
        params = GRUGate(2.0, fused=fused).init(jax.random.key(1), x, y)["params"]
        assert [name for name, leaf in params.items() if name != "b_g" and set(leaf) != {"kernel"}] == []
        np.testing.assert_array_equal(params["b_g"], np.full(d, 2.0, np.float32))
        trained = {**params, "b_g": jnp.asarray(rng.normal(size=d), jnp.float32)}  # a moved b_g is used
        if fused:
            w_r, w_z, w_g = np.split(np.asarray(trained["W"]["kernel"]), 3, axis=1)
            u_r, u_z = np.split(np.asarray(trained["U"]["kernel"]), 2, axis=1)
            u_g = np.asarray(trained["U_g"]["kernel"])
        else:
            w_r, w_z, w_g, u_r, u_z, u_g = (np.asarray(trained[n]["kernel"])
                                            for n in ("w_r", "w_z", "w_g", "u_r", "u_z", "u_g"))
        sigmoid = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
        r = sigmoid(y @ w_r + x @ u_r)
        z = sigmoid(y @ w_z + x @ u_z - np.asarray(trained["b_g"]))
        h = np.tanh(y @ w_g + (r * x) @ u_g)
        np.testing.assert_allclose(GRUGate(2.0, fused=fused).apply({"params": trained}, x, y), (1 - z) * x + z * h,
                                   rtol=1e-5, atol=1e-6)
