"""Leaderboard integrity: failed cells count, per-seed evaluation randomness, invalid evaluation actions, raising
factories, code versions, progress of long JAX-tier tasks.

The agents are submissions written as docs/submitting.md says (most in ``agents_for_tests``); the runs go through
the CLI (``memgym leaderboard run/show``) or :func:`memgym.leaderboard.running.runner.run`.
"""

from __future__ import annotations

import json

import pytest

from memgym.cli import main
from memgym.leaderboard.boards import report
from memgym.leaderboard.running import runner
from memgym.leaderboard.store import ResultsStore
from memgym.leaderboard.tracks import TMAZE, Preset

from . import agents_for_tests

AGENTS = "tests.leaderboard.agents_for_tests"
SMALL = ["--preset", "smoke", "--values", "2,3", "--seeds", "2", "--steps", "2048", "--eval-episodes", "8"]
TINY = Preset("tiny", (2, 3), seeds=2, total_steps=2048, train_window=512, eval_episodes=8, max_episode_steps=20)


def board_of(results) -> dict:
    return report.build_board(ResultsStore(results), TMAZE)


def entry(board: dict, agent: str) -> dict:
    (found,) = [e for e in board["entries"] if e["agent"] == agent]
    return found


def table_row(text: str, agent: str) -> list[str]:
    """The cells of the Markdown board row of ``agent`` (the ranked table comes before the failed cells')."""
    line = next(line for line in text.splitlines() if f"| `{agent}` |" in line)
    return [cell.strip() for cell in line.strip("|").split("|")]


# --- 1. a failed cell counts -------------------------------------------------------------------


def test_failed_cells_count_as_zero_and_coverage_is_shown(tmp_path, capsys):
    crasher, honest = f"{AGENTS}:crash_on_hard_seeds", "tests.leaderboard.test_harness:memoryless_factory"
    results = str(tmp_path / "results")
    assert main(["leaderboard", "run", "--agent", crasher, "--agent", honest, "--results", results, *SMALL]) == 0
    capsys.readouterr()
    board = board_of(results)
    crashed = entry(board, crasher)
    # seed 0 solves every maze, seed 1 crashed: each length's mean is (1 + 0) / 2, not 1.00 from the survivor
    assert crashed["eval"]["per_length"][2]["mean"] == crashed["eval"]["per_length"][3]["mean"] == 0.5
    assert crashed["eval"]["score"] == 0.5 and crashed["eval"]["iqm"] == 0.5
    assert crashed["train"]["score"] == 0.5 and crashed["eval"]["longest_solved"] is None
    assert crashed["cells"] == {"planned": 4, "ok": 2, "failed": 2, "missing": 0} and crashed["complete"]
    assert entry(board, honest)["cells"]["ok"] == 4
    assert main(["leaderboard", "show", "--results", results]) == 0
    shown = capsys.readouterr().out
    header = next(line for line in shown.splitlines() if line.startswith("| rank |"))
    assert "| score | cells |" in header
    row = table_row(shown, crasher)
    assert row[2].startswith("0.50 [") and row[3] == "2/4"
    assert table_row(shown, honest)[3] == "4/4"
    assert "## Failed cells" in shown and "crashed on a hard seed" in shown


def test_a_later_ok_retry_replaces_the_failure(tmp_path, capsys, monkeypatch):
    crasher = f"{AGENTS}:crash_on_hard_seeds"
    results = str(tmp_path / "results")
    assert main(["leaderboard", "run", "--agent", crasher, "--results", results, *SMALL]) == 0
    assert entry(board_of(results), crasher)["eval"]["score"] == 0.5
    monkeypatch.setattr(agents_for_tests, "CRASH_SEEDS", set())  # the agent was fixed: the retry succeeds
    assert main(["leaderboard", "run", "--agent", crasher, "--results", results, *SMALL]) == 0
    fixed = entry(board_of(results), crasher)
    assert fixed["eval"]["score"] == 1.0 and fixed["cells"] == {"planned": 4, "ok": 4, "failed": 0, "missing": 0}
    assert board_of(results)["failures"] == [] and fixed["repeats"] == 0
    assert len(list(ResultsStore(results).records())) == 6  # the failed records are kept


def test_an_incomplete_agent_is_marked_and_not_ranked_above_complete_ones(tmp_path):
    class Interrupt(runner.LocalBackend):
        def map(self, tasks, *args, **kwargs):
            for i, item in enumerate(super().map(tasks, *args, **kwargs)):
                if i == 1:
                    raise KeyboardInterrupt  # like Ctrl-C while the second task runs
                yield item

    oracle, honest = f"{AGENTS}:oracle", "tests.leaderboard.test_harness:memoryless_factory"
    with pytest.raises(KeyboardInterrupt):
        runner.run([oracle], TINY, tmp_path, log=lambda _: None, backend=Interrupt())
    runner.run([honest], TINY, tmp_path, log=lambda _: None)
    board = board_of(tmp_path)
    perfect = entry(board, oracle)
    assert perfect["eval"]["score"] == 1.0  # from the one cell that ran ...
    assert not perfect["complete"] and perfect["cells"] == {"planned": 4, "ok": 1, "failed": 0, "missing": 3}
    assert [e["agent"] for e in board["entries"]] == [honest, oracle]  # ... but it is not ranked above the complete
    text = report.markdown(board)
    assert table_row(text, honest)[0] == "1"
    assert table_row(text, oracle)[0] == "—" and table_row(text, oracle)[3] == "1/4 incomplete"


def test_a_failed_cell_scores_the_tracks_worst_value():
    """POPGym's normalized return lies in [−1, 1]: a failed cell counts as −1 there."""
    from memgym.leaderboard.tracks import POPGYM_REPEAT_PREVIOUS

    class Store:
        def records(self):
            budget = {"name": "tiny", "difficulties": ["Easy"], "seeds": 2, "total_steps": 10, "train_window": 5,
                      "eval_episodes": 1, "max_episode_steps": None}
            ok = {"agent": "a", "difficulty": "Easy", "seed": 0, "preset": budget, "status": "ok",
                  "path": "a/Easy/seed0.json",
                  "train": {"normalized_return": 0.5}, "eval": {"normalized_return": 0.5}}
            yield ok
            yield {**ok, "seed": 1, "status": "failed", "reason": "boom", "path": "a/Easy/seed1.json"}

        def unreadable(self):
            return []

    (row,) = report.build_board(Store(), POPGYM_REPEAT_PREVIOUS)["entries"]
    assert row["eval"]["score"] == pytest.approx((0.5 - 1.0) / 2) and row["train"]["score"] == pytest.approx(-0.25)


def test_the_board_flags_collapsed_cells_and_lengths_below_chance():
    """A run that learned and then lost it (last window far below its best curve bin) is flagged as collapsed;
    a length where the agent scores far below chance (it does not reach the junction) is flagged too."""
    budget = {"name": "tiny", "corridor_lengths": [2, 3], "seeds": 2, "total_steps": 100, "train_window": 5,
              "eval_episodes": 1, "max_episode_steps": 20}

    def record(length, seed, curve, final, evaluation):
        return {"agent": "a", "corridor_length": length, "seed": seed, "preset": budget, "status": "ok",
                "path": f"a/L{length}/seed{seed}.json", "train": {"success_rate": final, "curve": curve},
                "eval": {"success_rate": evaluation}}

    class Store:
        def records(self):
            yield record(2, 0, [[50, 25], [50, 50], [40, 40], [100, 0]], 0.0, 0.5)  # solved, then timed out
            yield record(2, 1, [[50, 25], [50, 26], [50, 25], [50, 25]], 0.5, 0.5)  # a steady guesser
            yield record(3, 0, [[10, 10], [19, 19], [200, 100], [200, 100]], 0.5, 0.1)  # small bins do not count as a best
            yield record(3, 1, [[100, 60], [100, 40], [100, 50], [100, 40]], 0.4, 0.2)  # 0.6 -> 0.4 is not a collapse

        def unreadable(self):
            return []

    board = report.build_board(Store(), TMAZE)
    (row,) = board["entries"]
    assert row["collapsed"] == [{"value": 2, "seed": 0, "best": 1.0, "final": 0.0}]
    assert row["below_chance"] == [3]  # mean evaluation 0.15 at L=3; 0.5 at L=2
    assert report.collapse(next(Store().records()), TMAZE) == {"best": 1.0, "final": 0.0}
    flags = table_row(report.markdown(board), "a")[-1]
    assert flags == "collapsed L=2 seed 0 (1.00 → 0.00); below chance L=3"
    assert "collapsed L=2 seed 0" in report.html(board)


def test_failed_cells_are_flagged_as_failed_not_as_below_chance():
    """A length whose cells all failed scores 0 by rule; the board says they failed, not that the agent does not
    reach the junction, and judges "below chance" on the cells that ran."""
    budget = {"name": "tiny", "corridor_lengths": [2, 3], "seeds": 2, "total_steps": 100, "train_window": 5,
              "eval_episodes": 1, "max_episode_steps": 20}

    def ok(length, seed, evaluation):
        return {"agent": "a", "corridor_length": length, "seed": seed, "preset": budget, "status": "ok",
                "path": f"a/L{length}/seed{seed}.json", "train": {"success_rate": evaluation},
                "eval": {"success_rate": evaluation}}

    def failed(length, seed):
        return {"agent": "a", "corridor_length": length, "seed": seed, "preset": budget, "status": "failed",
                "path": f"a/L{length}/seed{seed}.json", "reason": "SystemExit: 3"}

    class Store:
        def records(self):
            yield from (ok(2, 0, 1.0), failed(2, 1), failed(3, 0), failed(3, 1))

        def unreadable(self):
            return []

    (row,) = report.build_board(Store(), TMAZE)["entries"]
    assert row["below_chance"] == [] and row["failed_at"] == [[2, 1], [3, 2]]
    assert row["eval"]["per_length"][3]["mean"] == 0.0  # the rule: a failed cell counts as success 0
    assert report.flags(row, TMAZE) == ["failed L=2 (1 cell)", "failed L=3 (2 cells)"]


def test_a_planned_length_without_a_readable_cell_keeps_its_column():
    """Where every record of a length is unreadable (or not yet run), the board still shows the length, as "—",
    beside the row marked incomplete, rather than dropping the column."""
    budget = {"name": "tiny", "corridor_lengths": [2, 3], "seeds": 1, "total_steps": 100, "train_window": 5,
              "eval_episodes": 1, "max_episode_steps": 20}

    class Store:
        def records(self):
            yield {"agent": "a", "corridor_length": 3, "seed": 0, "preset": budget, "status": "ok",
                   "path": "a/L3/seed0.json", "train": {"success_rate": 1.0}, "eval": {"success_rate": 1.0}}

        def unreadable(self):
            return [("a/L2/seed0.json", "is not valid JSON")]

    board = report.build_board(Store(), TMAZE)
    header, rows = report.ranked_rows(board, TMAZE)["tiny"]
    (row,) = rows
    assert header[header.index("L=2"):header.index("L=3") + 1] == ["L=2", "L=3"]
    assert row[header.index("L=2")] == "—" and row[0] == "—" and "1/2 incomplete" in row


def test_a_corridor_no_agent_reaches_is_flagged_on_the_printed_board(tmp_path, capsys):
    """As a user met it: with the smoke preset's 100-step episodes nothing reaches the junction at L = 32, and the
    board says so instead of reading as a memory failure."""
    results = str(tmp_path / "results")
    assert main(["leaderboard", "run", "--agent", "examples.random_agent:factory", "--results", results,
                 "--preset", "smoke", "--values", "4,32", "--seeds", "1", "--steps", "2048",
                 "--eval-episodes", "16"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "show", "--results", results]) == 0
    row = table_row(capsys.readouterr().out, "examples.random_agent:factory")
    assert row[-1] == "below chance L=32"


# --- 2. evaluation randomness per seed; 3. invalid actions in evaluation ---------------------------


@pytest.mark.slow
def test_a_memoryless_agents_interval_contains_chance(tmp_path):
    budget = Preset("tiny", (4, 8), seeds=6, total_steps=512, train_window=128, eval_episodes=32,
                    max_episode_steps=40)
    coin, left = f"{AGENTS}:random_turn", f"{AGENTS}:always_left"
    store = runner.run([coin, left], budget, tmp_path, log=lambda _: None)
    board = board_of(tmp_path)
    low, high = entry(board, coin)["eval"]["score_ci"]
    assert low < 0.5 < high, (low, high)  # a coin flip at the junction is not significantly better than chance
    records = [r for r in store.records() if r["status"] == "ok"]
    assert len(records) == 24
    by = {(r["agent"], r["corridor_length"], r["seed"]): r["eval"]["success_rate"] for r in records}
    for length in budget.values:
        # the policy's keys differ between seeds ...
        assert len({by[(coin, length, seed)] for seed in range(6)}) > 1
        # ... while the mazes are fixed per length: a deterministic agent scores the same in every seed
        assert len({by[(left, length, seed)] for seed in range(6)}) == 1


def test_invalid_actions_in_evaluation_fail_the_cell(tmp_path):
    budget = Preset("tiny", (3,), seeds=1, total_steps=256, train_window=64, eval_episodes=4, max_episode_steps=20)
    store = runner.run([f"{AGENTS}:invalid_in_evaluation"], budget, tmp_path, log=lambda _: None)
    (record,) = store.records()
    assert record["status"] == "failed"
    assert "invalid actions during evaluation" in record["reason"] and "Discrete(4)" in record["reason"]


# --- 4. a factory that raises ----------------------------------------------------------------------


def test_a_raising_factory_fails_its_cells_and_the_others_run(tmp_path, capsys):
    raising, good = f"{AGENTS}:raising_factory", "examples.numpy_agent:factory"
    results = str(tmp_path / "results")
    assert main(["leaderboard", "run", "--agent", raising, "--agent", good, "--results", results, *SMALL]) == 0
    out = capsys.readouterr().out
    records = list(ResultsStore(results).records())
    mine = [r for r in records if r["agent"] == raising]
    assert len(mine) == 4 and all(r["status"] == "failed" for r in mine)
    assert all(r["reason"] == "the factory raised RuntimeError: factory exploded (raised at agents_for_tests.py:47 "
               "in raising_factory)" for r in mine)  # where, without the machine's directories
    assert len([r for r in records if r["agent"] == good and r["status"] == "ok"]) == 4
    assert "FAILED: the factory raised RuntimeError: factory exploded" in out
    row = table_row(out, raising)
    assert row[2].startswith("0.00") and row[3] == "0/4"
    assert json.loads((tmp_path / "results" / "board.json").read_text())["failures"]


# --- 5. code identity --------------------------------------------------------------------------

VERSIONED_AGENT = '''
import numpy as np

TURN = {turn}  # 2: left, 3: right


class Turner:
    """Walks up to the junction (where "up" does not move it) and always turns the same way."""

    def __init__(self, num_envs):
        self.last = np.full(num_envs, -1)

    def act(self, obs, start):
        position = np.packbits(obs[:, 2:10].astype(np.uint8), axis=1)[:, 0]
        turn = ~start & (position == self.last)
        self.last = np.where(start, -1, position)
        return np.where(turn, TURN, 0)

    def observe(self, *args):
        pass


def factory(context):
    return Turner(context.num_envs)
'''


def write_agent(folder, monkeypatch, turn: int, name: str = "integrity_versioned_agent") -> str:
    """Write (or rewrite) the agent module ``name`` in ``folder``; the next run imports it afresh (a new process)."""
    import importlib
    import sys

    (folder / f"{name}.py").write_text(VERSIONED_AGENT.format(turn=turn))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.invalidate_caches()
    return f"{name}:factory"


def test_changed_agent_code_is_refused_or_recorded_as_a_new_version(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.dont_write_bytecode", True)  # an edit within the same second must be re-read
    spec = write_agent(tmp_path, monkeypatch, turn=2)
    results = tmp_path / "results"
    run = ["leaderboard", "run", "--agent", spec, "--results", str(results), *SMALL]
    assert main(run) == 0
    (first,) = {r["agent_info"]["code_sha256"] for r in ResultsStore(results).records()}
    assert len(first) == 64 and all(r["version"] == 1 for r in ResultsStore(results).records())
    stored = sorted(results.rglob("seed*.json"))

    write_agent(tmp_path, monkeypatch, turn=3)  # the agent's code changed
    capsys.readouterr()
    assert main(run) == 2
    refused = capsys.readouterr().err
    assert f"agent {spec!r}: its code changed" in refused and "integrity_versioned_agent" in refused
    assert "mix two versions" in refused and "new results directory (--results)" in refused
    assert f"--new-version to record them as version 2 of the agent (shown as '{spec}@v2')" in refused
    assert sorted(results.rglob("seed*.json")) == stored  # nothing written

    assert main([*run, "--new-version"]) == 0
    shown = capsys.readouterr().out
    assert table_row(shown, spec)[3] == table_row(shown, f"{spec}@v2")[3] == "4/4"  # one version per row
    records = list(ResultsStore(results).records())
    assert sorted(r["version"] for r in records) == [1] * 4 + [2] * 4
    hashes = {r["version"]: r["agent_info"]["code_sha256"] for r in records}
    assert hashes[1] == first != hashes[2]
    by = {(r["version"], r["corridor_length"], r["seed"]): r["eval"]["success_rate"] for r in records}
    for length, seed in [(2, 0), (2, 1), (3, 0), (3, 1)]:  # v2 ran the new code: right turns on the same mazes
        assert by[(1, length, seed)] + by[(2, length, seed)] == 1.0

    assert main(run) == 0  # unchanged since version 2: resumes it, nothing to do
    assert "all 2 seeds stored, skipping" in capsys.readouterr().out
    assert len(list(ResultsStore(results).records())) == 8


# --- 13. progress of long JAX-tier tasks ---------------------------------------------------------


def test_a_jax_tier_task_reports_progress_while_it_trains(tmp_path, monkeypatch):
    from memgym.leaderboard.running import jax_tier

    monkeypatch.setattr(jax_tier, "IN_FLIGHT_PROGRESS_STEPS", 10_000)  # in-flight reports for these short cells
    budget = Preset("tiny", (4,), seeds=2, total_steps=40_000, train_window=1000, eval_episodes=4,
                    max_episode_steps=40)
    lines: list[str] = []
    runner.run([f"{AGENTS}:random_turn"], budget, tmp_path, log=lines.append)
    finished = next(i for i, line in enumerate(lines) if line.startswith("cells 2/2"))
    in_flight = [line for line in lines[:finished] if ": training " in line and "% (" in line]
    assert in_flight, lines
    assert all("steps/s" in line and "ETA" in line for line in in_flight)
    assert in_flight[0].startswith(f"[{AGENTS}:random_turn] L=4 seeds [0, 1]: training ")
    # the reports count the steps of both seeds' environments together, up to the task's 80,000 steps
    done = [float(line.split("(")[1].split("/")[0].replace(",", "")) for line in in_flight]
    assert done == sorted(done) and 0 < done[-1] <= 80_000 and any(d > 40_000 for d in done)


def test_the_speed_counts_the_steps_of_this_process_not_those_a_checkpoint_resumed_from(monkeypatch):
    import types

    from memgym.leaderboard.running import progress

    clock = [100.0]
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    lines: list[str] = []
    bar = progress.Progress(total_cells=4, steps_per_cell=1000, log=lines.append, track=None)
    task = types.SimpleNamespace(cells=[(4, 0), (4, 1)], describe=lambda: "[agent] L=4 seeds [0, 1]")
    bar.start(task)
    with progress.listening(bar.training):
        progress.in_flight(1500, resumed=True)  # an earlier process took these
        clock[0] += 10.0
        progress.in_flight(2000)
    assert lines[0] == "[agent] L=4 seeds [0, 1]: resumed from its checkpoint at 75% (1,500/2,000 steps)"
    # 500 steps in 10 s here; the other 2,000 steps of the run at that speed take 40 s
    assert lines[1].startswith("[agent] L=4 seeds [0, 1]: training 100% (2,000/2,000 steps) | 50 steps/s |")
    assert lines[1].endswith("| elapsed 0m10s | ETA 0m40s")


SHARDED = """
import sys
from memgym.leaderboard.running import jax_tier, runner
from memgym.leaderboard.tracks import Preset
jax_tier.IN_FLIGHT_PROGRESS_STEPS = 10_000  # in-flight reports for these short cells
budget = Preset("tiny", (4, 8), seeds=1, total_steps=40_000, train_window=1000, eval_episodes=4, max_episode_steps=40)
runner.run(["tests.leaderboard.agents_for_tests:random_turn"], budget, sys.argv[1], log=print)
"""


@pytest.mark.slow
def test_progress_of_a_batch_sharded_over_devices(tmp_path):
    """Four CPU devices: one whole-grid batch (2 cells, padded to 4), sharded; the reports aggregate the batch."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", SHARDED, str(tmp_path)], capture_output=True, text=True, env=env,
                         timeout=600, cwd=os.getcwd())
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    finished = next(i for i, line in enumerate(lines) if line.startswith("cells 2/2"))
    in_flight = [line for line in lines[:finished] if ": training " in line and "% (" in line]
    assert in_flight, lines
    done = [float(line.split("(")[1].split("/")[0].replace(",", "")) for line in in_flight]
    assert 0 < done[-1] <= 80_000 and any(d > 40_000 for d in done)  # the padding copies are not counted
    assert all(r["status"] == "ok" for r in ResultsStore(tmp_path).records())


# --- 11 (display). unreadable records ------------------------------------------------------------


def test_show_and_report_list_unreadable_records(tmp_path, capsys):
    spec = "examples.numpy_agent:factory"
    results = tmp_path / "results"
    assert main(["leaderboard", "run", "--agent", spec, "--results", str(results), *SMALL]) == 0
    torn = results / "examples.numpy_agent_factory" / "L3" / "seed1.json"
    torn.write_text(torn.read_text()[:40])  # a torn record
    capsys.readouterr()
    assert main(["leaderboard", "show", "--results", str(results)]) == 0
    shown = capsys.readouterr().out
    assert "## Unreadable records" in shown
    (line,) = [line for line in shown.splitlines() if str(torn) in line]
    assert "is not valid JSON" in line
    assert table_row(shown, spec)[3] == "3/4 incomplete"  # its cell is missing from the board
    assert main(["leaderboard", "report", "--results", str(results), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert "<h2>Unreadable records</h2>" in page and str(torn) in page
    assert json.loads((tmp_path / "site" / "board.json").read_text())["unreadable"][0]["path"] == str(torn)
