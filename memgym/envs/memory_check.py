"""Refusing, before building them, more environments than this machine's memory holds.

A simulator-backed environment can be large: one Memory Maze environment holds a
MuJoCo model with its textures and an OpenGL context (docs/memory_maze.md). A run
that builds as many as its ``num_envs`` asks for, one by one, can be killed by the
kernel's out-of-memory killer halfway through, with nothing printed.
:func:`check_num_envs` builds two environments first, measures what each added to
this process's resident memory, and compares what ``num_envs`` of them need with
the memory available; it raises :class:`NotEnoughMemory` (a ``ValueError``, so the
CLI prints it without a traceback) naming both figures and the largest number that
fits. ``memgym train`` on a Gymnasium env calls it before building its vector env;
a Memory Maze environment also refuses its own build when the memory left is less
than the last build took, wherever it is built (``gymnasium.make_vec``, a vector
env's workers). The leaderboard's tracks (T-Maze, POPGym) build environments of
kilobytes and are not checked.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Share of the available memory a run's environments may take; the rest is left to the learner
#: (parameters, rollouts, XLA's buffers) and to the rest of the machine.
ENV_SHARE = 0.8

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """This process's resident memory now (Linux: ``/proc/self/statm``; elsewhere its peak so far)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _cgroup_room() -> int | None:
    """Bytes this process's cgroup (v2) may still take, or None when it has no limit."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - used)


def available_bytes() -> int | None:
    """Memory this process can still take: the kernel's ``MemAvailable``, or less where a cgroup limits
    the process (a container); None where neither can be read (then nothing is refused)."""
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if available is None and hasattr(os, "sysconf"):
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * _PAGE
        except (ValueError, OSError):
            available = None
    room = _cgroup_room()
    if room is not None:
        available = room if available is None else min(available, room)
    return available


def release_freed_memory() -> None:
    """Return the heap memory this process has freed to the system (glibc's ``malloc_trim``; a no-op
    elsewhere). After a large model is freed, glibc keeps much of it for reuse; a process that builds
    environments one by one then reads, and holds, more than it uses."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return
    trim(0)


def gib(size: float) -> str:
    """``size`` bytes in GiB, for messages."""
    return f"{size / 2**30:.2f} GiB"


@dataclasses.dataclass(frozen=True)
class EnvMemory:
    """What environments of one kind cost in this process, measured by :func:`measure_env_memory`.

    ``first``: bytes the first one added (with whatever libraries and contexts it loaded once);
    ``each``: bytes each further one added; ``available``: memory available before they were built
    (``None``: unknown).
    """

    first: int
    each: int
    available: int | None

    def need(self, num_envs: int) -> int:
        """Bytes ``num_envs`` environments need: the first, then ``each`` per further one."""
        return self.first + max(0, num_envs - 1) * self.each

    def most_that_fit(self) -> int | None:
        """The largest number of environments within :data:`ENV_SHARE` of the available memory."""
        if self.available is None:
            return None
        room = ENV_SHARE * self.available - self.first
        if room < 0:
            return 0
        return 1 + (int(room // self.each) if self.each > 0 else sys.maxsize)

    def fits(self, num_envs: int) -> bool:
        return self.available is None or self.need(num_envs) <= ENV_SHARE * self.available


def measure_env_memory(make_env: Callable[[], Any], seed: int = 0) -> EnvMemory:
    """Build and reset (seeds ``seed``, ``seed + 1``) two environments from ``make_env``, reading this
    process's resident memory before and after each, then close both; the reset is measured because an
    environment may build its simulator there (Memory Maze does)."""
    available, before = available_bytes(), resident_bytes()
    sizes, envs = [], []
    try:
        for index in range(2):  # the first stays alive while the second is built
            envs.append(make_env())
            envs[-1].reset(seed=seed + index)
            sizes.append(resident_bytes())
    finally:
        for env in envs:
            env.close()
        del envs
    first, each = max(0, sizes[0] - before), max(0, sizes[1] - sizes[0])
    return EnvMemory(first=max(first, each), each=each, available=available)


class NotEnoughMemory(ValueError):
    """``num_envs`` environments would not fit in this machine's available memory."""


def check_num_envs(make_env: Callable[[], Any], num_envs: int, *, what: str, flag: str = "--num-envs",
                   seed: int = 0) -> EnvMemory:
    """Measure two environments from ``make_env`` (:func:`measure_env_memory`) and raise
    :class:`NotEnoughMemory` unless ``num_envs`` of them fit within :data:`ENV_SHARE` of the available
    memory. ``what`` names the environment and ``flag`` the setting a user changes, for the message.
    Returns the measurement."""
    memory = measure_env_memory(make_env, seed=seed)
    if memory.fits(num_envs):
        return memory
    most = memory.most_that_fit()
    advice = (f"the largest {flag} that fits is {most}" if most else
              "not even one fits: close other programs or use a machine with more memory")
    raise NotEnoughMemory(
        f"{flag} {num_envs}: {num_envs} x {what} need about {gib(memory.need(num_envs))} "
        f"(measured here: {gib(memory.first)} for the first, with the libraries it loads once, and "
        f"{gib(memory.each)} for each further one), but this machine has {gib(memory.available)} of memory "
        f"available and memgym leaves {1 - ENV_SHARE:.0%} of it to the learner and the system; {advice}"
    )
