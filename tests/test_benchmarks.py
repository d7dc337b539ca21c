"""Every script in benchmarks/ runs: its ``--smoke`` mode, in a fresh process, prints its table.

Nothing else runs the benchmark scripts, so without these tests they rot (a model joins the
registry, an API changes) unnoticed until someone needs a number. Twenty smoke runs take about 30
minutes of a CPU core (60-110 s each on a 2-core machine), more than CI's time allows: they are
the ``extended`` tier (``python -m pytest -q -m extended``), run by whoever changes a benchmark or
what it measures, and before a release. ``--smoke`` runs a script's
whole code path (every table, every model it measures, its files) at tiny sizes; the figures it
prints mean nothing, only that it ran. The scripts run against this checkout's ``memgym``
(``PYTHONPATH`` is the repository root) and write their files under the test's ``tmp_path``.
A smoke run is mostly XLA compilation: the scripts inherit the suite's ``XLA_FLAGS``, which turn
XLA's backend optimisation off (tests/conftest.py).

A script added to benchmarks/ without a case in :data:`CASES` fails
:func:`test_every_benchmark_has_a_smoke_case`, which is quick and runs in the default tier.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py"))
TIMEOUT_S = 900  # a smoke run is mostly JAX compilation; generous for a loaded 2-core CI machine


@dataclass(frozen=True)
class Case:
    """How to run one script's smoke mode and what it must print and write.

    ``args`` may contain ``{tmp}``, replaced by the test's ``tmp_path``; ``prints`` are texts its
    standard output must contain (the table's header); ``writes`` are the files (relative to
    ``tmp_path``) it must leave, ``.json`` ones parsed. ``needs``: the optional module without
    which the script cannot run at all (the test is skipped without it). ``extra``: an optional
    module the script uses for some rows when it is installed: then it must print ``with_extra``,
    otherwise ``without_extra`` (that it skipped them).
    """

    prints: tuple[str, ...]
    args: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    needs: str | None = None
    extra: str | None = None
    with_extra: tuple[str, ...] = ()
    without_extra: tuple[str, ...] = ()


CASES: dict[str, Case] = {
    "approximation_study.py": Case(
        prints=("| r \\ c |", "mean relative error"),
        args=("--write-docs", "--docs-dir", "{tmp}/docs"),
        writes=("docs/approximation_study.md", "docs/figures/approximation_study.png"),
    ),
    "buffer_speed.py": Case(
        prints=("| buffer | add (transitions/s)", "| SBB L=100 |", "| task | episode length |", "| CountRecallHard |"),
        args=("--json", "{tmp}/buffer_speed.json"),
        writes=("buffer_speed.json",),
    ),
    "cue_signal.py": Case(prints=("| agent | L = 4 | L = 16 | per step |", "| `a2c-long-mlp` | 0.0e+00", "`a2c-long-arelit`")),
    "encoder_speed.py": Case(prints=("encoder ", "flax nn.Conv", "Conv3x3 ", "in a scan", "Conv3x3 vs nn.Conv")),
    "env_throughput.py": Case(prints=("implementation", "Gymnasium TMaze, 1 env", "floor + gymnax's keys, 64 envs")),
    "grid_throughput.py": Case(
        prints=("| agent | mode | wall time |", "| whole grid |", "| per length |", "| per process |"),
        args=("--json", "{tmp}/grid_throughput.json"),
        writes=("grid_throughput.json",),
    ),
    "gtrxl_acting.py": Case(prints=("| M | form |", "| recomputing |", "| cached |", "| cache speed-up |")),
    "inference_cost.py": Case(
        prints=("| model | params |", "| GTrXL-256, no K/V cache |", "| MLP (no memory) |"),
        args=("--json", "{tmp}/inference_cost.json"),
        writes=("inference_cost.json",),
        extra="memax",
        with_extra=("| DeltaNet (memax) |", "| GDN (memax) |", "| S6 (memax) |", "| MGU (memax) |"),
        without_extra=("no memax row: skipped: the memax extra is missing",),
    ),
    "memory_maze_overhead.py": Case(
        prints=("variant", "upstream task (every texture)", "MemoryMazeEnv (shown textures)", "gymnasium.make",
                "wrapper translation alone (stub)"),
        needs="memory_maze",
    ),
    "popgym_overhead.py": Case(
        prints=("| task | raw popgym | before | after |", "| NoisyPositionOnlyPendulum |",
                "| task | before | after | after / before |", "| CountRecall |"),
        needs="popgym",
    ),
    "scaling.py": Case(
        prints=("| devices | device kind |",),
        args=("--json", "{tmp}/scaling.json"),
        writes=("scaling.json",),
        extra="ray",
        with_extra=("| backend | wall-clock (s) |", "| Ray, 2 CPUs"),
        without_extra=("Part 2 skipped: Ray is not installed",),
    ),
    "scan_speed.py": Case(
        prints=("Discounted return", "GAE (", "(c) episode loop", "Memory models", "gtrxl ", "chunked attn"),
        args=("--json", "{tmp}/scan_speed.json", "--plot", "{tmp}/scan_speed.png"),
        writes=("scan_speed.json", "scan_speed.png"),
        extra="memax",
        with_extra=("memax scan",),
        without_extra=("no memax rows: the memax extra is missing",),
    ),
    "tbb_long_episodes.py": Case(
        prints=("| episode length | B |", "| per-tape split |", "| sampler | success per seed |"),
    ),
    "train_speed.py": Case(
        prints=("| model ", "| gtrxl-256 ", "| arelit ", "AReLiT vs GTrXL-256 (thesis"),
        args=("--json", "{tmp}/train_speed.json"),
        writes=("train_speed.json",),
    ),
    "update_memory_profile.py": Case(
        prints=("| model | XLA memory (MiB) |", "biggest temporaries by shape", "AReLiT / GTrXL-256 XLA memory"),
    ),
    "popgym_jax_speed.py": Case(
        prints=("| task | JAX, 16 envs, steps/s |", "| RepeatPreviousEasy |", "| BattleshipEasy |", "load at the end"),
        args=("--json", "{tmp}/popgym_jax_speed.json"),
        writes=("popgym_jax_speed.json",),
        needs="popgym",
    ),
    "popgym_grid_speed.py": Case(
        prints=("| mode | tier | wall time (s) |", "| JAX tier (seeds vmapped, one call) | jax |",
                "| host loop (one cell at a time) | any |", "ratio (host loop time / JAX tier time)"),
        args=("--json", "{tmp}/popgym_grid_speed.json"),
        writes=("popgym_grid_speed.json",),
        needs="popgym",
    ),
    "update_time_split.py": Case(prints=("| model | collect (ms) |", "| arelit |", "| gtrxl-256 |")),
    "vector_env.py": Case(prints=("JAX vector env steps/s", "SyncVectorEnv steps/s")),
    "verification_cost.py": Case(
        prints=("| agent | in process (run) |", "examples.numpy_agent:factory", "| evaluation of 2 cells |",
                "exported act, here (verify)"),
    ),
    "verification_false_alarms.py": Case(
        prints=("| L | cells | bitwise-equal |", "false-alarm rate (honest)", "flag rate (5× budget)", "| 4 | 2 |",
                "| all | 2 |", "Backend fingerprints: native", "(different)", "# machine:", "# total time"),
        args=("--keep", "{tmp}/runs", "--json", "{tmp}/verification_false_alarms.json"),
        writes=("verification_false_alarms.json", "runs/native.log"),
    ),
}


def run_script(script: str, args: list[str], prelude: str | None = None) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> --smoke <args>`` from the repository root, against this checkout.

    ``prelude``: Python code run in the child before the script (the script then runs via runpy).
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               MPLBACKEND="Agg")
    path = str(BENCHMARKS / script)
    if prelude is None:
        command = [sys.executable, path, "--smoke", *args]
    else:
        argv = [path, "--smoke", *args]
        launch = f"import runpy, sys\nsys.argv = {argv!r}\nrunpy.run_path({path!r}, run_name='__main__')"
        command = [sys.executable, "-c", prelude + "\n" + launch]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def failure(done: subprocess.CompletedProcess) -> str:
    return (f"exit code {done.returncode}\n--- stdout (end)\n{done.stdout[-3000:]}\n"
            f"--- stderr (end)\n{done.stderr[-5000:]}")


def test_every_benchmark_has_a_smoke_case():
    """A new script in benchmarks/ needs a case here (and a --smoke mode), or it would rot untested."""
    assert SCRIPTS, f"no scripts found in {BENCHMARKS}"
    uncovered = sorted(set(SCRIPTS) - set(CASES))
    assert not uncovered, f"benchmarks without a smoke case in tests/test_benchmarks.py: {uncovered}"
    stale = sorted(set(CASES) - set(SCRIPTS))
    assert not stale, f"smoke cases for scripts that are gone from benchmarks/: {stale}"
    for script in SCRIPTS:
        assert '"--smoke"' in (BENCHMARKS / script).read_text(), f"benchmarks/{script} has no --smoke flag"


@pytest.mark.slow(seconds=60)
@pytest.mark.extended
@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_run_prints_its_table(script, tmp_path):
    case = CASES.get(script)
    assert case is not None, f"benchmarks/{script} has no smoke case in tests/test_benchmarks.py"
    if case.needs is not None and importlib.util.find_spec(case.needs) is None:
        pytest.skip(f"benchmarks/{script} needs the optional module {case.needs!r}, not installed here")
    done = run_script(script, [arg.replace("{tmp}", str(tmp_path)) for arg in case.args])
    assert done.returncode == 0, failure(done)
    expected = case.prints
    if case.extra is not None:
        expected += case.with_extra if importlib.util.find_spec(case.extra) else case.without_extra
    for text in expected:
        assert text in done.stdout, f"{script} printed no {text!r}:\n{failure(done)}"
    for name in case.writes:
        path = tmp_path / name
        assert path.is_file() and path.stat().st_size > 0, f"{script} did not write {name}:\n{failure(done)}"
        if path.suffix == ".json":
            json.loads(path.read_text())


# The child imports nothing named memax (or below it): as if the memax extra were not installed.
WITHOUT_MEMAX = """
import importlib.abc, sys
class NoMemax(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "memax" or name.startswith("memax."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoMemax())
"""


@pytest.mark.slow(seconds=60)
@pytest.mark.extended  # a benchmark script's smoke run, as above
def test_inference_cost_without_memax_says_the_row_is_skipped(tmp_path):
    done = run_script("inference_cost.py", ["--json", str(tmp_path / "cost.json")], prelude=WITHOUT_MEMAX)
    assert done.returncode == 0, failure(done)
    assert "| MLP (no memory) |" in done.stdout and "(memax) |" not in done.stdout, failure(done)
    assert "no memax row: skipped: the memax extra is missing" in done.stdout, failure(done)
    written = json.loads((tmp_path / "cost.json").read_text())
    assert set(written["skipped"]) == {"memax"}
    assert "memax" not in {row["name"] for row in written["rows"]}


@pytest.mark.slow(seconds=60)
def test_the_cue_signal_is_none_without_memory_kept_by_linear_attention_and_decays_in_a_gru():
    """benchmarks/cue_signal.py measures what it says: a memoryless network's junction does not depend on the cue
    (exactly 0), linear attention, which adds without forgetting, keeps it over 64 steps, and a GRU at
    initialisation shrinks it geometrically (its update gate keeps about half of its state per step); and the initial
    policy's forward drift spreads over seeds with the policy gain √2 and not with 0.01."""
    spec = importlib.util.spec_from_file_location("cue_signal", BENCHMARKS / "cue_signal.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    assert not study.cue_signal(study.trainer_of("a2c-long-mlp"), 8, seeds=2).any()
    attention = study.trainer_of("a2c-long-linear-attention")
    short, long = (float(study.cue_signal(attention, length, seeds=2).min()) for length in (4, 64))
    assert short > 0 and long > 1e-2 * short
    gru = study.trainer_of("a2c-long-gru")
    short, long = (float(study.cue_signal(gru, length, seeds=2).max()) for length in (4, 64))
    assert 0 < long < 1e-4 * short
    # the initial policy's drift down the corridor: with the long board's policy gain √2 some seeds lean forward
    # or back; with the short boards' 0.01 every seed's policy is near uniform, a lazy random walk
    leaning = study.forward_drift(gru, 16, seeds=8)
    assert np.abs(leaning).max() > 0.05 and np.all(np.abs(leaning) <= 1)
    assert np.abs(study.forward_drift(study.trainer_of("a2c-tiny-gru"), 16, seeds=8)).max() < 0.01
