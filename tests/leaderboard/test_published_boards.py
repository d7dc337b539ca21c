"""The boards published under docs/leaderboard/ are what their committed records give: no hand-edited board.

Each published board is a results store (its records) with the files ``memgym leaderboard report`` writes
from it; this rebuilds each from its records, through the command line, and compares the text files
byte for byte (the PNG plots depend on the installed matplotlib, so they are only required to exist).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memgym.cli import main

BOARDS = sorted(path.parent for path in (Path(__file__).parents[2] / "docs" / "leaderboard").glob("*/board.json"))


def test_the_reference_boards_are_published():
    assert {board.name for board in BOARDS} >= {"tmaze-cpu", "popgym-repeat-previous-cpu"}


@pytest.mark.parametrize("board", BOARDS, ids=[board.name for board in BOARDS])
def test_a_published_board_is_rebuilt_from_its_records(board, tmp_path, capsys, monkeypatch):
    published = json.loads((board / "board.json").read_text())
    track, sources = published["track"], published.get("sources")
    if sources is None:  # a results store with its board
        flags = ["--results", str(board)]
    else:  # a board of submissions (and a reference board), built from the repository's folders, named from its root
        monkeypatch.chdir(Path(__file__).parents[2])
        flags = ["--submissions", sources["submissions"]] + (["--results", sources["results"]] if sources["results"] else [])
    assert main(["leaderboard", "report", "--track", track, *flags, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    for name in ("board.json", "LEADERBOARD.md", "index.html"):
        assert (tmp_path / name).read_text() == (board / name).read_text(), (
            f"{board / name} is not what its records give: rebuild it with `memgym leaderboard report --track "
            f"{track} --results {board} --out {board}`")
    for name in ("success_by_length.png", "learning_curves.png"):
        assert (board / name).stat().st_size > 0
