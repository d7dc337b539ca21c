"""A missing optional extra fails only the agents that need it (here: memax, blocked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memgym.extras import MissingExtra, missing

# A fresh interpreter in which memax and equinox cannot be imported (as in `pip install ".[agents]"`), then the CLI.
WITHOUT_MEMAX = (
    "import sys; sys.modules.update(memax=None, equinox=None); "
    "from memgym.cli import main; sys.exit(main(sys.argv[1:]))"
)


def cli_without_memax(*argv: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_MEMAX, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**__import__("os").environ, "MEMGYM_COMPILATION_CACHE": "off"})


def test_missing_extra_names_what_needs_it_and_the_install_line():
    error = missing("a memax memory model", "memax", ModuleNotFoundError("No module named 'equinox'", name="equinox"))
    assert isinstance(error, ModuleNotFoundError) and error.name == "equinox"
    assert str(error) == ("a memax memory model needs memgym's [memax] extra (module 'equinox' is missing): "
                          'pip install "memgym[memax]"')
    assert missing("x", "memax", error) is error


@pytest.mark.slow(seconds=14)
def test_list_marks_the_agents_whose_extra_is_missing(tmp_path):
    listed = cli_without_memax("leaderboard", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line.startswith("  ")}
    assert 'unavailable: pip install "memgym[memax]"' in lines["a2c-tiny-deltanet"]
    assert "unavailable" not in lines["a2c-tiny-mlp"] and "unavailable" not in lines["ppo-cpu-gru"]


@pytest.mark.slow
def test_an_agent_without_memax_runs_and_a_memax_agent_is_refused_before_anything_is_stored(tmp_path):
    refused = cli_without_memax("leaderboard", "run", "--agent", "a2c-tiny-mlp", "--agent", "a2c-tiny-gdn",
                                "--preset", "smoke", "--results", "board", cwd=tmp_path)
    assert refused.returncode == 2
    assert "a2c-tiny-gdn" in refused.stderr and 'pip install "memgym[memax]"' in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "board").exists()
    ran = cli_without_memax("leaderboard", "run", "--agent", "a2c-tiny-mlp", "--preset", "smoke", "--values", "4",
                            "--seeds", "1", "--results", "board", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "board" / "LEADERBOARD.md").is_file()


def test_reference_agents_load_without_building_their_configs():
    """Importing the reference agents builds no config (that would import every model's extra)."""
    code = ("import sys; sys.modules.update(memax=None, equinox=None); "
            "import memgym.leaderboard.reference as r; "
            "assert r.a2c_tiny_mlp.config().memory == 'tiny-mlp'; "
            "from memgym.extras import MissingExtra\n"
            "try:\n    r.a2c_tiny_gdn.config()\nexcept MissingExtra as e:\n    print(e.extra)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "memax"
    assert issubclass(MissingExtra, ImportError)
