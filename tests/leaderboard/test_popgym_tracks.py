"""The POPGym tracks in the JAX tier: a number score (the normalized return) counted and sealed by the harness,
one JAX env per value (POPGym's difficulties deal other decks; its tasks have other spaces), and a run of the
multi-task track through the documented command line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.envs.popgym_jax.registration import task_class
from memgym.leaderboard import tracks
from memgym.leaderboard.scoring import ScoredEnv, ScoredParams, counters, evaluate_jax, seal_weights, sealed
from memgym.leaderboard.tracks import POPGYM, POPGYM_REPEAT_PREVIOUS, SCORE_UNITS, Preset


def test_a_number_score_is_counted_in_exact_units_and_sealed():
    """Random play on Repeat Previous Easy (52-step episodes, negative and positive returns): the counters hold
    the sum of each finished episode's normalized return rounded to 1/SCORE_UNITS, the window's and the curve's
    too, and the seal holds over negative counts and breaks on any edit."""
    inner = task_class("RepeatPreviousEasy")()
    env = ScoredEnv(inner, score_key="normalized_return", units=SCORE_UNITS)
    seal = seal_weights()
    params = ScoredParams(inner.default_params, jnp.asarray(300, jnp.int32), jnp.asarray(40, jnp.int32),
                          seal=jnp.asarray(seal))

    def run(key):
        _, state = env.reset(key, params)

        def step(state, key):
            action = jax.random.randint(key, (), 0, 4)
            _, state, _, terminated, truncated, info = env.step(jax.random.fold_in(key, 1), state, action, params)
            return state, (terminated | truncated, info["normalized_return"])

        return jax.lax.scan(step, state, jax.random.split(key, 800))

    state, (done, score) = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 8))
    done, score = np.asarray(done), np.asarray(score, np.float64)
    units = np.where(done, np.round(score * SCORE_UNITS), 0)
    got = counters(state, total="normalized_return_sum", units=SCORE_UNITS)
    assert got["episodes"] == done.sum() > 100 and (score[done] < 0).any() and got["normalized_return_sum"] < 0
    assert got["normalized_return_sum"] == units.sum() / SCORE_UNITS
    assert abs(got["normalized_return_sum"] - score[done].sum()) <= 0.5 / SCORE_UNITS * done.sum()
    assert got["window_normalized_return_sum"] == units[:, 300:].sum() / SCORE_UNITS
    assert [s for _, s in got["curve"]] == list(units.reshape(8, 20, 40).sum((0, 2)) / SCORE_UNITS)
    assert sealed(state, seal)
    for name in ("successes", "window_successes", "curve_successes"):
        edited = dataclasses.replace(state, **{name: getattr(state, name).at[(0,) * getattr(state, name).ndim].add(1)})
        assert not sealed(edited, seal), name


def test_evaluation_reads_the_number_score_of_each_first_episode():
    inner = task_class("PositionOnlyCartPoleEasy")()

    class Push:  # always push right: the pole falls within a few dozen steps
        def initialize_carry(self):
            return jnp.zeros(())

        def act(self, params, carry, obs, start, key):
            return jnp.asarray(1), carry

    keys = jax.random.split(jax.random.key(1), 16)
    score, returns, lengths, invalid = jax.jit(lambda k: evaluate_jax(
        Push(), None, inner, inner.default_params, k, 200, score_key="normalized_return", counted=False))(keys)
    assert score.dtype == jnp.float32 and not invalid.any()
    assert np.all((0 < np.asarray(lengths)) & (np.asarray(lengths) < 200))
    # the env's normalized return of each finished episode (1/200 a step, summed exactly), not the naive float32
    # sum of its rewards that ``returns`` is
    np.testing.assert_array_equal(score, (np.asarray(lengths) / 200).astype(np.float32))
    np.testing.assert_allclose(score, returns, atol=1e-6)


def test_each_value_has_its_own_env_and_the_tracks_bound_their_episodes():
    assert POPGYM.tiers == ("jax", "any") and POPGYM_REPEAT_PREVIOUS.tiers == ("jax", "any")
    assert POPGYM.env_key("CountRecallEasy") == "CountRecallEasy" and tracks.TMAZE.env_key(16) is None
    assert POPGYM.spaces("CountRecallEasy")[1].n == 27 and POPGYM.spaces("RepeatFirstEasy")[1].n == 4
    cpu = POPGYM.presets["cpu"]
    assert cpu.values == ("RepeatFirstEasy", "RepeatPreviousEasy", "CountRecallEasy", "PositionOnlyCartPoleEasy")
    assert [POPGYM.evaluation_steps(cpu, v) for v in cpu.values] == [51, 51, 51, 200]
    assert POPGYM_REPEAT_PREVIOUS.evaluation_steps(POPGYM_REPEAT_PREVIOUS.presets["standard"], "Hard") == 155
    with pytest.raises(ValueError, match="max_episode_steps=50: a POPGym task ends its own episodes"):
        POPGYM.preset("cpu", max_episode_steps=50)


@pytest.mark.slow
def test_the_multi_task_track_runs_each_task_in_the_jax_tier(tmp_path):
    """`memgym leaderboard run --track popgym` with a reference agent: one training call per task (their spaces
    differ), records with finite normalized returns, and a board with a column per task."""
    out = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--track", "popgym",
                          "--agent", "ppo-cpu-mlp", "--preset", "smoke", "--seeds", "1", "--steps", "20000",
                          "--values", "CountRecallEasy,PositionOnlyCartPoleEasy", "--results", "results"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "results").rglob("*.json")
               if "task" in json.loads(p.read_text())]
    assert sorted(r["task"] for r in records) == ["CountRecallEasy", "PositionOnlyCartPoleEasy"]
    for record in records:
        assert record["status"] == "ok" and record["tier"] == "jax", record
        assert -1 <= record["eval"]["normalized_return"] <= 1 and record["train"]["episodes"] > 0
    board = (tmp_path / "results" / "LEADERBOARD.md").read_text()
    assert "| CountRecallEasy | PositionOnlyCartPoleEasy |" in board


@dataclasses.dataclass(frozen=True)
class UniformConfig:
    num_actions: int


class UniformActions:
    """A JAX-tier agent that learns nothing and acts uniformly at random; its config names its action count,
    which differs by task, as the config of an agent sized for its task's spaces does."""

    num_envs = 2

    def __init__(self, num_actions: int):
        self.config = UniformConfig(num_actions)

    def initialize_carry(self):
        return jnp.zeros(())

    def act(self, params, carry, obs, start, key):
        return jax.random.randint(key, (), 0, self.config.num_actions), carry

    def train(self, key, env, env_params, total_steps):
        n = self.num_envs
        key_reset, key_run = jax.random.split(key)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_reset, n), env_params)

        def step(state, key):
            key_act, key_env = jax.random.split(key)
            action = jax.random.randint(key_act, (n,), 0, self.config.num_actions)
            _, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(jax.random.split(key_env, n), state, action,
                                                                         env_params)
            return state, None

        state, _ = jax.lax.scan(step, state, jax.random.split(key_run, total_steps // n))
        return {"w": jnp.zeros(())}, state


def per_task_agent(context):
    return UniformActions(context.action_space.n)


@pytest.mark.slow(seconds=16)
def test_a_run_resumes_with_an_agent_sized_for_each_task(tmp_path):
    """On a track whose tasks have their own spaces, a cell's record holds the config of the agent built for its
    task: resuming the board with another task compares each record with its own task's config (the agent built
    for tier detection has the check cell's spaces), so the unchanged agent is not taken for a changed one."""
    from memgym.leaderboard.running import runner

    spec = f"{__name__}:per_task_agent"
    budget = Preset("tiny", ("CountRecallEasy",), seeds=1, total_steps=256, train_window=128, eval_episodes=2)
    store = runner.run([spec], budget, tmp_path, track=POPGYM, log=lambda line: None, policies=False)
    first = [r for r in store.records() if r.get("task")]
    assert [(r["status"], r["agent_info"]["config"]) for r in first] == [("ok", {"num_actions": 27})], first
    more = dataclasses.replace(budget, values=("CountRecallEasy", "PositionOnlyCartPoleEasy"))
    store = runner.run([spec], more, tmp_path, track=POPGYM, log=lambda line: None, policies=False)
    records = {r["task"]: r for r in store.records() if r.get("task")}
    assert {task: (r["status"], r["version"], r["agent_info"]["config"]["num_actions"]) for task, r in records.items()} \
        == {"CountRecallEasy": ("ok", 1, 27), "PositionOnlyCartPoleEasy": ("ok", 1, 2)}


# ---------------------------------------------------------------------------------------------
# the suite and its groups


def test_the_suite_holds_every_family_in_jax_and_the_groups_are_popgyms_own_tags():
    """``popgym-suite`` has a column for every task written in JAX (every family popgym installs with, at every
    difficulty); the group tracks are the tags of popgym's own README (its installed package metadata), a family
    in each group it is tagged with."""
    import importlib.metadata
    import re

    from memgym.envs.popgym_jax import task_names

    assert set(tracks.POPGYM_SUITE.sweep.choices) == set(task_names())
    readme = importlib.metadata.metadata("popgym").get_payload()
    tags: dict[str, set[str]] = {}
    for name, tagged in re.findall(r"^\| \[([A-Za-z ]+)\]\([^)]*\) *\|([A-Za-z, ]+?) *\|", readme, re.MULTILINE):
        family = name.replace(" ", "").replace("Cartpole", "CartPole").replace("Minesweeper", "MineSweeper")
        for tag in tagged.split(","):
            tags.setdefault(tag.strip().lower(), set()).add(family)
    assert {group: set(families) for group, families in tracks.POPGYM_GROUPS.items()} == tags
    for group, track in tracks.POPGYM_GROUP_TRACKS.items():
        assert track.name == f"popgym-{group}" and track.tiers == ("jax", "any")
        assert track.presets["cpu"].values == tuple(family + "Easy" for family in tracks.POPGYM_GROUPS[group])
        assert len(track.presets["standard"].values) == 3 * len(tracks.POPGYM_GROUPS[group])
    for track in (tracks.POPGYM, tracks.POPGYM_SUITE, *tracks.POPGYM_GROUP_TRACKS.values()):
        board, sweep = track.presets["cpu"], track.presets["cpu-tune"]  # the sweep: the board's tasks, half its
        assert sweep.values == board.values and sweep.total_steps * 2 == board.total_steps  # budget, other seeds
        assert set(sweep.seed_range).isdisjoint(board.seed_range)


@pytest.mark.parametrize("task, good, bad", [
    pytest.param("BattleshipEasy", jnp.array([7, 0]), jnp.array([8, 0]),  # a cell of the 8 x 8 board; past it
                 marks=pytest.mark.slow(seconds=16)),
    ("PositionOnlyPendulumEasy", jnp.array([2.0]), jnp.array([jnp.nan])),  # the largest torque; NaN
    pytest.param("LabyrinthEscapeEasy", jnp.asarray(3), jnp.asarray(1.5),  # down; a fractional move
                 marks=pytest.mark.slow(seconds=16)),
])
def test_the_jax_tier_counts_invalid_actions_of_every_kind_of_space(task, good, bad):
    """The harness's evaluation counts an action outside a MultiDiscrete, Box or Discrete space as invalid, and one
    inside it as valid (memgym.envs.functional.valid_action), for the suite's tasks of each kind."""
    inner = task_class(task)()

    class Constant:
        def __init__(self, action):
            self.action = action

        def initialize_carry(self):
            return jnp.zeros(())

        def act(self, params, carry, obs, start, key):
            return self.action, carry

    keys = jax.random.split(jax.random.key(0), 4)
    for action, expect_invalid in ((good, False), (bad, True)):
        _, _, lengths, invalid = evaluate_jax(Constant(action), None, inner, inner.default_params, keys, 30,
                                              score_key="normalized_return", counted=False)
        assert (np.asarray(invalid) > 0).all() == expect_invalid and (np.asarray(lengths) >= 0).all()


@pytest.mark.slow(seconds=60)
@pytest.mark.parametrize("track, tasks", [("popgym-game", ["BattleshipEasy", "MineSweeperEasy"]),
                                          ("popgym-control", ["PositionOnlyPendulumEasy"])])
def test_reference_agents_play_multidiscrete_and_box_tasks(tmp_path, track, tasks):
    """``memgym leaderboard run`` with a reference agent on Battleship and MineSweeper (a cell as
    ``MultiDiscrete([rows, columns])``) and on the Pendulum (a torque in a ``Box``): every cell runs, no action is
    invalid, and the scores are normalized returns."""
    out = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--track", track,
                          "--agent", "a2c-tiny-gru", "--preset", "smoke", "--values", ",".join(tasks),
                          "--seeds", "1", "--steps", "20000", "--eval-episodes", "16", "--results", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    records = [json.loads(path.read_text()) for path in tmp_path.glob("a2c-tiny-gru/*/seed0.json")]
    assert sorted(record["task"] for record in records) == sorted(tasks)
    for record in records:
        assert record["status"] == "ok", record.get("error")
        assert record["train"]["invalid_actions"] == 0 and -1.0 <= record["eval"]["normalized_return"] <= 1.0


SPACE_AGENT = '''
import numpy as np


class SpaceAgent:
    """Acts by sampling its context's action space, whatever space that is."""

    def __init__(self, context):
        self.space, self.num_envs = context.action_space, context.num_envs
        self.space.seed(context.seed)

    def act(self, obs, start):
        return np.stack([self.space.sample() for _ in range(self.num_envs)])

    def observe(self, action, reward, next_obs, terminated, truncated):
        pass


def factory(context):
    return SpaceAgent(context)
'''


@pytest.mark.parametrize("track, task", [("popgym-control", "PositionOnlyPendulumEasy"),
                                         ("popgym-game", "BattleshipEasy")])
def test_an_any_framework_agent_acts_in_box_and_multidiscrete_spaces(tmp_path, track, task):
    """docs/submitting.md: "An agent of yours may act in any of these spaces." An any-framework agent that samples
    its ``AgentContext.action_space`` (a torque ``Box``, a cell ``MultiDiscrete``) runs its cell to ``ok`` through
    the command line."""
    (tmp_path / "space_agent.py").write_text(SPACE_AGENT)
    out = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--track", track,
                          "--agent", "space_agent:factory", "--preset", "smoke", "--values", task, "--seeds", "1",
                          "--steps", "800", "--eval-episodes", "8", "--results", str(tmp_path / "results")],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (path,) = (tmp_path / "results").glob("space_agent_factory/*/seed0.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok", record.get("reason")
    assert record["train"]["steps"] == 800 and -1.0 <= record["eval"]["normalized_return"] <= 1.0


@pytest.mark.slow(seconds=25)
def test_a_cell_whose_window_holds_no_episode_scores_the_worst_return(tmp_path):
    """docs/submitting.md: training success "is the track's worst value if no episode ends in that window". Three
    steps of HigherLower (52-step episodes) end no episode: the cell's training score is POPGym's worst normalized
    return, −1 (not 0, which would rank it above random play's −0.5), and the record is consistent with itself."""
    (tmp_path / "space_agent.py").write_text(SPACE_AGENT)
    results = tmp_path / "results"
    out = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "run", "--track", "popgym-game",
                          "--agent", "space_agent:factory", "--preset", "smoke", "--values", "HigherLowerEasy",
                          "--seeds", "1", "--steps", "3", "--eval-episodes", "4", "--results", str(results)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (path,) = results.glob("space_agent_factory/*/seed0.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok", record.get("reason")
    assert record["train"]["window_episodes"] == 0 and record["train"]["normalized_return"] == -1.0
    shown = subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "show", "--track", "popgym-game",
                            "--results", str(results)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert shown.returncode == 0 and "contradicts" not in shown.stdout + shown.stderr, shown.stdout[-2000:]


DISCRETE_ONLY_AGENT = '''
import numpy as np


class DiscreteOnly:
    """Acts uniformly over ``action_space.n``: right for Discrete actions, wrong for every other space."""

    def __init__(self, context):
        self.n, self.num_envs = context.action_space.n, context.num_envs
        self.rng = np.random.default_rng(context.seed)

    def act(self, obs, start):
        return self.rng.integers(0, self.n, self.num_envs)

    def observe(self, action, reward, next_obs, terminated, truncated):
        pass


def factory(context):
    return DiscreteOnly(context)
'''


@pytest.mark.slow(seconds=18)
def test_check_names_the_tracks_other_action_spaces_and_checks_one_with_value(tmp_path):
    """docs/submitting.md, `memgym leaderboard check`: on a track whose tasks act in spaces of other kinds, the check
    of the default cell says which other kinds there are, and ``--value`` checks a task of one. An agent written for
    Discrete actions alone passes on CartPole and fails on the Pendulum's Box."""
    (tmp_path / "discrete_only.py").write_text(DISCRETE_ONLY_AGENT)

    def check(*extra):
        return subprocess.run([sys.executable, "-m", "memgym.cli", "leaderboard", "check", "discrete_only:factory",
                               "--track", "popgym-control", *extra], capture_output=True, text=True, timeout=600,
                              cwd=tmp_path)

    default = check()
    assert default.returncode == 0, default.stdout[-2000:] + default.stderr[-2000:]
    assert "task PositionOnlyCartPoleEasy" in default.stdout
    assert "also act in Box (e.g. PositionOnlyPendulumEasy): check those with --value PositionOnlyPendulumEasy" \
        in default.stdout
    pendulum = check("--value", "PositionOnlyPendulumEasy")
    assert pendulum.returncode == 1 and "FAIL  factory builds an agent" in pendulum.stdout, pendulum.stdout[-2000:]
    assert "also act in" in pendulum.stdout and "Discrete (e.g. PositionOnlyCartPoleEasy)" in pendulum.stdout
    wrong = check("--value", "PendulumEasy")
    assert wrong.returncode == 2 and "--value PendulumEasy: task must be one of" in wrong.stderr
