"""Stored policies (memgym/leaderboard/store/policies.py): the documented file format, written by the store beside a
record, read back only when it is exactly what the record names."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import json
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym.leaderboard.store import policies
from memgym.leaderboard.store import ResultsStore

LEAVES = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], np.int32), np.array(True)]


def stored(tmp_path, leaves=LEAVES):
    """A record with a policy, written by the store as ``run`` writes one; (record path, its policy entry)."""
    store = ResultsStore(tmp_path)
    path = store.write("agent", 3, 0, {"agent": "agent", "seed": 0, "status": "ok", "policy": list(leaves)})
    return path, json.loads(path.read_text())["policy"]


def test_the_store_writes_the_policy_beside_the_record_and_it_reads_back(tmp_path):
    path, entry = stored(tmp_path)
    assert entry["file"].startswith("policy-") and (path.parent / entry["file"]).is_file()
    data = (path.parent / entry["file"]).read_bytes()
    assert entry["sha256"] == hashlib.sha256(data).hexdigest() and entry["bytes"] == len(data)
    assert entry["file"] == f"policy-{entry['sha256'][:16]}.npz"
    assert entry["leaves"] == [["<f4", [2, 3]], ["<i4", [2]], ["|b1", []]]
    back = policies.read(path, entry)
    assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(back, LEAVES, strict=True))
    with zipfile.ZipFile(path.parent / entry["file"]) as archive:  # the format docs/submitting.md names
        assert [m.filename for m in archive.infolist()] == ["0000.npy", "0001.npy", "0002.npy"]
        assert all(m.compress_type == zipfile.ZIP_STORED for m in archive.infolist())
    assert policies.content_hash(back) == entry["params_sha256"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["float32", "float64", "int32", "uint8", "bool"]),
                          st.lists(st.integers(0, 4), max_size=3)), min_size=1, max_size=5))
def test_any_numeric_leaves_round_trip_bitwise(tmp_path_factory, layout):
    rng = np.random.default_rng(0)
    leaves = [rng.normal(size=shape).astype(dtype) for dtype, shape in layout]
    path, entry = stored(tmp_path_factory.mktemp("p"), leaves)
    back = policies.read(path, entry)
    assert policies.content_hash(back) == policies.content_hash(leaves)
    assert [b.tobytes() for b in back] == [np.ascontiguousarray(a).tobytes() for a in leaves]


def test_a_policy_that_is_not_what_its_record_names_is_refused(tmp_path):
    path, entry = stored(tmp_path)
    file = path.parent / entry["file"]
    with pytest.raises(policies.PolicyError, match="is missing"):
        policies.read(path, dict(entry, file="policy-0000000000000000.npz"))
    with pytest.raises(policies.PolicyError, match="not a policy-<hash>.npz beside the record"):
        policies.read(path, dict(entry, file="../elsewhere/policy-1.npz"))
    with pytest.raises(policies.PolicyError, match="not an object with 'file' and 'sha256'"):
        policies.read(path, None)
    # other leaves under the same name: the hash no longer matches
    original = file.read_bytes()
    file.chmod(0o644)
    np.savez(file, **{"0000": np.zeros((2, 3), np.float32), "0001": np.array([1, 2], np.int32),
                      "0002": np.array(True)})
    with pytest.raises(policies.PolicyError, match="does not have the SHA-256 its record names"):
        policies.read(path, entry)
    # ... and a record whose sha256 was edited to the new file's still lists another content
    forged = dict(entry, sha256=hashlib.sha256(file.read_bytes()).hexdigest())
    with pytest.raises(policies.PolicyError, match="other parameters than its record's params_sha256"):
        policies.read(path, forged)
    file.write_bytes(original)
    assert policies.read(path, entry)


def test_pickles_compression_and_junk_are_refused(tmp_path):
    path, entry = stored(tmp_path)
    folder = path.parent

    def as_entry(name: str) -> dict:
        return dict(entry, file=name, sha256=hashlib.sha256((folder / name).read_bytes()).hexdigest())

    np.savez(folder / "policy-objects.npz", **{"0000": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(policies.PolicyError, match="is not a policy file"):
        policies.read(path, as_entry("policy-objects.npz"))
    np.savez_compressed(folder / "policy-small.npz", **{"0000": np.zeros(1000, np.float32)})
    with pytest.raises(policies.PolicyError, match="compressed"):
        policies.read(path, as_entry("policy-small.npz"))
    np.savez(folder / "policy-named.npz", weights=np.zeros(3))
    with pytest.raises(policies.PolicyError, match="not 0000.npy"):
        policies.read(path, as_entry("policy-named.npz"))
    (folder / "policy-junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(policies.PolicyError, match="is not a policy file"):
        policies.read(path, as_entry("policy-junk.npz"))


def test_the_size_bound_and_non_numeric_leaves_are_refused_when_written(tmp_path, monkeypatch):
    monkeypatch.setattr(policies, "LIMIT_BYTES", 1000)
    with pytest.raises(policies.PolicyError, match="more than a stored policy may"):
        policies.write(tmp_path, [np.zeros(300, np.float32)])
    with pytest.raises(policies.PolicyError, match="numeric arrays only"):
        policies.write(tmp_path, [np.array(["text"])])
    assert not list(tmp_path.iterdir())  # nothing half-written is left


def test_the_same_parameters_twice_share_one_file_and_nothing_is_overwritten(tmp_path):
    first = policies.write(tmp_path, LEAVES)
    before = (tmp_path / first["file"]).stat().st_mtime_ns
    again = policies.write(tmp_path, LEAVES)
    assert again["sha256"] == first["sha256"] or again["file"] != first["file"]  # npz timestamps may differ
    assert (tmp_path / first["file"]).stat().st_mtime_ns == before


TINY_JAX_AGENT = '''
import jax
import jax.numpy as jnp


class Agent:
    num_envs = 2

    def train(self, key, env, env_params, total_steps):
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, self.num_envs), env_params)

        def step(state, key):
            _, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key, self.num_envs), state, jnp.zeros(self.num_envs, jnp.int32), env_params)
            return state, None

        state, _ = jax.lax.scan(step, state, jax.random.split(key, total_steps // self.num_envs))
        return {"w": jnp.full((3, 2), jax.random.uniform(key)), "b": jnp.arange(2)}, state

    def initialize_carry(self):
        return jnp.zeros(())

    def act(self, params, carry, obs, start, key):
        return params["b"][0], carry


def factory(context):
    return Agent()
'''


@pytest.mark.slow
def test_run_stores_each_jax_cell_policy_and_no_policies_opts_out(tmp_path):
    """`memgym leaderboard run` stores each JAX-tier cell's trained parameters beside its record (the documented
    surface: the CLI and the files); `--no-policies` stores none."""
    (tmp_path / "tiny_jax.py").write_text(TINY_JAX_AGENT)
    grid = ["--preset", "smoke", "--values", "2", "--seeds", "2", "--steps", "200", "--eval-episodes", "8"]
    for flags in ([], ["--no-policies"]):
        results = tmp_path / f"results{len(flags)}"
        done = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--agent", "tiny_jax:factory",
                               "--results", str(results), *grid, *flags], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600, env=dict(os.environ, MEMGYM_COMPILATION_CACHE="off"))
        assert done.returncode == 0, done.stdout + done.stderr
        cell = results / "tiny_jax_factory" / "L2"
        records = [json.loads((cell / f"seed{s}.json").read_text()) for s in (0, 1)]
        if flags:
            assert not list(cell.glob("policy-*")) and all("policy" not in r for r in records)
            continue
        assert len({r["policy"]["file"] for r in records}) == 2  # the seeds' keys give different parameters
        for record in records:
            b, w = policies.read(cell / "seed0.json", record["policy"])  # jax.tree.leaves order: b, w
            assert w.shape == (3, 2) and b.tolist() == [0, 1] and record["policy"]["leaves"] == [["<i4", [2]],
                                                                                                ["<f4", [3, 2]]]
