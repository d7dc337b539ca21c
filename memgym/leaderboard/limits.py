"""The allowed ranges of the leaderboard's numeric flags (:data:`LIMITS`, checked by
:func:`memgym.validation.check_number` before anything runs), and the wall-clock limit on a call into an agent
(:func:`alarm`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

from memgym.validation import Limit


# Steps count inside jit in int32 (ScoredEnv's counters, the agents' scan lengths).
MAX_TOTAL_STEPS = 2**31 - 1
POSITIVE = Limit(1, 2**31 - 1, True, "2**31-1: counts are int32 inside jit")
STEPS = Limit(1, MAX_TOTAL_STEPS, True, "2**31-1: the JAX tier counts a cell's steps in int32")
SEEDS = Limit(1, 1000, True, "the seeds of a value train as one batch")
SEEDS_PER_BATCH = Limit(1, 1000, True, "a batch holds at most a value's seeds")
EVAL_EPISODES = Limit(1, 1000, True, "evaluation seeds are 2000003 + 1000*value + episode: more episodes would "
                                     "replay the next value's")
FIRST_SEED = Limit(0, 2**31 - 1000, True, "a cell's training key is jax.random.key(seed): seeds are int32")
SECONDS = Limit(0, 1e6, False, "1e6 s is 11.6 days; the alarm timer overflows on huge values", open_low=True)
CPUS = Limit(0, 1024, False, open_low=True)
GPUS = Limit(0, 1024, False)

# ``memgym leaderboard check``: each call into the agent (a JAX call's compilation included) must return by then.
DEFAULT_STEP_TIMEOUT = 120.0

LIMITS = {"--steps": STEPS, "--seeds": SEEDS, "--seeds-per-batch": SEEDS_PER_BATCH, "--first-seed": FIRST_SEED,
          "--eval-episodes": EVAL_EPISODES,
          "--cell-timeout": SECONDS,
          "--step-timeout": SECONDS, "--memory-limit": Limit(0, 1 << 20, False, "GiB of address space", open_low=True),
          "--cpus-per-task": CPUS, "--gpus-per-task": GPUS}


class CellFailure(Exception):
    """The agent broke a rule of the harness (invalid actions, NaN, too slow); the cell is recorded as failed, with
    the message alone as its reason (:func:`~memgym.leaderboard.store.failure_reason`)."""

    verdict = True


#: Seconds the code that :func:`alarm` interrupted has to unwind before the process is stopped: an agent that catches
#: the interrupt (``except BaseException:``, a bare ``except:``) and goes on running cannot be stopped otherwise in
#: its own process.
UNWIND_SECONDS = 10.0
#: The exit status of a process stopped so (GNU ``timeout``'s).
STOPPED_STATUS = 124


OVER_TIME = "exceeded the wall-clock limit per cell"


def over_time(seconds: float, limit: float) -> str:
    """Why a cell failed that ran ``seconds`` past its ``limit`` (``--cell-timeout``)."""
    return f"{OVER_TIME} ({seconds:.0f}s > {limit:g}s)"


@contextlib.contextmanager
def alarm(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CellFailure` in the main thread after ``seconds`` (interrupts a hung agent).

    The interrupt is an exception raised in the guarded code, which that code can catch. If it catches it and
    returns, the block still fails with :class:`CellFailure` once it ends; if it goes on running
    :data:`UNWIND_SECONDS` after the interrupt, the process is stopped with a message on stderr and exit status
    :data:`STOPPED_STATUS` (what was stored before is kept; the work in flight is not recorded). Compiled code
    (a running XLA computation) sees the interrupt only when it returns to Python.
    """
    if seconds is None or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return
    watchdog: list[threading.Timer] = []
    message = OVER_TIME

    def ring(signum, frame):
        if not watchdog:
            watchdog.append(threading.Timer(UNWIND_SECONDS, _stop, (seconds,)))
            watchdog[0].daemon = True
            watchdog[0].start()
        raise CellFailure(message)

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
        if watchdog:  # the interrupt was caught, and the code returned after its time
            raise CellFailure(message)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for timer in watchdog:
            timer.cancel()
        signal.signal(signal.SIGALRM, previous)


def _stop(seconds: float) -> None:
    """The watchdog of :func:`alarm`: the interrupted code has not unwound; stop the process."""
    sys.stderr.write(f"\nmemgym: the code interrupted at its wall-clock limit ({seconds:g} s) was still running "
                     f"{UNWIND_SECONDS:g} s later: it caught the interrupt (an `except BaseException:` or a bare "
                     f"`except:` around its work) and went on. Stopping the process (exit status {STOPPED_STATUS}); "
                     "results stored before are kept, the cell or check in flight is not recorded.\n")
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(STOPPED_STATUS)
