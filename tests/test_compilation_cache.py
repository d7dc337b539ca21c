"""JAX's persistent compilation cache under memgym's commands: where it lives, that it serves the training
function of a second run, and that it changes no result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memgym import compilation_cache


def test_the_cache_folder_follows_the_variables(monkeypatch, tmp_path):
    for name in ("MEMGYM_COMPILATION_CACHE", "JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert compilation_cache.cache_dir() == tmp_path / "home" / ".cache" / "memgym" / "jax"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compilation_cache.cache_dir() == tmp_path / "xdg" / "memgym" / "jax"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax-own"))
    assert compilation_cache.cache_dir() == tmp_path / "jax-own"
    monkeypatch.setenv("MEMGYM_COMPILATION_CACHE", str(tmp_path / "mine"))
    assert compilation_cache.cache_dir() == tmp_path / "mine"
    for off in ("off", "OFF", "0", "false", "no", ""):
        monkeypatch.setenv("MEMGYM_COMPILATION_CACHE", off)
        assert compilation_cache.cache_dir() is None and compilation_cache.enable() is None


def test_a_folder_that_cannot_be_used_is_a_clear_error(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("MEMGYM_COMPILATION_CACHE", str(blocker / "cache"))
    with pytest.raises(ValueError, match=r"cannot be used: it cannot be created .*set MEMGYM_COMPILATION_CACHE"):
        compilation_cache.enable()
    monkeypatch.setenv("MEMGYM_COMPILATION_CACHE", str(blocker))
    with pytest.raises(ValueError, match=r"'.*a-file' cannot be used: it is a file, not a folder; set MEMGYM_"):
        compilation_cache.enable()
    # A folder the user may not write to (faked: as root every folder is writable): refused, not left to JAX's
    # warnings that it could not store each entry.
    monkeypatch.setenv("MEMGYM_COMPILATION_CACHE", str(tmp_path / "read-only"))
    monkeypatch.setattr(compilation_cache.os, "access", lambda path, mode: False)
    with pytest.raises(ValueError, match=r"cannot be used: it is not writable; .*MEMGYM_COMPILATION_CACHE=off"):
        compilation_cache.enable()


def board_run(cwd: Path, results: str, cache: Path) -> list[dict]:
    # Every executable is stored (not only those that took JAX's default 1 s to compile), so that whether the
    # second run compiled anything does not hang on compile times near the threshold.
    env = {**os.environ, "MEMGYM_COMPILATION_CACHE": str(cache), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    out = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--agent", "a2c-tiny-gru",
                          "--preset", "smoke", "--values", "8", "--seeds", "1", "--results", results],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    records = sorted((json.loads(p.read_text()) for p in (cwd / results).rglob("*.json")
                      if p.name not in ("board.json",) and "corridor_length" in p.read_text()),
                     key=lambda r: (r.get("corridor_length"), r.get("seed")))
    return records


@pytest.mark.slow
def test_a_second_run_loads_the_training_function_and_agrees_exactly(tmp_path):
    cache = tmp_path / "cache"
    cold = board_run(tmp_path, "cold", cache)
    entries = {p.name: p.stat().st_size for p in cache.iterdir()}
    assert any(name.startswith("jit_") and size > 200_000 for name, size in entries.items()), entries
    warm = board_run(tmp_path, "warm", cache)
    assert {p.name for p in cache.iterdir()} == set(entries)  # everything the second run compiled came from the cache
    cells = [(r["train"], r["eval"]) for r in cold]
    assert cells and cells == [(r["train"], r["eval"]) for r in warm]


@pytest.mark.slow
def test_in_flight_progress_reports_change_no_result():
    """Long cells report progress from inside the compiled call (a host callback); the results are bitwise
    those of the same call without it, so the threshold that keeps short cells cacheable changes nothing."""
    import jax

    from memgym.leaderboard.running import jax_tier
    from memgym.leaderboard import scoring, tracks
    from memgym.leaderboard.protocol import load_factory

    track, budget = tracks.TMAZE, tracks.TMAZE.presets["smoke"]
    agent = load_factory("a2c-tiny-gru")(track.context(num_envs=8, seed=0, total_steps=budget.total_steps))
    seal = scoring.seal_weights()
    runs = []
    for threshold in (1, 10**12):  # every cell reports in flight / none does
        previous, jax_tier.IN_FLIGHT_PROGRESS_STEPS = jax_tier.IN_FLIGHT_PROGRESS_STEPS, threshold
        try:
            cells = jax_tier.JaxCells(agent, track, budget)
            assert (cells.batch([(8, 0)])[1].progress_step is None) == (threshold > budget.total_steps)
            runs.append(jax.tree.leaves(cells.train_cells([(8, 0), (12, 1)], seal)[:2]))
        finally:
            jax_tier.IN_FLIGHT_PROGRESS_STEPS = previous
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(*runs))
