"""popgym 1.0.7's Labyrinths as gymnax environments, step for step with popgym's NumPy ones.

Two tasks, each in popgym's three difficulties (``<Task>Easy`` / ``Medium`` / ``Hard``: mazes of 10 x 10,
14 x 14 and 18 x 18 blocks, episodes of 1024 steps) and in any setting popgym's own constructor accepts:

================  =================================================================================
task              the game
================  =================================================================================
LabyrinthEscape   find the exit, a gap on the maze's outer wall opposite the start:
                  ``-1 / L`` a step, ``+1`` more on the exit (the end); ``L`` the episode length
LabyrinthExplore  visit every open cell: ``+1 / F`` a cell not visited before (``F`` the maze's
                  open cells), ``-1 / L`` any other step; ends when every open cell is visited
================  =================================================================================

Both end by truncation on step ``L - 1`` (popgym's ``curr_step == max_episode_length - 1``). The agent
sees the 3 x 3 block of cells around it (free 0, wall 1, start 2, exit 3; outside the grid a wall) and
popgym's own record of its previous action (``NONE`` = 4 after a reset), each one-hot: memgym's
Gymnasium wrapper's observation of ``MultiDiscrete(9 * [5] + [5])``, then memgym's previous action
(one-hot of ``Discrete(4)``: left, right, up, down; zeros after a reset). popgym's view keeps a quirk
that this one keeps: at the grid's first row or column it is not centred on the agent, the missing
row or column padded with walls at the far side (the agent sits in the view's top row or left column).

**The mazes.** popgym draws each maze with mazelib's random Hunt-and-Kill on a lattice of
``rows x cols`` cells (half the blocks; a grid of ``2 rows + 1`` by ``2 cols + 1``, walls between):
a random walk from a random cell carves passages to unvisited neighbours until it is stuck, then a
random cell is "hunted" and, if it was visited, walked from; ``(2 rows + 1)(2 cols + 1)`` hunts in
all (so a cell can stay a wall, unreached: "a small amount of risk" in mazelib's words). The start
and the exit are gaps in opposite outer walls, each facing a uniform lattice cell of its side, the
side uniform (mazelib's ``generate_entrances(start_outer=True)``). :func:`hunt_and_kill` draws the
same distribution with a fixed number of loop steps: a hunt that lands on an unvisited cell or on a
cell with no unvisited neighbour changes nothing, so the hunts until the next one that starts a walk
are drawn at once (their number is geometric, the cell uniform among those that can start a walk),
and the loop has at most ``2 rows cols - 1`` steps (a carve each, a hunt before each walk but the
first), not one per hunt. The tests compare the distributions with mazelib's (the number of open
cells, where the start and exit lie, how often a cell stays a wall).

Each game's rewards are integer multiples of one unit (``1 / L``; Explore: ``1 / (L F)``, ``F`` the
episode's own open cells, so the unit is per episode), so both are
:class:`~memgym.envs.popgym_jax.common.ScoredTask`\\ s: the float32 reward is popgym's rounded once, the
episode's return popgym's score rounded to float32, to the bit. ::

    env = LabyrinthEscapeEasy()
    params = env.default_params
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, 1, params)  # right

Deviations from popgym
----------------------
None changes an observation, a reward, an end flag or a score of a valid action sequence.

====================================  ==========================================  ==========================================
what                                  popgym 1.0.7                                here
====================================  ==========================================  ==========================================
randomness                            Python's ``random`` and NumPy's global      ``jax.random``: the same distribution of
                                      generator, through mazelib                  mazes, start and exit (another stream)
invalid actions                       ``KeyError`` (memgym's wrapper raises       not checked (jit): clamped to 0..3 for the
                                      ``ValueError``)                             move, the previous-action block all zeros
stepping after an episode's end       goes on                                     gymnax's ``step`` starts a new episode
``info["position"]``, ``info["maze"]``, present                                     absent (``state.task.position``,
``get_state()``, rendering                                                        ``state.task.grid``, ``.visited``)
the mazes' own "not a memory task"    a ``DeprecationWarning`` on construction    none (the docs say it: docs/popgym_jax.md)
warning
invalid settings                      ``AssertionError``; an episode length of    ``ValueError`` naming the argument
                                      1 never ends
====================================  ==========================================  ==========================================
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces

from memgym.envs.popgym_jax.common import PopGymParams, PopGymState, ScoredTask, difficulty, flat_discrete
from memgym.envs.popgym_jax.games import nth_true
from memgym.validation import check_int

__all__ = [
    "LABYRINTH_TASKS",
    "Labyrinth",
    "LabyrinthEscape",
    "LabyrinthEscapeEasy",
    "LabyrinthEscapeHard",
    "LabyrinthEscapeMedium",
    "LabyrinthExplore",
    "LabyrinthExploreEasy",
    "LabyrinthExploreHard",
    "LabyrinthExploreMedium",
    "LabyrinthState",
    "MazeBuilder",
    "build_step",
    "build_steps",
    "finish_maze",
    "hunt_and_kill",
    "local_view",
    "maze_build_steps",
    "maze_builder",
    "maze_walls",
    "outer_entrances",
]

#: popgym's cell values (``popgym.core.maze.Cell``; its ``HIDDEN`` = 4 is never in a maze)
FREE, WALL, START, EXIT = 0, 1, 2, 3
#: the values of one observed cell and of popgym's own previous action (``Actions``: 4 moves and ``NONE``)
CELL_VALUES = 5
NO_ACTION = 4
#: the moves of actions 0..3 (left, right, up, down) as (row, column) steps
MOVES = np.array([[0, -1], [0, 1], [-1, 0], [1, 0]], np.int32)


def _unvisited_neighbours(visited: jax.Array) -> jax.Array:
    """``[rows, cols, 4]``: whether each lattice cell's neighbour above, below, left, right is an unvisited cell."""
    padded = jnp.pad(visited, 1, constant_values=True)  # beyond the lattice: nothing to carve
    return ~jnp.stack([padded[:-2, 1:-1], padded[2:, 1:-1], padded[1:-1, :-2], padded[1:-1, 2:]], axis=-1)


#: the lattice steps of :func:`_unvisited_neighbours`' four directions (up, down, left, right: ``d ^ 1`` is ``d``'s
#: opposite)
_LATTICE_STEPS = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]], np.int32)
#: :attr:`MazeBuilder.link` of a lattice cell not reached yet, and of the cell the first walk starts from
UNREACHED, ROOT = -2, -1


@struct.dataclass
class MazeBuilder:
    """A maze of :func:`hunt_and_kill` under construction, resumable a few loop steps at a time: ``link`` each
    lattice cell's way back to the cell it was carved from (int32 ``[rows, cols]``: a direction 0..3 of
    ``_LATTICE_STEPS``, :data:`ROOT` for the first cell, :data:`UNREACHED`), ``here`` the walk's lattice cell
    (int32 ``(r, c)``), ``hunts_left`` mazelib's hunts not yet spent, ``done`` whether no hunt left can change
    the maze, ``key`` the builder's own random stream. :func:`maze_walls` draws the grid."""

    link: jax.Array
    here: jax.Array
    hunts_left: jax.Array
    done: jax.Array
    key: jax.Array


def maze_builder(key: jax.Array, rows: int, cols: int) -> MazeBuilder:
    """A :class:`MazeBuilder` on a ``rows x cols`` lattice at its first cell (uniform, open), no step taken."""
    first_key, key = jax.random.split(key)
    first = jax.random.randint(first_key, (), 0, rows * cols)
    link = jnp.full(rows * cols, UNREACHED, jnp.int32).at[first].set(ROOT).reshape(rows, cols)
    here = jnp.stack(jnp.divmod(first, cols)).astype(jnp.int32)
    return MazeBuilder(link=link, here=here, hunts_left=jnp.int32((2 * rows + 1) * (2 * cols + 1)),
                       done=jnp.zeros((), bool), key=key)


def maze_walls(link: jax.Array) -> jax.Array:
    """The grid of a maze (bool ``[2 rows + 1, 2 cols + 1]``, True for a wall) from its lattice's links
    (:attr:`MazeBuilder.link`): a reached cell is open, and so is the wall between it and the cell it was
    carved from."""
    rows, cols = link.shape
    walls = jnp.ones((2 * rows + 1, 2 * cols + 1), bool).at[1::2, 1::2].set(link == UNREACHED)
    down = (link[1:] == 0) | (link[:-1] == 1)  # lattice rows r and r + 1 joined: grid row 2r + 2
    across = (link[:, 1:] == 2) | (link[:, :-1] == 3)  # lattice columns c and c + 1 joined: grid column 2c + 2
    return walls.at[2:-1:2, 1::2].set(~down).at[1::2, 2:-1:2].set(~across)


def _uniform_index(u: jax.Array, n: jax.Array) -> jax.Array:
    """``floor(u n)`` for ``u`` uniform on [0, 1): uniform on ``0 .. n - 1`` (int32; 0 where ``n`` is 0)."""
    return jnp.minimum(jnp.floor(u * n).astype(jnp.int32), jnp.maximum(n - 1, 0))


def build_step(builder: MazeBuilder, draws: jax.Array) -> MazeBuilder:
    """One step of :func:`hunt_and_kill`'s loop: carve to a uniform unvisited neighbour of the walk's cell; or,
    stuck, hunt the next cell a walk starts from (or find that none will); nothing once ``done``. ``draws``:
    three uniforms on [0, 1) (the neighbour, the number of hunts, the hunted cell)."""
    link, here = builder.link, builder.here
    rows, cols = link.shape
    visited = link != UNREACHED
    options = _unvisited_neighbours(visited)
    choices = options[here[0], here[1]]
    walk = choices.any() & ~builder.done
    direction = nth_true(choices, _uniform_index(draws[0], choices.sum()))
    ahead = jnp.clip(here + jnp.asarray(_LATTICE_STEPS)[direction], 0, jnp.array([rows - 1, cols - 1]))
    starts = (visited & options.any(axis=-1)).reshape(-1)
    count = starts.sum()
    # the hunts up to the first that lands in ``starts``: geometric, success count / cells (inverse CDF)
    failure = 1.0 - count.astype(jnp.float32) / (rows * cols)
    gap = jnp.floor(jnp.log1p(-draws[1]) / jnp.log(failure)).astype(jnp.int32) + 1
    hunt = ~walk & ~builder.done & (count > 0) & (gap <= builder.hunts_left)
    hunted = nth_true(starts, _uniform_index(draws[2], count))
    hunted = jnp.stack(jnp.divmod(hunted, cols)).astype(jnp.int32)
    # a carve links the cell ahead back to this one (the opposite direction); otherwise the same value goes back
    carved = jnp.where(walk, direction ^ 1, link[ahead[0], ahead[1]])
    return builder.replace(
        link=link.at[ahead[0], ahead[1]].set(carved),
        here=jnp.where(walk, ahead, jnp.where(hunt, hunted, here)),
        hunts_left=jnp.where(hunt, builder.hunts_left - gap, builder.hunts_left),
        done=builder.done | ~(walk | hunt),
    )


def build_steps(builder: MazeBuilder, steps: int) -> MazeBuilder:
    """``steps`` steps of :func:`build_step` (a static count), their uniforms drawn at once."""
    key, draw_key = jax.random.split(builder.key)
    draws = jax.random.uniform(draw_key, (steps, 3))
    builder = jax.lax.fori_loop(0, steps, lambda i, state: build_step(state, draws[i]), builder)
    return builder.replace(key=key)


def finish_maze(builder: MazeBuilder, needed: Any = True) -> jax.Array:
    """The finished maze's walls: the builder's steps until it is done (none where it already is). Where
    ``needed`` is False no step is taken (under ``vmap`` a loop runs as long as any environment's does: an
    auto-reset, computed at every step, asks only where the episode ends)."""
    needed = jnp.asarray(needed, bool)
    done = jax.lax.while_loop(lambda state: ~state.done & needed, lambda state: build_steps(state, 1), builder)
    return maze_walls(done.link)


def hunt_and_kill(key: jax.Array, rows: int, cols: int) -> jax.Array:
    """A maze of mazelib's random Hunt-and-Kill on a ``rows x cols`` lattice (module docstring): the grid,
    bool ``[2 rows + 1, 2 cols + 1]``, True for a wall (lattice cell ``(r, c)`` is grid cell
    ``(2r + 1, 2c + 1)``).

    mazelib's loop: walk (carve to a uniform unvisited neighbour until there is none), then hunt (a
    uniform lattice cell; walk from it if it was visited), ``(2 rows + 1)(2 cols + 1)`` hunts in all. Here a
    step (:func:`build_step`) either carves, or, stuck, draws the hunts up to the next one that starts a walk
    at once: their number is geometric with success ``|P| / (rows cols)``, ``P`` the visited cells with an
    unvisited neighbour, and the cell uniform on ``P``; where that number passes the hunts left, or ``P`` is
    empty, no hunt left can change the maze and it is complete. Each walk is preceded by such a hunt but the
    first and carves at least once, so :func:`maze_build_steps` (``2 rows cols - 1``) steps always finish it
    (:class:`MazeBuilder` spreads them over an episode).
    """
    return maze_walls(build_steps(maze_builder(key, rows, cols), maze_build_steps(rows, cols)).link)


def maze_build_steps(rows: int, cols: int) -> int:
    """The most steps :func:`hunt_and_kill`'s loop takes on a ``rows x cols`` lattice: ``2 rows cols - 1``."""
    return 2 * rows * cols - 1


def outer_entrances(key: jax.Array, rows: int, cols: int) -> tuple[jax.Array, jax.Array]:
    """``(start, exit)``, int32 ``(row, col)`` grid cells: gaps in two opposite outer walls of a
    ``[2 rows + 1, 2 cols + 1]`` grid, the start's side uniform, each facing a uniform lattice cell of its wall
    (mazelib's ``generate_entrances(start_outer=True, end_outer=True)``)."""
    side_key, start_key, exit_key = jax.random.split(key, 3)
    side = jax.random.randint(side_key, (), 0, 4)  # north, south, west, east
    across = jnp.where(side < 2, cols, rows)
    start_at = 2 * jax.random.randint(start_key, (), 0, across) + 1
    exit_at = 2 * jax.random.randint(exit_key, (), 0, across) + 1
    last_row, last_col = 2 * rows, 2 * cols
    start_edge = jnp.array([0, last_row, 0, last_col])[side]
    exit_edge = jnp.array([last_row, 0, last_col, 0])[side]
    north_south = side < 2
    start = jnp.where(north_south, jnp.stack([start_edge, start_at]), jnp.stack([start_at, start_edge]))
    exit_ = jnp.where(north_south, jnp.stack([exit_edge, exit_at]), jnp.stack([exit_at, exit_edge]))
    return start.astype(jnp.int32), exit_.astype(jnp.int32)


def local_view(grid: jax.Array, position: jax.Array) -> jax.Array:
    """popgym's 3 x 3 view of ``grid`` around ``position`` (int32, row-major): the rows from ``max(y - 1, 0)`` to
    ``min(y + 1, W)`` and the columns from ``max(x - 1, 0)`` to ``min(x + 1, H)`` that lie on the ``H x W`` grid
    (popgym bounds the row by the grid's width and the column by its height), the rest walls at the far sides."""
    height, width = grid.shape
    y, x = position[0], position[1]
    rows = jnp.maximum(y - 1, 0) + jnp.arange(3)
    cols = jnp.maximum(x - 1, 0) + jnp.arange(3)
    row_in = (rows <= jnp.minimum(y + 1, width)) & (rows < height)
    col_in = (cols <= jnp.minimum(x + 1, height)) & (cols < width)
    view = grid[jnp.clip(rows, 0, height - 1)][:, jnp.clip(cols, 0, width - 1)]
    return jnp.where(row_in[:, None] & col_in[None, :], view, WALL)


@struct.dataclass
class LabyrinthState:
    """A Labyrinth's state: ``grid``, popgym's maze grid (int32: free 0, wall 1, start 2, exit 3; Explore marks
    no exit); ``position``, the agent's ``(row, col)`` (int32); ``visited``, the cells it has stood on (bool,
    popgym's ``explored``); ``last_action``, popgym's own previous action (4 after a reset); ``open_cells``, the
    maze's free cells at the start (Explore's ``F``); ``score``, the episode's rewards in units of
    :meth:`Labyrinth.reward_denominator`; ``next_maze``, the maze of the next episode, built a few steps of
    :func:`build_step` at each step of this one (:attr:`Labyrinth.build_per_step`)."""

    grid: jax.Array
    position: jax.Array
    visited: jax.Array
    last_action: jax.Array
    open_cells: jax.Array
    score: jax.Array
    next_maze: MazeBuilder


class Labyrinth(ScoredTask):
    """What popgym's two Labyrinths share (popgym's ``MazeEnv``): the maze, the moves and the view.

    Args:
        maze_dims: ``(height, width)`` of the maze in blocks, even integers >= 6 (popgym's Easy / Medium / Hard:
            10, 14, 18 each); the grid is ``(2 (height // 2) + 1) x (2 (width // 2) + 1)``.
        episode_length: popgym's ``episode_length``, an integer >= 2: the episode is truncated on step
            ``episode_length - 1``.
        prev_action: append the previous action to the observation.
    """

    #: whether the exit is marked on the grid (Escape)
    marks_exit = False

    def __init__(self, maze_dims: Any = (10, 10), episode_length: int = 1024, prev_action: bool = True):
        super().__init__(prev_action=prev_action)
        try:
            dims = tuple(maze_dims)
        except TypeError:
            raise ValueError(f"maze_dims must be a pair of even integers >= 6, got maze_dims={maze_dims!r}") from None
        if len(dims) != 2:
            raise ValueError(f"maze_dims must be a pair (height, width), got maze_dims={maze_dims!r}")
        for dim in dims:
            check_int("maze_dims", dim, low=6, why="mazelib's smallest maze is 3 x 3 cells of 2 blocks")
            if dim % 2:
                raise ValueError(f"maze_dims must be even (popgym's mazes are cells of 2 blocks), got "
                                 f"maze_dims={maze_dims!r}")
        self.maze_dims = (int(dims[0]), int(dims[1]))
        self.lattice = (self.maze_dims[0] // 2, self.maze_dims[1] // 2)
        # the shortest episode walks from one outer wall to the opposite one: 2 min(rows, cols) steps at least
        #: steps of the next episode's maze built at each step (:class:`MazeBuilder`): enough to finish it by then
        self.build_per_step = -(-maze_build_steps(*self.lattice) // (2 * min(self.lattice)))
        self.grid_shape = (2 * self.lattice[0] + 1, 2 * self.lattice[1] + 1)
        self.episode_length = check_int("episode_length", episode_length, low=2,
                                        why="popgym truncates on step episode_length - 1")
        most_open = 2 * self.lattice[0] * self.lattice[1] - 1
        if self.episode_length * most_open >= 2 ** 24:
            raise ValueError(f"episode_length * the open cells of a maze must stay below 2**24 for exact rewards, got "
                             f"episode_length={episode_length!r} with maze_dims={maze_dims!r}")

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def default_params(self) -> PopGymParams:
        return PopGymParams(max_steps_in_episode=self.episode_length - 1)

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(len(MOVES))

    def task_observation_bounds(self, params):
        size = 10 * CELL_VALUES
        return np.zeros(size, np.float32), np.ones(size, np.float32)

    def observe_task(self, state: PopGymState, params) -> jax.Array:
        task: LabyrinthState = state.task
        view = local_view(task.grid, task.position).reshape(-1)
        return flat_discrete(jnp.concatenate([view, task.last_action[None]]), [CELL_VALUES] * 10)

    def start(self, walls: jax.Array, start: jax.Array, exit_: jax.Array, key: jax.Array) -> LabyrinthState:
        """A new episode's state in the maze ``walls`` (bool grid) entered at ``start``, its exit at ``exit_``
        (grid cells on the outer wall; marked on the grid only where :attr:`marks_exit`); ``key`` seeds the next
        episode's maze."""
        grid = jnp.asarray(walls).astype(jnp.int32)
        start, exit_ = jnp.asarray(start, jnp.int32), jnp.asarray(exit_, jnp.int32)
        grid = grid.at[start[0], start[1]].set(START)
        if self.marks_exit:
            grid = grid.at[exit_[0], exit_[1]].set(EXIT)
        open_cells = jnp.sum(grid == FREE).astype(jnp.int32)  # popgym's F: the start is not counted
        visited = jnp.zeros(self.grid_shape, bool).at[start[0], start[1]].set(True)
        return LabyrinthState(grid=grid, position=start, visited=visited, last_action=jnp.int32(NO_ACTION),
                              open_cells=open_cells, score=jnp.zeros((), jnp.int32),
                              next_maze=maze_builder(key, *self.lattice))

    def init_task(self, key, params) -> LabyrinthState:
        maze_key, door_key, next_key = jax.random.split(key, 3)
        walls = hunt_and_kill(maze_key, *self.lattice)
        return self.start(walls, *outer_entrances(door_key, *self.lattice), next_key)

    def next_task(self, key, state: PopGymState, params) -> LabyrinthState:
        """The next episode in the maze built during this one (finished here where the episode was too short)."""
        door_key, next_key = jax.random.split(key)
        walls = finish_maze(state.task.next_maze, needed=state.terminated | state.truncated)
        return self.start(walls, *outer_entrances(door_key, *self.lattice), next_key)

    def move(self, task: LabyrinthState, action: Any) -> jax.Array:
        """Where ``action`` takes the agent: one cell left, right, up or down, clamped to the grid; nowhere into a
        wall (popgym's ``MazeEnv.move``)."""
        step = jnp.asarray(MOVES)[jnp.clip(jnp.asarray(action, jnp.int32), 0, len(MOVES) - 1)]
        target = jnp.clip(task.position + step, 0, jnp.asarray(self.grid_shape) - 1)
        return jnp.where(task.grid[target[0], target[1]] == WALL, task.position, target)

    def walk(self, state: PopGymState, action: Any) -> tuple[LabyrinthState, jax.Array, jax.Array]:
        """The task state after the move, whether the cell moved to is new, and the truncation flag."""
        task: LabyrinthState = state.task
        position = self.move(task, action)
        new_cell = ~task.visited[position[0], position[1]]
        moved = task.replace(position=position, visited=task.visited.at[position[0], position[1]].set(True),
                             last_action=jnp.asarray(action, jnp.int32),
                             next_maze=build_steps(task.next_maze, self.build_per_step))
        return moved, new_cell, state.time + 1 == self.episode_length - 1

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(maze_dims={self.maze_dims}, episode_length={self.episode_length}, "
                f"prev_action={self.prev_action})")


class LabyrinthEscape(Labyrinth):
    """Escape a maze through its exit (module docstring; popgym's ``LabyrinthEscape``)."""

    marks_exit = True

    def reward_denominator(self, task, params) -> int:
        return self.episode_length

    def play(self, key, state: PopGymState, action, params):
        task, _, truncated = self.walk(state, action)
        escaped = task.grid[task.position[0], task.position[1]] == EXIT
        return task, jnp.where(escaped, self.episode_length - 1, -1), escaped, truncated


class LabyrinthExplore(Labyrinth):
    """Visit every open cell of a maze (module docstring; popgym's ``LabyrinthExplore``)."""

    def reward_denominator(self, task, params) -> jax.Array:
        return self.episode_length * task.open_cells

    def play(self, key, state: PopGymState, action, params):
        task, new_cell, truncated = self.walk(state, action)
        # popgym's 1 / F and -1 / L in units of 1 / (L F)
        units = jnp.where(new_cell, self.episode_length, -task.open_cells)
        explored = jnp.all(task.visited == (task.grid != WALL))
        return task, units, explored, truncated


# ---------------------------------------------------------------------------------------------
# popgym's difficulties


LabyrinthEscapeEasy = difficulty(LabyrinthEscape, "Easy", maze_dims=(10, 10), episode_length=1024)
LabyrinthEscapeMedium = difficulty(LabyrinthEscape, "Medium", maze_dims=(14, 14), episode_length=1024)
LabyrinthEscapeHard = difficulty(LabyrinthEscape, "Hard", maze_dims=(18, 18), episode_length=1024)
LabyrinthExploreEasy = difficulty(LabyrinthExplore, "Easy", maze_dims=(10, 10), episode_length=1024)
LabyrinthExploreMedium = difficulty(LabyrinthExplore, "Medium", maze_dims=(14, 14), episode_length=1024)
LabyrinthExploreHard = difficulty(LabyrinthExplore, "Hard", maze_dims=(18, 18), episode_length=1024)

#: popgym's class name -> the JAX class, for both Labyrinths and every difficulty (e.g. ``"LabyrinthEscapeEasy"``)
LABYRINTH_TASKS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        LabyrinthEscapeEasy, LabyrinthEscapeMedium, LabyrinthEscapeHard,
        LabyrinthExploreEasy, LabyrinthExploreMedium, LabyrinthExploreHard,
    )
}
