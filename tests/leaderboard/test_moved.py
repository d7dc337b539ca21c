"""Old import paths of moved leaderboard names keep working until memgym 0.3, with a warning naming the new path."""

from __future__ import annotations

import importlib

import pytest

NEW_HOMES = {
    "memgym.leaderboard.track": {"memgym.leaderboard.tracks": ("EVALUATION_SEED", "Preset", "Score", "Sweep", "Track")},
    "memgym.leaderboard.cells": {
        "memgym.leaderboard.planning": ("NUM_ENVS", "Task", "cell_record", "version_label"),
        "memgym.leaderboard.store": ("CURVE_POINTS", "failure_reason"),
        "memgym.leaderboard.code_identity": ("code_hash", "code_modules", "describe_agent", "describe_code"),
        "memgym.leaderboard.any_tier": ("CellFailure",),
    },
    "memgym.leaderboard.store": {"memgym.leaderboard.planning": ("cell_record",)},
    "memgym.leaderboard.submission": {
        "memgym.leaderboard.comparison": ("Z", "DETERMINISTIC_GPU", "same_backend", "tolerance", "compare",
                                          "compare_evaluation", "spreads", "compare_training", "pooled_bias",
                                          "REPRODUCED", "WITHIN_SPREAD", "NOT_REPRODUCED"),
        "memgym.leaderboard.verification": ("verify",),
        "memgym.leaderboard.verdict": ("status", "table"),
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
