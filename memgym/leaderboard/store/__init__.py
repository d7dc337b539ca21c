"""Stage 4, the results store: one JSON file per result of an (agent, swept value, seed) cell, append-only, written
atomically (the record itself: :func:`memgym.leaderboard.running.planning.cell_record`).

The layout, the atomic write, the schema and unreadable records: docs/leaderboard_internals.md; the
fields of a record: docs/submitting.md.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import traceback
from importlib import metadata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memgym.deprecation import forward
from memgym.validation import is_int

SCHEMA_VERSION = 1
CURVE_POINTS = 20  # learning-curve bins per training run


#: What a call into agent code may raise that fails the agent's cells rather than the run: any exception, and
#: ``SystemExit`` (an agent's ``sys.exit()`` is its cell's failure, not the harness's end). ``KeyboardInterrupt``
#: still stops the run: it is the user's.
AGENT_FAULTS: tuple[type[BaseException], ...] = (Exception, SystemExit)


def failure_reason(error: BaseException) -> str:
    """An exception as a failed record's reason: its type, first line and where it was raised (file name, line
    and function of the innermost frame; no directory, so records carry no machine paths). A verdict of the harness
    (an exception whose class sets ``verdict``, such as invalid actions or a wall-clock limit) is its message alone:
    where the harness raised it says nothing about the agent."""
    if getattr(error, "verdict", False):
        return str(error)[:500]
    text = str(error).strip().splitlines()
    reason = f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")
    frames = traceback.extract_tb(error.__traceback__)
    if frames:
        reason += f" (raised at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})"
    return reason[:500]


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
    if os.environ.get("XLA_FLAGS"):  # e.g. --xla_gpu_deterministic_ops=true: whether a GPU run can be repeated
        info["xla_flags"] = os.environ["XLA_FLAGS"]
    try:
        import jax

        info["jax"] = jax.__version__
        info["jaxlib"] = metadata.version("jaxlib")
        info["device"] = str(jax.devices()[0].device_kind)
    except Exception:  # noqa: BLE001 - the any-framework tier may run without JAX
        pass
    else:
        info["backend"] = backend(info)
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


#: The instruction-set extensions XLA's CPU compiler can use (LLVM's target features, as /proc/cpuinfo names
#: them): two processors that differ in one of these may compile one program into different float rounding.
_ISA_PREFIXES = ("sse", "ssse", "avx", "fma", "f16c", "bmi", "amx", "popcnt", "lzcnt", "abm", "movbe", "adx",
                 "sha_ni", "vaes", "vpclmulqdq", "gfni", "asimd", "sve", "fp", "neon")


def backend(info: dict[str, Any], xla_flags: str | None = None) -> dict[str, Any]:
    """What decides XLA's numbers, recorded in every JAX provenance (``info`` is :func:`provenance`'s):
    jax and jaxlib, the device kind, the ``XLA_FLAGS`` (``xla_flags`` replaces the process's: a child
    started with other flags), and on a CPU the processor (vendor, family and model, which set LLVM's
    target) with the instruction-set extensions it reports and its core count (XLA splits work across
    threads). ``fingerprint`` hashes all of it: two runs with the same fingerprint compile the same
    program for the same target. A GPU's fingerprint leaves the host processor out."""
    flags = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    parts: dict[str, Any] = {"jax": info.get("jax"), "jaxlib": info.get("jaxlib"), "device": info.get("device"),
                             "xla_flags": " ".join(flags.split())}
    if str(info.get("device", "")).lower() == "cpu":
        words = (_proc_value("/proc/cpuinfo", "flags") or _proc_value("/proc/cpuinfo", "Features") or "").split()
        parts |= {"machine": platform.machine(), "cpu": info.get("cpu"),
                  "cpu_id": [_proc_value("/proc/cpuinfo", key) for key in ("vendor_id", "cpu family", "model\t")],
                  "isa": sorted(w for w in set(words) if w.startswith(_ISA_PREFIXES)),
                  "cpu_count": os.cpu_count()}
    parts["fingerprint"] = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    return parts


def _proc_value(path: str, key: str) -> str | None:
    """The value of the first ``key: value`` line of a /proc file, or None where there is none."""
    try:
        with open(path) as file:
            for line in file:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    return _proc_value("/proc/cpuinfo", "model name") or platform.processor() or "unknown"


class ResultsStore:
    """Cells of one leaderboard under ``root``; a cell's directory is ``<prefix><value>`` (T-Maze: ``L4``).

    ``value_key`` (the record field of the swept value, ``"corridor_length"``), ``values_key`` (the budget's
    field of its values, ``"corridor_lengths"``), ``score_key`` (the score's field in ``train`` and
    ``eval``, ``"success_rate"``) and ``score_bounds`` (the range a score lies in, ``(0, 1)``), when given, are
    checked in every record read (:meth:`Track.store <memgym.leaderboard.tracks.Track.store>` gives them).
    """

    def __init__(self, root: str | os.PathLike, prefix: str = "L", value_key: str | None = None,
                 score_key: str | None = None, values_key: str | None = None,
                 score_bounds: tuple[float, float] | None = None):
        self.root = Path(root)
        self.prefix = prefix
        self.value_key, self.values_key, self.score_key = value_key, values_key, score_key
        self.score_bounds = score_bounds

    def cell_dir(self, agent: str, value: Any) -> Path:
        return self.root / agent / f"{self.prefix}{value}"

    def paths(self, agent: str, value: Any, seed: int) -> list[Path]:
        """Every stored result of a cell, oldest first."""
        folder = self.cell_dir(agent, value)
        found = [p for p in folder.glob(f"seed{int(seed)}*.json") if _result_index(p.name, seed) is not None]
        return sorted(found, key=lambda p: _result_index(p.name, seed))

    def results(self, agent: str, value: Any, seed: int) -> list[dict[str, Any]]:
        """Every readable result of a cell, oldest first (unreadable ones are skipped)."""
        return [record for record in map(self._read, self.paths(agent, value, seed)) if isinstance(record, dict)]

    def finished(self, agent: str, value: Any, seed: int) -> dict[str, Any] | None:
        """The cell's first ``ok`` result, or None."""
        return next((r for r in self.results(agent, value, seed) if r.get("status") == "ok"), None)

    def write(self, agent: str, value: Any, seed: int, record: dict[str, Any]) -> Path:
        """Store a result of a cell under the next free name; returns its path. A record whose ``policy`` holds
        parameter leaves (:func:`cell_record`) gets them stored in a file beside it, named in their place."""
        folder = self.cell_dir(agent, value)
        folder.mkdir(parents=True, exist_ok=True)
        record = {"schema": SCHEMA_VERSION, **record}
        if isinstance(record.get("policy"), list):
            from memgym.leaderboard.store import policies

            record["policy"] = policies.write(folder, record["policy"])
        handle, temporary = tempfile.mkstemp(prefix=".cell-", suffix=".json", dir=folder)
        try:
            os.fchmod(handle, 0o666 & ~_umask())  # mkstemp makes 0o600; a record is as readable as the board
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
        """Every readable, well-formed result (sorted by path); raises ValueError on a record from a newer schema.

        The others are listed by :meth:`unreadable`.
        """
        for path in self._files():
            record = self._read(path)
            if isinstance(record, dict):
                yield record

    def unreadable(self) -> list[tuple[Path, str]]:
        """The stored results that :meth:`records` skips, each with what is wrong with it (sorted by path).

        The text reads after the path: ``f"{path} {problem}"`` (``… is not valid JSON (…)``).
        """
        return [(path, problem) for path in self._files() if isinstance(problem := self._read(path), str)]

    @contextlib.contextmanager
    def writing(self, agent: str) -> Iterator[None]:
        """Hold this store's lock of ``agent`` (an agent's directory name) while a run stores its cells, or
        ``ValueError`` when another process holds it: two runs of one agent into one store would train its cells
        twice. The lock is the operating system's advisory lock on ``<root>/.<agent>.lock``, a file that lives as
        long as the lock and whose lock ends with its process, however that ends; where there are no such locks
        (Windows), runs are not guarded."""
        try:
            import fcntl
        except ImportError:
            yield
            return
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f".{agent}.lock"
        while True:
            handle = open(path, "a+", encoding="utf-8")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                handle.close()
                raise ValueError(f"{holder} is storing agent {agent!r} in {self.root}; wait for it to finish, or "
                                 f"give this run another --results folder") from None
            try:  # the file locked is still the one at the path (its holder did not remove it meanwhile)
                if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                    break
            except FileNotFoundError:
                pass
            handle.close()
        try:
            handle.truncate(0)
            handle.write(f"process {os.getpid()} on {platform.node()}")
            handle.flush()
            yield
        finally:
            path.unlink(missing_ok=True)  # before the lock ends: a run that opens the path next makes a new file
            handle.close()

    def check_writable(self) -> None:
        """``ValueError`` unless results can be stored under ``root`` (an existing writable directory, or a
        path that can be created): checked before a run trains anything."""
        root = self.root
        if root.exists() or root.is_symlink():
            if not root.is_dir():
                raise ValueError(f"{root} exists and is not a directory")
            try:
                handle, probe = tempfile.mkstemp(prefix=".probe-", dir=root)
            except OSError as error:
                raise ValueError(f"{root} is not writable ({error.strerror or error})") from None
            os.close(handle)
            os.unlink(probe)
            return
        parent = root.absolute().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise ValueError(f"{root} cannot be created: {parent} is not a directory")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ValueError(f"{root} cannot be created: {parent} is not writable")

    def _files(self) -> list[Path]:
        return sorted(p for p in self.root.glob("*/*/seed*.json") if p.is_file())

    def _read(self, path: Path) -> dict[str, Any] | str:
        """The record at ``path``, or what is wrong with it; ValueError for a record from a newer schema."""
        try:
            record = _load(path)
        except OSError as error:
            return f"cannot be read ({error.strerror or error})"
        except UnicodeDecodeError:
            return "is not UTF-8 text"
        except json.JSONDecodeError as error:
            return f"is not valid JSON ({error.msg}: line {error.lineno}, column {error.colno}; truncated?)"
        except RecursionError:
            return "nests JSON too deeply to be read"
        if isinstance(record, str):
            return record
        problem = _problem(record, path, self)
        return record if problem is None else problem


def result_order(record: dict[str, Any]) -> tuple[int, str]:
    """Results of a cell oldest first: ``seed<s>.json``, then ``seed<s>.r1.json``, ``.r2`` … (numerically)."""
    name = Path(record.get("path", "")).name
    parts = name.split(".")
    index = int(parts[1][1:]) if len(parts) == 3 and parts[1][:1] == "r" and parts[1][1:].isdigit() else 0
    return index, name


def _result_index(name: str, seed: int) -> int | None:
    """0 for ``seed<s>.json``, n for ``seed<s>.r<n>.json``, None for other names."""
    stem = name[: -len(".json")] if name.endswith(".json") else None
    base = f"seed{int(seed)}"
    if stem == base:
        return 0
    if stem and stem.startswith(base + ".r") and stem[len(base) + 2:].isdigit():
        return int(stem[len(base) + 2:])
    return None


def _load(path: Path) -> dict[str, Any] | str:
    """The JSON object at ``path`` (``"path"`` added), or what is wrong with its shape; ValueError for a newer
    schema (it is not misread, and not ignored either: a newer memgym wrote it)."""
    with open(path, encoding="utf-8") as file:
        record = json.load(file)
    if not isinstance(record, dict):
        return f"is a JSON {_JSON_TYPES.get(type(record), type(record).__name__)}, not a record (a JSON object)"
    schema = record.get("schema", 0)
    if isinstance(schema, bool) or not isinstance(schema, int):
        return f"has schema {schema!r}, not an integer"
    if schema > SCHEMA_VERSION:
        raise ValueError(
            f"{path} was written with results schema {schema!r}, newer than this memgym's {SCHEMA_VERSION}; "
            f"upgrade memgym to read it"
        )
    record["path"] = str(path)
    return record


_JSON_TYPES = {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
# Fields every record has; any other top-level field is a track's swept value.
_COMMON = {"schema", "agent", "agent_info", "tier", "seed", "preset", "status", "reason", "wall_time_s",
           "provenance", "train", "eval", "path", "version", "policy", "batch", "vmapped", "track"}


def _problem(record: dict[str, Any], path: Path, store: ResultsStore) -> str | None:
    """What keeps the board from using ``record`` (read from ``path`` in ``store``), or None."""
    prefix, value_key, values_key, score_key = store.prefix, store.value_key, store.values_key, store.score_key

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
            and abs(value) != float("inf")

    for name in ("agent", "status", "seed", "preset"):
        if name not in record:
            return f"has no {name!r} field"
    if not isinstance(record["agent"], str) or not record["agent"]:
        return f"has 'agent' {record['agent']!r}, not an agent name"
    if record["status"] not in ("ok", "failed"):
        return f"has 'status' {record['status']!r}, not 'ok' or 'failed'"
    seed = record["seed"]
    if not is_int(seed) or seed < 0:
        return f"has 'seed' {seed!r}, not an integer >= 0"
    if _result_index(path.name, seed) is None:
        return f"has 'seed' {seed}, which does not match its file name"
    preset = record["preset"]
    if not isinstance(preset, dict):
        return f"has 'preset' {preset!r}, not a JSON object"
    if not isinstance(preset.get("name"), str):
        return "has a 'preset' without a 'name'"
    for name in ("total_steps", "seeds"):
        if (name in preset or name == "total_steps") and (not is_int(preset.get(name)) or preset[name] < 1):
            return f"has a 'preset' without a positive integer {name!r} (got {preset.get(name)!r})"
    if values_key is not None and values_key in preset and not isinstance(preset[values_key], list):
        return f"has a 'preset' whose {values_key!r} is {preset[values_key]!r}, not a list"
    if "agent_info" in record and not isinstance(record["agent_info"], dict):
        return "has an 'agent_info' that is not a JSON object"
    if "version" in record and (not is_int(record["version"]) or record["version"] < 1):
        return f"has 'version' {record['version']!r}, not an integer >= 1"
    if value_key is not None:
        folder = path.parent.name
        if value_key not in record:
            others = [v for k, v in record.items() if k not in _COMMON and isinstance(v, (int, str))
                      and not isinstance(v, bool) and folder.endswith(str(v))]
            if not others:
                return f"has no {value_key!r} field"
            return None  # a result of another track, with its own swept value and score: the track refuses it
        else:
            value = record[value_key]
            if isinstance(value, bool) or not isinstance(value, (int, str)) or f"{prefix}{value}" != folder:
                return f"has {value_key!r} {value!r}, which does not match its directory {folder!r}"
    if record["status"] == "failed":
        if not isinstance(record.get("reason", ""), str):
            return "has a 'reason' that is not a string"
        return None
    for part in ("train", "eval"):
        if not isinstance(record.get(part), dict):
            return f"is an 'ok' result without a {part!r} object"
        if score_key is not None and not number(record[part].get(score_key)):
            return f"has no finite {score_key!r} in its {part!r} (got {record[part].get(score_key)!r})"
        if score_key is not None and store.score_bounds is not None:
            low, high = store.score_bounds  # a mean of episodes' scores: within their range, up to rounding
            if not low - 1e-9 <= record[part][score_key] <= high + 1e-9:
                return (f"has {score_key!r} {record[part][score_key]!r} in its {part!r}, outside the track's "
                        f"range [{low:g}, {high:g}]")
    curve = record["train"].get("curve")
    if curve is not None and not (isinstance(curve, list) and all(
            isinstance(point, list) and len(point) == 2 and all(map(number, point)) for point in curve)):
        return "has a 'train' 'curve' that is not a list of [episodes, score] pairs"
    return None


def _umask() -> int:
    """The process's umask (read without changing it where /proc tells it)."""
    value = _proc_value("/proc/self/status", "Umask:")
    if value and value.isdigit():
        return int(value, 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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


__getattr__ = forward(__name__, {"cell_record": "memgym.leaderboard.running.planning.cell_record"})
