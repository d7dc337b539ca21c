"""Laws every memory model obeys (the interface of :mod:`memgym.memory`), for every registered model:

* streaming (T = 1 calls, carry passed along) == one call over the whole tape;
* a tape split in two, carry passed across the split == one call;
* reset isolation: a tape of several episodes gives each episode exactly the
  outputs of running it alone from a fresh carry;
* finite outputs and gradients over a 10k-step tape.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym import memory

IN = 5  # input features of the test tapes
SMALL = {
    "linear_attention": dict(features=16, num_layers=2, num_heads=2, head_dim=8),
    "linear_attention_monoid": dict(features=16, key_size=6, value_size=4),
    "relit": dict(features=16, num_layers=2, num_heads=2, head_dim=8, eta=2),
    "arelit": dict(features=16, num_layers=2, num_heads=2, head_dim=8, eta=2, r=3),
    "s5": dict(features=16, state_size=8),
    "lru": dict(features=16, state_size=8),
    "ffm": dict(features=16, memory_size=8, context_size=4),
    "lstm": dict(features=16),
    "gru": dict(features=16),
    "gtrxl": dict(features=16, num_layers=2, num_heads=2, head_dim=8, memory_size=6),
    "mlp": dict(features=16),  # memoryless: the laws hold trivially (empty carry, no cross-step flow)
    "memax": dict(model="GDN", features=16),  # memax's Gated DeltaNet through the adapter
}
# A model with an option that changes its recurrence, run through the behaviour tests too (name: (model, options)).
VARIANTS = {"relit-convex": ("relit", {**SMALL["relit"], "decay": "convex"}),  # the thesis authors' code's gating
            "arelit-authors": ("arelit", {**SMALL["arelit"], "frequencies": "authors"})}  # ... and their frequencies
# memax's model through the adapter in the slow tier (tests/memory/test_memax.py checks the adapter in the fast one)
WITH_VARIANTS = pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow(seconds=12)) if name == "memax"
                                                 else name for name in sorted(SMALL) + sorted(VARIANTS)])
ATOL = 2e-4


def model_config(name: str) -> tuple[str, dict]:
    """``(registered model, options)`` of a ``SMALL`` or ``VARIANTS`` name."""
    return VARIANTS.get(name, (name, SMALL.get(name, {})))


class Jitted:
    """A model whose ``apply`` is jitted (tests call it on many tape shapes)."""

    def __init__(self, model):
        self.model = model
        self.apply = jax.jit(model.apply)
        self.initialize_carry = model.initialize_carry


@functools.cache
def build(name: str):
    """The model (its ``apply`` jitted) and its parameters, made once per model for the whole module, so that
    every test of a model reuses one compilation per tape shape."""
    model = memory.make(*model_config(name)[:1], **model_config(name)[1])
    x = jnp.zeros((3, IN))
    params = model.init(jax.random.key(0), x, jnp.zeros(3, bool), model.initialize_carry())
    return Jitted(model), params


def random_tape(seed: int, length: int, episode_lengths: list[int] | None = None):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(length, IN)).astype(np.float32)
    start = np.zeros(length, bool)
    start[0] = True
    if episode_lengths:
        np.put(start, np.cumsum(episode_lengths)[:-1], True)
    return jnp.asarray(x), jnp.asarray(start)


def test_registry_knows_every_name_and_rejects_unknown():
    assert set(memory.MODELS) == set(SMALL)
    with pytest.raises(ValueError, match="unknown memory model name 'transformer'"):
        memory.make("transformer")
    with pytest.raises(ValueError, match="unknown option"):
        memory.make("lstm", features=4, bogus=1)


@WITH_VARIANTS
def test_streaming_equals_tape(name):
    model, params = build(name)
    x, start = random_tape(0, 23, [9, 14])
    apply = model.apply
    y_tape, carry_tape = apply(params, x, start, model.initialize_carry())
    assert y_tape.shape == (23, model_config(name)[1]["features"])
    carry = model.initialize_carry()
    steps = []
    for t in range(23):
        y, carry = apply(params, x[t : t + 1], start[t : t + 1], carry)
        steps.append(y[0])
    np.testing.assert_allclose(np.stack(steps), y_tape, atol=ATOL, rtol=1e-3)
    for a, b in zip(jax.tree.leaves(carry), jax.tree.leaves(carry_tape), strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL, rtol=1e-3)


@WITH_VARIANTS
def test_carry_continues_across_calls(name):
    model, params = build(name)
    x, start = random_tape(1, 40, [40])
    whole, _ = model.apply(params, x, start, model.initialize_carry())
    first, carry = model.apply(params, x[:17], start[:17], model.initialize_carry())
    second, _ = model.apply(params, x[17:], start[17:], carry)
    np.testing.assert_allclose(jnp.concatenate([first, second]), whole, atol=ATOL, rtol=1e-3)


@WITH_VARIANTS
def test_reset_isolation(name):
    model, params = build(name)
    lengths = [7, 1, 12, 5, 9]
    x, start = random_tape(2, sum(lengths), lengths)
    # A non-trivial incoming carry: whatever it holds must not leak into the first episode either.
    _, dirty = model.apply(params, *random_tape(3, 8), model.initialize_carry())
    y, _ = model.apply(params, x, start, dirty)
    total, offset = sum(lengths), 0
    for length in lengths:
        # The episode alone from a fresh carry, padded with a later episode to the same tape
        # shape (one compilation; the models are causal, so the padding cannot matter).
        alone_x = jnp.zeros_like(x).at[:length].set(x[offset : offset + length])
        alone_start = jnp.zeros(total, bool).at[0].set(True).at[length % total].set(True)
        alone, _ = model.apply(params, alone_x, alone_start, model.initialize_carry())
        np.testing.assert_allclose(y[offset : offset + length], alone[:length], atol=ATOL, rtol=1e-3)
        offset += length


@pytest.mark.slow(seconds=45)
@WITH_VARIANTS
def test_finite_values_and_gradients_on_a_long_tape(name):
    model, params = build(name)
    x, start = random_tape(4, 10_000, [2_500, 7_500])

    def loss(params):
        y, carry = model.model.apply(params, x, start, model.initialize_carry())
        return jnp.mean(y**2), y

    (value, y), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
    assert np.isfinite(value) and np.all(np.isfinite(y))
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert any(np.any(g != 0) for g in leaves)


@WITH_VARIANTS
def test_vmap_over_a_batch_of_streams(name):
    model, params = build(name)
    xs = jnp.stack([random_tape(s, 11, [11])[0] for s in range(3)])
    starts = jnp.zeros((3, 11), bool).at[:, 0].set(True)
    carries = jax.tree.map(lambda c: jnp.stack([c] * 3), model.initialize_carry())
    ys, _ = jax.vmap(model.model.apply, in_axes=(None, 0, 0, 0))(params, xs, starts, carries)
    for i in range(3):
        alone, _ = model.apply(params, xs[i], starts[i], model.initialize_carry())
        np.testing.assert_allclose(ys[i], alone, atol=ATOL, rtol=1e-3)


# --- bad input: a ValueError that names the argument ------------------------------------------


@pytest.mark.parametrize("name", sorted(SMALL))
def test_bad_features_rejected(name):
    with pytest.raises(ValueError, match="features=0"):
        memory.make(name, **{**SMALL[name], "features": 0}).initialize_carry()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_bad_tape_shapes_rejected(name):
    model, params = build(name)
    carry = model.initialize_carry()
    with pytest.raises(ValueError, match=r"start must have shape \[T\] = \(4,\)"):
        model.model.apply(params, jnp.zeros((4, IN)), jnp.zeros(3, bool), carry)
    with pytest.raises(ValueError, match="x must be a 2-D tape"):
        model.model.apply(params, jnp.zeros(IN), jnp.zeros(1, bool), carry)


@pytest.mark.parametrize(
    "name, option, value",
    [("relit", "eta", 0), ("arelit", "eta", 0), ("arelit", "r", 0), ("gtrxl", "memory_size", 0),
     ("linear_attention", "num_heads", -1), ("s5", "state_size", 0), ("ffm", "context_size", 0),
     ("linear_attention_monoid", "key_size", 0)],
)
def test_bad_sizes_rejected(name, option, value):
    model = memory.make(name, **{**SMALL[name], option: value})
    with pytest.raises(ValueError, match=f"{option}={value}"):
        model.init(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(2, bool), model.initialize_carry())


@pytest.mark.parametrize("name", ["linear_attention", "relit", "arelit", "gtrxl"])
def test_heads_must_divide_width_when_head_dim_is_derived(name):
    config = {**SMALL[name], "features": 18, "num_heads": 4, "head_dim": None}
    with pytest.raises(ValueError, match="num_heads=4 must divide features=18"):
        memory.make(name, **config).initialize_carry()
    config["features"] = 16
    model = memory.make(name, **config)  # 4 heads of 4
    y, _ = model.apply(
        model.init(jax.random.key(0), jnp.zeros((2, IN)), jnp.zeros(2, bool), model.initialize_carry()),
        jnp.ones((2, IN)), jnp.ones(2, bool), model.initialize_carry(),
    )
    assert y.shape == (2, 16)


@pytest.mark.parametrize(
    "option, value, allowed",
    [("r_min", -0.1, r"\[0, 0\.99\)"), ("r_min", 0.99, r"\[0, 0\.99\)"), ("r_max", 1.0, r"\(0, 1\)"),
     ("r_max", float("nan"), r"\(0, 1\)"), ("max_phase", 0.0, r"\(0, inf\]"), ("max_phase", True, r"\(0, inf\]")],
)
def test_lru_ring_options_are_checked(option, value, allowed):
    """LRU's ring ``0 <= r_min < r_max < 1`` and ``max_phase > 0``: the bad option, its value and its range are named."""
    with pytest.raises(ValueError, match=rf"^{option} must be a number in {allowed}, got {option}={value!r}$"):
        memory.make("lru", **{**SMALL["lru"], option: value}).initialize_carry()


# Positive-integer options of the registered models (a model is tested on the ones it has).
SIZE_OPTIONS = (
    "features", "num_layers", "num_heads", "head_dim", "eta", "r",
    "state_size", "memory_size", "context_size", "ff_size", "chunk_size", "key_size", "value_size",
)
SIZE_CASES = [
    (name, option)
    for name in sorted(SMALL)
    for option in SIZE_OPTIONS
    if option in memory.model_class(name).__dataclass_fields__
]


@pytest.mark.parametrize("value", [0, -1, 2.5, True], ids=["zero", "negative", "float", "bool"])
@pytest.mark.parametrize("name, option", SIZE_CASES, ids=[f"{n}-{o}" for n, o in SIZE_CASES])
def test_every_size_option_rejects_non_positive_integers(name, option, value):
    """Sizes below 1 (r < 1, η < 1, no heads, …) or not integers fail before any parameter exists,
    with a message naming the option and the value given."""
    model = memory.make(name, **{**SMALL[name], option: value})
    with pytest.raises(ValueError, match=rf"{option}={value!r}\b"):
        model.initialize_carry()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_input_width_must_match_the_initialised_width(name):
    """``x`` with another feature width than at ``init`` is named, with both widths, on every call path."""
    model, params = build(name)
    message = rf"x has {IN + 2} features .* initialised for {IN}\b"
    carry = model.initialize_carry()
    for length in (1, 4):  # a streaming step and a tape
        x, start = jnp.zeros((length, IN + 2)), jnp.zeros(length, bool)
        with pytest.raises(ValueError, match=message):
            model.model.apply(params, x, start, carry)
        with pytest.raises(ValueError, match=message):
            model.apply(params, x, start, carry)  # jitted: checked while tracing
    batch = jnp.zeros((3, 4, IN + 2)), jnp.zeros((3, 4), bool)
    carries = jax.tree.map(lambda c: jnp.stack([c] * 3), carry)
    with pytest.raises(ValueError, match=message):
        jax.vmap(model.model.apply, in_axes=(None, 0, 0, 0))(params, *batch, carries)
    # The width it was initialised for still works, and so does init with another width.
    y, _ = model.apply(params, jnp.zeros((4, IN)), jnp.zeros(4, bool), carry)
    assert y.shape == (4, SMALL[name]["features"])
    wide = model.model.init(jax.random.key(0), jnp.zeros((2, IN + 2)), jnp.zeros(2, bool), carry)
    y, _ = model.model.apply(wide, jnp.zeros((2, IN + 2)), jnp.zeros(2, bool), carry)
    assert y.shape == (2, SMALL[name]["features"])


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("x_rows, start_rows", [(4, 3), (3, 4), (1, 0)])
def test_start_must_have_one_flag_per_row_of_x(name, x_rows, start_rows):
    model, params = build(name)
    message = rf"start must have shape \[T\] = \({x_rows},\).*got start with shape \({start_rows},\)"
    with pytest.raises(ValueError, match=message):
        model.model.apply(params, jnp.zeros((x_rows, IN)), jnp.zeros(start_rows, bool), model.initialize_carry())


@pytest.mark.parametrize("name", sorted(SMALL))
def test_make_names_missing_required_options_and_their_meaning(name):
    """``make`` without a required option raises a ValueError naming it and what it means (not a bare TypeError)."""
    from memgym.memory.options import option_descriptions, required_options

    cls = memory.model_class(name)
    required = required_options(cls)
    descriptions = option_descriptions(cls)
    for option in required:
        assert descriptions.get(option), f"{name}: option {option!r} has no description in the docstring"
    if not required:
        memory.make(name)  # every option has a default
        return
    with pytest.raises(ValueError, match=rf"memory model {name!r} needs option\(s\) \[{required[0]!r}.*{required[0]}: .*got \{{\}}$"):
        memory.make(name)


def test_make_lstm_without_features_explains_it():
    with pytest.raises(ValueError) as error:
        memory.make("lstm")
    assert str(error.value) == (
        "memory model 'lstm' needs option(s) ['features'] "
        "(features: width d of the hidden state (thesis Table A.2 uses 600)); got {}"
    )


def test_every_option_is_documented():
    """Every option of every registered model has a line in an ``Attributes:`` section (what ``make`` quotes)."""
    from memgym.memory.options import option_descriptions, options

    for name in sorted(SMALL):
        cls = memory.model_class(name)
        missing = set(options(cls)) - set(option_descriptions(cls))
        assert not missing, f"{name}: undocumented option(s) {sorted(missing)}"


def test_unknown_model_name_lists_the_registered_ones():
    for bad in ("LSTM", "", "s4"):
        listing = ", ".join(sorted(memory.MODELS))
        with pytest.raises(ValueError, match=rf"unknown memory model name {bad!r}; available: {listing}$"):
            memory.make(bad)
        with pytest.raises(ValueError, match="unknown memory model name"):
            memory.model_class(bad)


def test_relit_decay_is_one_of_its_two_forms():
    with pytest.raises(ValueError, match="decay must be one of 'product', 'convex', got decay='outer'"):
        memory.make("relit", **{**SMALL["relit"], "decay": "outer"}).initialize_carry()
