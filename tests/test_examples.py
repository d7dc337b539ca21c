"""Every example in ``examples/`` runs, at a tiny size, as its docstring tells a reader to run it (the submission
examples, ``random_agent``, ``numpy_agent`` and ``jax_agent``, are run by the leaderboard's tests)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                          timeout=900, cwd=EXAMPLES.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def test_every_example_is_run_here_or_by_the_leaderboard_tests():
    here = set(re.findall(r'run\("(\w+\.py)"', Path(__file__).read_text()))
    submissions = {"random_agent.py", "numpy_agent.py", "jax_agent.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} - {"__init__.py"} == here | submissions


def test_the_gymnasium_example_shows_memory_is_what_the_task_tests():
    out = run("gymnasium_tmaze.py", "--corridor-length", "12", "--episodes", "48")
    assert "remembers the cue: success 1.00 (one env), 1.00 (48 vector envs)" in out
    forgets = [float(x) for x in re.findall(r"forgets the cue\s*: success ([\d.]+) \(one env\), ([\d.]+)", out)[0]]
    assert all(0.2 < rate < 0.8 for rate in forgets), out


@pytest.mark.slow(seconds=40)
def test_the_gymnax_ppo_example_runs():
    assert re.search(r"T-Maze L=4: success [\d.]+ in the first updates, [\d.]+ in the last fifth",
                     run("gymnax_ppo.py", "--steps", "16384"))


@pytest.mark.slow(seconds=60)
def test_the_memax_example_runs():
    pytest.importorskip("memax")
    out = run("memax_models.py", "--steps", "4096", "--models", "tiny-deltanet,tiny-mgu")
    assert len(re.findall(r"T-Maze L=8: success [\d.]+ over the last fifth of the run", out)) == 2


@pytest.mark.slow(seconds=70)
def test_the_memorax_example_learns():
    """memorax's own PPO, which holds the env params in a static argument of jit, learns memgym's T-Maze. memorax 1.0
    steps gymnax 0.0.9's five values: CI runs this in its gymnax 0.0.9 stage, where memorax is installed."""
    pytest.importorskip("memorax")
    from importlib.metadata import version

    if version("gymnax") != "0.0.9":
        pytest.skip(f"memorax 1.0 steps gymnax 0.0.9's five values; gymnax {version('gymnax')} is installed")
    out = run("memorax_ppo.py", "--steps", "16384")
    after = float(re.search(r"evaluation success [\d.]+ before, ([\d.]+) after", out)[1])
    assert after > 0.9, out
