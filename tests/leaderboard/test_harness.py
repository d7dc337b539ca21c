"""The harness end to end: both tiers, harness-owned counting, resume, conformance checks."""

from __future__ import annotations

import dataclasses
import json
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.envs.tmaze_jax import TMazeJax, tmaze_params
from memgym.leaderboard.boards import report
from memgym.leaderboard.running import runner
from memgym.leaderboard.submissions.check import check_agent
from memgym.leaderboard.protocol import agent_id, load_factory, tier
from memgym.leaderboard.scoring import ScoredEnv, ScoredParams, counters, seal_weights, sealed
from memgym.leaderboard.store import ResultsStore
from memgym.leaderboard.tracks import TMAZE, Preset

TINY = dict(values=(2, 3), seeds=2, total_steps=4096, train_window=1024, eval_episodes=8,
            max_episode_steps=20)


def test_scored_env_counts_what_the_env_reports():
    env = ScoredEnv(TMazeJax())
    seal = seal_weights()
    params = ScoredParams(tmaze_params(3, max_episode_steps=10), jnp.asarray(20, jnp.int32), jnp.asarray(6, jnp.int32),
                          seal=jnp.asarray(seal))
    obs, state = env.reset(jax.random.key(0), params)
    rng = np.random.default_rng(0)
    episodes = successes = window_episodes = 0
    curve = np.zeros((20, 2), int)
    step = jax.jit(env.step)
    for t in range(60):
        action = rng.integers(4) if t != 7 else 9  # one invalid action
        obs, state, _, terminated, truncated, info = step(jax.random.key(t + 1), state, jnp.asarray(action), params)
        done = bool(terminated | truncated)
        episodes += done
        successes += done and bool(info["success"])
        window_episodes += done and t >= 20
        curve[t // 6] += (done, done and bool(info["success"]))
    got = counters(state)
    assert got["steps"] == 60 and got["episodes"] == episodes > 0
    assert got["successes"] == successes and got["window_episodes"] == window_episodes
    assert got["invalid_actions"] == 1
    assert got["curve"] == curve.tolist()
    assert sealed(state, seal) and not sealed(state, seal_weights())  # the tag is bound to this run's weights
    forged = dataclasses.replace(state, successes=state.episodes, window_successes=state.window_episodes,
                                 curve_successes=state.curve_episodes)
    assert successes < episodes and not sealed(forged, seal)


def test_seal_sums_over_environments_and_detects_any_single_edit():
    """Honest counters of many environments (vmapped, 2,000 steps each) keep the seal; +1 on any one count breaks it."""
    env = ScoredEnv(TMazeJax())
    seal = seal_weights()
    params = ScoredParams(tmaze_params(4, max_episode_steps=12), jnp.asarray(500, jnp.int32),
                          jnp.asarray(100, jnp.int32), seal=jnp.asarray(seal))

    def run(key):
        _, state = env.reset(key, params)

        def step(state, key):
            action = jax.random.randint(key, (), 0, 5)  # 4 is invalid
            _, state, *_ = env.step(jax.random.fold_in(key, 1), state, action, params)
            return state, None

        return jax.lax.scan(step, state, jax.random.split(key, 2000))[0]

    state = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(3), 64))
    assert counters(state)["episodes"] > 1000 and sealed(state, seal)
    for name in ("steps", "episodes", "successes", "window_episodes", "window_successes", "invalid_actions",
                 "curve_episodes", "curve_successes"):
        edited = dataclasses.replace(state, **{name: getattr(state, name).at[(0,) * getattr(state, name).ndim].add(1)})
        assert not sealed(edited, seal), name


def test_load_factory_errors_and_tiers():
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        load_factory("no_such_module:factory")
    with pytest.raises(ValueError, match="has no attribute 'nope'"):
        load_factory("memgym.leaderboard.reference:nope")
    with pytest.raises(ValueError, match="not a 'package.module:factory' string nor a registered agent"):
        load_factory("not-an-agent")
    assert load_factory("a2c-tiny-gru") is load_factory("memgym.leaderboard.reference:a2c_tiny_gru")
    with pytest.raises(TypeError, match="neither a JAX-tier agent"):
        tier(object())
    assert agent_id("examples.numpy_agent:factory") == "examples.numpy_agent_factory"


def test_every_reference_factory_is_a_registered_agent():
    """Each public factory of memgym.leaderboard.reference has its entry point in pyproject.toml (the name
    `memgym leaderboard list` shows and the boards use), and each of memgym's entry points loads it."""
    from memgym.leaderboard import reference
    from memgym.leaderboard.protocol import entry_points

    factories = {name for name in vars(reference) if name.startswith(("a2c_", "ppo_", "dqn_"))
                 and callable(getattr(reference, name)) and hasattr(getattr(reference, name), "with_options")}
    registered = {entry.value.split(":")[1]: name for name, entry in entry_points().items()
                  if entry.value.startswith("memgym.leaderboard.reference:")}
    assert factories == set(registered), factories ^ set(registered)
    for attribute, name in registered.items():
        assert name == attribute.replace("_", "-") and load_factory(name) is getattr(reference, attribute)


@pytest.mark.parametrize("spec", ["a2c-tiny-gru", "examples.numpy_agent:factory"])
@pytest.mark.slow
def test_run_scores_stores_and_resumes(tmp_path, spec):
    budget = Preset("tiny", **TINY)
    lines: list[str] = []
    store = runner.run([spec], budget, tmp_path, log=lines.append)
    records = list(store.records())
    assert sorted((r["corridor_length"], r["seed"]) for r in records) == [(2, 0), (2, 1), (3, 0), (3, 1)]
    for r in records:
        assert r["status"] == "ok" and r["schema"] == 1
        assert r["train"]["steps"] == budget.total_steps
        assert 0 < r["train"]["window_episodes"] <= r["train"]["episodes"]
        assert sum(e for e, _ in r["train"]["curve"]) == r["train"]["episodes"]
        assert 0.0 <= r["eval"]["success_rate"] <= 1.0 and r["eval"]["episodes"] == 8
        assert r["provenance"]["memgym"] and r["agent_info"]["code_sha256"]
        if spec == "a2c-tiny-gru":  # the config it trained with, not its factory's default budget
            assert r["agent_info"]["config"]["total_steps"] == budget.total_steps
    assert any("cells 4/4 (100%)" in line and "ETA" in line for line in lines)
    before = {p: p.read_text() for p in tmp_path.rglob("seed*.json")}
    lines.clear()
    runner.run([spec], budget, tmp_path, log=lines.append)  # resume: nothing left to do
    assert all("skipping" in line for line in lines)
    assert {p: p.read_text() for p in tmp_path.rglob("seed*.json")} == before
    with pytest.raises(ValueError, match="different budget"):  # another budget never reuses these cells
        runner.run([spec], Preset("tiny", **{**TINY, "total_steps": 8192}), tmp_path, log=lines.append)
    written = report.write_report(tmp_path)
    board = json.loads(written["json"].read_text())
    assert board["entries"][0]["agent"] == spec and board["failures"] == []
    assert "| 1 |" in written["markdown"].read_text()


class OracleAgent:
    """Remembers the cue, walks up until the wall of the junction stops it, then turns to the cued side."""

    def __init__(self, num_envs):
        self.cue = np.zeros(num_envs, int)
        self.last = np.full(num_envs, -1)
        self.turn = np.zeros(num_envs, bool)

    def act(self, obs, start):
        position = np.packbits(obs[:, 2:10].astype(np.uint8), axis=1)[:, 0]  # gray code: equal iff same cell
        self.cue = np.where(start, (obs[:, 0] == 1).astype(int), self.cue)  # cue bit 0 set: the goal is right
        self.turn = ~start & (position == self.last)  # "up" did not move: at the junction
        self.last = np.where(start, -1, position)
        return np.where(self.turn, 2 + self.cue, 0)

    def observe(self, *args):
        pass


class MemorylessAgent:
    """Walks up and always turns left at the junction (it cannot know the cue there)."""

    def __init__(self, num_envs):
        self.oracle = OracleAgent(num_envs)

    def act(self, obs, start):
        action = self.oracle.act(obs, start)
        return np.where(action >= 2, 2, action)

    def observe(self, *args):
        pass


class RaisingAgent:
    def act(self, obs, start):
        raise RuntimeError("agent exploded")

    def observe(self, *args):
        pass


class InvalidActionAgent(RaisingAgent):
    def act(self, obs, start):
        return np.full(len(obs), 7)


class SlowAgent(RaisingAgent):
    def act(self, obs, start):
        import time

        time.sleep(3600)  # interrupted by the harness's alarm


def oracle_factory(context):
    return OracleAgent(context.num_envs)


def memoryless_factory(context):
    return MemorylessAgent(context.num_envs)


def raising_factory(context):
    return RaisingAgent() if context.seed == 1 else OracleAgent(context.num_envs)


def invalid_factory(context):
    return InvalidActionAgent()


def slow_factory(context):
    return SlowAgent()


def not_an_agent_factory(context):
    return 42


def test_oracle_scores_one_and_memoryless_at_most_half(tmp_path):
    budget = Preset("tiny", **{**TINY, "values": (2, 5, 9), "eval_episodes": 64})
    runner.run(["tests.leaderboard.test_harness:oracle_factory", "tests.leaderboard.test_harness:memoryless_factory"],
               budget, tmp_path, log=lambda _: None)
    board = report.build_board(ResultsStore(tmp_path))
    by_agent = {e["agent"].split(":")[1]: e for e in board["entries"]}
    oracle, memoryless = by_agent["oracle_factory"], by_agent["memoryless_factory"]
    assert oracle["eval"]["score"] == 1.0 and oracle["train"]["score"] == 1.0
    assert oracle["eval"]["longest_solved"] == 9
    assert 0.3 <= memoryless["eval"]["score"] <= 0.7 and memoryless["eval"]["longest_solved"] is None
    assert board["entries"][0]["agent"].endswith("oracle_factory")  # ranked first


def test_failing_cells_are_recorded_and_the_run_goes_on(tmp_path):
    budget = Preset("tiny", **{**TINY, "values": (3,)})
    agents = ["tests.leaderboard.test_harness:raising_factory", "tests.leaderboard.test_harness:invalid_factory",
              "tests.leaderboard.test_harness:slow_factory", "examples.numpy_agent:factory"]
    lines: list[str] = []
    store = runner.run(agents, budget, tmp_path, log=lines.append, cell_timeout=2.0)
    by_cell = {(r["agent"].split(":")[-1], r["seed"]): r for r in store.records()}
    assert len(by_cell) == 8
    assert by_cell[("raising_factory", 1)]["status"] == "failed"
    raised_at = RaisingAgent.act.__code__.co_firstlineno + 1  # the line of its raise
    assert by_cell[("raising_factory", 1)]["reason"] == (
        f"RuntimeError: agent exploded (raised at test_harness.py:{raised_at} in act)")
    assert by_cell[("raising_factory", 0)]["status"] == "ok"  # the other seed of the same agent finished
    assert "invalid actions [7, 7" in by_cell[("invalid_factory", 0)]["reason"]
    assert "wall-clock limit" in by_cell[("slow_factory", 0)]["reason"]
    assert by_cell[("factory", 0)]["status"] == by_cell[("factory", 1)]["status"] == "ok"
    assert any("FAILED: RuntimeError: agent exploded" in line for line in lines)
    board = report.build_board(store)
    assert {(f["agent"].split(":")[-1], f["seed"]) for f in board["failures"]} == {
        ("raising_factory", 1), ("invalid_factory", 0), ("invalid_factory", 1), ("slow_factory", 0),
        ("slow_factory", 1)}
    # A rerun retries failed cells only, keeping the failed records.
    runner.run(agents[:1], budget, tmp_path, log=lines.append)
    results = store.results("tests.leaderboard.test_harness_raising_factory", 3, 1)
    assert [r["status"] for r in results] == ["failed", "failed"]
    assert len(store.results("tests.leaderboard.test_harness_raising_factory", 3, 0)) == 1


@pytest.mark.slow
def test_jax_tier_nan_parameters_fail_the_cell(tmp_path):
    budget = Preset("tiny", **{**TINY, "values": (2,), "seeds": 1})
    store = runner.run(["tests.leaderboard.test_harness:nan_jax_factory"], budget, tmp_path, log=lambda _: None)
    (record,) = store.records()
    assert record["status"] == "failed" and "NaN" in record["reason"]


def nan_jax_factory(context):
    from examples.jax_agent import factory

    agent = factory(context)

    class NaNAgent:
        num_envs, initialize_carry, act = agent.num_envs, agent.initialize_carry, agent.act

        def train(self, key, env, env_params, total_steps):
            params, env_state = agent.train(key, env, env_params, total_steps)
            return jax.tree.map(lambda x: x * jnp.nan, params), env_state

    return NaNAgent()


def test_interrupted_run_resumes_to_the_same_table(tmp_path):
    budget = Preset("tiny", **TINY)
    spec = "examples.numpy_agent:factory"
    runner.run([spec], budget, tmp_path / "whole", log=lambda _: None)

    class Interrupt(runner.LocalBackend):
        def map(self, tasks, *args, **kwargs):
            for i, item in enumerate(super().map(tasks, *args, **kwargs)):
                if i == 2:
                    raise KeyboardInterrupt  # like Ctrl-C while the third task runs
                yield item

    with pytest.raises(KeyboardInterrupt):
        runner.run([spec], budget, tmp_path / "cut", log=lambda _: None, backend=Interrupt())
    assert len(list(ResultsStore(tmp_path / "cut").records())) == 2
    runner.run([spec], budget, tmp_path / "cut", log=lambda _: None)
    whole = report.build_board(ResultsStore(tmp_path / "whole"))
    cut = report.build_board(ResultsStore(tmp_path / "cut"))
    assert report.markdown(whole) == report.markdown(cut)


class SlowOracleAgent(OracleAgent):
    def act(self, obs, start):
        import time

        time.sleep(0.002)  # slow enough that a kill lands mid-run
        return super().act(obs, start)


def slow_oracle_factory(context):
    return SlowOracleAgent(context.num_envs)


@pytest.mark.slow
def test_kill_9_loses_nothing_that_finished(tmp_path):
    """SIGKILL the CLI mid-run: finished cells survive intact, the rerun completes the grid exactly once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    results = tmp_path / "results"
    command = [sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--agent",
               "tests.leaderboard.test_harness:slow_oracle_factory", "--preset", "smoke", "--corridor-lengths", "2,3",
               "--seeds", "3", "--steps", "4096", "--eval-episodes", "8", "--results", str(results)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=os.getcwd())
    deadline = time.monotonic() + 300
    while not list(results.rglob("seed*.json")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, process.stderr.read().decode()[-2000:]
    survivors = {p: p.read_text() for p in results.rglob("seed*.json")}
    assert 1 <= len(survivors) < 6  # killed mid-run, after at least one cell finished
    for text in survivors.values():
        assert json.loads(text)["status"] == "ok"  # complete records only, never a torn file
    done = subprocess.run(command, capture_output=True, text=True, cwd=os.getcwd(), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    records = list(ResultsStore(results).records())
    assert sorted((r["corridor_length"], r["seed"]) for r in records) == [(2, 0), (2, 1), (2, 2), (3, 0), (3, 1),
                                                                          (3, 2)]
    assert all(p.read_text() == text for p, text in survivors.items())  # finished cells were not rerun


def test_repeats_are_kept_and_shown(tmp_path):
    budget = Preset("tiny", **{**TINY, "values": (2,), "seeds": 1})
    spec = "examples.numpy_agent:factory"
    runner.run([spec], budget, tmp_path, log=lambda _: None)
    runner.run([spec], budget, tmp_path, log=lambda _: None, repeat=True)
    board = report.build_board(ResultsStore(tmp_path))
    assert board["entries"][0]["repeats"] == 1
    assert len(list(ResultsStore(tmp_path).records())) == 2


def test_bad_submissions_write_nothing(tmp_path):
    budget = Preset("tiny", **TINY)
    for spec, match in [("no_such_module:factory", "cannot import module"),
                        ("tests.leaderboard.test_harness:not_an_agent_factory", "returned no agent: .int. object is neither"),
                        ("tests.leaderboard.test_harness:missing", "has no attribute")]:
        with pytest.raises(ValueError, match=match):
            runner.run(["examples.numpy_agent:factory", spec], budget, tmp_path, log=lambda _: None)
    with pytest.raises(ValueError, match="at least one agent"):
        runner.run([], budget, tmp_path, log=lambda _: None)
    for timeout in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=rf"cell_timeout must be a number in \(0, inf\], "
                                             rf"got cell_timeout={timeout}"):
            runner.run(["examples.numpy_agent:factory"], budget, tmp_path, log=lambda _: None, cell_timeout=timeout)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_report_files_and_html(tmp_path):
    from html.parser import HTMLParser

    budget = Preset("tiny", **{**TINY, "values": (2, 3), "seeds": 2})
    runner.run(["tests.leaderboard.test_harness:oracle_factory", "tests.leaderboard.test_harness:invalid_factory"],
               budget, tmp_path / "results", log=lambda _: None)
    written = report.write_report(tmp_path / "results", tmp_path / "site")
    assert {p.name for p in written.values()} == {"board.json", "LEADERBOARD.md", "index.html",
                                                  "success_by_length.png", "learning_curves.png"}
    for name in ("success_by_length.png", "learning_curves.png"):
        assert (tmp_path / "site" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    class Page(HTMLParser):
        def __init__(self):
            super().__init__()
            self.open, self.cells, self.images = [], [], []

        def handle_starttag(self, tag, attrs):
            if tag not in ("meta", "img", "br"):
                self.open.append(tag)
            if tag == "img":
                self.images.append(dict(attrs)["src"])

        def handle_endtag(self, tag):
            assert self.open and self.open.pop() == tag, f"unbalanced </{tag}>"

        def handle_data(self, data):
            if self.open and self.open[-1] == "td":
                self.cells.append(data)

    page = Page()
    page.feed((tmp_path / "site" / "index.html").read_text())
    assert page.open == []  # every element closed
    assert "tests.leaderboard.test_harness:oracle_factory" in page.cells
    assert "1.00 [1.00, 1.00]" in page.cells
    assert any("invalid actions" in cell for cell in page.cells)  # the failure table
    assert page.images == ["success_by_length.png", "learning_curves.png"]
    assert all((tmp_path / "site" / image).exists() for image in page.images)
    screenshot_in_headless_chromium(tmp_path / "site" / "index.html", tmp_path / "page.png")


def test_report_sets_a_boards_own_account_under_it(tmp_path, capsys):
    from memgym.cli import main

    budget = Preset("tiny", **{**TINY, "values": (2,), "seeds": 1})
    runner.run(["tests.leaderboard.test_harness:oracle_factory"], budget, tmp_path / "results", log=lambda _: None)
    site = tmp_path / "site"
    report_it = ["leaderboard", "report", "--results", str(tmp_path / "results"), "--out", str(site)]
    assert main(report_it) == 0
    assert "What this board shows" not in (site / "LEADERBOARD.md").read_text()
    account = "The oracle reads the cue from the environment's state: 1.00 at every length.\n\n- not a memory\n"
    (site / "ABOUT.md").write_text("\n" + account)
    assert main(report_it) == 0
    page = (site / "LEADERBOARD.md").read_text()
    assert page.endswith("## What this board shows\n\n" + account)
    assert page.index("learning_curves.png") < page.index("## What this board shows")  # under the board
    assert '<a href="ABOUT.md">ABOUT.md</a>' in (site / "index.html").read_text()
    assert (site / "ABOUT.md").read_text() == "\n" + account  # the hand-written file is never rewritten
    (site / "ABOUT.md").write_bytes(b"\xff\xfe not text")
    capsys.readouterr()
    assert main(report_it) == 2
    assert f"{site / 'ABOUT.md'} must be UTF-8 text" in capsys.readouterr().err
    assert page == (site / "LEADERBOARD.md").read_text()  # nothing written over


def screenshot_in_headless_chromium(page, shot):
    """Render ``page`` in Debian's chromium; the screenshot must show the tables' text and the colour plots.

    CI installs chromium (``.ci/run``) and this check is required there; on a
    machine without chromium it is skipped.
    """
    import os
    import shutil
    import subprocess

    import matplotlib.image

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        assert not os.environ.get("CI"), "CI must install chromium to test the HTML report"
        pytest.skip("no chromium on this machine")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1280,2400", f"--screenshot={shot}", page.resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)
    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1280)
    dark = pixels.max(axis=-1) < 0.3  # text and table rules
    colourful = pixels.max(axis=-1) - pixels.min(axis=-1) > 0.4  # the plots' coloured lines and bands
    assert dark.mean() > 0.002, "the page rendered no text"
    assert colourful.sum() > 500, "the plots did not render (no coloured pixels)"


@pytest.mark.slow
def test_same_seed_same_result(tmp_path):
    budget = Preset("tiny", **{**TINY, "values": (2,), "seeds": 1})
    a = list(runner.run(["a2c-tiny-gru"], budget, tmp_path / "a", log=lambda _: None).records())[0]
    b = list(runner.run(["a2c-tiny-gru"], budget, tmp_path / "b", log=lambda _: None).records())[0]
    assert a["train"] == b["train"] and a["eval"] == b["eval"]


def test_presets_and_bad_input():
    assert TMAZE.presets["thesis"].values == (120, 140, 160, 180, 200)
    assert TMAZE.presets["thesis"].total_steps == 10_000_000
    # Thesis §5.1.2: the mean over 50 seeds, success over the last 100K training steps.
    assert TMAZE.presets["thesis"].seeds == 50 and TMAZE.presets["thesis"].train_window == 100_000
    assert TMAZE.presets["thesis-10-seeds"].seeds == 10
    tune = TMAZE.presets["tune"]  # Appendix A.1: 5 seeds × 5 lengths × 5M steps per configuration
    assert (tune.values, tune.seeds, tune.total_steps, tune.train_window) == (
        (120, 140, 160, 180, 200), 5, 5_000_000, 100_000)
    assert TMAZE.preset().name == "thesis"  # the default preset
    assert TMAZE.preset("smoke", total_steps=5000).train_window == 1000
    assert TMAZE.preset("smoke", total_steps=5000).name == "smoke+custom"
    assert TMAZE.preset("smoke", seeds=TMAZE.presets["smoke"].seeds).name == "smoke"
    assert TMAZE.budget_record(TMAZE.presets["smoke"]) == {  # the record's budget keeps the T-Maze names
        "name": "smoke", "corridor_lengths": (4, 8, 12), "seeds": 2, "total_steps": 100_000, "train_window": 20_000,
        "eval_episodes": 256, "max_episode_steps": 100}
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        TMAZE.preset("huge")
    with pytest.raises(ValueError, match="seeds must be a positive integer, got seeds=0"):
        TMAZE.preset("smoke", seeds=0)
    with pytest.raises(ValueError, match=r"train_window must be an integer in \[1, 100\] \(at most total_steps\), "
                                         r"got train_window=200"):
        Preset("x", (2,), seeds=1, total_steps=100, train_window=200, eval_episodes=1)
    with pytest.raises(ValueError, match=r"max_episode_steps must be None \(the environment's own episode end\) or a "
                                         r"positive integer, got max_episode_steps=0"):
        Preset("x", (2,), seeds=1, total_steps=100, train_window=20, eval_episodes=1, max_episode_steps=0)
    with pytest.raises(ValueError, match="corridor_length"):
        TMAZE.preset("smoke", values=[0])


class ForgetfulAgent:
    """Any-framework agent that returns actions of the wrong shape."""

    def act(self, obs, start):
        return np.zeros(len(obs) + 1, np.int64)

    def observe(self, *args):
        pass


def forgetful_factory(context):
    return ForgetfulAgent()


class ExitingAgent:
    """Any-framework agent that calls ``sys.exit(3)`` on its seed 1 (a random agent otherwise)."""

    def __init__(self, context):
        self.seed, self.num_envs = context.seed, context.num_envs
        self.rng = np.random.default_rng(context.seed)

    def act(self, obs, start):
        if self.seed == 1:
            raise SystemExit(3)
        return self.rng.integers(0, 4, self.num_envs)

    def observe(self, *args):
        pass


def exiting_factory(context):
    return ExitingAgent(context)


def always_exiting_factory(context):
    """An agent that calls ``sys.exit(3)`` on every seed."""
    return ExitingAgent(dataclasses.replace(context, seed=1))


def hanging_factory(context):
    """A factory that never returns for seed 1."""
    while context.seed == 1:
        time.sleep(0.1)
    return ExitingAgent(context)


def test_an_agent_that_exits_or_hangs_fails_its_cells_and_the_run_goes_on(tmp_path, capsys):
    """From the command line, as docs/submitting.md's "Failures" promises: ``sys.exit()`` in ``act`` and a factory
    that hangs (with ``--cell-timeout``) each fail their own cells; the other cells and agents run and the board is
    written. ``check`` fails the exiting agent with exit status 1 instead of ending silently."""
    from memgym.cli import main

    results = tmp_path / "results"
    assert main(["leaderboard", "run", "--agent", "tests.leaderboard.test_harness:exiting_factory",
                 "--agent", "tests.leaderboard.test_harness:hanging_factory", "--preset", "smoke", "--values", "4",
                 "--seeds", "2", "--steps", "256", "--eval-episodes", "8", "--cell-timeout", "5",
                 "--results", str(results)]) == 0
    records = {(r["agent"].rsplit(":", 1)[1], r["seed"]): r for r in ResultsStore(results).records()}
    assert {cell: r["status"] for cell, r in records.items()} == {
        ("exiting_factory", 0): "ok", ("exiting_factory", 1): "failed",
        ("hanging_factory", 0): "ok", ("hanging_factory", 1): "failed"}
    assert records["exiting_factory", 1]["reason"].startswith("SystemExit: 3 (raised at test_harness.py")
    assert re.fullmatch(r"exceeded the wall-clock limit per cell \(\d+s > 5s\)", records["hanging_factory", 1]["reason"])
    board = (results / "LEADERBOARD.md").read_text()
    assert "failed L=4 (1 cell)" in board and "below chance L=" not in board
    capsys.readouterr()
    assert main(["leaderboard", "check", "tests.leaderboard.test_harness:always_exiting_factory"]) == 1
    assert "SystemExit: 3" in capsys.readouterr().out


class SwallowingAgent:
    """An any-framework agent whose sixth ``act`` sleeps and catches every interrupt: with ``forever`` it never
    returns; else it returns once it has caught one."""

    def __init__(self, context, forever: bool):
        self.num_envs, self.forever, self.calls = context.num_envs, forever, 0

    def act(self, obs, start):
        self.calls += 1
        if self.calls > 5:
            while True:
                try:
                    time.sleep(1000)
                except BaseException:  # the alarm's exception, caught
                    if not self.forever:
                        break
        return np.zeros(self.num_envs, np.int64)

    def observe(self, *transition):
        pass


def swallowing_factory(context):
    return SwallowingAgent(context, forever=True)


def test_alarm_fails_a_block_that_caught_its_interrupt_and_returned():
    from memgym.leaderboard.limits import CellFailure, alarm

    agent = SwallowingAgent(TMAZE.context(num_envs=2, seed=0, total_steps=64), forever=False)
    agent.calls = 5
    started = time.perf_counter()
    with pytest.raises(CellFailure, match="exceeded the wall-clock limit per cell"):
        with alarm(0.2):
            agent.act(None, None)  # returns, having caught the interrupt
    assert time.perf_counter() - started < 5


@pytest.mark.slow(seconds=25)
def test_check_stops_an_agent_that_catches_the_timeout_and_goes_on():
    """docs/submitting.md: a hung call is interrupted; one that catches the interrupt and keeps running is stopped
    with its process (exit status 124, the reason on stderr) instead of hanging ``check`` for ever."""
    import subprocess
    import sys

    from memgym.leaderboard.limits import STOPPED_STATUS, UNWIND_SECONDS

    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "check",
                           "tests.leaderboard.test_harness:swallowing_factory", "--step-timeout", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == STOPPED_STATUS, done.stdout + done.stderr
    assert "caught the interrupt" in done.stderr and "wall-clock limit (2 s)" in done.stderr
    assert time.perf_counter() - started > 2 + UNWIND_SECONDS


def test_check_explains_failures():
    results = check_agent("tests.leaderboard.test_harness:forgetful_factory")
    failed = [(name, why) for name, ok, why in results if not ok]
    assert failed and "shape (2,)" in failed[0][1]
    assert all(ok for _, ok, _ in check_agent("examples.numpy_agent:factory"))


def refusing_odd_seeds_factory(context):
    if context.seed % 2:
        raise RuntimeError(f"refuses seed {context.seed}")
    return OracleAgent(context.num_envs)


def exploding_factory(context):
    return RaisingAgent()


def test_check_names_the_call_that_raised():
    """A factory that raises on some seeds, or an ``act`` that raises: the explanation says which call raised (and
    for the factory, on which seed), not only the exception under the name of the check that made the call."""
    failed = {name: why for name, ok, why in check_agent("tests.leaderboard.test_harness:refusing_odd_seeds_factory")
              if not ok}
    assert failed["same seed, same actions"].startswith("the factory (seed 7) raised RuntimeError: refuses seed 7")
    failed = {name: why for name, ok, why in check_agent("tests.leaderboard.test_harness:exploding_factory")
              if not ok}
    assert any(why.startswith("act raised RuntimeError: agent exploded") for why in failed.values()), failed


@pytest.mark.slow
def test_jax_example_submission_passes_the_check():
    results = check_agent("examples.jax_agent:factory", budget=4096)
    assert all(ok for _, ok, _ in results), [r for r in results if not r[1]]


@pytest.mark.slow
def test_a_run_releases_compiled_cells_that_no_later_task_needs(tmp_path, monkeypatch):
    """An agent's compiled cells live while a task left in the run needs them, and no longer. A sweep of many
    configurations on a track with an env per value (POPGym's suite: 96 compilations in one run) kept every one,
    their code mapped into the process, until Linux's limit on memory maps (vm.max_map_count) made XLA's next
    compilation fail a few dozen tasks in."""
    import gc
    import weakref

    from memgym.leaderboard.running import jax_tier

    alive_at_creation = []
    made = []

    class Tracked(jax_tier.JaxCells):
        def __init__(self, *args, **kwargs):
            gc.collect()
            alive_at_creation.append(sum(ref() is not None for ref in made))
            super().__init__(*args, **kwargs)
            made.append(weakref.ref(self))

    monkeypatch.setattr(jax_tier, "JaxCells", Tracked)
    budget = Preset("tiny", **TINY)
    specs = ["a2c-tiny-mlp[learning_rate=0.001]", "a2c-tiny-mlp[learning_rate=0.003]"]
    runner.run(specs, budget, tmp_path, log=lambda _: None)
    assert len(list(ResultsStore(tmp_path).records())) == 8  # 2 configurations × 2 lengths × 2 seeds, all stored
    assert len(made) == 2  # one compilation per configuration, its lengths sharing it (one env serves them all)
    assert alive_at_creation == [0, 0]  # the first was released before the second was built
