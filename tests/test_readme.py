"""The README, then the guide (docs/guide.md) it leads to, run top to bottom: their shell commands and Python
snippets, in the order a reader types them, in a fresh folder (the README's own test, like the docs' snippet
tests)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The README's install prefix: the test runs in the environment it made, so only what follows it runs here.
INSTALL = re.compile(r'^python3 -m venv \.venv && \. \.venv/bin/activate && pip install "\.\[[a-z,-]+\]" && (?P<rest>.+)$')


#: The pages a reader follows from the front page, in order: the README, then the guide.
PAGES = ("README.md", "docs/guide.md")


def readme_blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced ``bash`` and ``python`` block of the README and the guide, in order."""
    text = "\n".join((ROOT / page).read_text() for page in PAGES)
    return [(m["lang"], m["code"]) for m in re.finditer(r"^```(?P<lang>bash|python)\n(?P<code>.*?)^```", text,
                                                      re.M | re.S)]


def test_the_readme_quickstart_is_what_ci_runs():
    """The README's two quickstart commands install with pip and run the main job and the tests."""
    quickstart = [code.strip() for lang, code in readme_blocks() if lang == "bash"][:2]
    assert all(INSTALL.match(line) for line in quickstart), quickstart
    ci = (ROOT / ".ci" / "run").read_text()
    # CI types the test command's install and its tests as two steps (other install checks run in between).
    install, tests = quickstart[1].rsplit(" && ", 1)
    lines = [line.strip() for line in ci.splitlines()]
    assert install in lines and tests in lines and lines.index(install) < lines.index(tests), (install, tests)
    assert INSTALL.match(quickstart[0])["rest"].split(" --agent")[0] in ci


#: README commands that another test runs as the README types them (it reads them from the README), so that
#: they do not run twice: the CPU-sized Memory Maze run (minutes) is tests/envs/test_memory_maze.py's (an
#: extended test).
RUN_BY_OTHER_TESTS = ("memgym train --preset memory-maze-arelit",)


def test_the_commands_left_to_other_tests_are_run_there():
    source = (ROOT / "tests" / "envs" / "test_memory_maze.py").read_text()
    assert all(f'README_COMMAND_PREFIX = "{prefix}"' in source for prefix in RUN_BY_OTHER_TESTS)
    assert sum(line.strip().startswith(RUN_BY_OTHER_TESTS) for lang, code in readme_blocks() if lang == "bash"
               for line in code.splitlines()) == len(RUN_BY_OTHER_TESTS)


@pytest.mark.slow(seconds=300)
def test_every_readme_command_and_snippet_runs_in_order(tmp_path):
    # The README's commands run in the environment its install made: this interpreter's, activated or not.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "MEMGYM_COMPILATION_CACHE": str(tmp_path / "cache"), "MPLBACKEND": "Agg"}
    # The quickstart's two commands (the main job and the tests) are CI's own steps (the test above checks it):
    # running them here again would only run them twice.
    quickstart = {INSTALL.match(code.strip())["rest"] for code in [c for lang, c in readme_blocks() if lang == "bash"][:2]}
    ran = []
    for lang, code in readme_blocks():
        if lang == "python":
            argv = [sys.executable, "-c", code]
        else:
            for line in (line.split("  #")[0].strip() for line in code.splitlines()):
                match = INSTALL.match(line)
                command = match["rest"] if match else line
                if not command or command in quickstart or command.startswith(RUN_BY_OTHER_TESTS):
                    continue
                if command == "pip install .":  # this environment is that install (and more)
                    assert subprocess.run([sys.executable, "-m", "pip", "show", "memgym"], capture_output=True,
                                          env=env).returncode == 0
                    continue
                ran.append(command)
                out = subprocess.run(ran[-1], shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                                     timeout=900)
                assert out.returncode == 0, f"README command {ran[-1]!r} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
            continue
        out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"README snippet failed:\n{code}\n{out.stderr[-3000:]}"
    assert any(command.startswith("memgym leaderboard run") for command in ran)  # the memax block's board
    assert len(list((tmp_path / "runs").iterdir())) == sum(c.startswith("memgym train") for c in ran)
    assert not any(c.startswith(RUN_BY_OTHER_TESTS) for c in ran)
