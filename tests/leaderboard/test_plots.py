"""A board's plots can be read with 20 agents: every series has a colour and marker of its own, an agent keeps
its style in both plots of the board, and the legend sits beside the panels, over no data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from memgym.leaderboard.boards import report  # noqa: E402

AGENTS = 20
LENGTHS = (16, 32, 64)
PUBLISHED = Path(__file__).parents[2] / "docs" / "leaderboard" / "tmaze-cpu" / "board.json"


@pytest.fixture(scope="module")
def board():
    """The published T-Maze board's first versions (15 agents, most tied at 1.0 at L=16) and 5 more agents: copies
    of its last five rows under new names, 0.02 lower at every length, ranked after them."""
    board = json.loads(PUBLISHED.read_text())
    board["entries"] = [entry for entry in board["entries"] if entry["version"] == 1]
    extra = []
    for number, entry in enumerate(board["entries"][-5:]):
        copy = json.loads(json.dumps(entry))
        copy["agent"] = f"a2c-cpu-extra-{number}"
        for summary in copy["eval"]["per_length"].values():
            for key in ("mean", "ci_low", "ci_high"):
                summary[key] -= 0.02
        extra.append(copy)
    board["entries"] += extra
    assert len({entry["agent"] for entry in board["entries"]}) == AGENTS
    return board


def series(figure) -> dict[str, list[tuple[str, str, str]]]:
    """Per labelled series of the figure's axes: its (colour, marker, line style) in each panel it is drawn in."""
    from matplotlib.colors import to_hex

    styles: dict[str, list[tuple[str, str, str]]] = {}
    for axis in figure.axes:
        for handle, label in zip(*axis.get_legend_handles_labels()):  # guides (the chance line) are unlabelled
            line = handle.lines[0] if hasattr(handle, "lines") else handle  # an error bar's line of means
            styles.setdefault(label, []).append((to_hex(line.get_color()), line.get_marker(), line.get_linestyle()))
    return styles


def assert_legend_beside_the_data(figure, labels):
    figure.canvas.draw()
    (legend,) = figure.legends
    assert not any(axis.get_legend() for axis in figure.axes), "a legend inside a panel covers its curves"
    assert [text.get_text() for text in legend.get_texts()] == labels
    box = legend.get_window_extent()
    for axis in figure.axes:
        if axis.get_visible() and axis.axison:
            assert not box.overlaps(axis.get_window_extent()), f"the legend covers the panel {axis.get_title()!r}"
    page = figure.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, (
        "the legend runs off the saved image")


def test_twenty_agents_each_have_their_own_style_in_both_plots(board):
    import matplotlib.pyplot as plt

    ranking = [entry["agent"] for entry in board["entries"]]
    by_length, curves = report.by_length_figure(board), report.learning_curves_figure(board)
    try:
        for figure in (by_length, curves):
            drawn = series(figure)
            assert set(drawn) == set(ranking)
            assert all(len(set(styles)) == 1 for styles in drawn.values()), "an agent changes style between panels"
            pairs = {label: styles[0][:2] for label, styles in drawn.items()}
            assert len(set(pairs.values())) == AGENTS, "two agents share a colour and a marker"
            assert all(marker not in ("", "None", None) for _, marker in pairs.values())
            assert_legend_beside_the_data(figure, ranking)
        look = [{label: styles[0] for label, styles in series(figure).items()} for figure in (by_length, curves)]
        assert look[0] == look[1], "an agent looks different in the board's two plots"
        assert len(by_length.axes) == 1 and len(curves.axes) == len(LENGTHS)  # a panel per length
    finally:
        plt.close(by_length)
        plt.close(curves)


def test_agents_tied_at_a_length_are_drawn_side_by_side(board):
    import matplotlib.pyplot as plt

    figure = report.by_length_figure(board)
    try:
        (axis,) = figure.axes
        handles, _ = axis.get_legend_handles_labels()
        xs = np.array([handle.lines[0].get_xdata() for handle in handles])
        assert xs.shape == (AGENTS, len(LENGTHS))
        for column, tick in enumerate(axis.get_xticks()):  # each length's points around its tick, all apart
            assert np.all(np.abs(xs[:, column] - tick) < 0.5) and len(np.unique(xs[:, column])) == AGENTS
        assert [t.get_text() for t in axis.get_xticklabels()] == [str(length) for length in LENGTHS]
    finally:
        plt.close(figure)


def test_the_styles_stay_distinct_past_the_palette():
    styles = report.series_styles([f"agent-{i}" for i in range(140)])
    assert len({(s["color"], s["marker"]) for s in styles.values()}) == 140
    assert len({s["color"] for s in styles.values()}) == 20
    first = report.series_styles(["b", "a"])
    assert first["b"] == styles["agent-0"] and first["a"] == styles["agent-1"]  # fixed by position, not name
    with pytest.raises(ValueError, match="names \\['a'\\] are given more than once"):
        report.series_styles(["a", "b", "a"])
    with pytest.raises(ValueError, match="panels must be a positive integer, got 0"):
        report.panel_grid(report.pyplot(), 0)


def test_a_tall_legend_gets_room_and_columns():
    import matplotlib.pyplot as plt

    names = [f"series-{i}" for i in range(60)]
    styles = report.series_styles(names)
    figure, axes = report.panel_grid(plt, 1)
    try:
        for i, name in enumerate(names):
            axes[0, 0].plot([0, 1], [i, i + 1], label=name, **styles[name])
        legend = report.arrange_panels(figure, axes, 1)
        figure.canvas.draw()
        columns = {round(text.get_window_extent().x0) for text in legend.get_texts()}
        assert len(columns) == -(-len(names) // report.LEGEND_ROWS) == 3
        assert_legend_beside_the_data(figure, names)
    finally:
        plt.close(figure)


def test_long_names_in_the_legend_leave_the_panel_its_width():
    """A board's agents named with their options (``a2c-long-linear-attention[learning_rate=0.003,…]``): the
    legend beside the panel widens the figure rather than squeezing the panel."""
    import matplotlib.pyplot as plt

    names = [f"a2c-long-model-{i}[learning_rate=0.003,entropy_coef=0.003]" for i in range(5)]
    styles = report.series_styles(names)
    figure, axes = report.panel_grid(plt, 1, width=6.5, height=4.2)
    try:
        for i, name in enumerate(names):
            axes[0, 0].plot([0, 1], [i, i + 1], label=name, **styles[name])
        report.arrange_panels(figure, axes, 1)
        figure.canvas.draw()
        panel_width = axes[0, 0].get_window_extent().width / figure.dpi
        assert panel_width > 5.0, f"the panel is {panel_width:.1f} inches wide of the 6.5 it was given"
        assert_legend_beside_the_data(figure, names)
    finally:
        plt.close(figure)


TUNING = Path(__file__).parents[2] / "docs" / "leaderboard" / "tmaze-cpu-tuning" / "board.json"


def test_a_tuning_board_gets_a_panel_per_agent_family_each_with_its_configurations():
    """More rows than one legend can name (a sweep: every configuration of 8 agents) are drawn one panel per
    agent family (learning curves: per family and corridor length), each with a legend of its configurations
    beside it (those with a curve at that length), covering no panel and inside the image."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from memgym.leaderboard.protocol import parse_spec
    from memgym.leaderboard.tracks import TMAZE

    board = json.loads(TUNING.read_text())
    families: dict[str, list[dict]] = {}
    for entry in board["entries"]:
        families.setdefault(parse_spec(entry["spec"])[0], []).append(entry)
    assert len(board["entries"]) > report.FAMILY_PANELS_ABOVE and len(families) > 1
    lengths = {family: sorted({int(length) for e in entries for length in e["curves"]})
               for family, entries in families.items()}
    assert max(len(found) for found in lengths.values()) > 1, "a family swept over several lengths"
    by_length = {family: (family, families[family]) for family in sorted(families)}
    curves = {f"{family}, {TMAZE.sweep.column(length)}": (family, [e for e in families[family]
                                                                   if e["curves"].get(str(length))])
              for family in sorted(families) for length in lengths[family]}
    for figure, expected in ((report.by_length_figure(board), by_length),
                             (report.learning_curves_figure(board), curves)):
        try:
            figure.canvas.draw()
            assert not figure.legends, "one legend for every panel"
            panels = [axis for axis in figure.axes if axis.axison]
            names = [", ".join(p for p in axis.get_title().split(", ") if "cpu-tune" not in p) for axis in panels]
            assert names == list(expected)
            for axis, name in zip(panels, names):
                entries = expected[name][1]
                legend = axis.get_legend()
                assert [t.get_text() for t in legend.get_texts()] == [report.family_label(e) for e in entries]
                assert all("[" not in t.get_text() for t in legend.get_texts())
                handles, _ = axis.get_legend_handles_labels()
                lines = [h.lines[0] if hasattr(h, "lines") else h for h in handles]
                looks = {(to_hex(line.get_color()), line.get_marker()) for line in lines}
                assert len(looks) == len(entries), "two configurations in a panel look alike"
                box = legend.get_window_extent()
                assert box.x0 >= axis.get_window_extent().x1, "the legend covers its panel"
                assert not any(box.overlaps(other.get_window_extent()) for other in panels), axis.get_title()
                page = figure.bbox
                assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
        finally:
            plt.close(figure)
    assert report.family_label({"spec": "a2c-cpu-gru[learning_rate=0.003,entropy_coef=0.01]", "version": 2}) == (
        "learning_rate=0.003, entropy_coef=0.01 @v2")
    assert report.family_label({"spec": "a2c-cpu-gru", "version": 1}) == "defaults"
