"""The results store never overwrites a cell and writes atomically."""

from __future__ import annotations

import json

import pytest

from memgym.leaderboard.store import CellExistsError, ResultsStore, provenance


def test_write_read_and_never_overwrite(tmp_path):
    store = ResultsStore(tmp_path)
    path = store.write("agent", 120, 0, {"eval": {"success_rate": 0.5}})
    assert store.has("agent", 120, 0) and path.name == "seed0.json"
    with pytest.raises(CellExistsError, match="never overwritten"):
        store.write("agent", 120, 0, {"eval": {"success_rate": 1.0}})
    assert json.loads(path.read_text())["eval"]["success_rate"] == 0.5
    assert [r["eval"]["success_rate"] for r in store.records()] == [0.5]
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".cell-")]  # no temporary files left


def test_provenance_names_versions():
    info = provenance()
    assert {"memgym", "python", "platform", "created"} <= set(info)
