"""Records made before the computation hash: stamped with it while the code that made them is installed.

A JAX-tier record written by memgym before 0.2 names its agent by code hash alone
(:mod:`~memgym.leaderboard.running.code_identity`), so the next edit of the agent's code, however small, makes it
another version. :func:`stamp` adds the computation hash to each such record whose agent is installed with
the same code (the same ``code_sha256``) and the same config: that code is the code that made it, so what it
computes now (traced, never trained) is what made the record. From then on a refactor that keeps what the
agent computes keeps the record current. Nothing else in a record changes; each is rewritten atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memgym.leaderboard.running.code_identity import COMPUTATION, describe_agent
from memgym.leaderboard.protocol import load_factory
from memgym.leaderboard.tracks import Track


def stamp(results: str | os.PathLike, track: Track, log: Callable[[str], None] = print) -> dict[str, int]:
    """Add the computation hash to the JAX-tier records under ``results`` that lack it and whose agent is
    installed with the code and config that made them; the counts ``{"stamped", "already", "other code",
    "other tier"}``. A record of other code than the installed one is left as it is and named."""
    from memgym.leaderboard.running.jax_tier import agent_computation
    from memgym.leaderboard.running.planning import NUM_ENVS

    store = track.store(results)
    counts = {"stamped": 0, "already": 0, "other code": 0, "other tier": 0}
    traced: dict[tuple[str, str, Any], tuple[dict[str, Any], str]] = {}
    for record in track.records(store):
        info = record.get("agent_info") or {}
        if record.get("tier") != "jax":
            counts["other tier"] += 1
            continue
        if COMPUTATION in info:
            counts["already"] += 1
            continue
        budget = track.budget_from_record(record["preset"])
        key = track.env_key(record[track.sweep.name])
        what = (record["agent"], json.dumps(record["preset"], sort_keys=True), key)
        if what not in traced:
            factory = load_factory(record["agent"])
            agent = factory(track.context(num_envs=NUM_ENVS, seed=0, total_steps=budget.total_steps, value=key))
            traced[what] = describe_agent(record["agent"], factory, agent), agent_computation(agent, track, budget, key)
        now, computation = traced[what]
        same_config = record.get("status") != "ok" or info.get("config") == json.loads(json.dumps(now.get("config")))
        if info.get("code_sha256") != now.get("code_sha256") or not same_config:
            counts["other code"] += 1
            log(f"{record['path']}: made by other code or another config than the installed "
                f"{record['agent']}'s, left as it is")
            continue
        _rewrite(Path(record["path"]), COMPUTATION, computation)
        counts["stamped"] += 1
    log(f"{results}: {counts['stamped']} records stamped with what their agent computes, {counts['already']} "
        f"already were, {counts['other code']} of other code left as they are, {counts['other tier']} of the "
        "any-framework tier (identified by code alone)")
    return counts


def _rewrite(path: Path, field: str, value: str) -> None:
    """Set ``agent_info[field]`` in the record at ``path``, written as the store writes records, atomically."""
    record = json.loads(path.read_text(encoding="utf-8"))
    record["agent_info"][field] = value
    handle, temporary = tempfile.mkstemp(prefix=".cell-", suffix=".json", dir=path.parent)
    try:
        os.fchmod(handle, path.stat().st_mode & 0o777)
        with os.fdopen(handle, "w") as file:
            json.dump(record, file, indent=2, sort_keys=True)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
