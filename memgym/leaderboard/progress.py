"""Progress of a run: cells done / total, environment steps per second and ETA.

A ``rich`` bar on a terminal (when ``rich`` is installed and the log is
``print``), plain lines otherwise; each finished task also prints one line with
its mean training and evaluation score, or each failed cell's reason.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

import numpy as np

from memgym.leaderboard.cells import Task
from memgym.leaderboard.track import Track


class Progress:
    """Cells done / total, environment steps per second and ETA: a rich bar on a terminal, lines otherwise."""

    def __init__(self, total_cells: int, steps_per_cell: int, log: Callable[[str], None], track: Track):
        self.total, self.steps_per_cell, self.log, self.track = total_cells, steps_per_cell, log, track
        self.done = self.failed = 0
        self.started = time.perf_counter()
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
                self._task = self._bar.add_task("cells", total=total_cells, rate="")
                self._bar.start()

    def message(self, line: str) -> None:
        if self._bar is not None:
            self._bar.console.print(line)
        else:
            self.log(line)

    def advance(self, task: Task, records: list[dict]) -> None:
        score, sweep = self.track.score, self.track.sweep
        self.done += len(records)
        failed = [r for r in records if r["status"] != "ok"]
        self.failed += len(failed)
        elapsed = time.perf_counter() - self.started
        rate = self.done * self.steps_per_cell / max(elapsed, 1e-9)
        eta = elapsed / self.done * (self.total - self.done) if self.done else math.inf
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
            self._bar.update(self._task, completed=self.done, rate=f"{rate:,.0f} steps/s")
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
