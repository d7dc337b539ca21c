"""popgym 1.0.7's card tasks in JAX (memgym.envs.popgym_jax.cards) against popgym's own NumPy tasks.

The parity tests drive memgym's Gymnasium wrapper of popgym (``PopGymEnv``: popgym's task, the
flat observation with the previous action, ``EpisodeReturn``) and the JAX task in lockstep: after
each popgym reset, :func:`from_popgym` copies popgym's shuffled deck into the JAX state; then both
get the same actions (half of them random, half the right answer read from popgym's hidden state,
so that both reward branches and every way an episode ends occur) and must give equal
observations, rewards, terminations and truncations. A new episode's deck cannot be mirrored
(popgym draws it from NumPy's generator, the JAX task from its key), so the JAX state is re-synced
at each reset, and the decks' distribution is compared separately (``test_episode_statistics_*``).
popgym is an optional extra: without it the parity tests are skipped.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from memgym.envs import gymnax_compat
from memgym.envs.popgym_jax import cards
from memgym.envs.popgym_jax.cards import CARD_TASKS
from memgym.envs.popgym_jax.common import (
    PopGymJaxEnv,
    PopGymState,
    compensated_add,
    flat_discrete,
    one_hot,
    rounded_ratio,
)

NAMES = list(CARD_TASKS)
TASKS = ("RepeatFirst", "RepeatPrevious", "CountRecall", "Autoencode", "HigherLower", "Concentration")
EASY = [task + "Easy" for task in TASKS]
#: the monoid paper's three card tasks: their tests of every level run in the fast tier
PAPER_TASKS = ("RepeatFirst", "RepeatPrevious", "CountRecall")


def need_popgym():
    return pytest.importorskip("popgym.envs")


# ---------------------------------------------------------------------------------------------
# popgym's hidden state -> the JAX state


def from_popgym(env: PopGymJaxEnv, upstream, params) -> PopGymState:
    """The JAX state of the episode popgym's ``upstream`` task has just reset to (its deck(s) copied).

    popgym deals from the end of ``Deck.idx``, the JAX dealing tasks from the start of their deck:
    the deck is copied reversed; Concentration's deck is its layout and is copied as it is."""
    if isinstance(env, cards.Concentration):
        assert not upstream.deck["face_up_idx"] and not upstream.deck["in_play_idx"]
        task = env.lay_out(cards.Decks.holding(upstream.deck.idx))
    elif isinstance(env, cards.CountRecall):
        task = env.deal(cards.Decks.holding(upstream.value_deck.idx[::-1]),
                        cards.Decks.holding(upstream.query_deck.idx[::-1]))
        np.testing.assert_array_equal(np.asarray(task.counts), upstream.counts)
    else:
        task = env.dealt(cards.Decks.holding(upstream.deck.idx[::-1]))
    return env.initial_state(task, params)


# ---------------------------------------------------------------------------------------------
# actions: random, or the right answer read from popgym's hidden state


def right_action(upstream, rng: np.random.Generator) -> int:
    """An action that scores (or, for Concentration, makes progress) in popgym's current state."""
    name = type(upstream).__name__
    if name.startswith("RepeatFirst"):
        return int(upstream.card)
    if name.startswith("RepeatPrevious"):
        hand, k = upstream.deck["player"], upstream.k
        return int(upstream.deck.suits_idx[hand[-k]]) if len(hand) >= k else int(rng.integers(4))
    if name.startswith("CountRecall"):
        return int(upstream.counts[upstream.query])
    if name.startswith("Autoencode"):
        if int(upstream.mode) == 0:
            return int(upstream.deck.suits_idx[upstream.deck["system"][-1]])
        return int(rng.integers(4))
    if name.startswith("HigherLower"):
        deck = upstream.deck
        showing = deck.ranks_idx[deck["player"][-1]]
        following = deck.ranks_idx[deck.idx[len(deck) - 1]]
        return 0 if following > showing else 1
    if name.startswith("Concentration"):
        deck, kinds = upstream.deck, upstream.deck_idx_type[upstream.deck.idx]
        down = [i for i in range(deck.num_cards) if i not in set(deck["face_up_idx"])]
        if deck["in_play_idx"]:
            first = deck["in_play_idx"][0]
            partners = [i for i in down if i != first and kinds[i] == kinds[first]]
            return int(rng.choice(partners))
        return int(rng.choice(down))
    raise AssertionError(name)


def return_bound(rewards, total) -> float:
    """How far the base class's compensated float32 sum of float32 rewards may lie from ``math.fsum`` of
    the float64 rewards they round: each reward is rounded once to float32 (``2**-24`` relative), the
    sum rounded once at the end (``2**-24 * |total|``), plus the compensated sum's own error,
    ``(n * 2**-24)**2 * sum|r|``."""
    magnitude = math.fsum(abs(r) for r in rewards)
    return 2.0**-24 * (magnitude + abs(total)) + (len(rewards) * 2.0**-24) ** 2 * magnitude


@functools.cache
def jitted(env: PopGymJaxEnv):
    """``(step, observe)``: the auto-resetting six-value step and ``get_obs``, jitted."""
    return jax.jit(functools.partial(gymnax_compat.step, env)), jax.jit(env.get_obs)


def lockstep(name: str, steps: int, seed: int, prev_action: bool = True, env: PopGymJaxEnv | None = None,
             right_share=(0.5,)) -> dict:
    """Drive popgym's task (memgym's wrapper) and the JAX task ``steps`` steps with the same actions and
    assert equal observations, rewards, flags and episode statistics; return counts of what happened.
    ``right_share`` cycles per episode: the share of actions that are ``right_action``."""
    from memgym.envs.popgym import PopGymEnv

    wrapped = PopGymEnv(name, prev_action=prev_action)
    upstream = wrapped.unwrapped
    env = CARD_TASKS[name](prev_action=prev_action) if env is None else env
    params = env.default_params
    step, observe = jitted(env)
    rng = np.random.default_rng(seed)
    keys = list(jax.random.split(jax.random.key(seed), steps))  # a list: indexing a key array costs more
    obs, _ = wrapped.reset(seed=seed)
    state = from_popgym(env, upstream, params)
    np.testing.assert_array_equal(np.asarray(observe(state, params)), obs)
    assert np.asarray(env.observation_space(params).low).shape == obs.shape
    seen = dict(episodes=0, terminated=0, truncated=0, positive=0, negative=0, zero=0)
    rewards: list[float] = []
    for t in range(steps):
        share = right_share[seen["episodes"] % len(right_share)]
        if rng.random() < share:
            action = right_action(upstream, rng)
        else:
            action = int(rng.integers(env.num_actions))
        obs, reward, terminated, truncated, info = wrapped.step(action)
        j_obs, state, *out = step(keys[t], state, action, params)
        j_obs, (j_reward, j_terminated, j_truncated, j_info) = jax.device_get((j_obs, out))  # one transfer
        where = f"{name} step {t} (episode {seen['episodes']}, action {action})"
        assert np.float32(j_reward) == np.float32(reward), where
        assert (bool(j_terminated), bool(j_truncated)) == (terminated, truncated), where
        np.testing.assert_array_equal(np.asarray(j_info["final_observation"]), obs, err_msg=where)
        rewards.append(reward)
        seen["positive" if reward > 0 else "negative" if reward < 0 else "zero"] += 1
        if terminated or truncated:
            # popgym's score (memgym's EpisodeReturn: math.fsum of the float64 rewards) rounded to float32
            assert j_info["episode_return"] == np.float32(info["episode_return"]), where
            assert j_info["normalized_return"] == np.float32(info["normalized_return"]), where
            assert int(j_info["episode_length"]) == info["episode_length"] == len(rewards), where
            # the JAX task started a new episode of its own: no step taken, no previous action shown
            time, no_action = jax.device_get((state.time, state.prev_action))
            assert time == 0 and not no_action.any()
            size = no_action.shape[0]
            assert size == (env.num_actions if prev_action else 0) and not j_obs[len(obs) - size:].any()
            seen["episodes"] += 1
            seen["terminated"] += terminated
            seen["truncated"] += truncated
            rewards = []
            obs, _ = wrapped.reset()
            state = from_popgym(env, upstream, params)
            np.testing.assert_array_equal(np.asarray(observe(state, params)), obs, err_msg=where)
        else:
            np.testing.assert_array_equal(np.asarray(j_obs), obs, err_msg=where)
            assert j_info["episode_return"] == np.float32(math.fsum(rewards)), where
            assert int(j_info["episode_length"]) == len(rewards), where
    return seen


# ---------------------------------------------------------------------------------------------
# parity


@pytest.mark.slow(seconds=8)  # each task and difficulty: 3-8 s on the 2-core CPU
@pytest.mark.parametrize("name", NAMES)
def test_parity_with_popgym(name):
    """4,000 steps of every task and difficulty in lockstep with popgym: observations exact, each
    reward popgym's float64 reward rounded once to float32, flags equal, the running and the final
    return ``EpisodeReturn``'s ``math.fsum`` rounded once to float32 (to the bit), lengths exact."""
    need_popgym()
    if name.startswith("Concentration"):
        # right answers in 0 / 50 / 90 / 100 % of an episode's steps: full games end by termination
        seen = lockstep(name, 4000, seed=11, right_share=(0.0, 0.5, 0.9, 1.0))
        assert seen["terminated"] >= 1 and seen["truncated"] >= 1
    else:
        seen = lockstep(name, 4000, seed=7)
        assert seen["terminated"] >= 4 and seen["truncated"] == 0
    assert seen["positive"] > 100 and seen["negative"] > 100
    if name.startswith(("RepeatPrevious", "Autoencode", "HigherLower", "Concentration")):
        assert seen["zero"] > 0


@pytest.mark.parametrize("name", ["RepeatFirstEasy", "CountRecallMedium", "AutoencodeEasy", "ConcentrationEasy"])
def test_parity_without_the_previous_action(name):
    """``prev_action=False`` gives ``PopGymEnv(prev_action=False)``'s observations."""
    need_popgym()
    env = CARD_TASKS[name](prev_action=False)
    with_action = CARD_TASKS[name]().observation_space(env.default_params).shape[0]
    assert env.observation_space(env.default_params).shape[0] == with_action - env.num_actions
    seen = lockstep(name, 600, seed=3, prev_action=False, env=env, right_share=(0.5, 1.0))
    assert seen["episodes"] >= 3


@pytest.mark.parametrize("level", ["Easy", "Medium", "Hard"])
def test_concentration_can_end_terminated_and_truncated_at_once(level):
    """A game whose last pair is found at the time limit ends with both flags, in popgym and here:
    ``L - n`` turns wasted (a card turned twice), then every pair found without a miss."""
    need_popgym()
    from memgym.envs.popgym import PopGymEnv

    name = "Concentration" + level
    wrapped, env = PopGymEnv(name), CARD_TASKS[name]()
    upstream, params = wrapped.unwrapped, env.default_params
    step, _ = jitted(env)
    wrapped.reset(seed=5)
    state = from_popgym(env, upstream, params)
    n, limit = env.num_cards, env.episode_length
    assert limit == upstream.episode_length and (limit - n) % 2 == 0
    kinds = upstream.deck_idx_type[upstream.deck.idx]
    actions = [0] * (limit - n)
    for kind in np.unique(kinds):
        positions = np.flatnonzero(kinds == kind)
        actions += positions.tolist()  # an even count of each kind: consecutive ones pair up
    assert len(actions) == limit
    for t, action in enumerate(actions):
        obs, reward, terminated, truncated, info = wrapped.step(action)
        j_obs, state, j_reward, j_terminated, j_truncated, j_info = step(jax.random.key(t), state, action, params)
        assert np.float32(j_reward) == np.float32(reward)
        assert (bool(j_terminated), bool(j_truncated)) == (terminated, truncated) == (t == limit - 1, t == limit - 1)
        np.testing.assert_array_equal(np.asarray(j_info["final_observation"]), obs)
    expected = 1 - (limit - n) / limit
    assert abs(info["episode_return"] - expected) < 1e-12
    assert j_info["episode_return"] == np.float32(info["episode_return"])


def test_observation_and_action_spaces_are_the_wrappers():
    """Every task's Box bounds and action count equal memgym's Gymnasium wrapper's spaces."""
    need_popgym()
    from memgym.envs.popgym import PopGymEnv

    for name in NAMES:
        for prev_action in (True, False):
            wrapped = PopGymEnv(name, prev_action=prev_action)
            env = CARD_TASKS[name](prev_action=prev_action)
            space = env.observation_space(env.default_params)
            np.testing.assert_array_equal(np.asarray(space.low), wrapped.observation_space.low, err_msg=name)
            np.testing.assert_array_equal(np.asarray(space.high), wrapped.observation_space.high, err_msg=name)
            assert space.shape == wrapped.observation_space.shape and space.dtype == jnp.float32
            assert env.action_space(env.default_params).n == wrapped.action_space.n == env.num_actions
        assert env.name == name == type(wrapped.unwrapped).__name__


@pytest.mark.parametrize("task", TASKS)
def test_difficulties_are_popgyms(task):
    """Each difficulty's settings are popgym's (decks, k, deck type, episode length)."""
    popgym_envs = need_popgym()
    for level in ("Easy", "Medium", "Hard"):
        name = task + level
        env, upstream = CARD_TASKS[name](), getattr(popgym_envs, name)()
        deck = upstream.value_deck if task == "CountRecall" else upstream.deck
        assert env.num_cards == deck.num_cards, name
        steps = int(env.default_params.max_steps_in_episode)
        if task == "Concentration":
            assert steps == upstream.episode_length
        elif task == "HigherLower":  # popgym keeps no length: the deck is dealt to its end
            assert steps == env.num_cards - 1
        else:
            assert steps == upstream.max_episode_length
        if hasattr(upstream, "k"):
            assert int(env.default_params.k) == upstream.k
        if task == "CountRecall":
            assert env.num_kinds == upstream.num_distinct_cards and env.max_count == upstream.max_card_count
            assert np.array_equal(np.asarray(cards.card_feature(np.arange(env.num_cards), env.deck_type)),
                                  upstream.deck_idx_type)
        if task == "Concentration":
            assert env.episode_length == upstream.episode_length
            assert np.array_equal(np.asarray(cards.card_feature(np.arange(env.num_cards), env.deck_type)),
                                  upstream.deck_idx_type)


def test_card_features_are_popgyms_deck():
    """Suit, colour and rank of every card as popgym's ``Deck`` lists them (16 decks)."""
    need_popgym()
    from popgym.core.deck import Deck

    deck = Deck(num_decks=16)
    cards_ = np.arange(deck.num_cards)
    for feature, expected in (("suits", deck.suits_idx), ("colors", deck.colors_idx), ("ranks", deck.ranks_idx)):
        np.testing.assert_array_equal(np.asarray(cards.card_feature(cards_, feature)), expected)
    with pytest.raises(ValueError, match="feature"):
        cards.card_feature(cards_, "faces")


# ---------------------------------------------------------------------------------------------
# RepeatPrevious's traced k


def test_repeat_previous_reward_scale_is_popgyms_for_every_k():
    """The traced ``1 / (num_cards - k)``, computed in float32, is popgym's float64 scale rounded once,
    for every k of 1, 2 and 3 decks."""
    for decks in (1, 2, 3):
        env = cards.RepeatPrevious(num_decks=decks, k=1)
        n = env.num_cards
        ks = np.arange(n)
        scale = jax.jit(jax.vmap(lambda k: jnp.float32(1.0) / (n - k).astype(jnp.float32)))(jnp.asarray(ks))
        np.testing.assert_array_equal(np.asarray(scale), np.array([np.float32(1 / (n - k)) for k in ks]))


def test_repeat_previous_vmaps_over_k():
    """One compiled step, a batch of k: each column equals the task built with that k alone."""
    env = cards.RepeatPrevious(num_decks=1, k=4)
    ks = np.array([0, 1, 4, 20, 51])
    batch = env.params(ks)
    key = jax.random.key(0)

    def run(params):
        _, state = env.reset(key, params)

        def body(state, t):
            action = t % 4
            _, state, reward, terminated, truncated, info = gymnax_compat.step(env, jax.random.fold_in(key, t),
                                                                               state, action, params)
            return state, (reward, terminated, info["episode_return"])

        return jax.lax.scan(body, state, jnp.arange(51))[1]

    rewards, terminated, returns = jax.jit(jax.vmap(run))(batch)
    for i, k in enumerate(ks):
        alone = jax.jit(run)(cards.RepeatPrevious(num_decks=1, k=int(k)).default_params)
        np.testing.assert_array_equal(np.asarray(rewards[i]), np.asarray(alone[0]))
        assert int((np.asarray(rewards[i]) != 0).sum()) == 52 - k - (k == 0)  # k = 0: every step, n - 1
        assert np.asarray(terminated[i]).tolist() == [False] * 50 + [True]


# ---------------------------------------------------------------------------------------------
# jit, vmap, auto-reset and the gymnax contract


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name.startswith(PAPER_TASKS) else pytest.mark.slow)
                                  for name in EASY])
def test_jit_and_vmap_over_1024_envs(name):
    """1,024 environments in one jitted, vmapped scan with random actions: shapes, dtypes, every
    episode's length as popgym's, and the returns and normalized returns in range."""
    env = CARD_TASKS[name]()
    params = env.default_params
    batch, steps = 1024, 120
    keys = jax.random.split(jax.random.key(1), batch)

    @jax.jit
    def run(keys):
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

        def body(carry, t):
            state, keys = carry
            keys, action_keys, step_keys = jax.vmap(lambda k: tuple(jax.random.split(k, 3)))(keys)
            actions = jax.vmap(lambda k: env.action_space(params).sample(k))(action_keys)
            step = jax.vmap(functools.partial(gymnax_compat.step, env), in_axes=(0, 0, 0, None))
            obs, state, reward, terminated, truncated, info = step(step_keys, state, actions, params)
            out = (obs.shape, reward, terminated | truncated, info["episode_length"], info["episode_return"],
                   info["normalized_return"])
            return (state, keys), out[1:]

        return obs, jax.lax.scan(body, (state, keys), jnp.arange(steps))[1]

    obs, (reward, done, length, ret, norm) = run(keys)
    assert obs.shape == (batch, env.observation_space(params).shape[0]) and obs.dtype == jnp.float32
    assert reward.shape == (steps, batch) and reward.dtype == jnp.float32
    done, length, ret, norm = map(np.asarray, (done, length, ret, norm))
    assert done.any()
    if name.startswith("Concentration"):
        assert (length[done] <= env.episode_length).all()
    else:
        expected = 2 * env.num_cards - 1 if name.startswith("Autoencode") else env.num_cards - 1
        assert (length[done] == expected).all() and done.sum() == batch * (steps // expected)
    assert (np.abs(ret[done]) <= 1 + 1e-6).all() and (np.abs(norm) <= 1).all()


def chi_square_uniform(counts) -> float:
    """p-value of Pearson's chi-square test that ``counts`` come from a uniform distribution."""
    return float(stats.chisquare(np.asarray(counts, float)).pvalue)


def test_shuffle_steps_give_every_ordering_equally_often():
    """Fisher-Yates steps 0 … n-2 from any start: each of the 24 orderings of 4 cards about equally
    often (chi-square, 24,000 shuffles, level 0.001), from the sorted and from a reversed start."""
    def shuffle(key, cards_):
        for step in range(3):
            cards_ = cards.shuffle_step(jax.random.fold_in(key, step), cards_, step)
        return cards_

    keys = jax.random.split(jax.random.key(8), 24_000)
    for start in (jnp.arange(4), jnp.arange(4)[::-1]):
        orders = np.asarray(jax.jit(jax.vmap(shuffle, in_axes=(0, None)))(keys, start.astype(jnp.int32)))
        codes = orders @ np.array([64, 16, 4, 1])
        _, counts = np.unique(codes, return_counts=True)
        assert len(counts) == 24 and chi_square_uniform(counts) > 1e-3
    decks = jnp.tile(jnp.arange(4, dtype=jnp.int32), (2, 1))  # the row form shuffles one row only
    shuffled = np.asarray(cards.shuffle_step(jax.random.key(0), decks, 0, row=1))
    assert shuffled[0].tolist() == [0, 1, 2, 3] and sorted(shuffled[1]) == [0, 1, 2, 3]


@pytest.mark.parametrize("name", ["RepeatFirstEasy", "CountRecallEasy", "ConcentrationEasy"])
def test_every_episode_deals_a_fresh_uniform_permutation(name):
    """4,096 environments: the decks dealt at reset and at the first auto-reset are permutations, the
    position of card 0 is uniform over the deck (chi-square, level 0.001) in both, and the deck after
    the auto-reset is independent of the one before (suits of the first cards: chi-square test of
    independence; same card in the same place about ``1/52`` of the time)."""
    env = CARD_TASKS[name]()
    params = env.default_params
    n = env.num_cards
    batch = 4096
    decks_of = (lambda task: task.values.deck) if name.startswith("CountRecall") else (lambda task: task.decks.deck)

    @jax.jit
    def run(keys):
        _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
        first = jax.vmap(lambda s: decks_of(s.task))(state)

        def body(carry, t):
            state, after = carry
            step_keys = jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)
            actions = (t % n) * jnp.ones(batch, jnp.int32)  # Concentration: card after card, a game runs to L
            step = jax.vmap(functools.partial(gymnax_compat.step, env), in_axes=(0, 0, 0, None))
            _, state, _, terminated, truncated, _ = step(step_keys, state, actions, params)
            done = terminated | truncated
            deck = jax.vmap(lambda s: decks_of(s.task))(state)
            after = jnp.where(done[:, None] & (after[:, :1] < 0), deck, after)
            return (state, after), None

        start = (state, -jnp.ones((batch, n), jnp.int32))
        (state, after), _ = jax.lax.scan(body, start, jnp.arange(int(params.max_steps_in_episode)))
        return first, after

    first, after = map(np.asarray, run(jax.random.split(jax.random.key(9), batch)))
    assert (after[:, 0] >= 0).all(), "every environment finished its first episode"
    for decks in (first, after):
        assert (np.sort(decks, axis=1) == np.arange(n)).all()
        position_of_zero = np.argmax(decks == 0, axis=1)
        assert chi_square_uniform(np.bincount(position_of_zero, minlength=n)) > 1e-3
    table = np.zeros((4, 4))
    np.add.at(table, (first[:, 0] % 4, after[:, 0] % 4), 1)
    assert stats.chi2_contingency(table).pvalue > 1e-3
    fixed_points = (first == after).sum(axis=1)  # about Poisson(1) for independent uniform orderings
    assert abs(fixed_points.mean() - 1) < 5 / math.sqrt(batch)


@pytest.mark.slow(seconds=17)
def test_step_follows_the_installed_gymnax():
    """``step`` / ``step_env`` return what the installed gymnax expects (1.0: six / five values with the
    truncation left to ``is_truncated``; 0.0.9: five, ``done`` fourth, the flags in ``info``), and
    ``gymnax_compat``'s six values agree, for a terminating and for a truncating task (the first two
    steps and, the clock set forward, the last two)."""
    for env in (cards.RepeatFirstEasy(), cards.ConcentrationEasy()):
        params = env.default_params
        key = jax.random.key(4)
        _, state = env.reset(key, params)
        length = env.episode_length if isinstance(env, cards.Concentration) else 51
        step, step_env = jitted(env)[0], jax.jit(env.step_env)
        for t in (0, 1, length - 2, length - 1):
            state = state.replace(time=jnp.asarray(t, jnp.int32))  # Concentration: t even, no card pending
            action = 0 if isinstance(env, cards.Concentration) else t % 4  # Concentration: turn card 0 forever
            native = env.step(key, state, action, params)
            native_one = step_env(key, state, action, params)
            obs, after, reward, terminated, truncated, info = step(key, state, action, params)
            end = t == length - 1
            assert bool(terminated) == (end and not isinstance(env, cards.Concentration))
            assert bool(truncated) == (end and isinstance(env, cards.Concentration))
            assert len(native_one) == 5 and float(native_one[2]) == float(reward)
            if gymnax_compat.FIVE_VALUE_STEP:
                assert len(native) == 5 and bool(native[3]) == end
                assert bool(native[4]["truncated"]) == bool(truncated)
            else:
                assert len(native) == 6 and (bool(native[3]), bool(native[4])) == (bool(terminated), bool(truncated))
                assert bool(env.is_truncated(native_one[1], params)) == bool(truncated)
            assert int(info["episode_length"]) == t + 1
            assert int(after.time) == (0 if end else t + 1)
            state = after


def test_info_holds_the_running_return_and_length():
    """Every step's info: the return and length so far (the finished episode's at its end), popgym's
    float64 score rounded to float32; the base class's compensated float32 sum, kept beside it in the
    state, within :func:`return_bound` of it."""
    env = cards.HigherLowerEasy()
    params = env.default_params
    step, _ = jitted(env)
    _, state = env.reset(jax.random.key(5), params)
    rewards = []
    for t in range(51 * 2):
        _, state, reward, terminated, truncated, info = step(jax.random.key(t), state, t % 2, params)
        units = round(float(reward) * 52)
        assert np.float32(reward) == np.float32(units / 52) and units in (-1, 0, 1)
        rewards.append(units / 52)  # popgym's float64 reward
        score = math.fsum(rewards)
        assert int(info["episode_length"]) == len(rewards)
        assert info["episode_return"] == np.float32(score)
        assert info["normalized_return"] == np.float32(score)
        if not terminated:
            compensated = float(PopGymJaxEnv.episode_return(env, state, params))
            assert abs(compensated - score) <= return_bound(rewards, compensated)
        if terminated:
            rewards = []
    assert not rewards


def test_rounded_ratio_is_the_correctly_rounded_quotient():
    """``rounded_ratio`` against NumPy's float64 quotient rounded to float32 (the correctly rounded
    quotient for such integers): every pair with ``|n| <= 300``, ``d <= 300``, 300,000 random pairs up to
    ``2**24``, and a denominator shared across a ``vmap`` (which XLA would turn into a reciprocal)."""
    ratio = jax.jit(rounded_ratio)
    numerators, denominators = np.meshgrid(np.arange(-300, 301), np.arange(1, 301))
    np.testing.assert_array_equal(np.asarray(ratio(numerators, denominators)),
                                  (numerators / denominators).astype(np.float32))
    rng = np.random.default_rng(1)
    numerators, denominators = rng.integers(-(2**24) + 1, 2**24, 300_000), rng.integers(1, 2**24, 300_000)
    np.testing.assert_array_equal(np.asarray(ratio(numerators, denominators)),
                                  (numerators / denominators).astype(np.float32))
    shared = jax.jit(jax.vmap(rounded_ratio, in_axes=(0, None)))(jnp.arange(-831, 832), 831)
    np.testing.assert_array_equal(np.asarray(shared), (np.arange(-831, 832) / 831).astype(np.float32))


def test_compensated_sum_is_the_rounded_exact_sum():
    """Thousands of small rewards of mixed sign: the compensated float32 sum is the float32 rounding of
    their exact sum, where a plain float32 sum drifts."""
    rng = np.random.default_rng(0)
    values = (rng.choice([-1, 1], 5000) * np.float32(1 / 831)).astype(np.float32)
    values = np.concatenate([values, np.full(3000, np.float32(1 / 207))])

    def body(carry, value):
        total, error, plain = carry
        total, error = compensated_add(total, error, value)
        return (total, error, plain + value), None

    zero = jnp.zeros((), jnp.float32)
    (total, error, plain), _ = jax.jit(lambda v: jax.lax.scan(body, (zero, zero, zero), v))(jnp.asarray(values))
    exact = math.fsum(float(v) for v in values)
    assert np.float32(total + error) == np.float32(exact)
    assert np.float32(plain) != np.float32(exact)


def test_observation_helpers():
    np.testing.assert_array_equal(np.asarray(one_hot(2, 4)), [0, 0, 1, 0])
    np.testing.assert_array_equal(np.asarray(one_hot(7, 4)), [0, 0, 0, 0])  # outside: zeros
    np.testing.assert_array_equal(np.asarray(one_hot(jnp.array([1, 0]), 2)), [0, 1, 1, 0])
    np.testing.assert_array_equal(np.asarray(flat_discrete([1, 2], [2, 3])), [0, 1, 0, 0, 1])
    with pytest.raises(ValueError, match="sizes"):
        flat_discrete([1, 2, 0], [2, 3])


# ---------------------------------------------------------------------------------------------
# the decks' distribution against popgym's


def fixed_policy_action(name: str, obs: np.ndarray, t: int) -> int:
    """A fixed policy whose returns depend on the deck: always 0 (guess "higher", answer suit 0 or
    count 0); Autoencode answers the suit it sees; Concentration turns the positions in order."""
    if name.startswith("Autoencode"):
        return int(np.argmax(obs[2:6]))
    if name.startswith("Concentration"):
        return t % (52 * (2 if name.endswith("Medium") else 1))
    return 0


def popgym_statistics(name: str, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns and lengths of popgym's own task under :func:`fixed_policy_action`."""
    from memgym.envs.popgym import PopGymEnv

    env = PopGymEnv(name)
    returns, lengths = [], []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        t = 0
        while True:
            obs, _, terminated, truncated, info = env.step(fixed_policy_action(name, obs, t))
            t += 1
            if terminated or truncated:
                returns.append(info["episode_return"])
                lengths.append(info["episode_length"])
                break
    return np.array(returns), np.array(lengths)


def jax_statistics(name: str, episodes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The same for the JAX task, vmapped: of each environment, the *second* episode, whose deck the
    auto-reset dealt (shuffled during the first episode)."""
    env = CARD_TASKS[name]()
    params = env.default_params
    horizon = int(params.max_steps_in_episode)

    def episodes_of(key):
        obs, state = env.reset(key, params)

        def body(carry, t):
            obs, state, finished, ret, length = carry
            if name.startswith("Autoencode"):
                action = jnp.argmax(obs[2:6])
            elif name.startswith("Concentration"):
                action = state.time % env.num_cards
            else:
                action = jnp.zeros((), jnp.int32)
            obs, state, _, terminated, truncated, info = gymnax_compat.step(env, jax.random.fold_in(key, t), state,
                                                                            action, params)
            done = terminated | truncated
            second = done & (finished == 1)
            ret = jnp.where(second, info["episode_return"], ret)
            length = jnp.where(second, info["episode_length"], length)
            return (obs, state, finished + done, ret, length), None

        init = (obs, state, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
        (_, _, finished, ret, length), _ = jax.lax.scan(body, init, jnp.arange(2 * horizon))
        return finished, ret, length

    finished, ret, length = jax.jit(jax.vmap(episodes_of))(jax.random.split(jax.random.key(seed), episodes))
    assert (np.asarray(finished) >= 2).all()
    return np.asarray(ret, np.float64), np.asarray(length)


def assert_same_distribution(name, ours, theirs):
    """Two-sample Kolmogorov-Smirnov test (exact-or-asymptotic p-value; conservative for these discrete
    returns) at level 0.001; fixed seeds make the outcome deterministic. Values are rounded to 6
    decimals first: the JAX returns are float32, popgym's float64, and KS must see equal returns as ties."""
    ours, theirs = np.round(ours, 6), np.round(theirs, 6)
    if np.all(ours == ours[0]) and np.all(theirs == theirs[0]):
        assert ours[0] == pytest.approx(theirs[0], abs=1e-6), name
        return
    result = stats.ks_2samp(ours, theirs)
    assert result.pvalue > 1e-3, f"{name}: KS statistic {result.statistic:.4f}, p={result.pvalue:.2g}"
    spread = max(np.std(ours), np.std(theirs), 1e-9)
    assert abs(ours.mean() - theirs.mean()) < 5 * spread * math.sqrt(2 / len(ours)), name


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name.startswith(PAPER_TASKS) else pytest.mark.slow)
                                  for name in EASY])
def test_episode_statistics_match_popgyms(name):
    """Returns (and, for Concentration, lengths) of 1,000 episodes under a fixed, deck-dependent policy
    come from the same distribution here (episodes started by the auto-reset) and in popgym: the
    incremental shuffle deals what popgym's deals."""
    need_popgym()
    popgym_returns, popgym_lengths = popgym_statistics(name, 1000, seed=1000)
    returns, lengths = jax_statistics(name, 1000, seed=17)
    assert len(np.unique(popgym_returns)) > 1 or name.startswith("Concentration")
    assert_same_distribution(name + " returns", returns, popgym_returns)
    assert_same_distribution(name + " lengths", lengths.astype(float), popgym_lengths.astype(float))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if not n.endswith("Easy")])
def test_episode_statistics_match_popgyms_harder_levels(name):
    """:func:`test_episode_statistics_match_popgyms` for the Medium and Hard levels (longer episodes)."""
    need_popgym()
    popgym_returns, popgym_lengths = popgym_statistics(name, 1000, seed=2000)
    returns, lengths = jax_statistics(name, 1000, seed=23)
    assert_same_distribution(name + " returns", returns, popgym_returns)
    assert_same_distribution(name + " lengths", lengths.astype(float), popgym_lengths.astype(float))


# ---------------------------------------------------------------------------------------------
# invalid arguments


@pytest.mark.parametrize(
    "build, argument",
    [
        (lambda: cards.RepeatFirst(num_decks=0), "num_decks"),
        (lambda: cards.RepeatFirst(num_decks=1.5), "num_decks"),
        (lambda: cards.RepeatFirst(num_decks=True), "num_decks"),
        (lambda: cards.HigherLower(num_decks=-2), "num_decks"),
        (lambda: cards.Autoencode(num_decks="2"), "num_decks"),
        (lambda: cards.RepeatPrevious(num_decks=1, k=52), "k"),
        (lambda: cards.RepeatPrevious(num_decks=1, k=-1), "k"),
        (lambda: cards.RepeatPrevious(num_decks=1, k=2.0), "k"),
        (lambda: cards.RepeatPrevious(num_decks=1).params([4, 60]), "k"),
        (lambda: cards.CountRecall(deck_type="faces"), "deck_type"),
        (lambda: cards.Concentration(deck_type="suits"), "deck_type"),
        (lambda: cards.RepeatFirstEasy(prev_action="yes"), "prev_action"),
        (lambda: cards.ConcentrationHard(prev_action=None), "prev_action"),
    ],
)
def test_invalid_arguments_raise_value_errors_naming_them(build, argument):
    with pytest.raises(ValueError, match=f"{argument}=") as error:
        build()
    assert argument in str(error.value)


def test_difficulty_classes_take_only_prev_action():
    with pytest.raises(TypeError):
        cards.RepeatFirstEasy(num_decks=2)
    assert cards.RepeatPreviousHard.config == {"num_decks": 3, "k": 64}
    assert repr(cards.CountRecall(num_decks=2, deck_type="suits")) == \
        "CountRecall(num_decks=2, deck_type='suits', prev_action=True)"
    assert repr(cards.CountRecallHard(prev_action=False)) == "CountRecallHard(prev_action=False)"
