"""memax's models inside memgym (:class:`memgym.memory.memax.Memax`) and memgym's models in memax's
convention (:class:`memgym.memory.memax.MemaxConvention`).

For DeltaNet, GDN, S6 and MGU through ``Memax``: reset isolation (an episode in a tape gets the
outputs it gets alone), streaming == whole tape, the carry round-trips across any split, gradients
reach every memax parameter, and memory flows within an episode but never across a start. Then
the name handling (aliases, unknown and refused names, ``memax:NAME``, presets) and AReLiT called
through the memax convention == memgym's own ``apply``.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("memax")
pytest.importorskip("equinox")

from memgym import memory  # noqa: E402
from memgym.agents.config import MEMORY_PRESETS, resolve_memory  # noqa: E402
from memgym.memory import memax as memax_lib  # noqa: E402

NAMES = ["DeltaNet", "GDN", "S6", "MGU"]
IN, T = 5, 16  # input features and length of the test tapes
TOL = dict(atol=5e-5, rtol=5e-5)


class Built:
    """A ``Memax`` model (2 layers, hidden 16, output 8), its parameters and a jitted ``apply``."""

    def __init__(self, name: str):
        self.model = memory.make("memax", model=name, features=8, hidden=16, num_layers=2)
        self.params = self.model.init(jax.random.key(0), jnp.zeros((T, IN)), jnp.zeros(T, bool), self.fresh())
        self.apply = jax.jit(self.model.apply)

    def fresh(self):
        return self.model.initialize_carry()

    def __call__(self, x, start, carry=None):
        return self.apply(self.params, x, start, self.fresh() if carry is None else carry)


# DeltaNet's build compiles for 18 s on the 2-core CPU: its cases run in the slow tier, the others in the fast one
@pytest.fixture(scope="module", params=[pytest.param(name, marks=pytest.mark.slow(seconds=18)) if name == "DeltaNet"
                                        else name for name in NAMES])
def built(request) -> Built:
    return Built(request.param)


def tape(seed: int, start: list[bool] | None = None, length: int = T):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(length, IN)).astype(np.float32)
    start = np.zeros(length, bool) if start is None else np.asarray(start, bool)
    start[0] = True
    return jnp.asarray(x), jnp.asarray(start)


def assert_trees_close(a, b, **tol):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for left, right in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(left), np.asarray(right), **tol)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16), start=st.lists(st.booleans(), min_size=T, max_size=T))
@pytest.mark.slow
def test_an_episode_in_a_tape_gets_the_outputs_it_gets_alone(built, seed, start):
    x, start = tape(seed, start)
    y, _ = built(x, start)
    bounds = [*np.flatnonzero(np.asarray(start)), T]
    junk = np.random.default_rng(seed + 1).normal(size=(T, IN)).astype(np.float32)
    for first, end in zip(bounds[:-1], bounds[1:]):
        # The episode alone from a fresh carry, padded to length T with other data (one compiled shape;
        # a model that let later steps leak into earlier ones would see the padding, not the tape).
        alone = jnp.concatenate([x[first:end], junk[: T - (end - first)]])
        y_alone, _ = built(alone, jnp.zeros(T, bool).at[0].set(True))
        np.testing.assert_allclose(y_alone[: end - first], y[first:end], **TOL, err_msg=f"episode [{first}, {end})")


def test_streaming_one_step_at_a_time_equals_the_whole_tape(built):
    x, start = tape(1, [t in (6, 7, 12) for t in range(T)])
    y, carry = built(x, start)
    step_carry, ys = built.fresh(), []
    for t in range(T):
        y_t, step_carry = built(x[t : t + 1], start[t : t + 1], step_carry)
        ys.append(y_t)
    np.testing.assert_allclose(jnp.concatenate(ys), y, **TOL)
    assert_trees_close(step_carry, carry, **TOL)


@settings(max_examples=5, deadline=None)
@given(split=st.integers(1, T - 1))
@pytest.mark.slow
def test_the_carry_round_trips_across_a_split(built, split):
    x, start = tape(2, [t in (5, 11) for t in range(T)])
    y, carry = built(x, start)
    y_first, middle = built(x[:split], start[:split])
    y_second, end = built(x[split:], start[split:], middle)
    np.testing.assert_allclose(jnp.concatenate([y_first, y_second]), y, **TOL)
    assert_trees_close(end, carry, **TOL)


def test_the_carry_is_memax_state_and_does_not_depend_on_the_input_width(built):
    fresh = built.fresh()
    assert len(fresh) == 2  # one state per layer
    for width in (3, IN):
        x, start = tape(3, length=4)
        x = x[:, :width]
        params = built.model.init(jax.random.key(1), x, start, fresh)
        _, carry = built.model.apply(params, x, start, fresh)
        assert jax.tree.structure(carry) == jax.tree.structure(fresh)
        assert [(a.shape, a.dtype) for a in jax.tree.leaves(carry)] == [(a.shape, a.dtype) for a in jax.tree.leaves(fresh)]


@pytest.mark.slow
def test_gradients_reach_every_memax_parameter(built):
    x, start = tape(4, [t == 9 for t in range(T)])
    grads = jax.grad(lambda p: jnp.sum(jnp.square(built.model.apply(p, x, start, built.fresh())[0])))(built.params)
    leaves = jax.tree_util.tree_flatten_with_path(grads)[0]
    assert len(leaves) == len(built.params["params"]["weights"]) > 0
    for path, grad in leaves:
        assert np.all(np.isfinite(grad)), jax.tree_util.keystr(path)
        assert np.any(grad != 0), f"no gradient reaches {jax.tree_util.keystr(path)}"


@pytest.mark.slow
def test_memory_flows_within_an_episode_and_never_across_a_start(built):
    x, start = tape(5)

    def last_output_wrt_first_input(start):
        return jax.jacobian(lambda x: built.model.apply(built.params, x, start, built.fresh())[0][-1])(x)[:, 0]

    assert np.abs(last_output_wrt_first_input(start)).max() > 1e-6  # one episode: x[0] reaches y[-1]
    assert np.all(last_output_wrt_first_input(start.at[8].set(True)) == 0)  # a start in between cuts it


@pytest.mark.parametrize("alias, name", [("gdn", "GDN"), ("deltanet", "DeltaNet"), ("Delta_Net", "DeltaNet"),
                                         ("s6", "S6"), ("mgu", "MGU"), ("deltaproduct", "DeltaProduct"),
                                         ("attention-rope", "Attention-RoPE")])
def test_names_match_ignoring_case_dashes_and_underscores(alias, name):
    assert memax_lib.canonical_name(alias) == name


def test_an_unknown_name_lists_the_available_ones():
    available = memax_lib.available_models()
    assert {"DeltaNet", "DeltaProduct", "GDN", "S6", "MGU", "LSTM", "Spherical"} <= set(available)
    with pytest.raises(ValueError, match=r"model='deltanett' is not a memax model; available: Attention, ") as error:
        memory.make("memax:deltanett", features=8).initialize_carry()
    listed = str(error.value).split("available: ")[1].split(", ")
    assert listed == [name for name in available if name not in memax_lib.REFUSED]


def test_a_model_that_breaks_the_contract_is_refused_with_the_reason():
    for model in ("Spherical", "spherical"):
        with pytest.raises(ValueError, match=r"Spherical breaks memgym's memory-model contract: its initial recurrent "
                                             r"state .* trainable parameter"):
            memory.make("memax", model=model, features=8).initialize_carry()


def test_bad_options_are_named():
    with pytest.raises(ValueError, match="features must be a positive integer, got features=0"):
        memory.make("memax:gdn", features=0).initialize_carry()
    with pytest.raises(ValueError, match=r"hidden must be None \(features\) or a positive integer, got hidden=-4"):
        memory.make("memax:gdn", features=8, hidden=-4).initialize_carry()
    with pytest.raises(ValueError, match=r"needs option\(s\) \['model'\]"):
        memory.make("memax", features=8)
    with pytest.raises(ValueError, match=r"option\(s\) \['model'\] given both in the name and as keyword"):
        memory.make("memax:gdn", model="s6", features=8)


@pytest.mark.slow
def test_x_of_another_width_than_at_init_is_reported():
    built = Built("GDN")
    x, start = tape(6)
    with pytest.raises(ValueError, match=r"x has 4 features \(x.shape = \(16, 4\)\) but memax.s GDN was initialised for 5"):
        built.model.apply(built.params, x[:, :4], start, built.fresh())


def test_every_option_is_documented():
    from memgym.memory.options import option_descriptions, options

    assert set(options(memax_lib.Memax)) == {"model", "features", "hidden", "num_layers"}
    assert set(option_descriptions(memax_lib.Memax)) >= set(options(memax_lib.Memax))


def test_the_memax_prefix_and_the_presets_resolve():
    model = memory.make("memax:gdn", features=32)
    assert isinstance(model, memax_lib.Memax) and (model.model, model.features) == ("gdn", 32)
    with pytest.raises(ValueError, match=r"needs option\(s\) \['features'\].*--memory-config"):
        resolve_memory("memax:gdn")  # a model, not a preset: its width must be given
    with pytest.raises(ValueError, match="not a memax model"):
        resolve_memory("memax:foo", {"features": 16})
    assert resolve_memory("memax:s6", {"features": 16}) == ("memax", {"model": "s6", "features": 16})
    for preset, name in [("tiny-deltanet", "DeltaNet"), ("tiny-gdn", "GDN"), ("tiny-s6", "S6"), ("tiny-mgu", "MGU")]:
        assert MEMORY_PRESETS[preset][0] == "memax"
        resolved, config = resolve_memory(preset)
        assert memax_lib.canonical_name(memory.make(resolved, **config).model) == name


def test_a_missing_memax_names_the_extra(monkeypatch):
    for module in ("memax", "memax.equinox", "memax.equinox.train_utils"):
        monkeypatch.setitem(sys.modules, module, None)  # makes `import memax...` fail
    with pytest.raises(ImportError, match=r'pip install "memgym\[memax\]"'):
        memax_lib._import_memax()


@pytest.mark.slow
def test_arelit_through_the_memax_convention_equals_its_own_apply():
    model = memory.make("arelit", features=16, num_layers=1, num_heads=2, head_dim=8, eta=2, r=1)
    x, start = tape(7, [t in (4, 5, 10) for t in range(T)])
    params = model.init(jax.random.key(2), x, start, model.initialize_carry())
    y, carry = jax.jit(model.apply)(params, x, start, model.initialize_carry())

    wrapped = memax_lib.MemaxConvention(model, params)
    hs, y_memax = jax.jit(lambda w, h, x, s: w(h, (x, s)))(wrapped, wrapped.initialize_carry(), x, start)
    np.testing.assert_allclose(y_memax, y, atol=1e-6, rtol=1e-6)
    assert all(leaf.shape[0] == 1 for leaf in jax.tree.leaves(hs))  # the final carry with a time axis of 1
    assert_trees_close(wrapped.latest_recurrent_state(hs), carry, atol=1e-6, rtol=1e-6)

    # Passing memax's latest state on continues the tape.
    hs_first, y_first = wrapped(wrapped.initialize_carry(), (x[:7], start[:7]))
    hs_second, y_second = wrapped(wrapped.latest_recurrent_state(hs_first), (x[7:], start[7:]))
    np.testing.assert_allclose(jnp.concatenate([y_first, y_second]), y, **TOL)
    assert_trees_close(wrapped.latest_recurrent_state(hs_second), carry, **TOL)


@pytest.mark.slow
def test_memax_reference_agents_are_on_the_board_and_pass_the_check(capsys):
    """From the user's side: `memgym leaderboard list` shows the memax agents, and `check` passes one."""
    from memgym.cli import main

    assert main(["leaderboard", "list"]) == 0
    listed = capsys.readouterr().out
    for name in ("a2c-tiny-deltanet", "a2c-tiny-gdn", "a2c-tiny-s6", "a2c-tiny-mgu"):
        assert name in listed
    assert main(["leaderboard", "check", "a2c-tiny-deltanet", "--steps", "256"]) == 0, capsys.readouterr().out
