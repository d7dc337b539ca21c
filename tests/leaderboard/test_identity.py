"""An agent's version changes when what it computes changes, and only then (code_identity.computation_sha256).

The JAX tier's identity is the canonical jaxprs the harness runs (``train`` and the evaluation, on the track's
environment) with their constants. These tests take a submission written from scratch (examples/jax_agent.py),
copied into packages that differ by one edit, and memgym's own reference agent with one module constant
patched, and check both directions: a moved function, a renamed helper (a method, a jitted function), an added
docstring and an added warning leave the hash as it is; a changed default learning rate, a changed initializer
gain and a changed T-Maze reward change it. Then a run resumes into a store whose records were made by code
that moved (the same version), and refuses one whose records were made by code that computes otherwise.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import warnings
from pathlib import Path

import pytest

from memgym.leaderboard.running import jax_tier
from memgym.leaderboard.running.code_identity import COMPUTATION, computation_sha256
from memgym.leaderboard.running.runner import run
from memgym.leaderboard.tracks import TMAZE, Preset

ROOT = Path(__file__).parents[2]
SOURCE = (ROOT / "examples" / "jax_agent.py").read_text()
SMOKE = TMAZE.presets["smoke"]
# A jitted helper in the agent (its name is printed in the jaxpr: ``jit[name=…]``), called in the loss.
HELPER = '''

@jax.jit
def _mean_square(x):
    return (x ** 2).mean()
'''


def with_helper(source: str, name: str = "_mean_square") -> str:
    source = source.replace("\n\nclass A2CAgent:", HELPER.replace("_mean_square", name) + "\n\nclass A2CAgent:")
    return source.replace("value_loss = ((jnp.swapaxes(returns, 0, 1) - values) ** 2).mean()",
                          f"value_loss = {name}(jnp.swapaxes(returns, 0, 1) - values)")


def moved(source: str) -> str:
    """``gae`` moved from above the agent's class to the end of the module."""
    start, end = source.index("def gae("), source.index("class A2CAgent:")
    return source[:start] + source[end:] + "\n\n" + source[start:end]


def renamed_method(source: str) -> str:
    return source.replace("self._apply(", "self._streams(").replace("def _apply(", "def _streams(")


def documented_and_warned(source: str) -> str:
    """A docstring added to the loss, and a warning that ``train`` gives (while it is traced)."""
    source = source.replace("    def _loss(self, params, start_carry, tape, advantages, returns):\n",
                            "    def _loss(self, params, start_carry, tape, advantages, returns):\n"
                            '        """The A2C loss: policy gradient, value regression, entropy bonus."""\n')
    source = source.replace('        n, t = self.num_envs, self.rollout\n',
                            '        n, t = self.num_envs, self.rollout\n'
                            '        warnings.warn("a budget shorter than one rollout trains one update")\n', 1)
    return source.replace("from __future__ import annotations\n", "from __future__ import annotations\n\nimport warnings\n")


def learning_rate(source: str) -> str:
    return source.replace("learning_rate=3e-3", "learning_rate=1e-3")


def policy_gain(source: str) -> str:
    """The policy head's kernel initialised orthogonally with gain 0.01 instead of flax's default."""
    return source.replace("logits = nn.Dense(self.num_actions)(",
                          "logits = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))(")


PACKAGES = itertools.count()


@pytest.fixture
def agent_package(tmp_path, monkeypatch):
    """``write(source) -> spec``: the submission's module, as a package of its own, importable by the harness."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:  # a name never imported before in this process (sys.modules keeps modules)
        package = tmp_path / f"submitted_{next(PACKAGES)}"
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "agent.py").write_text(source)
        return f"{package.name}.agent:factory"

    return write


def computation(spec: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the added warning
        return jax_tier.computation(spec, TMAZE, SMOKE)


def test_the_hash_reads_the_computation_and_not_the_names():
    import jax
    import jax.numpy as jnp
    import numpy as np

    def helper(x):
        return jnp.tanh(x) * 2.0

    renamed = jax.jit(lambda x: jnp.tanh(x) * 2.0)
    weights = np.arange(6.0, dtype=np.float32).reshape(2, 3)

    def f(h):
        return lambda x: h(x @ jnp.asarray(weights)).sum()

    x = jnp.ones((4, 2))
    same = {computation_sha256(jax.make_jaxpr(f(jax.jit(helper)))(x)), computation_sha256(jax.make_jaxpr(f(renamed))(x))}
    assert len(same) == 1
    weights[0, 0] = 7.0  # a closed-over array's value is part of what is computed
    assert computation_sha256(jax.make_jaxpr(f(renamed))(x)) not in same

    def first_sine(x):  # two independent terms, written in either order, and a value computed but never used
        a = jnp.sin(x)
        b = jnp.cos(x) * 3.0
        return a + b

    def first_cosine(x):
        b = jnp.cos(x) * 3.0
        unused = jnp.exp(x)  # noqa: F841
        a = jnp.sin(x)
        return a + b

    def other_factor(x):
        return jnp.sin(x) + jnp.cos(x) * 4.0

    hashes = [computation_sha256(jax.make_jaxpr(g)(x)) for g in (first_sine, first_cosine, other_factor)]
    assert hashes[0] == hashes[1] != hashes[2]


@pytest.mark.slow(seconds=40)
def test_code_that_moves_is_the_same_agent_and_code_that_computes_otherwise_is_not(agent_package):
    base = computation(agent_package(with_helper(SOURCE)))
    unchanged = {
        "a moved function": moved(with_helper(SOURCE)),
        "a renamed private method": renamed_method(with_helper(SOURCE)),
        "a renamed jitted helper": with_helper(SOURCE, "_squared_mean"),
        "an added docstring and warning": documented_and_warned(with_helper(SOURCE)),
    }
    changed = {
        "a changed default learning rate": learning_rate(with_helper(SOURCE)),
        "a changed initializer gain": policy_gain(with_helper(SOURCE)),
    }
    for what, source in unchanged.items():
        assert computation(agent_package(source)) == base, what
    hashes = {what: computation(agent_package(source)) for what, source in changed.items()}
    assert base not in hashes.values() and len(set(hashes.values())) == len(hashes), hashes


@pytest.mark.slow(seconds=25)
def test_the_reference_agents_computation_moves_with_an_initializer_gain_and_the_tmaze_reward(monkeypatch):
    """memgym's own agent: a hidden layer's orthogonal gain and the T-Maze's success reward are module constants
    read while tracing; changing either changes the identity, though no config field holds them."""
    from memgym.agents import networks
    from memgym.envs import tmaze
    from memgym.memory.initializers import HIDDEN_GAIN, orthogonal

    base = computation("a2c-tiny-gru")
    assert computation("a2c-tiny-gru") == base
    with monkeypatch.context() as patch:
        patch.setattr(networks, "HIDDEN", orthogonal(HIDDEN_GAIN / 2))  # the hidden layers' gain: sqrt(2)/2
        gain = computation("a2c-tiny-gru")
    with monkeypatch.context() as patch:
        patch.setattr(tmaze, "SUCCESS_REWARD", 5.0)
        reward = computation("a2c-tiny-gru")
    assert len({base, gain, reward}) == 3


def test_the_worked_submissions_records_are_of_what_the_reference_agent_computes_now():
    """The worked example stays current through any refactor that keeps what the agent computes: its records'
    computation hash is the reference agent's now (a change here is a change of what a2c-tiny-gru computes)."""
    records = [json.loads(path.read_text()) for path in
               sorted((ROOT / "submissions" / "a2c-tiny-gru-smoke" / "results").glob("*/*/seed*.json"))]
    assert len(records) == 6 and {r["agent_info"][COMPUTATION] for r in records} == {computation("a2c-tiny-gru")}


@pytest.mark.slow(seconds=90)
def test_a_run_resumes_across_a_refactor_and_refuses_a_changed_computation(agent_package, tmp_path):
    """Records of code that has since moved are the same version (no cell re-runs); records whose code computes
    otherwise stop the run, which names what changed. A value added to the budget's grid trains as the same version
beside the moved code's records. The store's records are edited as an older version of the
    code would have written them: another code hash, the same computation."""
    budget = Preset("tiny", values=(4,), seeds=1, total_steps=2_048, train_window=1_024, eval_episodes=8,
                    max_episode_steps=16)
    spec = agent_package(SOURCE)
    results = tmp_path / "results"
    run([spec], budget, results, log=lambda line: None, policies=False)
    (path,) = results.glob("*/*/seed0.json")
    record = json.loads(path.read_text())
    assert record["agent_info"][COMPUTATION] == jax_tier.computation(spec, TMAZE, budget)
    record["agent_info"]["code_sha256"] = "0" * 64  # made by code that has since moved
    path.write_text(json.dumps(record))
    lines = []
    run([spec], budget, results, log=lines.append, policies=False)
    assert any("its seed stored, skipping" in line for line in lines), lines
    run([spec], dataclasses.replace(budget, values=(4, 6)), results, log=lambda line: None, policies=False)
    added = json.loads(next(results.glob("*/L6/seed0.json")).read_text())  # the grid gained a value: same version
    assert added["version"] == 1 and added["agent_info"][COMPUTATION] == record["agent_info"][COMPUTATION]
    record["agent_info"][COMPUTATION] = "1" * 64  # made by code that computed otherwise
    path.write_text(json.dumps(record))
    with pytest.raises(ValueError, match=re.escape("what it computes changed (computation sha256 1111111111111111…")):
        run([spec], budget, results, log=lambda line: None, policies=False)


@pytest.mark.slow(seconds=12)
def test_stamp_adds_the_computation_to_records_made_before_it_and_leaves_other_code_alone(tmp_path, capsys):
    """`memgym leaderboard stamp`, as a user with a store from memgym 0.1 runs it: records of the installed code
    get its computation hash, nothing else in them changes; a record of other code is named and left as it is."""
    import shutil

    from memgym.cli import main

    from memgym.leaderboard.running.code_identity import describe_code
    from memgym.leaderboard.protocol import load_factory

    results = tmp_path / "results"
    shutil.copytree(ROOT / "submissions" / "a2c-tiny-gru-smoke" / "results", results)
    paths = sorted(results.glob("*/*/seed*.json"))
    installed = describe_code("a2c-tiny-gru", load_factory("a2c-tiny-gru"))  # records made by the installed code
    before = {}
    for path in paths:
        record = json.loads(path.read_text())
        info = {k: v for k, v in record["agent_info"].items() if k != COMPUTATION}
        before[path] = dict(record, agent_info=info | {k: installed[k] for k in ("code_sha256", "code_modules")})
        path.write_text(json.dumps(before[path], indent=2, sort_keys=True))
    other = json.loads(paths[0].read_text())
    other["agent_info"]["code_sha256"] = "0" * 64  # made by other code
    paths[0].write_text(json.dumps(other, indent=2, sort_keys=True))
    assert main(["leaderboard", "stamp", "--results", str(results)]) == 0
    printed = capsys.readouterr().out
    assert "5 records stamped with what their agent computes, 0 already were, 1 of other code" in printed, printed
    assert f"{paths[0]}: made by other code" in printed
    assert COMPUTATION not in json.loads(paths[0].read_text())["agent_info"]
    expected = computation("a2c-tiny-gru")
    for path in paths[1:]:
        record = json.loads(path.read_text())
        assert record["agent_info"].pop(COMPUTATION) == expected and record == before[path]
    assert main(["leaderboard", "stamp", "--results", str(results)]) == 0
    assert "0 records stamped with what their agent computes, 5 already were" in capsys.readouterr().out
