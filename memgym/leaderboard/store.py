"""The results store: one JSON file per result of an (agent, swept value, seed) cell, append-only.

Layout: ``<root>/<agent id>/<prefix><value>/seed<seed>.json`` for a cell's first
result (T-Maze: ``L<corridor length>/``), ``seed<seed>.r<n>.json`` for later ones
(a retry after a failure, or a deliberate repeat). A result is written atomically: the record goes to a
temporary file in the same directory, is flushed and ``fsync``-ed, then is
*linked* to its final name, which fails if the name exists — so a crash (even
``kill -9``) never leaves a half-written result, two runners racing on one name
cannot both win (the loser takes the next free name), and nothing stored is
ever replaced.

Why JSON files and not SQLite: a record is written once and never updated, so
the store needs no transactions, only atomic creation, which ``link`` gives on
every POSIX file system; files diff, copy and merge across machines (a cluster's
results directory is ``rsync``-ed together) and a person can read one with any
editor.

Each record carries ``schema`` (:data:`SCHEMA_VERSION`), ``status`` (``"ok"`` or
``"failed"`` with a ``reason``) and its provenance (:func:`provenance`). Reading
a record from a newer schema raises instead of misreading it. Runs resume by
skipping cells that have an ``ok`` result.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from importlib import metadata
from collections.abc import Iterator
from pathlib import Path
from typing import Any


SCHEMA_VERSION = 1


def provenance() -> dict[str, Any]:
    """Versions, machine and (when run from a git checkout) the commit that produced a result."""
    import memgym

    info: dict[str, Any] = {
        "memgym": getattr(memgym, "__version__", "unknown"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    try:
        import jax

        info["jax"] = jax.__version__
        info["jaxlib"] = metadata.version("jaxlib")
        info["device"] = str(jax.devices()[0].device_kind)
    except Exception:  # noqa: BLE001 - the any-framework tier may run without JAX
        pass
    for package in ("flax", "optax", "gymnasium", "numpy"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
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


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


class ResultsStore:
    """Cells of one leaderboard under ``root``; a cell's directory is ``<prefix><value>`` (T-Maze: ``L4``)."""

    def __init__(self, root: str | os.PathLike, prefix: str = "L"):
        self.root = Path(root)
        self.prefix = prefix

    def cell_dir(self, agent: str, value: Any) -> Path:
        return self.root / agent / f"{self.prefix}{value}"

    def paths(self, agent: str, value: Any, seed: int) -> list[Path]:
        """Every stored result of a cell, oldest first."""
        folder = self.cell_dir(agent, value)
        found = [p for p in folder.glob(f"seed{int(seed)}*.json") if _result_index(p.name, seed) is not None]
        return sorted(found, key=lambda p: _result_index(p.name, seed))

    def results(self, agent: str, value: Any, seed: int) -> list[dict[str, Any]]:
        """Every stored result of a cell, oldest first."""
        return [_load(p) for p in self.paths(agent, value, seed)]

    def finished(self, agent: str, value: Any, seed: int) -> dict[str, Any] | None:
        """The cell's first ``ok`` result, or None."""
        return next((r for r in self.results(agent, value, seed) if r.get("status") == "ok"), None)

    def write(self, agent: str, value: Any, seed: int, record: dict[str, Any]) -> Path:
        """Store a result of a cell under the next free name; returns its path."""
        folder = self.cell_dir(agent, value)
        folder.mkdir(parents=True, exist_ok=True)
        record = {"schema": SCHEMA_VERSION, **record}
        handle, temporary = tempfile.mkstemp(prefix=".cell-", suffix=".json", dir=folder)
        try:
            with os.fdopen(handle, "w") as file:
                json.dump(record, file, indent=2, sort_keys=True)
                file.flush()
                os.fsync(file.fileno())
            existing = self.paths(agent, value, seed)
            index = _result_index(existing[-1].name, seed) + 1 if existing else 0
            while True:
                final = folder / (f"seed{int(seed)}.json" if index == 0 else f"seed{int(seed)}.r{index}.json")
                try:
                    os.link(temporary, final)
                    break
                except FileExistsError:  # another runner took this name first
                    index += 1
            _fsync_dir(folder)
        finally:
            os.unlink(temporary)
        return final

    def records(self) -> Iterator[dict[str, Any]]:
        """Every stored result (sorted by path); raises ValueError on a record from a newer schema."""
        for path in sorted(self.root.glob("*/*/seed*.json")):
            yield _load(path)


def _result_index(name: str, seed: int) -> int | None:
    """0 for ``seed<s>.json``, n for ``seed<s>.r<n>.json``, None for other names."""
    stem = name[: -len(".json")] if name.endswith(".json") else None
    base = f"seed{int(seed)}"
    if stem == base:
        return 0
    if stem and stem.startswith(base + ".r") and stem[len(base) + 2:].isdigit():
        return int(stem[len(base) + 2:])
    return None


def _load(path: Path) -> dict[str, Any]:
    with open(path) as file:
        record = json.load(file)
    schema = record.get("schema", 0)
    if not isinstance(schema, int) or schema > SCHEMA_VERSION:
        raise ValueError(
            f"{path} was written with results schema {schema!r}, newer than this memgym's {SCHEMA_VERSION}; "
            f"upgrade memgym to read it"
        )
    record["path"] = str(path)
    return record


def _fsync_dir(folder: Path) -> None:
    """Make a new directory entry durable (a crash right after the link keeps the file)."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)
