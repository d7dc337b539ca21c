"""The suite's compiler settings, and a test worker's compiled code kept bounded.

Much of the suite's time is XLA compiling small training functions on the CPU, so the suite
compiles with XLA's backend (LLVM) optimisation off (:data:`TEST_XLA_FLAG`): compile-bound tests
take 30–50 % less time, the few that train for long up to twice as long, the slow tier about 9 %
less in all (CONTRIBUTING.md). The same computations are compiled and run, only less optimised
machine code is made from them. It is added to ``XLA_FLAGS`` (and so reaches every subprocess a test
starts) unless ``XLA_FLAGS`` already names an optimisation level: ``XLA_FLAGS=
--xla_backend_optimization_level=3 python -m pytest`` tests at XLA's default. Records a test
makes name the flag in their backend (:func:`memgym.leaderboard.store.backend`), and a
verification retrains with the flags its records name, so the worked submission, made with
XLA's defaults, is still retrained with them.

Every executable XLA compiles on the CPU holds a few memory mappings until its cache
entry is dropped, and Linux caps a process at ``vm.max_map_count`` (65,530 by default);
past it, the next compilation aborts the interpreter. One pytest worker compiles
thousands of executables over the suite, so after each test module that leaves the
worker above :data:`MAPPINGS_BUDGET` mappings, JAX's caches are cleared.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

TEST_XLA_FLAG = "--xla_backend_optimization_level=0"
if "--xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAG}".strip()

# The suite compiles without JAX's persistent compilation cache (memgym's commands use one by default), so that
# no test depends on what an earlier run left in the user's cache; tests of the cache set their own folder.
os.environ.setdefault("MEMGYM_COMPILATION_CACHE", "off")

MAPPINGS_BUDGET = 20_000
_MAPS = Path("/proc/self/maps")


def mappings() -> int | None:
    """This process's memory mappings, where the system reports them (Linux)."""
    try:
        with _MAPS.open("rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return None


def pytest_collection_modifyitems(items):
    """Longest first: a test marked ``slow(seconds=N)`` (N: its measured time) runs before shorter ones, so that
    pytest-xdist, which hands tests to its workers in collection order, does not leave one worker running a
    minutes-long test alone at the end of the slow tier."""
    items.sort(key=lambda item: -max((mark.kwargs.get("seconds", 0) for mark in item.iter_markers("slow")),
                                     default=0))


@pytest.fixture(autouse=True, scope="module")
def bounded_compiled_code():
    yield
    count = mappings()
    if "jax" in sys.modules and count is not None and count > MAPPINGS_BUDGET:
        sys.modules["jax"].clear_caches()
