"""Old import paths of moved leaderboard names and modules keep working until memgym 0.3, with a warning naming the
new path."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from memgym.leaderboard import MOVED_MODULES

NEW_HOMES = {
    "memgym.leaderboard.track": {"memgym.leaderboard.tracks": ("EVALUATION_SEED", "Preset", "Score", "Sweep", "Track")},
    "memgym.leaderboard.cells": {
        "memgym.leaderboard.running.planning": ("NUM_ENVS", "Task", "cell_record", "version_label"),
        "memgym.leaderboard.store": ("CURVE_POINTS", "failure_reason"),
        "memgym.leaderboard.running.code_identity": ("code_hash", "code_modules", "describe_agent", "describe_code"),
        "memgym.leaderboard.running.any_tier": ("CellFailure",),
    },
    "memgym.leaderboard.store": {"memgym.leaderboard.running.planning": ("cell_record",)},
    "memgym.leaderboard.submission": {
        "memgym.leaderboard.submissions.comparison": ("Z", "DETERMINISTIC_GPU", "same_backend", "tolerance", "compare",
                                          "compare_evaluation", "spreads", "compare_training", "pooled_bias",
                                          "REPRODUCED", "WITHIN_SPREAD", "NOT_REPRODUCED"),
        "memgym.leaderboard.submissions.verification": ("verify",),
        "memgym.leaderboard.submissions.verdict": ("status", "table"),
    },
}
MOVED = [(old, name, new) for old, homes in NEW_HOMES.items() for new, names in homes.items() for name in names]


@pytest.mark.parametrize(("old", "name", "new"), MOVED)
def test_an_old_path_warns_and_gives_the_same_object(old, name, new):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"^{old}\.{name} is now {new}\.{name}; the old name stops working in memgym 0\.3"):
        found = getattr(module, name)
    assert found is getattr(importlib.import_module(new), name)


def test_from_import_of_an_old_path_warns():
    with pytest.warns(DeprecationWarning, match="memgym.leaderboard.track.Preset is now memgym.leaderboard.tracks.Preset"):
        from memgym.leaderboard.track import Preset
    assert Preset.__module__ == "memgym.leaderboard.tracks"


def test_a_name_that_never_was_there_is_an_attribute_error():
    module = importlib.import_module("memgym.leaderboard.track")
    with pytest.raises(AttributeError, match="module 'memgym.leaderboard.track' has no attribute 'Tracks'"):
        module.Tracks  # noqa: B018


def test_an_old_module_path_imports_the_moved_module_and_warns_once():
    """In a fresh interpreter (this one has imported the old paths already), for every moved module: ``import OLD``
    warns at the import statement's line, gives the module at its new path, and a second import does not warn
    again."""
    script = f"""
import importlib, warnings
warnings.simplefilter("always")
for old, new in {sorted(MOVED_MODULES.items())!r}:
    with warnings.catch_warnings(record=True) as caught:
        exec(f"import {{old}} as old_module\\nimport {{old}}", namespace := {{}})
    assert namespace["old_module"] is importlib.import_module(new), (old, new)
    assert [str(w.message) for w in caught] == [f"{{old}} is now {{new}}; the old path stops working in memgym 0.3"], caught
    assert caught[0].category is DeprecationWarning and caught[0].filename == "<string>", caught[0].filename
print(len({sorted(MOVED_MODULES.items())!r}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(len(MOVED_MODULES))]


def test_every_old_module_path_moved_to_a_module_that_exists():
    for old, new in MOVED_MODULES.items():
        assert importlib.util.find_spec(new) is not None, new
        assert old.rpartition(".")[0] == "memgym.leaderboard", old
