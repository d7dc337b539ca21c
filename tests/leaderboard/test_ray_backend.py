"""The Ray backend on a real local Ray cluster: same board as the local backend, dead workers, bad setups.

The module starts one local Ray (2 CPUs, loopback) shared by its tests. Agents
for the failure tests live in this module; Ray workers import them by spec
(the backend puts the driver's working directory, the repository root, on their
``PYTHONPATH``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from memgym.leaderboard.boards import report  # noqa: E402
from memgym.leaderboard.running import runner
from memgym.leaderboard.running.ray_backend import RayBackend  # noqa: E402
from memgym.leaderboard.store import ResultsStore  # noqa: E402
from memgym.leaderboard.tracks import TMAZE, Preset  # noqa: E402

from .test_harness import TINY, OracleAgent  # noqa: E402

HERE = "tests.leaderboard.test_ray_backend"
MARKERS = "MEMGYM_TEST_RAY_MARKERS"


class KillWorkerAgent(OracleAgent):
    """Kills its own worker process (SIGKILL) after ``after`` steps of training.

    ``once``: only the first agent to get there kills (an exclusive marker file),
    so Ray's retry of that task finishes normally.
    """

    def __init__(self, num_envs, once, after=40):
        super().__init__(num_envs)
        self.once, self.after, self.calls = once, after, 0

    def act(self, obs, start):
        self.calls += 1
        if self.calls == self.after:
            if not self.once:
                os.kill(os.getpid(), signal.SIGKILL)
            try:
                fd = os.open(Path(os.environ[MARKERS]) / "killed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)
        return super().act(obs, start)


def kill_once(context):
    return KillWorkerAgent(context.num_envs, once=True)


def kill_always(context):
    return KillWorkerAgent(context.num_envs, once=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    markers = tmp_path_factory.mktemp("markers")
    # Ray runs its workers at niceness 15 (its worker_niceness); beside the other pytest worker they starved, and a
    # cell took 6x as long as in the driver. At niceness 0 they share the CPUs fairly; results do not depend on it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_worker_niceness", "0")
        backend = RayBackend(num_cpus=1, local_cpus=2, max_retries=2,
                             runtime_env={"env_vars": {MARKERS: str(markers)}})
    yield backend, markers
    ray.shutdown()


def table(results) -> str:
    return report.markdown(report.build_board(ResultsStore(results)))


@pytest.mark.slow(seconds=59)
def test_smoke_preset_on_ray_matches_local(cluster, tmp_path):
    """Both tiers, the smoke preset on a 2 × 2 grid with a short budget: the Ray board equals the local board."""
    backend, _ = cluster
    agents = ["a2c-tiny-gru", "examples.numpy_agent:factory"]
    budget = TMAZE.preset("smoke", values=(3, 4), total_steps=8192, eval_episodes=32)
    lines: list[str] = []
    runner.run(agents, budget, tmp_path / "ray", log=lines.append, backend=backend)
    runner.run(agents, budget, tmp_path / "local", log=lambda line: None)
    records = list(ResultsStore(tmp_path / "ray").records())
    assert len(records) == 2 * len(budget.values) * budget.seeds
    assert all(r["status"] == "ok" for r in records)
    assert table(tmp_path / "ray") == table(tmp_path / "local")
    assert any(f"cells {len(records)}/{len(records)} (100%)" in line for line in lines)
    # Resume through Ray: nothing left to run, nothing rewritten.
    before = {p: p.read_text() for p in (tmp_path / "ray").rglob("seed*.json")}
    runner.run(agents, budget, tmp_path / "ray", log=lines.append, backend=backend)
    assert {p: p.read_text() for p in (tmp_path / "ray").rglob("seed*.json")} == before


@pytest.mark.slow
def test_killed_worker_is_retried_without_losing_or_duplicating_cells(cluster, tmp_path):
    backend, markers = cluster
    budget = Preset("tiny", **TINY)
    store = runner.run([f"{HERE}:kill_once"], budget, tmp_path, log=lambda line: None, backend=backend)
    assert (markers / "killed").exists()  # a worker really died mid-training
    cells = sorted((r["corridor_length"], r["seed"]) for r in store.records())
    assert cells == [(2, 0), (2, 1), (3, 0), (3, 1)]  # each exactly once
    assert len(list(tmp_path.rglob("seed*.json"))) == 4
    records = list(store.records())
    assert all(r["status"] == "ok" for r in records)
    assert np.mean([r["eval"]["success_rate"] for r in records]) == 1.0  # the oracle, retried to completion


@pytest.mark.slow(seconds=10)  # it needs the Ray cluster, which takes about 10 s to start
def test_worker_dead_after_all_retries_is_recorded_as_failed(cluster, tmp_path):
    no_retry = RayBackend(num_cpus=1, max_retries=0)
    budget = Preset("tiny", **{**TINY, "values": (2,), "seeds": 1})
    store = runner.run([f"{HERE}:kill_always"], budget, tmp_path, log=lambda line: None, backend=no_retry)
    (record,) = store.records()
    assert record["status"] == "failed" and (record["corridor_length"], record["seed"]) == (2, 0)
    assert "Ray task failed after 0 retries" in record["reason"]


@pytest.mark.slow(seconds=10)  # it needs the Ray cluster, which takes about 10 s to start
def test_resources_no_node_has_are_refused_before_anything_runs(cluster):
    with pytest.raises(ValueError, match=r"no Ray node can run a task that needs num_cpus=1, num_gpus=1"):
        RayBackend(num_gpus=1)
    with pytest.raises(ValueError, match=r"num_cpus=64"):
        RayBackend(num_cpus=64)
    with pytest.raises(ValueError, match=r"max_retries must be an integer >= 0, got max_retries=-1"):
        RayBackend(max_retries=-1)


def test_resources_are_checked_before_ray_starts(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # the checks come first: no Ray is needed to fail them
    with pytest.raises(ValueError, match=r"num_cpus must be a number in \(0, inf\], got num_cpus=0"):
        RayBackend(num_cpus=0)
    with pytest.raises(ValueError, match=r"num_gpus must be a number in \[0, inf\], got num_gpus=-1"):
        RayBackend(num_gpus=-1)
    with pytest.raises(ValueError, match=r"max_retries must be an integer >= 0, got max_retries=1.5"):
        RayBackend(max_retries=1.5)


def test_ray_not_installed_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ValueError, match=r"pip install 'memgym\[ray\]'"):
        RayBackend()


def test_unreachable_or_malformed_address_fails_fast():
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        "from memgym.leaderboard.running.ray_backend import RayBackend\n"
        "for address in ['127.0.0.1:%d', 'ray://127.0.0.1:%d', 'no-port-here']:\n"
        "    try:\n"
        "        RayBackend(address=address)\n"
        "    except ValueError as error:\n"
        "        print(error)\n" % (port, port)
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stderr
    assert lines[0].startswith(f"cannot reach the Ray cluster at address='127.0.0.1:{port}'")
    assert lines[1].startswith(f"cannot reach the Ray cluster at address='ray://127.0.0.1:{port}'")
    assert "is not a Ray cluster address" in lines[2]


def test_cli_reports_bad_ray_setup_before_running(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--agent", "a2c-tiny-gru", "--preset", "smoke",
         "--backend", "ray", "--gpus-per-task", "-1", "--results", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 2 and "--gpus-per-task must be a number >= 0, got gpus_per_task=-1" in out.stderr
    assert not (tmp_path / "r").exists()
