"""Run leaderboard tasks on a Ray cluster (``memgym leaderboard run --backend ray``).

Each task becomes one Ray task that calls :func:`~memgym.leaderboard.running.runner.execute` on a worker; the
driver alone writes the records, so the store keeps its guarantees. Dead workers, bad setups and how
workers import the agent: docs/leaderboard_internals.md.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from memgym.leaderboard.running.planning import Task, cell_record
from memgym.leaderboard.running.runner import execute
from memgym.leaderboard.store import failure_reason
from memgym.leaderboard.tracks import Preset
from memgym.validation import check_int, check_real


def _import_ray():
    try:
        import ray
    except ImportError:
        raise ValueError("--backend ray needs Ray: pip install 'memgym[ray]'") from None
    return ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on a ``host:port`` / ``ray://host:port`` nobody listens on.

    ``ray.init`` would retry such an address for about a minute before giving up;
    ``"auto"`` and ``"local"`` (resolved by Ray itself) are left to Ray.
    """
    if address in ("auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(
            f"address={address!r} is not a Ray cluster address: use 'host:port' (the head's GCS port, usually "
            "6379), 'ray://host:port' (Ray Client, usually 10001) or 'auto'"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        raise ValueError(f"cannot reach the Ray cluster at address={address!r}: {error}") from None


class RayBackend:
    """Runs tasks as Ray tasks with ``num_cpus`` / ``num_gpus`` reserved per task.

    Args:
        address: a running cluster (``"ray://host:10001"``, ``"host:6379"`` or
            ``"auto"``); None starts a local Ray in this process (``local_cpus``
            CPUs, default all).
        num_cpus, num_gpus: resources reserved per task.
        max_retries: re-runs of a task whose worker process died.
        runtime_env: passed to ``ray.init`` (e.g. a ``working_dir`` to ship the
            agent's code to a remote cluster).
    """

    def __init__(self, address: str | None = None, num_cpus: float = 1.0, num_gpus: float = 0.0,
                 max_retries: int = 2, local_cpus: int | None = None, runtime_env: dict[str, Any] | None = None):
        self.num_cpus = check_real("num_cpus", num_cpus, 0.0, include_low=False)
        self.num_gpus = check_real("num_gpus", num_gpus, 0.0)
        self.max_retries = check_int("max_retries", max_retries, low=0)
        ray = self.ray = _import_ray()
        if address is not None:
            _check_reachable(address)
        if not ray.is_initialized():
            env = dict(runtime_env or {})
            if address is None:  # a local cluster: workers resolve specs from the driver's directory
                paths = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
                env.setdefault("env_vars", {}).setdefault("PYTHONPATH", os.pathsep.join(paths))
            try:
                ray.init(address=address, num_cpus=local_cpus if address is None else None,
                         runtime_env=env or None, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, TimeoutError, RuntimeError, ValueError) as error:
                reason = failure_reason(error)
                raise ValueError(f"cannot connect to the Ray cluster at address={address!r}: {reason}") from None
        self._check_resources()

    def _check_resources(self) -> None:
        """Some alive node must offer one task's CPUs and GPUs, or no task could ever start."""
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        fits = [n for n in nodes if n["Resources"].get("CPU", 0) >= self.num_cpus
                and n["Resources"].get("GPU", 0) >= self.num_gpus]
        if not fits:
            offered = [{k: n["Resources"].get(k, 0) for k in ("CPU", "GPU")} for n in nodes]
            raise ValueError(
                f"no Ray node can run a task that needs num_cpus={self.num_cpus:g}, num_gpus={self.num_gpus:g}; "
                f"nodes offer {offered}"
            )

    def map(self, tasks: Sequence[Task], budget: Preset, cell_timeout: float | None,
            started: Callable[[Task], None] = lambda task: None) -> Iterator[tuple[Task, list[dict]]]:
        """Submit every task, then yield ``(task, records)`` in the order tasks finish."""
        ray = self.ray
        remote = ray.remote(execute).options(
            num_cpus=self.num_cpus, num_gpus=self.num_gpus, max_retries=self.max_retries, retry_exceptions=False
        )
        pending = {}
        for task in tasks:
            pending[remote.remote(task, budget, cell_timeout)] = task
            started(task)
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    task = pending.pop(ref)
                    try:
                        records = ray.get(ref)
                    except Exception as error:  # noqa: BLE001 - a dead worker after all retries
                        reason = f"Ray task failed after {self.max_retries} retries: {failure_reason(error)}"
                        records = [cell_record(task, budget, cell, {"spec": task.spec}, 0.0, reason=reason)
                                   for cell in task.cells]
                    yield task, records
        finally:
            for ref in pending:  # interrupted: stop what is still queued or running
                ray.cancel(ref, force=True)
