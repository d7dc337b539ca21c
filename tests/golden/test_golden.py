"""Fixed-seed runs of every memory model and trainer equal the stored fingerprints (see make_golden.py), and the
hash leaves left out of them mean what they should."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.golden.make_golden import (
    GOLDEN,
    hash_leaves,
    memory_fingerprints,
    memory_run,
    trainer_fingerprints,
)

STORED = json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("part, compute", [("memory", memory_fingerprints), ("trainers", trainer_fingerprints)])
@pytest.mark.slow(seconds=68)
def test_fingerprints_unchanged(part, compute):
    now = compute()
    assert sorted(now) == sorted(STORED[part])
    for name, values in STORED[part].items():
        assert len(now[name]) == len(values), name
        np.testing.assert_allclose(now[name], values, rtol=2e-4, atol=1e-5, err_msg=name)


@pytest.mark.slow
def test_gtrxl_stamps_are_equal_for_equal_parameters_and_change_with_an_update():
    """GTrXL's carry stamps (one per layer, a 64-bit hash of the parameters its key/value cache was made with) are
    checked by what they mean, not by their value: equal parameters (the same ones copied, on another tape, in a
    streaming step) give equal stamps; each layer's own parameters give it its own stamp; a training update
    changes every stamp."""
    run = memory_run("gtrxl")
    stamps = hash_leaves(run.carry_out)
    assert len(stamps) == run.model.num_layers
    assert all(stamp.dtype == np.uint32 and stamp.shape == (2,) for stamp in stamps)
    assert not any(np.array_equal(stamp, empty) for stamp, empty in zip(stamps, hash_leaves(run.carry), strict=True))
    assert len({tuple(stamp) for stamp in stamps}) == len(stamps)

    copied = jax.tree.map(lambda p: jnp.array(p, copy=True), run.params)
    for _, carry in (run.model.apply(copied, run.x, run.start, run.carry),
                     run.model.apply(run.params, run.x[::-1] * 2.0, jnp.zeros_like(run.start), run.carry),
                     run.model.apply(run.params, run.x[:1], run.start[:1], run.carry)):
        for stamp, again in zip(stamps, hash_leaves(carry), strict=True):
            np.testing.assert_array_equal(again, stamp)

    updated = jax.tree.map(lambda p, g: p - 0.01 * g, run.params, run.grad)
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(updated), jax.tree.leaves(run.params)))
    _, carry = run.model.apply(updated, run.x, run.start, run.carry)
    for stamp, after in zip(stamps, hash_leaves(carry), strict=True):
        assert not np.array_equal(after, stamp)
