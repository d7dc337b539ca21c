"""popgym 1.0.7's bandits and board games as gymnax environments, step for step with popgym's NumPy ones.

Three tasks, each in popgym's three difficulties (the classes ``<Task>Easy`` / ``Medium`` / ``Hard``, built
with no arguments but ``prev_action``) and in any setting popgym's own constructor accepts:

================  ===============================================  ==========================================
task              the game                                         Easy / Medium / Hard
================  ===============================================  ==========================================
MultiarmedBandit  ``num_bandits`` arms, each paying with its own   10 arms, 200 steps / 20, 400 / 30, 600
                  probability (uniform in [0, 1) per episode):
                  ``+1 / L`` a payout, ``-1 / L`` otherwise;
                  the agent sees whether the last pull paid
Battleship        ships of sizes 2, 3, 3, 4 hidden on a square     board 8 / 10 / 12
                  board; an action names a cell, the agent sees
                  hit or miss: ``+1 / h`` a new hit (``h`` the
                  ship cells), ``-1 / (n^2 - h)`` anything else;
                  ends when every ship cell is hit, or after
                  ``n^2`` shots
MineSweeper       mines hidden on a board; an action names a       4 x 4, 2 mines / 6 x 6, 6 / 8 x 8, 10
                  cell, the agent sees its count of mines in
                  the 3 x 3 block around it (itself included):
                  ``+1 / L`` a new cell, ``-0.5 / (L - 2)`` a
                  cell seen before, ``-0.5 - 1 / L`` a mine
                  (the end); ``L`` = the free cells; ends when
                  every free cell is seen, or after ``L`` steps
================  ===============================================  ==========================================

popgym's rewards are scaled so that a return lies in ``[-1, 1]`` (a Battleship that misses every shot
scores a little below -1). Each game's rewards are integer multiples of one unit (``1 / L``;
``1 / (h (n^2 - h))``; ``1 / (2 L (L - 2))``), so every task is a
:class:`~memgym.envs.popgym_jax.common.ScoredTask`: the float32 reward is popgym's rounded once and the
episode's return in ``info`` is popgym's score rounded to float32, to the bit. The observation is memgym's
Gymnasium wrapper's (``memgym/popgym-<Task><Difficulty>-v0``: popgym's ``Discrete`` observation one-hot, then
the previous action: one-hot for the bandit's ``Discrete`` action, two one-hot blocks (row, column) for the
board games' ``MultiDiscrete([n, n])`` action, zeros after a reset)::

    env = BattleshipEasy()
    params = env.default_params
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, jnp.array([3, 4]), params)

Battleship places its ships as popgym does, one after another, each uniformly among the placements that fit
on the board and touch no ship placed before (popgym draws a cell, an axis and a direction until they fit:
every fitting placement is drawn by two of its draws, so the placements are uniform); here the fitting
placements are counted and one is drawn. MineSweeper's mines are a uniformly random set of cells, as
popgym's ``choice(..., replace=False)`` (here each mine uniform among the cells left). gymnax's auto-reset
computes a new episode at every vmapped step, so each of these draws takes one random integer
(:func:`nth_true`), not one random number per candidate, and Battleship's next board is placed during the
episode before, one ship a step (:meth:`Battleship.place_next`).

Deviations from popgym
----------------------
None changes an observation, a reward, an end flag or a score of a valid action sequence.

====================================  ==========================================  ==========================================
what                                  popgym 1.0.7                                here
====================================  ==========================================  ==========================================
randomness                            NumPy's generator                           ``jax.random``: the same distributions
                                                                                  (another stream); the bandit's draw for
                                                                                  the next pull is made one step ahead
                                                                                  (``next_draw``)
the bandit's draw under JAX's         float64, compared with the float32 arm      float32 (float64 under JAX's 64-bit mode):
default float32                                                                   a payout's probability differs by < 2^-24
Battleship: ships that cannot fit     draws forever                               the ship is left out (the episode then
                                                                                  ends only by its shot limit)
invalid actions                       not checked (memgym's wrapper raises        not checked (jit): an index outside the
                                      ``ValueError``); popgym's NumPy indexing    board is clamped to it for the game, and
                                      wraps a negative one                        its previous-action block is all zeros
stepping after an episode's end       goes on (MineSweeper) or scores on          gymnax's ``step`` starts a new episode
                                      (Battleship, bandits)
``info["bandits"]``, ``get_state()``,  present                                     absent (the arms are ``state.task.arms``,
rendering                                                                         the boards ``state.task.board`` /
                                                                                  ``hidden``)
invalid settings                      ``AssertionError``, an endless loop or a    ``ValueError`` naming the argument
                                      ``ZeroDivisionError``
====================================  ==========================================  ==========================================
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces

from memgym.envs.functional import MultiDiscrete
from memgym.envs.popgym_jax.common import PopGymParams, PopGymState, ScoredTask, difficulty, one_hot, physics_dtype
from memgym.validation import check_choice, check_int

__all__ = [
    "GAME_TASKS",
    "BanditState",
    "Battleship",
    "BattleshipEasy",
    "BattleshipHard",
    "BattleshipMedium",
    "BattleshipState",
    "MineSweeper",
    "MineSweeperEasy",
    "MineSweeperHard",
    "MineSweeperMedium",
    "MineSweeperState",
    "MultiarmedBandit",
    "MultiarmedBanditEasy",
    "MultiarmedBanditHard",
    "MultiarmedBanditMedium",
    "mine_counts",
    "nth_true",
    "place_ship",
]


class _GameTask(ScoredTask):
    """What the three games share: a name, a ``Discrete`` observation of ``observations`` values (one-hot; 0 after
    a reset) and params holding only popgym's longest episode (Python ints, hashable as gymnax's)."""

    #: how many values popgym's ``Discrete`` observation takes
    observations = 2

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def default_params(self) -> PopGymParams:
        return PopGymParams(max_steps_in_episode=self.max_episode_length)

    def task_observation_bounds(self, params):
        return np.zeros(self.observations, np.float32), np.ones(self.observations, np.float32)

    def observe_task(self, state: PopGymState, params) -> jax.Array:
        return one_hot(state.task.shown, self.observations)


# ---------------------------------------------------------------------------------------------
# MultiarmedBandit


@struct.dataclass
class BanditState:
    """MultiarmedBandit's state: ``arms``, each arm's payout probability (float32); ``next_draw``, the uniform
    draw the next pull is compared with (float64 under JAX's 64-bit mode, else float32); ``shown``, whether the
    last pull paid (int32, 0 after a reset); ``score``, the episode's rewards in units of ``1 / L``."""

    arms: jax.Array
    next_draw: jax.Array
    shown: jax.Array
    score: jax.Array


class MultiarmedBandit(_GameTask):
    """Episodic multi-armed bandit: new payout probabilities every episode, to be found by pulling and then
    exploited (see the module docstring).

    Args:
        num_bandits: the arms, an integer >= 1 (popgym's Easy / Medium / Hard: 10 / 20 / 30).
        episode_length: the episode's length, an integer >= 1 (200 / 400 / 600).
        prev_action: append the previous action to the observation.
    """

    def __init__(self, num_bandits: int = 10, episode_length: int = 200, prev_action: bool = True):
        super().__init__(prev_action=prev_action)
        self.num_bandits = check_int("num_bandits", num_bandits, low=1)
        self.max_episode_length = check_int("episode_length", episode_length, low=1)

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(self.num_bandits)

    def reward_denominator(self, task, params) -> int:
        return self.max_episode_length

    def start(self, arms: jax.Array, next_draw: jax.Array) -> BanditState:
        """A new episode's state with payout probabilities ``arms`` and the first pull's draw ``next_draw``."""
        return BanditState(arms=jnp.asarray(arms, jnp.float32), next_draw=jnp.asarray(next_draw, physics_dtype()),
                           shown=jnp.zeros((), jnp.int32), score=jnp.zeros((), jnp.int32))

    def init_task(self, key, params) -> BanditState:
        arms_key, draw_key = jax.random.split(key)
        return self.start(jax.random.uniform(arms_key, (self.num_bandits,), jnp.float32),
                          jax.random.uniform(draw_key, (), physics_dtype()))

    def play(self, key, state: PopGymState, action, params):
        task: BanditState = state.task
        arm = task.arms[jnp.clip(jnp.asarray(action, jnp.int32), 0, self.num_bandits - 1)]
        paid = task.next_draw < arm.astype(task.next_draw.dtype)
        new_task = task.replace(next_draw=jax.random.uniform(key, (), task.next_draw.dtype),
                                shown=paid.astype(jnp.int32))
        return (new_task, jnp.where(paid, 1, -1), jnp.zeros((), bool),
                state.time + 1 >= self.max_episode_length)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_bandits={self.num_bandits}, episode_length={self.max_episode_length}, "
                f"prev_action={self.prev_action})")


# ---------------------------------------------------------------------------------------------
# Battleship


def nth_true(mask: jax.Array, n: jax.Array) -> jax.Array:
    """The index of ``mask``'s ``n``-th True entry, counting from 0 (1-d ``mask``; 0 where there is none): with
    ``n`` uniform on ``[0, mask.sum())``, a uniform draw among the True entries from one random integer (where
    ``jax.random.choice`` or a categorical draw takes one random number per entry, the cost of a vmapped
    auto-reset)."""
    # a log-depth scan: XLA's CPU cumsum is a reduce-window, quadratic in the length
    return jnp.argmax(jax.lax.associative_scan(jnp.add, mask.astype(jnp.int32)) > n)


def place_ship(key: jax.Array, board: jax.Array, size: Any, longest: int | None = None) -> jax.Array:
    """``board`` (bool, ``n x n``) with a ship of ``size`` cells added, uniformly among the placements (a row or
    a column of ``size`` cells) that fit on the board and touch no ship on it; unchanged where none fits.

    Every placement is a start cell and an axis; a placement fits where the board's cells it covers sum to 0 (the
    board, walled beyond its edge, added to ``size`` shifted copies of itself), and one uniform integer picks among
    those that fit (:func:`nth_true`). ``size`` may be traced (an int32 of at most ``longest``, a static bound):
    one compiled placement serves ships of every size."""
    n = board.shape[0]
    longest = int(size) if longest is None else int(longest)
    size = jnp.asarray(size, jnp.int32)
    occupied = jnp.pad(board.astype(jnp.int32), ((0, 0), (0, longest)), constant_values=1)  # beyond the edge: full

    def windows(grid: jax.Array) -> jax.Array:  # grid[r, c : c + size].sum() for every start c, [n, n]
        return sum(jnp.where(i < size, grid[:, i:i + n], 0) for i in range(longest))

    rows_padded = jnp.pad(board.astype(jnp.int32).T, ((0, 0), (0, longest)), constant_values=1)
    across, down = windows(occupied) == 0, windows(rows_padded) == 0  # [row, start col], [col, start row]
    free = jnp.concatenate([across.reshape(-1), down.reshape(-1)]) & (size >= 1) & (size <= n)
    choice = nth_true(free, jax.random.randint(key, (), 0, jnp.maximum(free.sum(), 1)))
    is_down = choice >= n * n
    line, start = jnp.divmod(jnp.where(is_down, choice - n * n, choice), n)
    rows, cols = jnp.arange(n)[:, None], jnp.arange(n)[None, :]
    along, other = jnp.where(is_down, rows, cols), jnp.where(is_down, cols, rows)
    ship = (other == line) & (along >= start) & (along < start + size) & jnp.any(free)
    return board | ship


@struct.dataclass
class BattleshipState:
    """Battleship's state: ``board``, the ship cells (bool ``n x n``); ``guesses``, the cells shot at (bool);
    ``hits``, the ship cells hit (int32); ``shown``, whether the last shot was a new hit (int32, 0 after a
    reset); ``score``, the episode's rewards in units of ``1 / (h (n^2 - h))``; ``next_board`` and
    ``next_ships``, the next episode's board and how many of its ships are placed (one a step: an episode lasts at
    least as many steps as there are ship cells, so it is complete when the episode ends)."""

    board: jax.Array
    guesses: jax.Array
    hits: jax.Array
    shown: jax.Array
    score: jax.Array
    next_board: jax.Array
    next_ships: jax.Array


class Battleship(_GameTask):
    """Battleship on an unseen board (see the module docstring).

    Args:
        board_size: the board's side, an integer >= 1 (popgym's Easy / Medium / Hard: 8 / 10 / 12).
        ship_sizes: the ships' sizes, a non-empty sequence of integers from 1 to ``board_size`` whose sum is
            below ``board_size ** 2`` (popgym's: 2, 3, 3, 4).
        prev_action: append the previous action to the observation.
    """

    def __init__(self, board_size: int = 10, ship_sizes: Any = (2, 3, 3, 4), prev_action: bool = True):
        super().__init__(prev_action=prev_action)
        self.board_size = check_int("board_size", board_size, low=1)
        try:
            sizes = tuple(ship_sizes)
        except TypeError:
            raise ValueError(f"ship_sizes must be a sequence of integers, got ship_sizes={ship_sizes!r}") from None
        if not sizes:
            raise ValueError("ship_sizes must name at least one ship, got ship_sizes=()")
        self.ship_sizes = tuple(check_int("ship_sizes", size, low=1, high=self.board_size) for size in sizes)
        self.needed_hits = sum(self.ship_sizes)
        self.max_episode_length = self.board_size ** 2
        if self.needed_hits >= self.max_episode_length:
            raise ValueError(f"ship_sizes must cover fewer than board_size ** 2 = {self.max_episode_length} cells "
                             f"(popgym divides by the free cells), got ship_sizes={ship_sizes!r}")

    def action_space(self, params=None) -> MultiDiscrete:
        return MultiDiscrete([self.board_size, self.board_size])

    def reward_denominator(self, task, params) -> int:
        return self.needed_hits * (self.max_episode_length - self.needed_hits)

    def start(self, board: jax.Array) -> BattleshipState:
        """A new episode's state on ``board`` (the ship cells, bool), the next episode's board empty."""
        n = self.board_size
        zero = jnp.zeros((), jnp.int32)
        return BattleshipState(board=jnp.asarray(board, bool), guesses=jnp.zeros((n, n), bool), hits=zero,
                               shown=zero, score=zero, next_board=jnp.zeros((n, n), bool), next_ships=zero)

    def place_next(self, key: jax.Array, task: BattleshipState) -> BattleshipState:
        """``task`` with the next episode's next ship placed (nothing once every ship is)."""
        index = jnp.minimum(task.next_ships, len(self.ship_sizes) - 1)
        size = jnp.where(task.next_ships < len(self.ship_sizes), jnp.asarray(self.ship_sizes)[index], 0)
        return task.replace(next_board=place_ship(key, task.next_board, size, max(self.ship_sizes)),
                            next_ships=task.next_ships + 1)

    def init_task(self, key, params) -> BattleshipState:
        board = jnp.zeros((self.board_size, self.board_size), bool)
        for ship_key, size in zip(jax.random.split(key, len(self.ship_sizes)), self.ship_sizes):
            board = place_ship(ship_key, board, size)
        return self.start(board)

    def next_task(self, key, state: PopGymState, params) -> BattleshipState:
        """The next episode on the board placed during this one."""
        return self.start(state.task.next_board)

    def play(self, key, state: PopGymState, action, params):
        task: BattleshipState = self.place_next(key, state.task)
        row, col = _cell(action, (self.board_size, self.board_size))
        hit = task.board[row, col] & ~task.guesses[row, col]
        hits = task.hits + hit.astype(jnp.int32)
        new_task = task.replace(guesses=task.guesses.at[row, col].set(True), hits=hits, shown=hit.astype(jnp.int32))
        free = self.max_episode_length - self.needed_hits
        units = jnp.where(hit, free, -self.needed_hits)
        return new_task, units, hits == self.needed_hits, state.time + 1 >= self.max_episode_length

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(board_size={self.board_size}, ship_sizes={list(self.ship_sizes)}, "
                f"prev_action={self.prev_action})")


def _cell(action: Any, dims: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
    """The (row, column) an action names, clamped to a board of ``dims`` (rows, columns)."""
    cell = jnp.clip(jnp.asarray(action, jnp.int32).reshape(-1)[:2], 0, jnp.asarray(dims) - 1)
    return cell[0], cell[1]


# ---------------------------------------------------------------------------------------------
# MineSweeper

#: popgym's MineSweeper difficulties: (rows, columns) and mines
MINESWEEPER_SETTINGS = {"easy": ((4, 4), 2), "medium": ((6, 6), 6), "hard": ((8, 8), 10)}
CLEAR, MINE, VIEWED = 0, 1, 2


def mine_counts(mines: jax.Array) -> jax.Array:
    """Each cell's count of mines in the 3 x 3 block around it, itself included (int32), as popgym counts."""
    padded = jnp.pad(mines.astype(jnp.int32), 1)
    rows, cols = mines.shape
    return sum(padded[1 + i:1 + i + rows, 1 + j:1 + j + cols] for i in (-1, 0, 1) for j in (-1, 0, 1))


@struct.dataclass
class MineSweeperState:
    """MineSweeper's state: ``hidden``, each cell clear (0), a mine (1) or seen (2) (int32, popgym's
    ``hidden_grid``); ``counts``, each cell's mine count (:func:`mine_counts`); ``shown``, the count the agent
    sees (0 after a reset); ``score``, the episode's rewards in units of ``1 / (2 L (L - 2))``."""

    hidden: jax.Array
    counts: jax.Array
    shown: jax.Array
    score: jax.Array


class MineSweeper(_GameTask):
    """MineSweeper on an unseen board (see the module docstring).

    Args:
        difficulty: ``"easy"`` (4 x 4, 2 mines), ``"medium"`` (6 x 6, 6) or ``"hard"`` (8 x 8, 10), as popgym's.
        prev_action: append the previous action to the observation.
    """

    def __init__(self, difficulty: str = "easy", prev_action: bool = True):
        super().__init__(prev_action=prev_action)
        self.difficulty = check_choice("difficulty", difficulty, MINESWEEPER_SETTINGS)
        self.dims, self.num_mines = MINESWEEPER_SETTINGS[difficulty]
        self.max_episode_length = self.dims[0] * self.dims[1] - self.num_mines
        self.observations = min(self.num_mines + 1, 10)

    def action_space(self, params=None) -> MultiDiscrete:
        return MultiDiscrete(list(self.dims))

    def reward_denominator(self, task, params) -> int:
        free = self.max_episode_length
        return 2 * free * (free - 2)

    def start(self, mines: jax.Array) -> MineSweeperState:
        """A new episode's state with ``mines`` (bool, ``rows x columns``)."""
        mines = jnp.asarray(mines, bool)
        return MineSweeperState(hidden=mines.astype(jnp.int32), counts=mine_counts(mines),
                                shown=jnp.zeros((), jnp.int32), score=jnp.zeros((), jnp.int32))

    def init_task(self, key, params) -> MineSweeperState:
        cells = self.dims[0] * self.dims[1]
        mines = jnp.zeros(cells, bool)
        # a uniformly random set of cells: each mine uniform among the cells left (one random integer a mine)
        for index, mine_key in enumerate(jax.random.split(key, self.num_mines)):
            mines = mines.at[nth_true(~mines, jax.random.randint(mine_key, (), 0, cells - index))].set(True)
        return self.start(mines.reshape(self.dims))

    def play(self, key, state: PopGymState, action, params):
        task: MineSweeperState = state.task
        row, col = _cell(action, self.dims)
        before = task.hidden[row, col]
        hidden = jnp.where(before == CLEAR, task.hidden.at[row, col].set(VIEWED), task.hidden)
        free = self.max_episode_length
        # popgym's rewards 1 / L, -0.5 / (L - 2) and -0.5 - 1 / L in units of 1 / (2 L (L - 2))
        units = jnp.select([before == MINE, before == VIEWED], [-(free + 2) * (free - 2), -free], 2 * (free - 2))
        terminated = (before == MINE) | jnp.all(hidden != CLEAR)
        truncated = (state.time + 1 == free) & ~terminated
        return task.replace(hidden=hidden, shown=task.counts[row, col]), units, terminated, truncated

    def __repr__(self) -> str:
        return f"{type(self).__name__}(difficulty={self.difficulty!r}, prev_action={self.prev_action})"


# ---------------------------------------------------------------------------------------------
# popgym's difficulties


MultiarmedBanditEasy = difficulty(MultiarmedBandit, "Easy", num_bandits=10, episode_length=200)
MultiarmedBanditMedium = difficulty(MultiarmedBandit, "Medium", num_bandits=20, episode_length=400)
MultiarmedBanditHard = difficulty(MultiarmedBandit, "Hard", num_bandits=30, episode_length=600)
BattleshipEasy = difficulty(Battleship, "Easy", board_size=8, ship_sizes=(2, 3, 3, 4))
BattleshipMedium = difficulty(Battleship, "Medium", board_size=10, ship_sizes=(2, 3, 3, 4))
BattleshipHard = difficulty(Battleship, "Hard", board_size=12, ship_sizes=(2, 3, 3, 4))
MineSweeperEasy = difficulty(MineSweeper, "Easy", difficulty="easy")
MineSweeperMedium = difficulty(MineSweeper, "Medium", difficulty="medium")
MineSweeperHard = difficulty(MineSweeper, "Hard", difficulty="hard")

#: popgym's class name -> the JAX class, for every game and difficulty (e.g. ``"BattleshipEasy"``)
GAME_TASKS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        MultiarmedBanditEasy, MultiarmedBanditMedium, MultiarmedBanditHard,
        BattleshipEasy, BattleshipMedium, BattleshipHard,
        MineSweeperEasy, MineSweeperMedium, MineSweeperHard,
    )
}
