"""Recurrent-state sizes of the thesis T-Maze models equal thesis Table 5.1 exactly.

Table 5.1 lists, "for a single head", the number of floating point values a
self-attention layer stores as its previous state: GTrXL-256 32768, ReLiT
16640, AReLiT 896, for the T-Maze configuration of Table A.2 (d = 128, 4 heads
of d_h = 64, 4 layers, η = 4, r = 1, GTrXL memory M = 256).

The counts here come from the real carry pytrees: ``initialize_carry()`` of the
models built by :func:`memgym.memory.make`. Only floating-point leaves count,
as in the table; the non-float bookkeeping leaves are checked separately so
that a new one cannot hide:

* AReLiT keeps one int32 step counter per layer (the episode step ``t`` in
  ``cos(ω_k t)``, eq. 4.20–4.21), shared by the layer's heads;
* GTrXL keeps one bool ``valid [M]`` mask per layer (which memory rows belong
  to the current episode), and a cache of the keys and values of its memory rows
  with the uint32 stamp of the parameters that made them: derived values, which
  speed up acting and are not state (the next step's output is a function of
  ``mem`` and the parameters alone), so they are counted apart.

Per head and per layer: ReLiT's and AReLiT's carries are a tuple over layers
whose float leaves carry a leading head axis, so the per-layer count is divided
by the number of heads. GTrXL's carry is one ``mem [M, d]`` per layer shared by
all heads (every head projects its keys and values from it), so it is *not*
divided by heads: the 32768 = M·d of Table 5.1 is the memory of one layer.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from memgym import memory

LAYERS, HEADS, HEAD_DIM, WIDTH = 4, 4, 64, 128  # thesis Table A.2 (T-Maze)
TRANSFORMER = dict(features=WIDTH, num_layers=LAYERS, num_heads=HEADS, head_dim=HEAD_DIM)


def floats(tree) -> int:
    """Number of floating-point values among the leaves of ``tree``."""
    return sum(leaf.size for leaf in jax.tree.leaves(tree) if jnp.issubdtype(leaf.dtype, jnp.floating))


def non_float_leaves(tree) -> list[tuple[tuple[int, ...], str]]:
    return [(leaf.shape, str(leaf.dtype)) for leaf in jax.tree.leaves(tree) if not jnp.issubdtype(leaf.dtype, jnp.floating)]


@pytest.mark.parametrize(
    ("name", "config", "per_head"),
    [
        ("relit", dict(eta=4), 16640),  # C [d_h, η d_h] + s [η d_h] = 64·256 + 256
        ("arelit", dict(eta=4, r=1), 896),  # (r+1)(d_h + η d_h) + η d_h = 2·(64 + 256) + 256
    ],
)
def test_relit_family_state_per_head_per_layer_matches_table_5_1(name, config, per_head):
    carry = memory.make(name, **TRANSFORMER, **config).initialize_carry()
    assert len(carry) == LAYERS
    for heads_carry, extra in carry:  # (per-head leaves, state shared by the heads)
        assert all(leaf.shape[0] == HEADS for leaf in jax.tree.leaves(heads_carry))
        assert floats(heads_carry) == HEADS * per_head
        assert floats(extra) == 0
    assert floats(carry) == LAYERS * HEADS * per_head
    expected_bookkeeping = [((), "int32")] * LAYERS if name == "arelit" else []
    assert non_float_leaves(carry) == expected_bookkeeping


def test_gtrxl_256_state_per_layer_matches_table_5_1():
    memory_size = 256
    carry = memory.make("gtrxl", **TRANSFORMER, memory_size=memory_size).initialize_carry()
    assert len(carry) == LAYERS
    for layer in carry:
        assert layer.mem.shape == (memory_size, WIDTH)  # shared by the heads: no head axis to divide by
        assert floats(layer.mem) == 32768 == memory_size * WIDTH
        assert floats((layer.keys, layer.values)) == 2 * memory_size * HEADS * HEAD_DIM  # the cache
    assert floats([layer.mem for layer in carry]) == LAYERS * 32768
    assert floats(carry) == LAYERS * (32768 + 2 * memory_size * HEADS * HEAD_DIM)
    assert non_float_leaves(carry) == [((memory_size,), "bool"), ((2,), "uint32")] * LAYERS


def test_space_ratios_quoted_in_sections_3_3_and_4_2():
    """§3.3: with d = 256, GTrXL (M = 512) stores 7.87× more than ReLiT; §4.2: ReLiT 5.9× more than AReLiT (r = 7).

    (§4.2's "52.51× less space" than GTrXL matches r·(d_h + η d_h) + η d_h = 2496 floats rather than the
    (r+1)·(…) = 2816 of Alg. 6; the 5.9× ratio, like Table 5.1, uses r + 1.)
    """
    wide = dict(TRANSFORMER, features=256)
    per_layer = lambda name, **config: floats(memory.make(name, **wide, **config).initialize_carry()) // LAYERS  # noqa: E731
    gtrxl = floats([layer.mem for layer in memory.make("gtrxl", **wide, memory_size=512).initialize_carry()]) // LAYERS
    relit = per_layer("relit", eta=4) // HEADS
    arelit = per_layer("arelit", eta=4, r=7) // HEADS
    assert (gtrxl, relit, arelit) == (131072, 16640, 2816)
    assert gtrxl / relit == pytest.approx(7.87, abs=0.01)
    assert relit / arelit == pytest.approx(5.9, abs=0.01)
