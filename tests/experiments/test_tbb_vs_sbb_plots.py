"""The TBB-vs-SBB study's plots: a style of its own per model (or policy), the legend beside the panels, and the
published docs/tbb-vs-sbb/ images are what the published study.json draws."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from memgym.experiments import tbb_vs_sbb  # noqa: E402
from tests.leaderboard.published_images import assert_same_image  # noqa: E402

STUDY = Path(__file__).parents[2] / "docs" / "tbb-vs-sbb"
REBUILD = ("rebuild it with `memgym experiment tbb-vs-sbb report --results <the study's results> "
           "--out docs/tbb-vs-sbb`")


def summary_of_four_models() -> dict:
    """Every model on two tasks under TBB and SBB L=10, all tied at 0.5 under TBB."""
    rows = []
    for task in tbb_vs_sbb.TASKS[:2]:
        for place, model in enumerate(tbb_vs_sbb.MODELS):
            for batching, mean in (("tbb", 0.5), ("sbb10", 0.1 * place)):
                rows.append({"preset": "smoke", "task": task, "model": model, "batching": batching, "failed": 0,
                             "seconds": [1.0], "n": 3, "mean": mean, "ci_low": mean - 0.1, "ci_high": mean + 0.1})
    return {"rows": rows}


def drawn_styles(figure) -> dict[str, set[tuple[str, str]]]:
    from matplotlib.colors import to_hex

    styles: dict[str, set[tuple[str, str]]] = {}
    for axis in figure.axes:
        for handle, label in zip(*axis.get_legend_handles_labels()):
            line = handle.lines[0] if hasattr(handle, "lines") else handle
            styles.setdefault(label, set()).add((to_hex(line.get_color()), line.get_marker()))
    return styles


def assert_legend_beside(figure, labels):
    figure.canvas.draw()
    (legend,) = figure.legends
    assert [text.get_text() for text in legend.get_texts()] == labels
    assert not any(axis.get_legend() for axis in figure.axes)
    box = legend.get_window_extent()
    assert not any(box.overlaps(axis.get_window_extent()) for axis in figure.axes if axis.axison)
    assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1 and box.y1 <= figure.bbox.y1


def test_each_model_has_its_own_style_and_tied_models_stand_apart():
    import matplotlib.pyplot as plt

    figure = tbb_vs_sbb.returns_figure(summary_of_four_models())
    try:
        styles = drawn_styles(figure)
        assert set(styles) == set(tbb_vs_sbb.MODELS) and all(len(s) == 1 for s in styles.values())
        assert len({next(iter(s)) for s in styles.values()}) == len(tbb_vs_sbb.MODELS)
        for axis in figure.axes:
            handles, _ = axis.get_legend_handles_labels()
            at_tbb = [handle.lines[0].get_xdata()[0] for handle in handles]  # four models tied at 0.5
            assert len(set(at_tbb)) == len(tbb_vs_sbb.MODELS) and all(abs(x) < 0.5 for x in at_tbb)
        assert_legend_beside(figure, list(tbb_vs_sbb.MODELS))
    finally:
        plt.close(figure)


def test_the_sensitivity_policies_differ_and_the_legend_covers_no_curve():
    import matplotlib.pyplot as plt

    study = json.loads((STUDY / "study.json").read_text())
    figure = tbb_vs_sbb.sensitivity_figure(study["sensitivity"])
    try:
        labels = ["ffm TBB", "ffm SBB L=10"]
        styles = drawn_styles(figure)
        assert set(styles) == set(labels) and len({next(iter(s)) for s in styles.values()}) == 2
        assert_legend_beside(figure, labels)
        lines = figure.axes[0].get_lines()
        assert np.allclose(lines[0].get_ydata(), study["sensitivity"][0]["share"])
    finally:
        plt.close(figure)


def test_the_published_study_images_are_what_its_summary_draws(tmp_path):
    study = json.loads((STUDY / "study.json").read_text())
    assert tbb_vs_sbb.plot_returns({"rows": study["cells"]}, tmp_path / "returns.png")
    assert tbb_vs_sbb.plot_sensitivity(study["sensitivity"], tmp_path / "sensitivity.png")
    for name in ("returns.png", "sensitivity.png"):
        assert f"![{name[:-4]}]({name})" in (STUDY / "REPORT.md").read_text()
        assert_same_image(tmp_path / name, STUDY / name, REBUILD)
