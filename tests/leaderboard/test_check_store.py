"""`memgym leaderboard check` against hostile agents, the leaderboard flags' ranges, and the results store's
handling of unusable directories, corrupt records and file permissions — all through the command line.

The agents below are written as docs/submitting.md says (``factory(context) -> agent``) and named by
``tests.leaderboard.test_check_store:<factory>``.
"""

from __future__ import annotations

import json
import os
import stat
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.cli import build_parser, main
from memgym.leaderboard.store import ResultsStore
from memgym.leaderboard.tracks import TMAZE

HERE = "tests.leaderboard.test_check_store"

# --- JAX-tier agents ----------------------------------------------------------------------------


class TinyJaxAgent:
    """Steps its environments with action 0 for the budget; its policy walks up and turns by its carry."""

    num_envs = 2

    def initialize_carry(self):
        return jnp.zeros(2)  # the remembered cue

    def remember(self, carry, obs, start):
        return jnp.where(start, obs[:2], carry)  # an honest memory: a new episode starts from its own cue

    def act(self, params, carry, obs, start, key):
        carry = self.remember(carry, obs, start)
        return (2 + jnp.argmax(carry)).astype(jnp.int32), carry

    def params(self):
        return {"w": jnp.ones(3)}

    def train(self, key, env, env_params, total_steps):
        n = self.num_envs
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, n), env_params)

        def step(state, key):
            _, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key, n), state, jnp.zeros(n, jnp.int32), env_params)
            return state, None

        state, _ = jax.lax.scan(step, state, jax.random.split(key, total_steps // n))
        return self.params(), state


class NaNParams(TinyJaxAgent):
    def params(self):
        return {"w": jnp.full(3, jnp.nan)}


class NaNAction(TinyJaxAgent):
    def act(self, params, carry, obs, start, key):
        return jnp.float32(jnp.nan), carry


class CueKeeperJax(TinyJaxAgent):
    """Cheats: ignores ``start`` and keeps the first cue it ever saw in its carry."""

    def remember(self, carry, obs, start):
        return jnp.where(carry.sum() > 0, carry, obs[:2])


class MaxKeeperJax(TinyJaxAgent):
    """Cheats more quietly: ignores ``start`` and keeps, per cue bit, whether it was ever set (the larger cue)."""

    def remember(self, carry, obs, start):
        return jnp.maximum(carry, obs[:2])


class HangingJaxAct(TinyJaxAgent):
    def act(self, params, carry, obs, start, key):
        time.sleep(3600)  # runs while jit traces act
        return super().act(params, carry, obs, start, key)


class HangingJaxTrain(TinyJaxAgent):
    def train(self, key, env, env_params, total_steps):
        time.sleep(3600)  # runs while jit traces train
        return super().train(key, env, env_params, total_steps)


def tiny_jax(context):
    return TinyJaxAgent()


def nan_params(context):
    return NaNParams()


def nan_action(context):
    return NaNAction()


def cue_keeper_jax(context):
    return CueKeeperJax()


def max_keeper_jax(context):
    return MaxKeeperJax()


def hanging_jax_act(context):
    return HangingJaxAct()


def hanging_jax_train(context):
    return HangingJaxTrain()


# --- any-framework agents -----------------------------------------------------------------------


class CueAgent:
    """Walks up and turns to the side of the cue it remembers for each environment."""

    def __init__(self, num_envs):
        self.cue = np.full(num_envs, -1)

    def remember(self, obs, start):
        self.cue = np.where(start, obs[:, 0].astype(int), self.cue)

    def act(self, obs, start):
        self.remember(obs, start)
        return np.where(self.cue < 0, 0, 2 + self.cue).astype(np.int64)

    def observe(self, action, reward, next_obs, terminated, truncated):
        pass


class CueKeeper(CueAgent):
    """Cheats: ignores ``start`` and keeps the first cue each environment ever showed."""

    def remember(self, obs, start):
        shown = obs[:, :2].sum(axis=1) > 0
        self.cue = np.where((self.cue < 0) & shown, obs[:, 0].astype(int), self.cue)


class MaxKeeper(CueAgent):
    """Cheats more quietly: ignores ``start`` and keeps, per cue bit, whether it was ever set."""

    def __init__(self, num_envs):
        self.memory = np.zeros((num_envs, 2))

    def act(self, obs, start):
        self.memory = np.maximum(self.memory, obs[:, :2])
        return np.where(self.memory[:, 0] > 0, 2, 3).astype(np.int64)


class Unseeded(CueAgent):
    """Turns at random from NumPy's global generator, which no seed of the context reaches."""

    def act(self, obs, start):
        return np.random.randint(0, 4, size=len(obs))


class SlowCue(CueAgent):
    def act(self, obs, start):
        time.sleep(0.02)
        return super().act(obs, start)


class NaNActions(CueAgent):
    def act(self, obs, start):
        return np.full(len(obs), np.nan)


class HangsOnSecondAct(CueAgent):
    calls = 0

    def act(self, obs, start):
        self.calls += 1
        if self.calls == 2:
            time.sleep(3600)
        return super().act(obs, start)


def cue_agent(context):
    return CueAgent(context.num_envs)


def cue_keeper(context):
    return CueKeeper(context.num_envs)


def max_keeper(context):
    return MaxKeeper(context.num_envs)


def unseeded(context):
    return Unseeded(context.num_envs)


def slow_cue(context):
    return SlowCue(context.num_envs)


def nan_actions(context):
    return NaNActions(context.num_envs)


def hangs_on_second_act(context):
    return HangsOnSecondAct(context.num_envs)


def check(capsys, factory, *flags):
    """``memgym leaderboard check``: exit status, the failed checks' lines and the whole output."""
    status = main(["leaderboard", "check", f"{HERE}:{factory}", *flags])
    out = capsys.readouterr().out
    failed = [block for block in out.split("FAIL  ")[1:]]
    return status, failed, out


JAX_FLAGS = ("--steps", "64")

# --- 6. NaN ---------------------------------------------------------------------------------------


def test_check_reports_nan_parameters_as_nan(capsys):
    status, failed, out = check(capsys, "nan_params", *JAX_FLAGS)
    assert status == 1 and len(failed) == 1, out
    assert "NaN or infinite values" in failed[0] and "['w']" in failed[0]
    assert "deterministic" not in failed[0].split("\n", 1)[1]  # the explanation, not the check's name


def test_check_reports_nan_actions_once(capsys):
    status, failed, out = check(capsys, "nan_actions")
    assert status == 1 and len(failed) == 1, out
    assert "NaN actions" in failed[0]
    status, failed, out = check(capsys, "nan_action", *JAX_FLAGS)
    assert status == 1 and len(failed) == 1, out
    assert "NaN action" in failed[0]


# --- 7. start resets the memory ------------------------------------------------------------------


def test_check_catches_a_cue_carried_across_an_episode_start(capsys):
    status, failed, out = check(capsys, "cue_keeper")
    assert status == 1 and len(failed) == 1, out
    assert failed[0].startswith("start=True resets the memory") and "carries memory across an episode start" in out
    status, failed, out = check(capsys, "cue_keeper_jax", *JAX_FLAGS)
    assert status == 1 and len(failed) == 1, out
    assert failed[0].startswith("start=True resets the memory") and "carries memory across an episode start" in out
    # An agent that keeps the larger cue acts as a fresh one after one of the two cues only: each new episode is
    # played with both.
    for agent, flags in (("max_keeper", ()), ("max_keeper_jax", JAX_FLAGS)):
        status, failed, out = check(capsys, agent, *flags)
        assert status == 1 and len(failed) == 1, out
        assert failed[0].startswith("start=True resets the memory") and "carries memory across" in out
    # The same agents with an honest memory pass.
    assert check(capsys, "cue_agent")[0] == 0
    assert check(capsys, "tiny_jax", *JAX_FLAGS)[0] == 0


def test_an_unseeded_agent_fails_one_check_not_two(capsys):
    status, failed, out = check(capsys, "unseeded")
    assert status == 1 and len(failed) == 1, out
    assert failed[0].startswith("same seed, same actions") and "carries memory" not in out


@pytest.mark.slow(seconds=60)
def test_an_agent_passes_the_check_of_a_track_whose_actions_are_not_discrete(capsys):
    # Battleship's actions are MultiDiscrete cells: the memory test steps with the lowest, and the JAX tier's
    # act is held to the run's rule for that space.
    assert main(["leaderboard", "check", "examples.random_agent:factory", "--track", "popgym-game"]) == 0
    assert "4/4 checks passed" in capsys.readouterr().out
    assert main(["leaderboard", "check", "a2c-tiny-mlp", "--track", "popgym-game", "--steps", "2048"]) == 0
    assert "6/6 checks passed" in capsys.readouterr().out


# --- 8. step timeout ------------------------------------------------------------------------------


@pytest.mark.slow
def test_check_stops_a_hung_call(capsys):
    started = time.perf_counter()
    status, failed, out = check(capsys, "hangs_on_second_act", "--step-timeout", "1")
    assert status == 1 and len(failed) == 1, out
    assert "act did not return within 1 s (--step-timeout)" in failed[0]
    status, failed, out = check(capsys, "hanging_jax_train", *JAX_FLAGS, "--step-timeout", "2")
    assert status == 1 and len(failed) == 1, out
    assert "train did not return within 2 s (--step-timeout)" in failed[0]
    status, failed, out = check(capsys, "hanging_jax_act", *JAX_FLAGS, "--step-timeout", "20")  # train compiles
    assert status == 1 and len(failed) == 1, out
    assert "act did not return within 20 s (--step-timeout)" in failed[0]
    assert time.perf_counter() - started < 120
    assert build_parser().parse_args(["leaderboard", "check", "x:y"]).step_timeout > 0  # a limit by default


# --- 9. two runs of one agent into one store ----------------------------------------------------------


@pytest.mark.slow(seconds=20)
def test_a_second_run_of_an_agent_into_its_store_waits_its_turn(capsys, tmp_path):
    """As two shells see it: while one run stores an agent's cells, a second run of that agent into the same
    folder is refused (it would train the same cells again); once the first has finished, the second finds them."""
    import subprocess
    import sys

    argv = ["leaderboard", "run", "--agent", f"{HERE}:slow_cue", "--preset", "smoke", "--values", "2", "--seeds", "2",
            "--steps", "800", "--eval-episodes", "2", "--results", str(tmp_path)]
    first = subprocess.Popen([sys.executable, "-m", "memgym.cli", *argv], stdout=subprocess.PIPE, text=True)
    lock = tmp_path / f".{HERE}_slow_cue.lock"
    deadline = time.monotonic() + 120
    while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lock.exists(), "the first run never took its lock"
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"process {first.pid} on " in err and "is storing agent" in err and "another --results folder" in err
    assert first.wait(timeout=300) == 0 and not lock.exists()
    assert main(argv) == 0
    assert "all 2 seeds stored, skipping" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.rglob("seed*.json")) == ["seed0.json", "seed1.json"]  # no repeats


# --- 10. numeric flags -----------------------------------------------------------------------------

RUN = ["leaderboard", "run", "--agent", "examples.random_agent:factory", "--preset", "smoke"]
NO_RUN = ["leaderboard", "run", "--agent", "no_such_module:factory", "--preset", "smoke"]  # if parsed, fails at once


@pytest.mark.parametrize("argv, flag, allowed", [
    (NO_RUN + ["--steps", "1e100"], "--steps", "[1, 2,147,483,647]"),
    (NO_RUN + ["--steps", "2147483648"], "--steps", "int32"),
    (NO_RUN + ["--steps", "0.5"], "--steps", "[1, 2,147,483,647]"),
    (NO_RUN + ["--seeds", "1e9"], "--seeds", "[1, 1,000]"),
    (NO_RUN + ["--eval-episodes", "1001"], "--eval-episodes", "[1, 1,000]"),
    (NO_RUN + ["--cell-timeout", "inf"], "--cell-timeout", "(0, 1e+06]"),
    (NO_RUN + ["--cell-timeout", "nan"], "--cell-timeout", "(0, 1e+06]"),
    (NO_RUN + ["--cell-timeout", "1e100"], "--cell-timeout", "(0, 1e+06]"),
    (NO_RUN + ["--cell-timeout", "0"], "--cell-timeout", "(0, 1e+06]"),
    (NO_RUN + ["--gpus-per-task", "-1"], "--gpus-per-task", "[0, 1024]"),
    (["leaderboard", "check", "x:y", "--steps", "1e100"], "--steps", "[1, 2,147,483,647]"),
    (["leaderboard", "check", "x:y", "--step-timeout", "-3"], "--step-timeout", "(0, 1e+06]"),
])
def test_numeric_flags_are_refused_out_of_range(capsys, argv, flag, allowed):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"{flag} must be" in err and argv[-1] in err and allowed in err


def test_largest_values_parse():
    args = build_parser().parse_args(RUN + ["--steps", "2147483647", "--seeds", "1000", "--eval-episodes", "1e3"])
    assert (args.steps, args.seeds, args.eval_episodes) == (2**31 - 1, 1000, 1000)


@pytest.mark.parametrize("values, message", [
    ("1e100", "corridor_length must be an integer, got '1e100'"),
    ("99999", "corridor_length must be an integer in [1, 256] (2**gray_bits positions with gray_bits=8), "
                "got corridor_length=99999"),
    ("4,4", "a value is named twice"),
])
def test_values_are_refused_naming_the_flag(capsys, tmp_path, values, message):
    assert main(NO_RUN + ["--values", values, "--results", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"--values {values}: {message}" in err
    assert not (tmp_path / "r").exists()


# --- 10. --results --------------------------------------------------------------------------------

TINY_RUN = RUN + ["--values", "2", "--seeds", "2", "--steps", "64", "--eval-episodes", "2"]


def test_results_that_cannot_hold_results_fail_before_training(capsys, tmp_path):
    file = tmp_path / "file"
    file.write_text("not a directory")
    assert main(TINY_RUN + ["--results", str(file)]) == 2
    out, err = capsys.readouterr()
    assert f"--results {file}: {file} exists and is not a directory" in err and "training" not in out
    assert main(TINY_RUN + ["--results", str(file / "below")]) == 2
    out, err = capsys.readouterr()
    assert f"{file} is not a directory" in err and "training" not in out
    assert file.read_text() == "not a directory"


def test_show_and_report_refuse_a_folder_without_results(capsys, tmp_path):
    """A mistyped or empty --results is an error for `show` as for `report`, never a silent empty board."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in ("show", "report"):
        assert main(["leaderboard", command, "--track", "popgym-control", "--results", str(empty)]) == 2
        assert f"no results stored under {empty}" in capsys.readouterr().err
    assert list(empty.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_results_that_are_not_writable_fail_before_training(capsys, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert main(TINY_RUN + ["--results", str(locked)]) == 2
        out, err = capsys.readouterr()
        assert "is not writable" in err and "training" not in out
    finally:
        locked.chmod(0o700)


# --- 11. corrupt records --------------------------------------------------------------------------

OK = {"agent": "a:f", "status": "ok", "corridor_length": 2, "seed": 0,
      "preset": {"name": "smoke", "corridor_lengths": [2], "seeds": 1, "total_steps": 64},
      "train": {"success_rate": 0.5, "curve": [[1, 1], [2, 0]]}, "eval": {"success_rate": 0.25}}


def test_store_lists_unreadable_records_and_yields_the_others(tmp_path):
    store = TMAZE.store(tmp_path)
    good = store.write("a_f", 2, 0, OK)
    failed = store.write("a_f", 2, 1, {**OK, "seed": 1, "status": "failed", "reason": "boom"})
    folder = store.cell_dir("a_f", 2)
    broken = {
        "seed2.json": json.dumps(OK)[:40],
        "seed3.json": "[1, 2]",
        "seed4.json": json.dumps({k: v for k, v in {**OK, "seed": 4}.items() if k != "agent"}),
        "seed5.json": json.dumps({**OK, "seed": 5, "eval": {}}),
        "seed6.json": json.dumps({**OK, "seed": 6, "corridor_length": 3}),
        "seed7.json": json.dumps({k: v for k, v in {**OK, "seed": 7}.items() if k != "corridor_length"}),
        "seed8.json": json.dumps({**OK, "seed": 9}),
        "seed10.json": json.dumps({**OK, "seed": 10, "preset": [1]}),
        "seed11.json": json.dumps({**OK, "seed": 11, "train": {"success_rate": 0.5, "curve": 3}}),
        "seed12.json": b"\xff\xfe",
        "seed13.json": json.dumps({**OK, "seed": 13, "eval": {**OK["eval"], "success_rate": 7.0}}),
    }
    for name, text in broken.items():
        (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    assert [r["path"] for r in store.records()] == [str(good), str(failed)]
    problems = {path.name: problem for path, problem in store.unreadable()}
    assert set(problems) == set(broken)
    assert problems["seed2.json"].startswith("is not valid JSON (") and "truncated" in problems["seed2.json"]
    assert problems["seed3.json"] == "is a JSON list, not a record (a JSON object)"
    assert problems["seed4.json"] == "has no 'agent' field"
    assert problems["seed5.json"] == "has no finite 'success_rate' in its 'eval' (got None)"
    assert problems["seed6.json"] == "has 'corridor_length' 3, which does not match its directory 'L2'"
    assert problems["seed7.json"] == "has no 'corridor_length' field"
    assert problems["seed8.json"] == "has 'seed' 9, which does not match its file name"
    assert problems["seed10.json"].startswith("has 'preset' [1], not a JSON object")
    assert "'curve'" in problems["seed11.json"]
    assert problems["seed12.json"] == "is not UTF-8 text"
    assert problems["seed13.json"] == "has 'success_rate' 7.0 in its 'eval', outside the track's range [0, 1]"
    assert [r["status"] for r in store.results("a_f", 2, 2)] == []  # a cell with only a corrupt record
    assert store.finished("a_f", 2, 2) is None
    assert store.write("a_f", 2, 2, {**OK, "seed": 2}).name == "seed2.r1.json"  # the corrupt name stays taken
    assert (folder / "seed2.json").read_text() == broken["seed2.json"]


def test_run_resumes_past_a_corrupt_record_and_show_lists_nothing_bogus(capsys, tmp_path):
    results = tmp_path / "results"
    assert main(TINY_RUN + ["--results", str(results)]) == 0
    folder = results / "examples.random_agent_factory" / "L2"
    corrupt, kept = folder / "seed0.json", folder / "seed1.json"
    corrupt.write_text(corrupt.read_text()[:100])  # a truncated record
    truncated, valid = corrupt.read_bytes(), kept.read_bytes()
    capsys.readouterr()
    assert main(TINY_RUN + ["--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert f"unreadable record, kept and not counted: {corrupt} is not valid JSON" in out
    assert corrupt.read_bytes() == truncated and kept.read_bytes() == valid  # neither touched
    assert sorted(p.name for p in folder.iterdir()) == ["seed0.json", "seed0.r1.json", "seed1.json"]
    rerun = json.loads((folder / "seed0.r1.json").read_text())
    assert rerun["status"] == "ok" and rerun["seed"] == 0
    # Records that are JSON but not usable do not break show or report either.
    (folder / "seed0.r2.json").write_text("[]")
    (folder / "seed1.r1.json").write_text(json.dumps({**json.loads(valid), "eval": None}))
    assert main(["leaderboard", "show", "--results", str(results)]) == 0
    assert main(["leaderboard", "report", "--results", str(results), "--out", str(tmp_path / "site")]) == 0
    assert "examples.random_agent:factory" in capsys.readouterr().out
    assert [p.name for p, _ in TMAZE.store(results).unreadable()] == ["seed0.json", "seed0.r2.json", "seed1.r1.json"]


# --- 12. permissions ------------------------------------------------------------------------------


def test_records_get_the_permissions_of_the_board_files(capsys, tmp_path):
    previous = os.umask(0o022)
    try:
        assert main(TINY_RUN + ["--results", str(tmp_path)]) == 0
    finally:
        os.umask(previous)
    record = tmp_path / "examples.random_agent_factory" / "L2" / "seed0.json"
    mode = stat.S_IMODE(record.stat().st_mode)
    assert mode == 0o644 == stat.S_IMODE((tmp_path / "LEADERBOARD.md").stat().st_mode)
    previous = os.umask(0o077)
    try:
        path = ResultsStore(tmp_path / "private").write("a_f", 2, 0, OK)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the umask is honoured, not overridden
