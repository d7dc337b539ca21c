"""The results store is append-only, atomic, schema-versioned and keeps repeats."""

from __future__ import annotations

import json
import os

import pytest

from memgym.leaderboard.store import SCHEMA_VERSION, ResultsStore, backend, provenance


def cell(seed: int = 0, status: str = "ok", **fields) -> dict:
    """A well-formed record of a cell (the store skips records that lack what the board needs)."""
    record = {"agent": "a:f", "seed": seed, "status": status, "corridor_length": 120,
              "preset": {"name": "tiny", "total_steps": 10}, **fields}
    if status == "ok":
        record = {"train": {"success_rate": 0.0}, "eval": {"success_rate": 0.0}, **record}
    return record


def test_results_are_appended_never_overwritten(tmp_path):
    store = ResultsStore(tmp_path)
    first = store.write("agent", 120, 0, cell(status="failed", reason="boom"))
    assert first.name == "seed0.json" and store.finished("agent", 120, 0) is None
    second = store.write("agent", 120, 0, cell(eval={"success_rate": 0.5}))
    third = store.write("agent", 120, 0, cell(eval={"success_rate": 1.0}))
    assert (second.name, third.name) == ("seed0.r1.json", "seed0.r2.json")
    assert json.loads(first.read_text())["reason"] == "boom"  # the failure is kept
    assert store.finished("agent", 120, 0)["eval"]["success_rate"] == 0.5  # the first ok result counts
    assert [r["status"] for r in store.results("agent", 120, 0)] == ["failed", "ok", "ok"]
    assert all(r["schema"] == SCHEMA_VERSION for r in store.records())
    store.write("agent", 120, 1, cell(1))
    store.write("agent", 140, 0, cell(corridor_length=140))
    assert len(store.paths("agent", 120, 1)) == 1 and len(list(store.records())) == 5
    assert not [p for p in tmp_path.rglob(".cell-*")]  # no temporary files left


def test_a_taken_name_is_skipped_not_replaced(tmp_path):
    store = ResultsStore(tmp_path)
    folder = store.cell_dir("agent", 120)
    folder.mkdir(parents=True)
    (folder / "seed3.json").write_text(json.dumps({"schema": 1, "status": "ok", "mine": True}))
    path = store.write("agent", 120, 3, {"status": "ok"})
    assert path.name == "seed3.r1.json" and json.loads((folder / "seed3.json").read_text())["mine"]


def test_records_from_a_newer_schema_are_refused(tmp_path):
    store = ResultsStore(tmp_path)
    folder = store.cell_dir("agent", 120)
    folder.mkdir(parents=True)
    (folder / "seed0.json").write_text(json.dumps({"schema": SCHEMA_VERSION + 1, "status": "ok"}))
    with pytest.raises(ValueError, match="newer than this memgym"):
        list(store.records())


def test_provenance_names_versions_and_hardware():
    info = provenance()
    assert {"memgym", "python", "platform", "cpu", "created", "jax", "jaxlib", "flax", "device"} <= set(info)


def test_the_backend_fingerprint_names_what_changes_xlas_numbers(monkeypatch):
    """Every JAX provenance carries the backend: jax/jaxlib, device kind, XLA flags and, on a CPU, the processor's
    identity, instruction-set extensions and core count; the fingerprint changes with each of them."""
    info = provenance()
    parts = info["backend"]
    assert {"jax", "jaxlib", "device", "xla_flags", "cpu_id", "isa", "cpu_count", "fingerprint"} <= set(parts)
    assert parts["device"].lower() == "cpu" and parts["cpu_count"] == os.cpu_count()
    if parts["machine"] == "x86_64":
        assert "sse2" in parts["isa"] and not {"flags", "hypervisor"} & set(parts["isa"])
    assert backend(info)["fingerprint"] == parts["fingerprint"]  # a pure function of the machine and the flags
    capped = backend(info, "--xla_cpu_max_isa=AVX2")
    assert capped["xla_flags"] == "--xla_cpu_max_isa=AVX2" and capped["fingerprint"] != parts["fingerprint"]
    monkeypatch.setenv("XLA_FLAGS", "  --xla_cpu_max_isa=AVX2 ")
    assert backend(info)["fingerprint"] == capped["fingerprint"]  # spacing in the flags does not matter
    assert backend(dict(info, jaxlib="0.0.1"))["fingerprint"] != capped["fingerprint"]
    gpu = backend(dict(info, device="NVIDIA H100 80GB HBM3"), "")
    assert "isa" not in gpu and "cpu_count" not in gpu  # a GPU's numbers do not depend on its host processor
