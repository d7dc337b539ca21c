"""Submissions by pull request, from the user's side: the documented layout, the CLI (`run`, `verify`, `show
--submissions`, `check`) and the hostile cases of docs/submitting.md ("Submitting by pull request").

Each submission is written into ``tmp/submissions/<name>/`` with its agent in ``code/`` and its results made by
``memgym leaderboard run`` in a separate process (a hostile agent patches the process it runs in).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym.cli import main
from memgym.leaderboard.submissions import format as submission
from memgym.leaderboard.submissions.verdict import status
from memgym.leaderboard.tracks import TMAZE

REPO = Path(__file__).resolve().parents[2]
MEMGYM = [sys.executable, "-m", "memgym.cli"]
GRID = ["--preset", "smoke", "--values", "2,3", "--seeds", "2", "--steps", "2000", "--eval-episodes", "256"]

RANDOM_AGENT = """
import numpy as np


class Agent:
    def __init__(self, context):
        self.rng = np.random.default_rng(context.seed)

    def act(self, obs, start):
        return self.rng.integers(0, 4, size=len(obs))

    def observe(self, action, reward, next_obs, terminated, truncated):
        pass


def factory(context):
    return Agent(context)
"""

# the forgery of the issue that asked for verification: 12 lines that rewrite the harness's evaluation
PATCHING_AGENT = RANDOM_AGENT + """
import memgym.leaderboard.running.any_tier as any_tier

_evaluate = any_tier.evaluate


def _forged(*args, **kwargs):
    result = _evaluate(*args, **kwargs)
    result["success_rate"] = 1.0
    return result


any_tier.evaluate = _forged
"""

JAX_AGENT = """
import dataclasses

import jax
import jax.numpy as jnp

FORGE_COUNTERS = {forge_counters}
PATCH_ENV = {patch_env}


class Agent:
    num_envs = 4

    def train(self, key, env, env_params, total_steps):
        if PATCH_ENV:  # at trace time: every finished episode of the evaluation wrapper reads as a success
            from memgym.envs import functional

            update = functional.EpisodeStatistics.update

            def forged(self, *args):
                state, info = update(self, *args)
                return state, dict(info, success=info["done"])

            functional.EpisodeStatistics.update = forged
        keys = jax.random.split(key, self.num_envs)
        _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)

        def step(state, key):
            actions = jax.random.randint(key, (self.num_envs,), 0, 4)
            _, state, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key, self.num_envs), state, actions, env_params)
            return state, None

        state, _ = jax.lax.scan(step, state, jax.random.split(key, total_steps // self.num_envs))
        if FORGE_COUNTERS:
            state = dataclasses.replace(state, successes=state.episodes, window_successes=state.window_episodes,
                                        curve_successes=state.curve_episodes)
        return {{"logits": jnp.zeros(4)}}, state

    def initialize_carry(self):
        return jnp.zeros(())

    def act(self, params, carry, obs, start, key):
        return jax.random.categorical(key, params["logits"]), carry


def factory(context):
    return Agent()
"""


def make_submission(root: Path, name: str, source: str, module: str, grid=GRID, **meta) -> Path:
    """``root/submissions/name`` with the agent ``module`` in ``code/`` and the results of ``memgym leaderboard run``
    (run from ``code/``, as docs/submitting.md says)."""
    folder = root / "submissions" / name
    code = folder / "code"
    code.mkdir(parents=True)
    (code / f"{module}.py").write_text(textwrap.dedent(source))
    metadata = {"name": name, "agent": f"{module}:factory", "code": "code", "track": "tmaze",
                "preset": "smoke+custom", "authors": ["A. Researcher", "B. Student"],
                "link": "https://example.org/paper", "framework": "NumPy", "licence": "MIT",
                "hardware": "a laptop CPU", **meta}
    (folder / "submission.json").write_text(json.dumps(metadata, indent=1))
    done = subprocess.run([*MEMGYM, "leaderboard", "run", "--agent", f"{module}:factory", "--results", "../results",
                           *grid], cwd=code, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def verify(folder: Path, *flags: str, capsys) -> tuple[int, str, dict]:
    code = main(["leaderboard", "verify", str(folder), *flags])
    out = capsys.readouterr().out
    return code, out, json.loads((folder / "verification.json").read_text())


def copy(folder: Path, name: str) -> Path:
    target = folder.parent / name
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("verification.json", "__pycache__"))
    meta = json.loads((target / "submission.json").read_text())
    (target / "submission.json").write_text(json.dumps(dict(meta, name=name)))
    return target


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    return make_submission(tmp_path_factory.mktemp("honest"), "random-agent", RANDOM_AGENT, "random_walker")


@pytest.mark.slow(seconds=12)
def test_an_honest_submission_verifies_and_shows_on_the_board(honest, capsys):
    code, out, verdict = verify(honest, "--k", "4", "--sample-seed", "0", capsys=capsys)
    assert code == 0, out
    assert verdict["verdict"] == "verified" and verdict["agreeing"] == 4 and len(verdict["cells"]) == 4
    assert "verdict: VERIFIED (4/4 re-run cells agree)" in out
    # any-framework tier, on the records' machine: the agent repeats its training, so its evaluation is held exactly
    assert all(row["rule"] == "exact (its training repeated on the record's backend)" for row in verdict["cells"])
    assert verdict["digest"] == submission.digest(submission.load(honest))
    assert main(["leaderboard", "show", "--submissions", str(honest.parent)]) == 0
    board = capsys.readouterr().out
    assert "| verified |" in board and "`submissions/random-agent`" in board and "| re-run 4/4 of 4 |" in board


@pytest.mark.slow(seconds=18)
def test_a_hand_edited_score_is_a_mismatch(honest, capsys):
    """On the records' backend an any-framework cell whose training repeats is held exactly: one episode's
    worth (1/256) added to its evaluation score is a mismatch. Records of another backend are compared within
    the statistical tolerance, beyond which a larger edit is caught."""
    edited = copy(honest, "edited-score")
    record = edited / "results" / "random_walker_factory" / "L3" / "seed1.json"
    data = json.loads(record.read_text())
    honest_score = data["eval"]["success_rate"]
    data["eval"]["success_rate"] += 1 / 256
    record.write_text(json.dumps(data))
    code, out, verdict = verify(edited, "--k", "1", "--sample-seed", "0", capsys=capsys)  # draws L=3 seed 1
    assert code == 1 and verdict["verdict"] == "mismatch"
    [bad] = verdict["cells"]
    assert (bad["value"], bad["seed"], bad["eval_rerun"], bad["agrees"]) == (3, 1, honest_score, False)
    assert bad["rule"] == "exact (its training repeated on the record's backend)"
    assert "MISMATCH (evaluation differs)" in out
    for path in (edited / "results").rglob("seed*.json"):  # the records now claim another machine
        claimed = json.loads(path.read_text())
        claimed["provenance"]["backend"]["fingerprint"] = "another machine"
        if path == record:
            claimed["eval"]["success_rate"] = 1.0
        path.write_text(json.dumps(claimed))
    code, out, verdict = verify(edited, "--k", "4", "--sample-seed", "0", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "mismatch"
    [bad] = [row for row in verdict["cells"] if not row["agrees"]]
    assert (bad["value"], bad["seed"], bad["eval_stored"]) == (3, 1, 1.0) and bad["eval_rerun"] < 0.9
    assert bad["rule"].startswith("statistical")
    assert "MISMATCH (evaluation score off by more than its tolerance)" in out
    # the board marks it, and a verdict on other files than the board's is stale
    assert status(submission.load(edited)) == "mismatch: re-run 3/4 of 4"
    (edited / "results" / "random_walker_factory" / "L2" / "seed0.json").write_text("{}")
    assert status(submission.load(edited)) == "stale"


@pytest.mark.parametrize("damage, message", [
    ("code", "was produced by other code than the submission holds (code_sha256"),
    ("missing", "planned cells without a result: L=3 seed 0"),
    ("other-agent", "is of agent 'someone_else:factory', not of this submission's 'random_walker:factory'"),
    ("other-directory", "results/someone_else_factory is not the agent's directory"),
    ("markup", "must be plain text of at most 200 characters"),
    ("link", "is not a plain http(s) URL"),
    ("escape", "results '../../outside' escapes the submission's directory"),
    ("symlink", "is a symbolic link"),
    ("torn", "cannot be read"),
    ("metadata", "submission.json lacks 'licence'"),
    ("outside-grid", "is of L=2 seed 2, outside the grid of preset 'smoke+custom'"),
    ("train-score", "contradicts itself: train success_rate 1.0 is not window_successes / window_episodes"),
    ("train-window", "contradicts itself: more successes than episodes can give"),
    ("deep-record", "nests JSON too deeply to be read"),
    ("deep-metadata", "submission.json cannot be read (RecursionError"),
    ("duplicate-key", "the key(s) 'agent' appear more than once"),
    ("invisible", "must be plain text of at most 200 characters"),
    ("score-range", "has 'success_rate' 1000.0 in its 'eval', outside the track's range [0, 1]"),
    ("short-curve", "a learning curve of shape (19, 2), not (20, 2)"),
    ("compiled", "code/helper.cpython-311.pyc is compiled code, which the code hash cannot cover"),
])
def test_a_malformed_submission_is_refused_before_anything_runs(honest, capsys, damage, message):
    broken = copy(honest, f"broken-{damage}")
    results = broken / "results" / "random_walker_factory"
    meta = json.loads((broken / "submission.json").read_text())
    if damage == "code":
        (broken / "code" / "random_walker.py").write_text(RANDOM_AGENT.replace("0, 4", "0, 3"))
    elif damage == "missing":
        (results / "L3" / "seed0.json").unlink()
    elif damage in ("other-agent", "other-directory"):  # another agent's record, in this agent's folder or its own
        record = json.loads((results / "L2" / "seed0.json").read_text())
        record["agent"] = "someone_else:factory"
        target = results / "L2" if damage == "other-agent" else broken / "results" / "someone_else_factory" / "L2"
        target.mkdir(parents=True, exist_ok=True)
        (target / "seed0.r1.json").write_text(json.dumps(record))
    elif damage == "markup":
        meta["authors"] = ["<script>alert(1)</script>", "[click](https://evil.example)"]
    elif damage == "link":
        meta["link"] = "javascript:alert(1)"
    elif damage == "escape":
        meta["results"] = "../../outside"
        (broken.parent.parent / "outside").mkdir(exist_ok=True)
    elif damage == "symlink":
        (results / "L2" / "seed0.json").unlink()
        os.symlink(honest / "results" / "random_walker_factory" / "L2" / "seed0.json", results / "L2" / "seed0.json")
    elif damage == "torn":
        (results / "L2" / "seed1.json").write_text('{"schema": 1, "agent": ')
    elif damage == "metadata":
        del meta["licence"]
    elif damage == "outside-grid":  # a copy of a real cell under a seed the preset does not have
        record = json.loads((results / "L2" / "seed0.json").read_text())
        (results / "L2" / "seed2.json").write_text(json.dumps(dict(record, seed=2)))
    elif damage in ("train-score", "train-window"):
        record = json.loads((results / "L3" / "seed1.json").read_text())
        record["train"] |= {"success_rate": 1.0} | ({"window_episodes": 0} if damage == "train-window" else {})
        (results / "L3" / "seed1.json").write_text(json.dumps(record))
    elif damage == "deep-record":
        (results / "L3" / "seed1.r1.json").write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "score-range":  # consistent everywhere but far above what a success rate can be
        record = json.loads((results / "L3" / "seed1.json").read_text())
        record["eval"]["success_rate"] = 1000.0
        (results / "L3" / "seed1.json").write_text(json.dumps(record))
    elif damage == "short-curve":  # the last two bins merged: the sums still match
        record = json.loads((results / "L3" / "seed1.json").read_text())
        curve = record["train"]["curve"]
        record["train"]["curve"] = curve[:18] + [[curve[18][0] + curve[19][0], curve[18][1] + curve[19][1]]]
        (results / "L3" / "seed1.json").write_text(json.dumps(record))
    elif damage == "compiled":
        (broken / "code" / "helper.cpython-311.pyc").write_bytes(b"\0" * 16)
    elif damage == "invisible":
        meta["authors"] = ["A. Re\u202esearcher"]
    (broken / "submission.json").write_text(json.dumps(meta))
    if damage == "deep-metadata":
        (broken / "submission.json").write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "duplicate-key":
        (broken / "submission.json").write_text(json.dumps(meta)[:-1] + ', "agent": "other:factory"}')
    code, out, verdict = verify(broken, "--k", "1", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "malformed" and not verdict["cells"]
    assert any(message in problem for problem in verdict["problems"]), verdict["problems"]
    assert "verdict: MALFORMED" in out and message in out


def test_a_submission_outside_submissions_is_refused(honest, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere" / "random-agent"
    shutil.copytree(honest, elsewhere)
    code, _, verdict = verify(elsewhere, capsys=capsys)
    assert code == 1 and any("a submission lives in a directory named submissions/" in p for p in verdict["problems"])


def test_the_board_shows_metadata_as_text_never_as_markup(honest, tmp_path):
    """Names are restricted to a-z 0-9 . _ - and every other field is refused with markup in it; what reaches
    the HTML board is escaped all the same."""
    from memgym.leaderboard.boards import report

    out = tmp_path / "board"
    report.write_report(None, out, TMAZE, [submission.load(honest)])
    page = (out / "index.html").read_text()
    assert "<td>submissions/random-agent</td>" in page
    assert "<td>not verified</td>" in page or "<td>re-run 4/4 of 4</td>" in page
    assert "<script" not in page


@pytest.mark.slow(seconds=13)
def test_an_agent_that_patches_the_harness_at_import_ranks_first_in_process_and_fails_verification(tmp_path, capsys):
    folder = make_submission(tmp_path, "patcher", PATCHING_AGENT, "patcher")
    stored = json.loads((folder / "results" / "patcher_factory" / "L2" / "seed0.json").read_text())
    assert stored["eval"]["success_rate"] == 1.0  # in its own process the forgery works
    code, out, verdict = verify(folder, "--k", "2", "--sample-seed", "3", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "mismatch"
    assert all(not row["agrees"] and row["eval_rerun"] < 0.9 for row in verdict["cells"])


@pytest.mark.slow
def test_a_jax_agent_that_patches_the_env_at_trace_time_fails_verification(tmp_path, capsys):
    source = JAX_AGENT.format(forge_counters=False, patch_env=True)
    folder = make_submission(tmp_path, "trace-patcher", source, "trace_patcher", framework="JAX")
    stored = json.loads((folder / "results" / "trace_patcher_factory" / "L3" / "seed1.json").read_text())
    assert stored["eval"]["success_rate"] == 1.0  # the patched evaluation, in its own process
    code, out, verdict = verify(folder, "--k", "1", "--sample-seed", "0", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "mismatch" and len(verdict["cells"]) == 4  # every stored policy
    assert all(row["rule"] == "exact (same backend)" and not row["agrees"] and row["eval_rerun"] < 0.9
               for row in verdict["cells"])
    [retrained] = verdict["retrained"]  # trained in the agent's process (patched there), evaluated here
    assert retrained["outcome"] == "not reproduced" and retrained["conclusive"] and retrained["train_self_reported"]
    assert "evaluation differ" in retrained["reason"]
    assert "training score counted in the agent's process (JAX tier): self-reported" in out


@pytest.mark.slow
def test_an_honest_jax_submission_reproduces_exactly(tmp_path, capsys):
    # run one seed per batch: the verification re-trains each cell in a batch of the size its record names
    folder = make_submission(tmp_path, "jax-random", JAX_AGENT.format(forge_counters=False, patch_env=False),
                             "jax_random", grid=[*GRID, "--seeds-per-batch", "1"], framework="JAX")
    assert {json.loads(path.read_text())["batch"] for path in (folder / "results").rglob("seed*.json")} == {1}
    code, out, verdict = verify(folder, "--k", "all", "--sample-seed", "0", capsys=capsys)
    assert code == 0, out
    assert all(row["rule"] == "exact (same backend)" and row["agrees"] for row in verdict["cells"])
    assert [row["outcome"] for row in verdict["retrained"]] == ["reproduced exactly"] * 4
    assert "verdict: VERIFIED (evaluation 4/4 cells agree, training 4/4 reproduced)" in out
    assert status(submission.load(folder)) == "eval 4/4, train 4/4"
    # Its code re-commented and a method renamed after the run: other code, the same computation, verified.
    source = (folder / "code" / "jax_random.py").read_text()
    refactored = copy(folder, "jax-random-refactored")
    (refactored / "code" / "jax_random.py").write_text(
        "# Refactored after the run.\n" + source.replace("def initialize_carry(self):",
                                                          "def initialize_carry(self):\n        \"\"\"No memory.\"\"\""))
    code, out, verdict = verify(refactored, "--k", "1", "--sample-seed", "0", capsys=capsys)
    assert code == 0 and verdict["verdict"] == "verified", out
    # Its logits changed after the run: code that computes something else is refused, naming both hashes.
    changed = copy(folder, "jax-random-changed")
    (changed / "code" / "jax_random.py").write_text(source.replace('{"logits": jnp.zeros(4)}', '{"logits": jnp.ones(4)}'))
    code, out, verdict = verify(changed, "--k", "1", "--sample-seed", "0", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "malformed", out
    assert any("was produced by other code than the submission holds" in problem and "which computes something else "
               "(computation_sha256" in problem for problem in verdict["problems"]), verdict["problems"]


@pytest.mark.slow
def test_train_that_returns_edited_counters_fails_its_cells_and_the_check(tmp_path):
    source = JAX_AGENT.format(forge_counters=True, patch_env=False)
    folder = make_submission(tmp_path, "forger", source, "forger", framework="JAX")
    record = json.loads((folder / "results" / "forger_factory" / "L2" / "seed0.json").read_text())
    assert record["status"] == "failed"
    assert "train returned training counters that ScoredEnv did not count" in record["reason"]
    checked = subprocess.run([*MEMGYM, "leaderboard", "check", "forger:factory", "--steps", "512"],
                             cwd=folder / "code", capture_output=True, text=True, timeout=600)
    assert checked.returncode == 1
    assert "FAIL  train" in checked.stdout and "their seal does not match" in checked.stdout


@pytest.mark.slow(seconds=40)
def test_the_worked_example_verifies(tmp_path):
    """docs/submitting.md's worked example, a reference agent submitted by package requirement, re-run from the
    command line (in a copy: the repository's verdict is left as it is)."""
    folder = tmp_path / "submissions" / "a2c-tiny-gru-smoke"
    shutil.copytree(REPO / "submissions" / "a2c-tiny-gru-smoke", folder,
                    ignore=shutil.ignore_patterns("verification.json"))
    # sample seed 0 draws L=8 seed 1, which this tiny agent solves (1.00) on any backend: on a CPU of another type
    # the comparison is statistical, and the cells at L=12, where it is on the edge of learning, may take another path
    done = subprocess.run([*MEMGYM, "leaderboard", "verify", str(folder), "--k", "1", "--sample-seed", "0",
                           "--preset", "smoke", "--cell-timeout", "600"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: VERIFIED (evaluation 6/6 cells agree, training " in done.stdout
    assert json.loads((folder / "verification.json").read_text())["verdict"] == "verified"


@pytest.mark.slow(seconds=94)
@pytest.mark.extended  # the cross-backend verify of a JAX-tier run: CI runs it in the lone cells' test below
def test_the_worked_example_verifies_on_another_backend(tmp_path):
    """The worked example verified with XLA capped at AVX2: another backend (the XLA flags are part of the
    fingerprint; on an AVX-512 machine the code differs too): the stored policies evaluate within evaluation
    noise, and the re-trained cells, whose training may take another path there, are judged against the seeds'
    spread, never called forged."""
    folder = tmp_path / "submissions" / "a2c-tiny-gru-smoke"
    shutil.copytree(REPO / "submissions" / "a2c-tiny-gru-smoke", folder,
                    ignore=shutil.ignore_patterns("verification.json"))
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_max_isa=AVX2")
    done = subprocess.run([*MEMGYM, "leaderboard", "verify", str(folder), "--k", "2", "--sample-seed", "5",
                           "--preset", "smoke"], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = json.loads((folder / "verification.json").read_text())
    assert verdict["evaluation"]["checked"] == 6 and verdict["agreeing"] == 6
    assert all(row["rule"].startswith("statistical") for row in verdict["cells"])
    assert len(verdict["retrained"]) == 2 and not any(row["conclusive"] for row in verdict["retrained"])
    assert "note: the records were made on cpu" in done.stdout


@pytest.mark.slow(seconds=80)
def test_lone_cells_trained_unbatched_verify_here_exactly_and_on_another_backend_statistically(tmp_path):
    """A run of one seed per batch (each cell trained unbatched, ``"vmapped": false``) verified with the CLI here,
    and with XLA capped at AVX2: re-trained here, its cells reproduce exactly; on the other backend its stored
    policies evaluate within noise and its re-trained cells are judged by the seeds' spread, never forged."""
    folder = tmp_path / "submissions" / "tiny-gru-lone"
    subprocess.run([*MEMGYM, "leaderboard", "run", "--agent", "a2c-tiny-gru", "--preset", "smoke", "--seeds-per-batch",
                    "1", "--results", str(folder / "results")], check=True, capture_output=True, timeout=900)
    records = [json.loads(path.read_text()) for path in (folder / "results").rglob("seed*.json")]
    assert len(records) == 6 and all(r["batch"] == 1 and r["vmapped"] is False for r in records)
    meta = json.loads((REPO / "submissions" / "a2c-tiny-gru-smoke" / "submission.json").read_text())
    (folder / "submission.json").write_text(json.dumps(meta | {"name": "tiny-gru-lone"}))
    verify_cli = [*MEMGYM, "leaderboard", "verify", str(folder), "--k", "2", "--sample-seed", "5", "--preset", "smoke"]
    # here: the flags the records were made with (tests/conftest.py adds one); there: AVX2 and no other flag
    for xla_flags, rule in ((os.environ.get("XLA_FLAGS", ""), "exact"), ("--xla_cpu_max_isa=AVX2", "statistical")):
        done = subprocess.run(verify_cli, capture_output=True, text=True, timeout=900,
                              env=dict(os.environ, XLA_FLAGS=xla_flags))
        assert done.returncode == 0, done.stdout + done.stderr
        verdict = json.loads((folder / "verification.json").read_text())
        assert verdict["verdict"] == "verified" and verdict["agreeing"] == 6
        assert all(row["rule"].startswith(rule) for row in verdict["cells"])
        outcomes = [row["outcome"] for row in verdict["retrained"]]
        if rule == "exact":
            assert outcomes == ["reproduced exactly"] * 2
        else:  # another path may or may not round alike; it is never called forged
            assert len(outcomes) == 2 and set(outcomes) <= {"reproduced exactly", "within the seeds' spread"}


SIX_CELLS = ["--preset", "smoke", "--values", "2,3,4", "--seeds", "2", "--steps", "2000", "--eval-episodes", "256"]


@pytest.fixture(scope="module")
def jax_six(tmp_path_factory) -> Path:
    """A JAX-tier submission of six cells, as many as the smoke preset's."""
    return make_submission(tmp_path_factory.mktemp("six"), "jax-six", JAX_AGENT.format(forge_counters=False,
                                                                                         patch_env=False),
                           "jax_six", grid=SIX_CELLS, framework="JAX")


@pytest.mark.slow(seconds=67)
def test_one_forged_cell_among_six_is_refused_whatever_the_sample(jax_six, capsys):
    """docs/submitting.md: a cell whose records were replaced by another cell's (evaluation and training figures
    of L=2 seed 0 copied into L=3 seed 0: consistent counts, every offline check passes) is refused under CI's
    settings (every cell re-trained) and by the evaluation of the stored policies alone, for any sample seed:
    every cell's stored policy is evaluated, so no draw can miss it."""
    forged = copy(jax_six, "forged-cell")
    cells = forged / "results" / "jax_six_factory"
    source, target = (json.loads((cells / f"L{v}" / "seed0.json").read_text()) for v in (2, 3))
    target |= {"train": source["train"], "eval": source["eval"]}
    (cells / "L3" / "seed0.json").write_text(json.dumps(target))
    assert submission.offline_problems(submission.load(forged)) == []
    assert source["eval"] != json.loads((jax_six / "results/jax_six_factory/L3/seed0.json").read_text())["eval"]
    code, out, verdict = verify(forged, "--k", "all", capsys=capsys)  # CI's settings
    assert code == 1 and verdict["verdict"] == "mismatch"
    assert [(r["value"], r["seed"]) for r in verdict["cells"] if not r["agrees"]] == [(3, 0)]
    for sample_seed in ("0", "1"):  # the evaluation check does not depend on the draw
        code, out, verdict = verify(forged, "--k", "0", "--sample-seed", sample_seed, capsys=capsys)
        assert code == 1 and [(r["value"], r["seed"]) for r in verdict["cells"] if not r["agrees"]] == [(3, 0)]
        assert verdict["training"]["sampled"] == 0 and verdict["training"]["unsampled_escape"] == 1.0
    # a JAX-tier record without its stored policy cannot have its evaluation checked: refused before anything runs
    bare = copy(jax_six, "no-policy")
    record = json.loads((bare / "results/jax_six_factory/L4/seed1.json").read_text())
    del record["policy"]
    (bare / "results/jax_six_factory/L4/seed1.json").write_text(json.dumps(record))
    code, out, verdict = verify(bare, "--k", "0", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "malformed" and "L4/seed1.json stores no trained policy" in out
    # records from before backend fingerprints are compared statistically, and an honest copy passes
    old = copy(jax_six, "old-records")
    for path in (old / "results").rglob("seed*.json"):
        record = json.loads(path.read_text())
        del record["provenance"]["backend"]
        path.write_text(json.dumps(record))
    code, out, verdict = verify(old, "--k", "0", capsys=capsys)
    assert code == 0 and all(r["rule"].startswith("statistical") and r["agrees"] for r in verdict["cells"])


# a JAX-tier learner whose parameters depend on every step of its training: action preferences moved by rewards
LEARNING_AGENT = """
import jax
import jax.numpy as jnp


class Agent:
    num_envs = 4

    def train(self, key, env, env_params, total_steps):
        _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, self.num_envs), env_params)

        def step(carry, key):
            state, logits = carry
            pick, move = jax.random.split(key)
            actions = jax.random.categorical(pick, logits, shape=(self.num_envs,))
            _, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(move, self.num_envs), state, actions, env_params)
            return (state, logits + 0.01 * jnp.zeros(4).at[actions].add(reward)), None

        (state, logits), _ = jax.lax.scan(step, (state, jnp.zeros(4)),
                                          jax.random.split(key, total_steps // self.num_envs))
        return {"logits": logits}, state

""" + JAX_AGENT[JAX_AGENT.index("    def initialize_carry"):]  # JAX_AGENT's act: a categorical over its logits


@pytest.mark.slow
def test_a_policy_trained_with_five_times_the_budget_passes_evaluation_and_fails_its_retraining(tmp_path, capsys):
    """docs/submitting.md: shipped policies open no new door. A cell whose stored policy (and its evaluation) come
    from a run with five times the budget, its training counters from an honest run, evaluates as it claims; its
    re-training on the records' backend gives other parameters, so the cell is not reproduced, conclusively."""
    grid = ["--preset", "smoke", "--values", "2", "--seeds", "2", "--eval-episodes", "256"]
    folder = make_submission(tmp_path, "overtrained", LEARNING_AGENT, "learner", grid=[*grid, "--steps", "2000"],
                             framework="JAX")
    done = subprocess.run([*MEMGYM, "leaderboard", "run", "--agent", "learner:factory", "--results",
                           str(tmp_path / "five-times"), *grid, "--steps", "10000"], cwd=folder / "code",
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    cell, over_cell = folder / "results" / "learner_factory" / "L2", tmp_path / "five-times" / "learner_factory" / "L2"
    record, over = (json.loads((c / "seed0.json").read_text()) for c in (cell, over_cell))
    assert over["policy"]["params_sha256"] != record["policy"]["params_sha256"]
    shutil.copy(over_cell / over["policy"]["file"], cell)
    record |= {"policy": over["policy"], "eval": over["eval"]}
    (cell / "seed0.json").write_text(json.dumps(record))
    assert submission.offline_problems(submission.load(folder)) == []
    code, out, verdict = verify(folder, "--k", "all", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "mismatch"
    assert verdict["agreeing"] == 2  # the stored policies do score what their records say
    outcomes = {(r["value"], r["seed"]): r for r in verdict["retrained"]}
    assert outcomes[(2, 0)]["outcome"] == "not reproduced" and outcomes[(2, 0)]["conclusive"]
    assert "trained parameters differ" in outcomes[(2, 0)]["reason"]
    assert outcomes[(2, 1)]["outcome"] == "reproduced exactly"


def test_verify_refuses_bad_flags(honest, capsys):
    assert main(["leaderboard", "verify", str(honest), "--k", "0"]) == 2
    assert "k must be at least 1 for an any-framework submission" in capsys.readouterr().err
    assert main(["leaderboard", "verify", str(honest), "--z", "-1"]) == 2
    assert "z" in capsys.readouterr().err


def test_the_ci_job_fails_a_pull_request_with_an_unfit_submission_or_its_own_verdict(honest, tmp_path):
    """.ci/verify-submissions in a repository whose pull request adds a submission: one of a custom grid (the job
    requires the smoke preset) fails it, and so does a pull request that writes its own verification.json."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "verify-submissions", repo / ".ci")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.org", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.org")

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    def job() -> subprocess.CompletedProcess:
        return subprocess.run(["bash", ".ci/verify-submissions", "main"], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=600)

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("commit", "-qm", "base")
    git("checkout", "-qb", "pull-request")
    shutil.copytree(honest, repo / "submissions" / "random-agent", ignore=shutil.ignore_patterns("verification.json"))
    git("add", ".")
    git("commit", "-qm", "a submission")
    done = job()
    assert done.returncode == 1 and "not verified: random-agent" in done.stderr
    assert "this verification requires 'smoke'" in done.stdout
    (repo / "submissions" / "random-agent" / "verification.json").write_text('{"verdict": "verified"}')
    git("add", ".")
    git("commit", "-qm", "and its own verdict")
    done = job()
    assert done.returncode == 1 and "a verdict is written by the verification, not by a pull request" in done.stderr


CRASHING_AGENT = RANDOM_AGENT + """

class Crashing(Agent):
    def __init__(self, context):
        super().__init__(context)
        self.crash, self.steps = context.seed == 1, 0

    def observe(self, action, reward, next_obs, terminated, truncated):
        self.steps += 1
        if self.crash and self.steps == 50:
            raise RuntimeError("seed 1 breaks at its 50th step")


def factory(context):
    return Crashing(context)
"""


@pytest.mark.slow
def test_a_cell_that_failed_must_fail_again_and_errors_cross_the_process_boundary(tmp_path, capsys):
    folder = make_submission(tmp_path, "crasher", CRASHING_AGENT, "crasher")
    code, out, verdict = verify(folder, "--k", "4", "--sample-seed", "0", capsys=capsys)
    assert code == 0, out
    failed = [row for row in verdict["cells"] if row["seed"] == 1]
    assert len(failed) == 2 and all(row["rerun_status"] == "failed" and row["agrees"] for row in failed)
    assert all("seed 1 breaks at its 50th step" in row["reason"] for row in failed)


@given(st.lists(st.tuples(st.sampled_from(["bool", "int8", "int64", "uint32", "float32", "float64"]),
                          st.lists(st.integers(0, 3), max_size=3)), max_size=4),
       st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3))
@settings(max_examples=50, deadline=None)
def test_messages_round_trip_plain_arrays_of_any_shape(arrays, meta):
    from memgym.leaderboard.submissions.isolation import decode, encode

    sent = {f"a{i}": np.arange(int(np.prod(shape)), dtype=np.int64).astype(dtype).reshape(shape)
            for i, (dtype, shape) in enumerate(arrays)}
    got_meta, got = decode(encode(meta, sent))
    assert got_meta == meta and list(got) == list(sent)
    for name, value in sent.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape  # 0-d stays 0-d
        assert np.array_equal(got[name], value) and got[name].flags.writeable


def test_messages_refuse_objects_and_bytes_no_array_accounts_for():
    from memgym.leaderboard.submissions.isolation import decode, encode

    with pytest.raises(TypeError, match="array of Python objects"):
        encode({}, {"x": np.array([object()])})
    data = encode({"op": "act"}, {"x": np.zeros(3)})
    with pytest.raises(ValueError, match="no array accounts for"):
        decode(data + b"\0")
    with pytest.raises(ValueError, match="runs past"):
        decode(data[:-1])
    for forged in (data.replace(b'"<f8"', b'"|O8"'), data.replace(b'"<f8"', b'"no such dtype"'), b"\0",
                   b"\0\0\0\2[]", data.replace(b'[3]', b'[-3]'), data.replace(b'[3]', b'["3"]')):
        with pytest.raises(ValueError):  # whatever the agent's process sends, the verifier reads it or refuses it
            decode(forged)


def test_the_board_leaves_off_a_submission_it_cannot_check_and_says_why(honest, capsys):
    broken = copy(honest, "unreadable-metadata")
    (broken / "submission.json").write_text("{not json")
    incomplete = copy(honest, "missing-cell")
    (incomplete / "results" / "random_walker_factory" / "L3" / "seed0.json").unlink()
    assert main(["leaderboard", "show", "--submissions", str(honest.parent)]) == 0
    captured = capsys.readouterr()
    assert "`submissions/random-agent`" in captured.out
    assert "unreadable-metadata" not in captured.out and "missing-cell`" not in captured.out
    assert "left off the board" in captured.err and "submission.json cannot be read" in captured.err
    assert "submission missing-cell: planned cells without a result: L=3 seed 0" in captured.err
    shutil.rmtree(broken)
    shutil.rmtree(incomplete)


def test_a_submission_named_like_a_reference_agent_leaves_its_row_alone(honest, tmp_path, capsys):
    folder = tmp_path / "named" / "submissions" / "a2c-cpu-gru"
    shutil.copytree(honest, folder, ignore=shutil.ignore_patterns("verification.json"))
    meta = json.loads((folder / "submission.json").read_text())
    (folder / "submission.json").write_text(json.dumps(dict(meta, name="a2c-cpu-gru")))
    reference = Path(__file__).resolve().parents[2] / "docs" / "leaderboard" / "tmaze-cpu"
    assert main(["leaderboard", "show", "--results", str(reference), "--submissions", str(folder.parent)]) == 0
    board = capsys.readouterr().out
    published = [entry["agent"] for entry in json.loads((reference / "board.json").read_text())["entries"]]
    rank = published.index("a2c-cpu-gru") + 1  # the reference row keeps its place and its numbers
    assert f"| {rank} | `a2c-cpu-gru` | 0.97 [0.91, 1.00] | 15/15 |" in board
    assert board.count("| reference |") == len(published)
    assert "| — | `submissions/a2c-cpu-gru` |" in board and "| not verified |" in board


def test_the_digest_tells_apart_files_whose_bytes_only_moved_between_them(honest):
    moved = copy(honest, "moved-bytes")
    sub = submission.load(moved)
    carrier, target = moved / "results" / "carrier.x", moved / "results" / "random_walker_factory" / "L2" / "x.json"
    carrier.write_bytes(b"pad\0results/random_walker_factory/L2/x.json\0forged")
    before = submission.digest(sub)
    carrier.write_bytes(b"pad")
    target.write_bytes(b"forged")
    assert submission.digest(sub) != before
    shutil.rmtree(moved)


@pytest.mark.slow(seconds=16)
def test_a_small_edit_on_every_cell_is_caught_pooled_and_exact_ignores_the_claimed_backend(honest, capsys):
    """+26 successes of 256 episodes (+0.10) on every stored evaluation score of records that claim another
    machine (so compared statistically) lies within each cell's tolerance (about 0.13) but not within the pooled
    one; `--exact` compares exactly whatever the provenance claims."""
    inflated = copy(honest, "inflated")
    for path in (inflated / "results" / "random_walker_factory").rglob("seed*.json"):
        record = json.loads(path.read_text())
        record["eval"]["success_rate"] += 26 / 256
        record["provenance"]["cpu"] = "another CPU (claimed)"
        record["provenance"]["backend"]["fingerprint"] = "another machine"
        path.write_text(json.dumps(record))
    code, out, verdict = verify(inflated, "--k", "4", "--sample-seed", "0", capsys=capsys)
    assert code == 1 and verdict["verdict"] == "mismatch" and verdict["agreeing"] == 4
    assert verdict["pooled"]["mean_excess"] == pytest.approx(26 / 256) and not verdict["pooled"]["agrees"]
    assert "stored scores exceed their re-runs by +0.102 on average" in out
    code, out, verdict = verify(inflated, "--k", "1", "--exact", capsys=capsys)
    assert code == 1 and verdict["cells"][0]["rule"] == "exact (--exact)" and not verdict["cells"][0]["agrees"]


TAMPERING_AGENT = RANDOM_AGENT + """
import os
import pathlib


class Tampering(Agent):
    def act(self, obs, start):
        print("hello from the agent")
        if os.environ.get("MEMGYM_TAMPER"):  # set only for the verification: its records are rewritten during it
            for path in pathlib.Path("..", "results").rglob("seed*.json"):
                path.write_text(path.read_text().replace('"success_rate": 0', '"success_rate": 1'))
        return super().act(obs, start)


def factory(context):
    return Tampering(context)
"""


@pytest.mark.slow
def test_files_changed_during_the_verification_make_it_malformed_and_the_agent_output_is_marked(
        tmp_path, capfd, monkeypatch):
    folder = make_submission(tmp_path, "tamperer", TAMPERING_AGENT, "tamperer")
    records = {p: p.read_bytes() for p in (folder / "results").rglob("*.json")}
    monkeypatch.setenv("MEMGYM_TAMPER", "1")
    # sandboxed, the agent sees only its own code: the records stay as they were and the verdict stands
    assert main(["leaderboard", "verify", str(folder), "--k", "1"]) == 0
    assert {p: p.read_bytes() for p in (folder / "results").rglob("*.json")} == records
    capfd.readouterr()
    # run as the verifier's own user (asked for by name), it rewrites them: the verification notices
    assert main(["leaderboard", "verify", str(folder), "--k", "1", "--unsandboxed"]) == 1
    out, err = capfd.readouterr()
    verdict = json.loads((folder / "verification.json").read_text())
    assert verdict["verdict"] == "malformed"
    assert "the submission's files changed while it was being verified" in verdict["problems"][0]
    assert "  agent | hello from the agent" in err and "\nhello from the agent" not in err


def test_invalid_action_types_are_named():
    import gymnasium as gym

    from memgym.leaderboard.running.any_tier import CellFailure, checked_actions

    four = gym.spaces.Discrete(4)
    with pytest.raises(CellFailure, match="act returned bool actions"):
        checked_actions(np.ones(2, bool), 2, four)
    with pytest.raises(CellFailure, match="act returned complex128 actions"):
        checked_actions(np.array([1 + 1j, 2]), 2, four)
    # the JAX tier's rule (valid_action): a whole float is its integer, a fraction or NaN is invalid
    assert checked_actions(np.array([0.0, 3.0]), 2, four).tolist() == [0, 3]
    with pytest.raises(CellFailure, match=r"act returned NaN actions \[nan, 1.0\]"):
        checked_actions(np.array([np.nan, 1]), 2, four)
    for bad in ([0.5, 1], [0, 4], [-1, 0]):
        with pytest.raises(CellFailure, match=r"act returned invalid actions .*the action space is Discrete\(4\)"):
            checked_actions(np.array(bad), 2, four)
    assert checked_actions([0, 3], 2, four).dtype == np.int64 and checked_actions(np.uint8([1, 2]), 2, four).tolist() == [1, 2]


def test_actions_in_multidiscrete_and_box_spaces_are_checked_as_the_jax_tier_checks_them():
    """Battleship's and MineSweeper's cells (``MultiDiscrete``) and the Pendulums' torque (``Box``) reach the
    any-framework tier's env; each action is held to :func:`~memgym.envs.functional.valid_action`'s rule."""
    import gymnasium as gym
    import jax.numpy as jnp

    from memgym.envs.functional import MultiDiscrete, valid_action
    from memgym.leaderboard.running.any_tier import CellFailure, checked_actions
    from gymnax.environments import spaces

    cells, torque = gym.spaces.MultiDiscrete([8, 8]), gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    twins = {id(cells): MultiDiscrete(np.array([8, 8])), id(torque): spaces.Box(-2.0, 2.0, (1,), jnp.float32)}
    cases = [(cells, [[7, 0], [0, 7]], True), (cells, [[8, 0], [0, 0]], False), (cells, [[1.5, 0], [0, 0]], False),
             (torque, [[2.0], [-2.0]], True), (torque, [[2.5], [0.0]], False), (torque, [[-2.01], [0.0]], False)]
    for space, actions, valid in cases:
        assert all(bool(valid_action(twins[id(space)], jnp.asarray(a))) for a in actions) == valid, (space, actions)
        if valid:
            assert checked_actions(np.array(actions), 2, space).shape == (2, *space.shape)
        else:
            with pytest.raises(CellFailure, match="act returned invalid actions"):
                checked_actions(np.array(actions), 2, space)
    with pytest.raises(CellFailure, match=r"expected shape \(2, 2\)"):
        checked_actions(np.array([1, 2]), 2, cells)
