"""A JAX-tier cell's trained policy, stored beside its record, so that a verifier can evaluate every cell again.

**Format.** The parameters ``train`` returned for one cell, as the leaves of their pytree in
``jax.tree.leaves`` order, in an uncompressed NumPy ``.npz`` file whose members are ``0000.npy``,
``0001.npy``, … (plain numeric dtypes only: it is read with ``allow_pickle=False``). The file lies in
the cell's directory and is named by its content, ``policy-<first 16 hex digits of its SHA-256>.npz``;
the record's ``policy`` field names it and holds its SHA-256, its size and each leaf's dtype and shape,
so a record and its policy cannot be paired wrongly and a stored file is never replaced. The
exported ``act`` of the agent (:mod:`memgym.leaderboard.submissions.isolation`) takes exactly these leaves.

**Bound.** A policy file may hold at most :data:`LIMIT_BYTES` (64 MiB) — about 16.7M float32
parameters, nine times the thesis-size AReLiT (1.8M parameters, 6.9 MiB with its critic) — so a
verifier never reads more than that per cell; docs/submitting.md gives the sizes per preset.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

LIMIT_BYTES = 64 << 20
_NUMERIC = "biuf"  # bool, signed and unsigned integers, floats: what parameters are


class PolicyError(ValueError):
    """A stored policy that cannot be used: missing, of another content than its record says, too large,
    or not a file of the format above."""


def leaves_of(params: Any) -> list[np.ndarray]:
    """The leaves of a parameter pytree as host arrays, in ``jax.tree.leaves`` order."""
    import jax

    return [np.asarray(leaf) for leaf in jax.tree.leaves(params)]


def layout(leaves: Sequence[np.ndarray]) -> list[list[Any]]:
    """Each leaf's ``[dtype, shape]``, as a record holds them."""
    return [[np.asarray(leaf).dtype.str, list(np.shape(leaf))] for leaf in leaves]


def content_hash(leaves: Sequence[np.ndarray]) -> str:
    """SHA-256 over the leaves' dtypes, shapes and bytes: equal for bitwise-equal parameters."""
    digest = hashlib.sha256()
    for leaf in leaves:
        leaf = np.ascontiguousarray(leaf)
        digest.update(f"{leaf.dtype.str}{list(leaf.shape)}".encode())
        digest.update(leaf.tobytes())
    return digest.hexdigest()


def write(folder: str | os.PathLike, leaves: Sequence[np.ndarray]) -> dict[str, Any]:
    """Store ``leaves`` in ``folder`` (atomically: a temporary file linked to its content's name); the record's
    ``policy`` entry. ``PolicyError`` when they exceed :data:`LIMIT_BYTES` or are not numeric arrays."""
    leaves = [np.asarray(leaf) for leaf in leaves]
    for i, leaf in enumerate(leaves):
        if leaf.dtype.kind not in _NUMERIC:
            raise PolicyError(f"parameter leaf {i} has dtype {leaf.dtype}; a stored policy holds numeric arrays only")
    size = sum(leaf.nbytes for leaf in leaves)
    if size > LIMIT_BYTES:
        raise PolicyError(f"the trained parameters take {size / 2**20:.1f} MiB, more than a stored policy may "
                          f"({LIMIT_BYTES >> 20} MiB)")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".policy-", suffix=".npz", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            np.savez(file, **{f"{i:04d}": leaf for i, leaf in enumerate(leaves)})
            file.flush()
            os.fsync(file.fileno())
        data = Path(temporary).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        final = folder / f"policy-{sha[:16]}.npz"
        try:
            os.link(temporary, final)
        except FileExistsError:  # the same bytes are stored already (the name is their hash)
            if hashlib.sha256(final.read_bytes()).hexdigest() != sha:
                raise PolicyError(f"{final} exists with other content than its name says") from None
        os.chmod(final, 0o644)
    finally:
        os.unlink(temporary)
    return {"file": final.name, "sha256": sha, "bytes": len(data), "params_sha256": content_hash(leaves),
            "leaves": layout(leaves)}


def read(record_path: str | os.PathLike, entry: Any) -> list[np.ndarray]:
    """The leaves of the policy that record ``record_path`` names in ``entry`` (its ``policy`` field), checked
    against the entry: the file beside the record, its SHA-256, :data:`LIMIT_BYTES`, the leaves' dtypes and
    shapes and their content hash. ``PolicyError`` saying what is wrong otherwise."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or not isinstance(entry.get("sha256"), str):
        raise PolicyError("its 'policy' is not an object with 'file' and 'sha256'")
    name = entry["file"]
    if Path(name).name != name or not name.startswith("policy-") or not name.endswith(".npz"):
        raise PolicyError(f"its policy file {name!r} is not a policy-<hash>.npz beside the record")
    path = Path(record_path).parent / name
    if path.is_symlink() or not path.is_file():
        raise PolicyError(f"its policy file {name} is missing")
    if path.stat().st_size > LIMIT_BYTES + (1 << 20):
        raise PolicyError(f"its policy file {name} takes {path.stat().st_size} bytes, more than a policy may "
                          f"({LIMIT_BYTES >> 20} MiB)")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise PolicyError(f"its policy file {name} does not have the SHA-256 its record names")
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            names = [m.filename for m in members]
            if names != [f"{i:04d}.npy" for i in range(len(names))]:
                raise PolicyError(f"its policy file {name} holds members {names[:5]}…, not 0000.npy, 0001.npy, …")
            if any(m.compress_type != zipfile.ZIP_STORED for m in members) or \
                    sum(m.file_size for m in members) > LIMIT_BYTES + (1 << 20):
                raise PolicyError(f"its policy file {name} is compressed or larger than {LIMIT_BYTES >> 20} MiB")
        with np.load(path, allow_pickle=False) as arrays:
            leaves = [arrays[n.removesuffix(".npy")] for n in names]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
        if isinstance(error, PolicyError):
            raise
        raise PolicyError(f"its policy file {name} is not a policy file ({type(error).__name__}: {error})") from None
    if any(leaf.dtype.kind not in _NUMERIC for leaf in leaves):
        raise PolicyError(f"its policy file {name} holds a non-numeric array")
    if layout(leaves) != entry.get("leaves"):
        raise PolicyError(f"its policy file {name} holds other leaves than its record lists")
    if content_hash(leaves) != entry.get("params_sha256"):
        raise PolicyError(f"its policy file {name} holds other parameters than its record's params_sha256")
    return leaves
