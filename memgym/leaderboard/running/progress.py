"""Progress of a run: cells done / total, environment steps per second and ETA, on a ``rich`` bar or in
plain lines, with the in-flight reports of a training task (docs/leaderboard_internals.md)."""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from memgym.leaderboard.running.planning import Task
from memgym.leaderboard.tracks import Track


QUIET_SECONDS = 30.0  # the longest a training task goes without a progress line while reports come in

_LISTENER: list[Callable[[float, bool], None] | None] = [None]


@contextlib.contextmanager
def listening(listener: Callable[[float, bool], None]) -> Iterator[None]:
    """While open, :func:`in_flight` reports go to ``listener`` (:meth:`Progress.training` in a run)."""
    previous, _LISTENER[0] = _LISTENER[0], listener
    try:
        yield
    finally:
        _LISTENER[0] = previous


def in_flight(steps: float, resumed: bool = False) -> None:
    """The running task has taken ``steps`` environment steps (all its cells together); with ``resumed``, it has
    resumed from a checkpoint at that many, taken by an earlier process. Any thread may call it."""
    listener = _LISTENER[0]
    if listener is not None:
        listener(steps, resumed)


class Progress:
    """Cells done / total, environment steps per second and ETA: a rich bar on a terminal, lines otherwise."""

    def __init__(self, total_cells: int, steps_per_cell: int, log: Callable[[str], None], track: Track):
        self.total, self.steps_per_cell, self.log, self.track = total_cells, steps_per_cell, log, track
        self.done = self.failed = 0
        self.started = time.perf_counter()
        self._task: Task | None = None
        self._training = 0.0  # steps the running task has taken
        self._resumed = 0.0  # steps of this run's tasks taken before it, by the process a checkpoint came from
        self._shown = (0, 0.0)  # (tenths of the running task, time) of its last in-flight line
        self._lock = threading.Lock()
        self._bar = None
        if log is print and sys.stdout.isatty():
            try:
                from rich import progress as rich_progress
            except ImportError:
                rich_progress = None
            if rich_progress is not None:
                self._bar = rich_progress.Progress(
                    rich_progress.TextColumn("cells"), rich_progress.BarColumn(), rich_progress.MofNCompleteColumn(),
                    rich_progress.TextColumn("{task.fields[rate]}"), rich_progress.TimeElapsedColumn(),
                    rich_progress.TextColumn("ETA"), rich_progress.TimeRemainingColumn(),
                )
                self._bar_task = self._bar.add_task("cells", total=total_cells, rate="")
                self._bar.start()

    def message(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line)
        else:
            self.log(line)

    def start(self, task: Task) -> None:
        """``task`` begins (local backend: the in-flight reports that follow are its own)."""
        with self._lock:
            self._task, self._training, self._shown = task, 0.0, (0, time.perf_counter())

    def training(self, steps: float, resumed: bool = False) -> None:
        """The running task has taken ``steps`` environment steps (reported from inside its training); with
        ``resumed``, it resumed from a checkpoint at ``steps``: they count as done, not towards the speed."""
        with self._lock:
            task = self._task
            if task is None:
                return
            planned = len(task.cells) * self.steps_per_cell
            steps = min(float(steps), planned)
            if resumed:
                self._resumed += steps - self._training
            self._training = steps
            now = time.perf_counter()
            elapsed = now - self.started
            done_steps = self.done * self.steps_per_cell + steps
            rate, eta = self._speed(done_steps, elapsed)
            tenths = int(10 * steps / planned) if planned else 10
            if resumed:
                line = (f"resumed from its checkpoint at {100 * steps / max(planned, 1):.0f}% "
                        f"({steps:,.0f}/{planned:,} steps)")
            elif self._bar is not None:
                self._bar.update(self._bar_task, completed=self.done + steps / self.steps_per_cell,
                                 rate=f"{rate:,.0f} steps/s")
                return
            elif tenths <= self._shown[0] and now - self._shown[1] < QUIET_SECONDS:
                return
            else:
                line = (f"training {100 * steps / max(planned, 1):.0f}% ({steps:,.0f}/{planned:,} steps) "
                        f"| {rate:,.0f} steps/s | elapsed {_clock(elapsed)} | ETA {_clock(eta)}")
            self._shown = (tenths, now)
        self.message(f"{task.describe()}: {line}")

    def _speed(self, done_steps: float, elapsed: float) -> tuple[float, float]:
        """Steps per second taken in this process (not those a checkpoint resumed from), and the ETA of the rest."""
        rate = (done_steps - self._resumed) / max(elapsed, 1e-9)
        eta = (self.total * self.steps_per_cell - done_steps) / rate if rate > 0 else math.inf
        return rate, eta

    def advance(self, task: Task, records: list[dict]) -> None:
        score, sweep = self.track.score, self.track.sweep
        with self._lock:
            self._task = None
        self.done += len(records)
        failed = [r for r in records if r["status"] != "ok"]
        self.failed += len(failed)
        elapsed = time.perf_counter() - self.started
        rate, eta = self._speed(self.done * self.steps_per_cell, elapsed)
        ok = [r for r in records if r["status"] == "ok"]
        summary = ""
        if ok:
            summary = (f"train {score.label} {np.mean([r['train'][score.name] for r in ok]):.2f}, "
                       f"eval {score.label} {np.mean([r['eval'][score.name] for r in ok]):.2f}")
        for r in failed:
            summary += f"{'; ' if summary else ''}{sweep.column(r[sweep.name])} seed {r['seed']} FAILED: {r['reason']}"
        self.message(f"{task.describe()}: {summary}")
        status = (f"cells {self.done}/{self.total} ({100 * self.done / max(self.total, 1):.0f}%)"
                  f"{f', {self.failed} failed' if self.failed else ''} | {rate:,.0f} steps/s | "
                  f"elapsed {_clock(elapsed)} | ETA {_clock(eta)}")
        if self._bar is not None:
            self._bar.update(self._bar_task, completed=self.done, rate=f"{rate:,.0f} steps/s")
        else:
            self.log(status)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{seconds:02d}s" if hours else f"{minutes}m{seconds:02d}s"
