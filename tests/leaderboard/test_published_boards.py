"""The boards published under docs/leaderboard/ are what their committed records give: no hand-edited board.

Each published board is a results store (its records) with the files ``memgym leaderboard report`` writes
from it. The slow test rebuilds each from its records, through the command line, and compares the text
files byte for byte and the PNG plots as images (:mod:`tests.leaderboard.published_images`: pixel for pixel
under the matplotlib version that drew them). The fast one draws the plots again from the published
``board.json`` (the board the records give, by the slow test) and compares them the same way. A published
tuning table (``tuning-<agent>.json``, beside a sweep's records) must be the selection its records give.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from memgym.cli import main
from memgym.leaderboard.boards import report
from tests.leaderboard.published_images import assert_same_image

ROOT = Path(__file__).parents[2]
BOARDS = sorted(path.parent for path in (ROOT / "docs" / "leaderboard").glob("*/board.json"))
PLOTS = ("success_by_length.png", "learning_curves.png")


def test_the_reference_boards_are_published():
    assert {board.name for board in BOARDS} >= {"tmaze-cpu", "popgym-repeat-previous-cpu"}


def rebuild_flags(board: Path, published: dict) -> list[str]:
    """The ``memgym leaderboard report`` flags that rebuild ``board`` (run from the repository's root)."""
    sources = published.get("sources")
    if sources is None:  # a results store with its board
        return ["--track", published["track"], "--results", board.relative_to(ROOT).as_posix()]
    # a board of submissions (and a reference board), built from the repository's folders, named from its root
    return (["--track", published["track"], "--submissions", sources["submissions"]]
            + (["--results", sources["results"]] if sources["results"] else []))


def how_to_rebuild(board: Path, published: dict) -> str:
    flags = " ".join(rebuild_flags(board, published))
    return f"rebuild it with `memgym leaderboard report {flags} --out {board.relative_to(ROOT).as_posix()}`"


@pytest.mark.slow
@pytest.mark.parametrize("board", BOARDS, ids=[board.name for board in BOARDS])
def test_a_published_board_is_rebuilt_from_its_records(board, tmp_path, capsys, monkeypatch):
    published = json.loads((board / "board.json").read_text())
    if (board / report.ABOUT).exists():  # the board's own account, set under it, lives in its folder
        shutil.copy(board / report.ABOUT, tmp_path / report.ABOUT)
    monkeypatch.chdir(ROOT)
    assert main(["leaderboard", "report", *rebuild_flags(board, published), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    hint = how_to_rebuild(board, published)
    for name in ("board.json", "LEADERBOARD.md", "index.html"):
        assert (tmp_path / name).read_text() == (board / name).read_text(), (
            f"{board / name} is not what its records give: {hint}")
    for name in PLOTS:
        assert_same_image(tmp_path / name, board / name, hint)


@pytest.mark.parametrize("board", BOARDS, ids=[board.name for board in BOARDS])
def test_a_published_boards_account_of_what_it_shows_is_set_under_it(board):
    about, page = report.read_about(board), (board / "LEADERBOARD.md").read_text()
    heading = f"## {report.ABOUT_HEADING}"
    if about is None:
        assert heading not in page
    else:
        assert page.endswith(f"{heading}\n\n{about}\n"), (
            f"{board / report.ABOUT} changed since the board was written: "
            f"{how_to_rebuild(board, json.loads((board / 'board.json').read_text()))}")


@pytest.mark.parametrize("board", BOARDS, ids=[board.name for board in BOARDS])
def test_a_published_board_shows_the_plots_its_board_draws(board, tmp_path):
    pytest.importorskip("matplotlib")
    from memgym.leaderboard.tracks import TRACKS

    published = json.loads((board / "board.json").read_text())
    track = TRACKS[published["track"]]
    assert report.plot(published, tmp_path / PLOTS[0], track)
    assert report.plot_learning_curves(published, tmp_path / PLOTS[1], track)
    for name in PLOTS:
        assert f'<img src="{name}"' in (board / "index.html").read_text() and f"]({name})" in (
            board / "LEADERBOARD.md").read_text(), f"{board} does not show {name}"
        assert_same_image(tmp_path / name, board / name, how_to_rebuild(board, published))


HOST_LOOP_BOARD = ROOT / "docs" / "leaderboard" / "popgym-repeat-previous-cpu"
JAX_TIER_BOARD = ROOT / "docs" / "leaderboard" / "popgym-repeat-previous-jax-cpu"


def tier_comparison() -> list[dict]:
    """Per agent of the POPGym Repeat Previous CPU board, its score through the host loop (popgym's NumPy task) and
    in the JAX tier (memgym's JAX task), each with its 95% interval, and whether the intervals overlap."""
    boards = [{entry["agent"]: entry for entry in json.loads((board / "board.json").read_text())["entries"]}
              for board in (HOST_LOOP_BOARD, JAX_TIER_BOARD)]
    rows = []
    for agent in [a for a in boards[0] if a in boards[1]]:
        host, jax_tier = (board[agent]["eval"] for board in boards)
        rows.append({"agent": agent, "host": (host["score"], *host["score_ci"]),
                     "jax": (jax_tier["score"], *jax_tier["score_ci"]),
                     "agree": host["score_ci"][0] <= jax_tier["score_ci"][1]
                     and jax_tier["score_ci"][0] <= host["score_ci"][1]})
    return rows


def comparison_table(rows: list[dict]) -> str:
    """The Markdown table docs/popgym_jax.md shows."""
    def cell(score):
        return f"{score[0]:.2f} [{score[1]:.2f}, {score[2]:.2f}]"

    lines = ["| agent | host loop (popgym) | JAX tier (memgym.envs.popgym_jax) | intervals overlap |", "|---|---|---|---|"]
    lines += [f"| `{r['agent']}` | {cell(r['host'])} | {cell(r['jax'])} | {'yes' if r['agree'] else 'no'} |"
              for r in rows]
    return "\n".join(lines)


def test_the_jax_tier_rerun_of_the_popgym_board_is_compared_agent_by_agent_in_the_docs():
    """The POPGym board re-run in the JAX tier: docs/popgym_jax.md shows, for every agent of both boards, the two
    scores and whether their 95% intervals overlap, as the published records give them."""
    rows = tier_comparison()
    assert len(rows) == len(json.loads((JAX_TIER_BOARD / "board.json").read_text())["entries"]) >= 10
    assert comparison_table(rows) in (ROOT / "docs" / "popgym_jax.md").read_text(), comparison_table(rows)


FIGURE_6 = ROOT / "docs" / "tbb-vs-sbb-cpu"


@pytest.mark.slow
def test_the_published_figure_6_study_is_what_its_records_give(tmp_path, capsys):
    """docs/tbb-vs-sbb-cpu: the whole CPU grid of Figure 6 (4 tasks × 4 models × 5 batchings × 5 seeds) is stored,
    and its report, plots and study.json are what `memgym experiment tbb-vs-sbb report` writes from its records."""
    from memgym.experiments import tbb_vs_sbb

    records = sorted(FIGURE_6.glob("*/*/seed*.json"))
    study = tbb_vs_sbb.make_study("cpu")
    assert len(records) == len(study.agents()) * len(study.budget.values) * study.budget.seeds == 400
    assert {json.loads(path.read_text())["status"] for path in records} == {"ok"}
    hint = "rebuild it with `memgym experiment tbb-vs-sbb report --results docs/tbb-vs-sbb-cpu`"
    assert main(["experiment", "tbb-vs-sbb", "report", "--results", str(FIGURE_6), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    for name in ("REPORT.md", "study.json"):
        assert (tmp_path / name).read_text() == (FIGURE_6 / name).read_text(), f"{FIGURE_6 / name}: {hint}"
    for name in ("curves.png", "returns.png", "sensitivity.png"):
        assert_same_image(tmp_path / name, FIGURE_6 / name, hint)


TUNING_TABLES = sorted((ROOT / "docs" / "leaderboard").glob("*/tuning-*.json"))


def tuning_track(outcome: dict):
    """The track with a preset of the tuning outcome's name whose budget the outcome's is, on some of its values (a
    store's records stay valid when values are added to a preset: ``running.planning``)."""
    from memgym.leaderboard.tracks import TRACKS

    name, record = outcome["preset"]["name"], outcome["preset"]
    matches = []
    for track in TRACKS.values():
        if name in track.presets and track.sweep.plural in record:
            preset, budget = track.presets[name], track.budget_from_record(record)
            if set(budget.values) <= set(preset.values) and dataclasses.replace(budget, values=preset.values) == preset:
                matches.append(track)
    assert len(matches) == 1, f"no single track has the preset {outcome['preset']}: {[t.name for t in matches]}"
    return matches[0]


# Swept, but their selection does not carry to the board (docs/reproduction.md): they keep the shared values.
SELECTION_NOT_CARRIED = {"a2c-cpu-mlp", "a2c-cpu-gtrxl-32", "a2c-cpu-lstm"}


def test_the_cpu_boards_tuned_agents_run_at_their_published_selection():
    """Every ``a2c-cpu-*`` agent with a published sweep on ``cpu-tune`` trains at the learning rate and entropy
    coefficient the sweep selected (the board is scored at each model's own tuned values), except those of
    :data:`SELECTION_NOT_CARRIED`, which train at the board's shared values; and every agent in
    :data:`~memgym.leaderboard.reference.CPU_TUNED` has such a sweep."""
    from memgym.leaderboard import reference
    from memgym.leaderboard.protocol import parse_spec

    tables = {json.loads(p.read_text())["agent"]: json.loads(p.read_text()) for p in TUNING_TABLES
              if p.parent.name == "tmaze-cpu-tuning"}
    tuned = {getattr(reference, name.replace("-", "_")).config().memory for name in tables}
    assert set(reference.CPU_TUNED) <= tuned, sorted(set(reference.CPU_TUNED) - tuned)
    for name, table in tables.items():
        config = getattr(reference, name.replace("-", "_")).config()
        selected = parse_spec(table["selected"]["spec"])[1]
        expected = ({key: reference.CPU_A2C[key] for key in selected} if name in SELECTION_NOT_CARRIED
                    else selected)
        assert {key: getattr(config, key) for key in selected} == expected, name
        assert (config.memory in reference.CPU_TUNED) == (name not in SELECTION_NOT_CARRIED), name


def test_the_tuning_tables_are_published():
    assert any(path.parent.name == "tmaze-cpu-tuning" for path in TUNING_TABLES)


@pytest.mark.parametrize("path", TUNING_TABLES, ids=[f"{p.parent.name}/{p.name}" for p in TUNING_TABLES])
def test_a_published_tuning_selection_is_what_its_records_give(path):
    """A tuning table (``memgym leaderboard tune``'s ``tuning-<agent>.json``) ranks and selects what the
    records beside it give (:func:`memgym.leaderboard.boards.tuning.select`), every configuration of its grid
    complete."""
    from memgym.leaderboard.boards.tuning import grid_specs, select

    outcome = json.loads(path.read_text())
    track = tuning_track(outcome)
    specs = grid_specs(outcome["agent"], outcome["grid"])
    again = select(path.parent, specs, track.budget_from_record(outcome["preset"]), track)
    hint = (f"{path} is not what its records give: run `memgym leaderboard tune` again with its agent, grid and "
            f"preset and --results docs/leaderboard/{path.parent.name} (it trains nothing stored and rewrites the "
            "table)")
    assert json.loads(json.dumps(again, default=str)) == {k: outcome[k] for k in again}, hint
    assert again["incomplete"] == [] and len(again["ranked"]) == len(specs), "a published sweep is complete"
