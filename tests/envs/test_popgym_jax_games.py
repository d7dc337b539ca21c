"""popgym 1.0.7's bandits and board games in JAX (memgym.envs.popgym_jax.games) against popgym's own.

The parity tests drive popgym's environment through memgym's Gymnasium wrapper (``PopGymEnv``) and step the
JAX task beside it from the same hidden state: after each of popgym's resets its arms, ship board or mines go
into a fresh JAX state, and the bandit's next draw (read from a copy of popgym's generator, so its own stream
is untouched) into ``next_draw`` before each pull. Every observation (the previous action included), reward,
end flag, episode return (popgym's score rounded to float32, to the bit) and length must be equal. The
policies mix random actions with ones that win (every ship cell shot, every free cell opened) and lose
(a mine opened), so that every way an episode ends is met.

popgym's randomness (arms, ship placements, mines) cannot be replayed through ``jax.random``; the
distributions are compared with stated tests (chi-square, Kolmogorov-Smirnov; fixed keys).

popgym is an optional extra, so the whole module is skipped without it.
"""

from __future__ import annotations

import copy
import functools
import itertools
import warnings

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

popgym_envs = pytest.importorskip("popgym.envs")
stats = pytest.importorskip("scipy.stats")

from memgym.envs import make_jax  # noqa: E402
from memgym.envs.functional import GymnasiumAdapter, GymnasiumVectorAdapter, MultiDiscrete, gymnasium_space  # noqa: E402
from memgym.envs.popgym import PopGymEnv  # noqa: E402
from tests.envs.popgym_lockstep import check_lockstep  # noqa: E402
from memgym.envs.popgym_jax.games import (  # noqa: E402
    GAME_TASKS,
    Battleship,
    MineSweeper,
    MultiarmedBandit,
    mine_counts,
    place_ship,
)

NAMES = list(GAME_TASKS)
# each family at Easy in the fast tier, every difficulty in the slow one
TIERED = [pytest.param(name, marks=() if name.endswith("Easy") else pytest.mark.slow(seconds=8)) for name in NAMES]


# ---------------------------------------------------------------------------------------------
# popgym's side: what goes into the JAX state, and the policies


def start_from_popgym(env, upstream):
    """The JAX task state of popgym's task ``upstream`` just after its reset."""
    if isinstance(env, MultiarmedBandit):
        return env.start(upstream.bandits, next_draw(upstream))
    if isinstance(env, Battleship):
        return env.start(upstream.board.astype(bool))
    return env.start(upstream.hidden_grid == 1)


def next_draw(upstream) -> float:
    """popgym's bandit's draw for its next pull, from a copy of its generator."""
    return copy.deepcopy(upstream.np_random).random()


def policy(env, upstream, rng: np.random.Generator, aim: float):
    """With probability ``aim`` a good action: for the board games a winning one (a ship cell not shot yet, a
    free cell not opened yet), now and then a losing one (a MineSweeper mine), the bandit's best arm; otherwise
    a random one."""
    if isinstance(env, MultiarmedBandit):
        return int(rng.integers(env.num_bandits)) if rng.random() >= aim else int(np.argmax(upstream.bandits))
    shape = (env.board_size,) * 2 if isinstance(env, Battleship) else env.dims
    if rng.random() >= aim:
        return rng.integers(np.array(shape))
    if isinstance(env, Battleship):
        targets = np.argwhere(upstream.board.astype(bool) & ~upstream.guesses.astype(bool))
    else:
        targets = np.argwhere(upstream.hidden_grid == (1 if rng.random() < 0.03 else 0))
    return targets[rng.integers(len(targets))] if len(targets) else rng.integers(np.array(shape))


# ---------------------------------------------------------------------------------------------
# parity


@pytest.mark.parametrize("name", TIERED)
def test_lockstep_with_popgym_is_exact(name):
    """Every observation, reward, end flag, return and length equal to popgym's, over every difficulty and every
    way an episode ends; thousands of steps in all."""
    family = name.removesuffix("Easy").removesuffix("Medium").removesuffix("Hard")
    episodes = {"MultiarmedBandit": 8, "Battleship": 30, "MineSweeper": 150}[family]
    env = GAME_TASKS[name]()

    def next_bandit_draw(state, upstream):
        return state.replace(task=state.task.replace(next_draw=jnp.asarray(next_draw(upstream))))

    counts = check_lockstep(name, env, start_from_popgym, functools.partial(policy, env), episodes,
                            seed=NAMES.index(name), aim=0.5,
                            after_step=next_bandit_draw if isinstance(env, MultiarmedBandit) else None)
    assert counts["steps"] >= 1000
    if name.startswith("MultiarmedBandit"):
        assert counts["truncated"] == episodes
    else:
        assert counts["terminated"] >= 5 and (counts["truncated"] >= 1 or name.startswith("MineSweeper"))


def test_minesweeper_episodes_end_by_a_mine_by_winning_and_by_the_step_limit():
    env = MineSweeper("easy")
    params = env.default_params
    mines = np.zeros((4, 4), bool)
    mines[0, 0] = mines[3, 3] = True
    step = jax.jit(lambda state, action: env.step_env(jax.random.key(0), state, action, params))
    free = [cell for cell in itertools.product(range(4), range(4)) if not mines[cell]]
    state = env.initial_state(env.start(mines), params)
    for cell in free:  # every free cell once: a win on the last
        obs, state, reward, terminated, info = step(state, jnp.array(cell))
    assert bool(terminated) and float(info["episode_return"]) == 1.0 and int(state.task.shown) == 1  # (3,2) sees (3,3)
    state = env.initial_state(env.start(mines), params)
    obs, state, reward, terminated, info = step(state, jnp.array([0, 0]))
    assert bool(terminated) and reward == np.float32(-0.5 - 1 / 14)
    state = env.initial_state(env.start(mines), params)
    for _ in range(14):  # the same cell again and again: the step limit
        obs, state, reward, terminated, info = step(state, jnp.array([1, 1]))
    assert not bool(terminated) and bool(env.is_truncated(state, params))
    assert reward == np.float32(-0.5 / 12)
    assert np.asarray(info["episode_return"]) == np.float32(1 / 14 - 13 * 0.5 / 12)


def test_constants_and_difficulties_are_popgyms():
    for name, cls in GAME_TASKS.items():
        ours, theirs = cls(), getattr(popgym_envs, name)()
        assert ours.default_params.max_steps_in_episode == theirs.max_episode_length
        assert ours.observations == theirs.observation_space.n
        assert gymnasium_space(ours.action_space(ours.default_params)) == theirs.action_space
        wrapped = PopGymEnv(name)
        space = ours.observation_space(ours.default_params)
        assert space.shape == wrapped.observation_space.shape
        np.testing.assert_array_equal(space.low, wrapped.observation_space.low)
        np.testing.assert_array_equal(space.high, wrapped.observation_space.high)


def test_mine_counts_are_popgyms():
    """popgym's count (its reset's sum of nine shifted copies of the padded grid) of random grids."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        grid = rng.random((6, 6)) < 0.3
        padded = np.pad(grid.astype(np.int8), [(1, 1), (1, 1)])
        expected = sum(np.roll(np.roll(padded, i, 0), j, 1)[1:-1, 1:-1] for i in (-1, 0, 1) for j in (-1, 0, 1))
        np.testing.assert_array_equal(np.asarray(mine_counts(jnp.asarray(grid))), expected)


@pytest.mark.parametrize("call, match", [
    (lambda: MultiarmedBandit(num_bandits=0), "num_bandits"),
    (lambda: MultiarmedBandit(episode_length=0), "episode_length"),
    (lambda: Battleship(board_size=0), "board_size"),
    (lambda: Battleship(board_size=8, ship_sizes=()), "ship_sizes"),
    (lambda: Battleship(board_size=8, ship_sizes=(9,)), "ship_sizes"),
    (lambda: Battleship(board_size=3, ship_sizes=(3, 3, 3)), r"fewer than board_size \*\* 2 = 9"),
    (lambda: Battleship(board_size=8, ship_sizes=5), "ship_sizes must be a sequence"),
    (lambda: MineSweeper("extreme"), "difficulty must be one of 'easy', 'medium', 'hard'"),
    (lambda: MultiDiscrete([3, 0]), "nvec must be a non-empty sequence of integers >= 1"),
])
def test_invalid_arguments_raise_value_errors_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_multidiscrete_samples_contains_and_converts():
    space = MultiDiscrete([3, 5])
    samples = np.asarray(jax.vmap(space.sample)(jax.random.split(jax.random.key(0), 2000)))
    assert samples.shape == (2000, 2) and samples.min() == 0 and samples[:, 0].max() == 2 and samples[:, 1].max() == 4
    assert bool(space.contains(jnp.array([2, 4]))) and not bool(space.contains(jnp.array([3, 0])))
    assert not bool(space.contains(jnp.array([1, 1, 1])))
    assert gymnasium_space(space) == gym.spaces.MultiDiscrete([3, 5]) and repr(space) == "MultiDiscrete([3, 5])"


@pytest.mark.parametrize("name", ["BattleshipEasy", "MultiarmedBanditEasy", "MineSweeperEasy"])
@pytest.mark.slow(seconds=12)
def test_the_gymnasium_adapters_pass_check_env_and_take_multidiscrete_batches(name):
    env = GAME_TASKS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no spec, so no render-mode check
        check_env(GymnasiumAdapter(env, env.default_params))
    vector = GymnasiumVectorAdapter(env, env.default_params, num_envs=4)
    vector.reset(seed=0)
    for _ in range(3):
        obs, reward, terminated, truncated, info = vector.step(vector.action_space.sample())
    assert obs.shape == (4, env.observation_space(env.default_params).shape[0]) and np.isfinite(reward).all()


def test_the_previous_action_is_two_one_hot_blocks():
    env, params = make_jax("memgym/popgym-BattleshipEasy-v0")
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (2 + 8 + 8,) and not obs[2:].any()
    obs, *_ = env.step(jax.random.key(1), state, jnp.array([3, 6]), params)
    np.testing.assert_array_equal(np.flatnonzero(np.asarray(obs[2:])), [3, 8 + 6])


# ---------------------------------------------------------------------------------------------
# distributions (popgym's randomness cannot be replayed)


def placements(n: int, size: int, board: np.ndarray) -> list[frozenset]:
    """Every placement of a ship of ``size`` that fits on ``board`` and touches no ship on it, by brute force."""
    found = set()
    for row, col, down in itertools.product(range(n), range(n), (False, True)):
        cells = frozenset((row + i, col) if down else (row, col + i) for i in range(size))
        if all(r < n and c < n and not board[r, c] for r, c in cells):
            found.add(cells)
    return sorted(found, key=sorted)


@pytest.mark.slow(seconds=8)
def test_a_ship_is_placed_uniformly_among_the_placements_that_fit():
    """On a board with ships on it already, 20,000 placements of a ship of 4: each of the fitting placements
    (brute force) is drawn, none other, with frequencies passing a chi-square test of uniformity, p > 0.001."""
    n = 8
    board = np.zeros((n, n), bool)
    board[2, 1:5] = board[4:7, 6] = board[0, 0] = True
    allowed = placements(n, 4, board)
    drawn = np.asarray(jax.jit(jax.vmap(lambda key: place_ship(key, jnp.asarray(board), 4)))(
        jax.random.split(jax.random.key(0), 20_000))) & ~board
    index = {cells: i for i, cells in enumerate(allowed)}
    counts = np.zeros(len(allowed), int)
    for ship in drawn:
        counts[index[frozenset(map(tuple, np.argwhere(ship)))]] += 1  # a KeyError would be a placement not allowed
    assert (counts > 0).all() and stats.chisquare(counts).pvalue > 1e-3
    full = jnp.ones((n, n), bool).at[0, 0].set(False)  # no room for a ship of 2: the board comes back unchanged
    np.testing.assert_array_equal(np.asarray(place_ship(jax.random.key(0), full, 2)), np.asarray(full))


@pytest.mark.slow(seconds=8)
def test_boards_mines_and_arms_have_popgyms_distributions():
    """Independent per-episode statistics from popgym's generator (1,500 resets) and from ``jax.random`` (4,096):
    the number of ship cells on Battleship's border (on a reset's board and on the next episode's, placed during
    the episode before) and MineSweeper's first mine (chi-square tests of homogeneity), the bandit's arms (uniform:
    Kolmogorov-Smirnov); p > 0.001 each, fixed seeds and keys."""
    keys = jax.random.split(jax.random.key(5), 4096)

    def popgym_resets(name: str, read) -> list:
        upstream = getattr(popgym_envs, name)()
        upstream.reset(seed=5)
        values = []
        for _ in range(1500):
            upstream.reset()
            values.append(read(upstream))
        return values

    def homogeneous(ours: np.ndarray, theirs: np.ndarray) -> float:
        categories = np.union1d(ours, theirs)
        table = np.array([[np.sum(sample == c) for c in categories] for sample in (ours, theirs)])
        return stats.chi2_contingency(table[:, table.sum(axis=0) >= 10]).pvalue

    border = np.ones((8, 8), bool)
    border[1:-1, 1:-1] = False
    env = GAME_TASKS["BattleshipEasy"]()
    boards = np.asarray(jax.vmap(lambda key: env.reset(key)[1].task.board)(keys))
    assert (boards.sum(axis=(1, 2)) == 12).all()
    theirs = popgym_resets("BattleshipEasy", lambda upstream: int(upstream.board[border].sum()))
    assert homogeneous(boards[:, border].sum(axis=1), np.array(theirs)) > 1e-3

    # the boards of the episodes gymnax's auto-reset starts (placed one ship a step during the episode before):
    # every cell shot in turn, so each first episode ends within 64 steps
    def next_board(key):
        _, state = env.reset(key)

        def shoot(state, t):
            _, state, _, terminated, truncated, _ = env.step(jax.random.fold_in(key, t), state,
                                                              jnp.stack(jnp.divmod(t, 8)))
            return state, (state.task.board, terminated | truncated)

        _, (seen, ended) = jax.lax.scan(shoot, state, jnp.arange(64))
        return seen[jnp.argmax(ended)]

    later = np.asarray(jax.jit(jax.vmap(next_board))(keys))
    assert (later.sum(axis=(1, 2)) == 12).all() and not (later == boards).all(axis=(1, 2)).any()
    assert homogeneous(later[:, border].sum(axis=1), np.array(theirs)) > 1e-3

    env = GAME_TASKS["MineSweeperMedium"]()
    hidden = np.asarray(jax.vmap(lambda key: env.reset(key)[1].task.hidden)(keys)).reshape(4096, -1)
    assert (hidden.sum(axis=1) == 6).all()
    theirs = popgym_resets("MineSweeperMedium", lambda upstream: int(np.argmax(upstream.hidden_grid.ravel() == 1)))
    assert homogeneous(hidden.argmax(axis=1), np.array(theirs)) > 1e-3

    env = GAME_TASKS["MultiarmedBanditEasy"]()
    arms = np.asarray(jax.vmap(lambda key: env.reset(key)[1].task.arms)(keys))
    assert arms.dtype == np.float32 and stats.kstest(arms.ravel(), "uniform").pvalue > 1e-3
    draws = np.asarray(jax.vmap(lambda key: env.reset(key)[1].task.next_draw)(keys))
    assert stats.kstest(draws, "uniform").pvalue > 1e-3


def test_valid_action_of_each_kind_of_space():
    from gymnax.environments import spaces

    from memgym.envs.functional import valid_action

    cases = [
        (spaces.Discrete(4), [0, 3, 3.0], [-1, 4, 1.5, jnp.nan]),
        (MultiDiscrete([3, 5]), [[0, 0], [2, 4]], [[3, 0], [0, -1], [0.5, 1], [jnp.nan, 0]]),
        (spaces.Box(-2.0, 2.0, (1,)), [[-2.0], [0.3], [2.0]], [[2.5], [jnp.nan], [-jnp.inf]]),
    ]
    for space, good, bad in cases:
        assert all(bool(valid_action(space, jnp.asarray(a, jnp.float32))) for a in good), space
        assert not any(bool(valid_action(space, jnp.asarray(a, jnp.float32))) for a in bad), space
    with pytest.raises(ValueError, match=r"action must have the shape \(2,\)"):
        valid_action(MultiDiscrete([3, 5]), jnp.zeros(3))
