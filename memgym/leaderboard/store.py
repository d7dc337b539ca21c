"""The results store: one JSON file per (agent, corridor length, seed) cell, never overwritten.

Layout: ``<root>/<agent id>/L<corridor length>/seed<seed>.json``. A cell is
written atomically: the record goes to a temporary file in the same directory,
then is *linked* to its final name, which fails if the name exists — so two
runners racing on one cell cannot both win, a crash never leaves a half-written
cell, and a stored result is never replaced. Runs resume by skipping cells that
exist. Each record carries its provenance (:func:`provenance`).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class CellExistsError(FileExistsError):
    """A result for this cell is already stored."""


def provenance() -> dict[str, Any]:
    """Versions, machine and (when run from a git checkout) the commit that produced a result."""
    import memgym

    info: dict[str, Any] = {
        "memgym": getattr(memgym, "__version__", "unknown"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        import jax

        info["jax"] = jax.__version__
        info["device"] = str(jax.devices()[0].device_kind)
    except Exception:  # noqa: BLE001 - the any-framework tier may run without JAX
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, cwd=Path(__file__).parent
        )
        if commit.returncode == 0:
            info["git_commit"] = commit.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return info


class ResultsStore:
    """Cells of one leaderboard under ``root``."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, agent: str, corridor_length: int, seed: int) -> Path:
        return self.root / agent / f"L{int(corridor_length)}" / f"seed{int(seed)}.json"

    def has(self, agent: str, corridor_length: int, seed: int) -> bool:
        return self.path(agent, corridor_length, seed).exists()

    def write(self, agent: str, corridor_length: int, seed: int, record: dict[str, Any]) -> Path:
        """Store a cell; raises :class:`CellExistsError` if it is already stored."""
        final = self.path(agent, corridor_length, seed)
        final.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".cell-", suffix=".json", dir=final.parent)
        try:
            with os.fdopen(handle, "w") as file:
                json.dump(record, file, indent=2, sort_keys=True)
                file.flush()
                os.fsync(file.fileno())
            try:
                os.link(temporary, final)
            except FileExistsError:
                raise CellExistsError(f"a result is already stored at {final}; it is never overwritten") from None
        finally:
            os.unlink(temporary)
        return final

    def read(self, agent: str, corridor_length: int, seed: int) -> dict[str, Any]:
        with open(self.path(agent, corridor_length, seed)) as file:
            return json.load(file)

    def records(self) -> Iterator[dict[str, Any]]:
        """Every stored cell (sorted by path)."""
        for path in sorted(self.root.glob("*/L*/seed*.json")):
            with open(path) as file:
                yield json.load(file)
