"""Fixed-seed runs of every memory model and trainer equal the stored fingerprints (see make_golden.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.golden.make_golden import GOLDEN, memory_fingerprints, trainer_fingerprints

STORED = json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("part, compute", [("memory", memory_fingerprints), ("trainers", trainer_fingerprints)])
def test_fingerprints_unchanged(part, compute):
    now = compute()
    assert sorted(now) == sorted(STORED[part])
    for name, values in STORED[part].items():
        assert len(now[name]) == len(values), name
        np.testing.assert_allclose(now[name], values, rtol=2e-4, atol=1e-5, err_msg=name)
