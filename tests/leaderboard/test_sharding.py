"""The JAX tier's cell batch sharded over several devices gives the single-device results.

CPU stands in for accelerators: ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
makes XLA expose four CPU devices. The flag must be set before JAX starts, so each
run is a fresh subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .test_harness import TINY

SCRIPT = """
import json, sys
import jax
from memgym.leaderboard.running import runner
from memgym.leaderboard.running.jax_tier import JaxCells
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.tracks import TMAZE, Preset
budget = Preset("tiny", **json.loads(sys.argv[2]))
store = runner.run([sys.argv[3]], budget, sys.argv[1], log=lambda line: None)
agent = load_factory(sys.argv[3])(TMAZE.context())  # the batch the runner would build for the whole grid
keys, *_ = JaxCells(agent, TMAZE, budget).batch(
    [(length, seed) for length in budget.values for seed in range(budget.seeds)])
records = sorted(
    ({k: r[k] for k in ("corridor_length", "seed", "status", "train", "eval")} for r in store.records()),
    key=lambda r: (r["corridor_length"], r["seed"]),
)
print(json.dumps({"devices": jax.device_count(), "key_shards": len(keys.sharding.device_set),
                  "records": records}))
"""


def run(tmp_path, devices: int, agent: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "JAX_PLATFORMS": "cpu"}
    budget = {**TINY, "values": list(TINY["values"])}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / f"d{devices}"), json.dumps(budget), agent],
        capture_output=True, text=True, env=env, timeout=600, cwd=os.getcwd(),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.slow
def test_sharded_cells_equal_single_device(tmp_path):
    # Built-in agents take the same path (JaxCells); the example agent compiles fastest.
    agent = "examples.jax_agent:factory"
    one, four = run(tmp_path, 1, agent), run(tmp_path, 4, agent)
    assert (one["devices"], one["key_shards"]) == (1, 1)
    assert (four["devices"], four["key_shards"]) == (4, 4)  # the cell batch really is spread over 4 devices
    assert len(four["records"]) == 4 and all(r["status"] == "ok" for r in four["records"])
    assert four["records"] == one["records"]
