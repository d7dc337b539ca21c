"""popgym 1.0.7's Labyrinths in JAX (memgym.envs.popgym_jax.labyrinth) against popgym's own.

The parity tests drive popgym's environment through memgym's Gymnasium wrapper (``PopGymEnv``) and step the
JAX task beside it from the same maze: after each of popgym's resets its grid, start and exit go into a fresh
JAX state. Every observation (popgym's 3 x 3 view, its own previous action and memgym's), reward, end flag,
episode return (popgym's score rounded to float32, to the bit) and length must be equal. The policies mix
random moves with ones that head (by breadth-first search on popgym's grid) for the exit or for the nearest
cell not visited yet, so that Escape's and Explore's episodes end both ways.

popgym draws its mazes from Python's and NumPy's global generators through mazelib; they cannot be replayed
through ``jax.random``, so the mazes' distribution is compared with mazelib's with stated tests (fixed seeds).

popgym's Labyrinths need popgym and mazelib, so the module is skipped without them.
"""

from __future__ import annotations

import collections
import random
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("mazelib")
popgym_envs = pytest.importorskip("popgym.envs")
stats = pytest.importorskip("scipy.stats")

from mazelib.generate.HuntAndKill import HuntAndKill  # noqa: E402
from popgym.core.maze import MazeEnv  # noqa: E402

from memgym.envs import make_jax  # noqa: E402
from memgym.envs.functional import GymnasiumAdapter, GymnasiumVectorAdapter  # noqa: E402
from memgym.envs.popgym import PopGymEnv  # noqa: E402
from tests.envs.popgym_lockstep import check_lockstep  # noqa: E402
from memgym.envs.popgym_jax.labyrinth import (  # noqa: E402
    LABYRINTH_TASKS,
    LabyrinthEscape,
    LabyrinthExplore,
    build_steps,
    finish_maze,
    hunt_and_kill,
    local_view,
    maze_build_steps,
    maze_builder,
    outer_entrances,
)

NAMES = list(LABYRINTH_TASKS)
# each task at Easy in the fast tier, every difficulty in the slow one
MOVES = {0: (0, -1), 1: (0, 1), 2: (-1, 0), 3: (1, 0)}


@pytest.fixture(autouse=True)
def _no_maze_warning():
    """popgym's mazes warn on construction that they are no memory benchmark (docs/popgym_jax.md says it)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Maze environments", DeprecationWarning)
        yield


# ---------------------------------------------------------------------------------------------
# popgym's side


def first_moves(grid: np.ndarray, position: tuple[int, int], goal) -> dict:
    """Breadth-first search from ``position`` over popgym's grid (walls are 1): for every reachable cell where
    ``goal(cell)`` holds, the first move of a shortest path to it (None for ``position`` itself)."""
    seen = {position: None}
    queue = collections.deque([position])
    found = {}
    while queue:
        cell = queue.popleft()
        if goal(cell):
            found[cell] = seen[cell]
        for action, (dy, dx) in MOVES.items():
            nxt = (cell[0] + dy, cell[1] + dx)
            if 0 <= nxt[0] < grid.shape[0] and 0 <= nxt[1] < grid.shape[1] and grid[nxt] != 1 and nxt not in seen:
                seen[nxt] = action if seen[cell] is None else seen[cell]
                queue.append(nxt)
    return found


def policy(upstream, rng: np.random.Generator, aim: float) -> int:
    """With probability ``aim`` a move along a shortest path to the exit (Escape) or to the nearest cell not
    visited yet (Explore); otherwise (or with nowhere to head for) a random move."""
    if rng.random() < aim:
        if hasattr(upstream, "pos_reward_scale"):  # Explore
            goal = lambda cell: upstream.explored[cell] == 0  # noqa: E731
        else:
            goal = lambda cell: cell == tuple(upstream.maze.end)  # noqa: E731
        found = first_moves(upstream.maze.grid, tuple(upstream.position), goal)
        if found:
            return next(iter(found.values()))
    return int(rng.integers(4))


def start_from_popgym(env, upstream):
    """The JAX task state of popgym's task ``upstream`` just after its reset (its grid, start and exit)."""
    walls = upstream.maze.grid == 1
    return env.start(walls, np.array(upstream.maze.start), np.array(upstream.maze.end), jax.random.key(0))


# ---------------------------------------------------------------------------------------------
# parity


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.slow(seconds=15)  # every difficulty (Easy 12-13 s: over the fast tier's 10 s)
def test_lockstep_with_popgym_is_exact(name):
    """Every observation, reward, end flag, return and length equal to popgym's, at every difficulty, episodes
    ending by the exit (Escape) or by every cell visited (Explore) and by the step limit; thousands of steps."""
    counts = check_lockstep(name, LABYRINTH_TASKS[name](), start_from_popgym, policy, episodes=9,
                            seed=NAMES.index(name), aim=0.9)
    assert counts["steps"] >= 2000
    assert counts["terminated"] >= 2 and counts["truncated"] >= 1


def test_the_view_is_popgyms_at_every_cell_of_square_and_oblong_grids():
    """popgym's ``local_view`` (its off-centre view at the first row and column, its height and width swapped in
    the bounds) at every position of random grids, square and not."""
    rng = np.random.default_rng(0)
    view = jax.jit(local_view)
    for shape in [(11, 11), (11, 15), (15, 11)]:
        grid = rng.integers(0, 4, shape)
        upstream = MazeEnv.__new__(MazeEnv)
        upstream.maze = type("Maze", (), {"grid": grid})()
        for y in range(shape[0]):
            for x in range(shape[1]):
                upstream.position = (y, x)
                np.testing.assert_array_equal(np.asarray(view(jnp.asarray(grid), jnp.array([y, x]))),
                                              upstream.local_view(grid), err_msg=f"{shape} at {(y, x)}")


def test_constants_and_difficulties_are_popgyms():
    for name, cls in LABYRINTH_TASKS.items():
        ours, theirs = cls(), getattr(popgym_envs, name)()
        assert ours.default_params.max_steps_in_episode == theirs.max_episode_length - 1
        assert list(ours.lattice) == theirs.maze_dims
        assert ours.action_space(ours.default_params).n == theirs.action_space.n
        wrapped = PopGymEnv(name)
        space = ours.observation_space(ours.default_params)
        assert space.shape == wrapped.observation_space.shape


def test_escape_and_explore_score_as_popgym_says():
    """On a hand-made maze: the exit reached in the fewest steps, every cell visited, a step into a wall."""
    walls = np.ones((7, 7), bool)
    walls[1, 1:6] = walls[1:6, 5] = False  # an L-shaped corridor: (1, 1) to (1, 5), then down to (5, 5)
    start, exit_ = np.array([0, 1]), np.array([6, 5])
    escape = LabyrinthEscape(maze_dims=(6, 6), episode_length=100)
    params = escape.default_params
    step = jax.jit(lambda state, action: escape.step_env(jax.random.key(0), state, action, params))
    state = escape.initial_state(escape.start(walls, start, exit_, jax.random.key(0)), params)
    for action in [3] + [1] * 4 + [3] * 5:
        obs, state, reward, terminated, info = step(state, jnp.asarray(action))
    assert bool(terminated) and reward == np.float32(1 - 1 / 100)
    assert np.asarray(info["episode_return"]) == np.float32(1 - 10 / 100)
    explore = LabyrinthExplore(maze_dims=(6, 6), episode_length=100)
    state = explore.initial_state(explore.start(walls, start, exit_, jax.random.key(0)), params)
    assert int(state.task.open_cells) == 9 and int(state.task.grid[6, 5]) == 1  # no exit marked
    step = jax.jit(lambda state, action: explore.step_env(jax.random.key(0), state, action, params))
    obs, state, reward, terminated, info = step(state, jnp.asarray(2))  # up from the start: the outer wall's edge
    assert reward == np.float32(-1 / 100) and (np.asarray(state.task.position) == start).all()
    for action in [3] + [1] * 4 + [3] * 4:
        obs, state, reward, terminated, info = step(state, jnp.asarray(action))
    assert bool(terminated) and reward == np.float32(1 / 9)
    assert np.asarray(info["episode_return"]) == np.float32(1 - 1 / 100)


@pytest.mark.parametrize("call, match", [
    (lambda: LabyrinthEscape(maze_dims=(4, 10)), "maze_dims"),
    (lambda: LabyrinthEscape(maze_dims=(11, 10)), "maze_dims must be even"),
    (lambda: LabyrinthEscape(maze_dims=10), "maze_dims must be a pair"),
    (lambda: LabyrinthExplore(maze_dims=(10, 10, 10)), r"maze_dims must be a pair \(height, width\)"),
    (lambda: LabyrinthExplore(episode_length=1), "episode_length"),
    (lambda: LabyrinthExplore(maze_dims=(200, 200), episode_length=1024), "below 2\\*\\*24"),
])
def test_invalid_arguments_raise_value_errors_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.slow(seconds=16)
@pytest.mark.parametrize("name", ["LabyrinthEscapeEasy", "LabyrinthExploreEasy"])
def test_the_gymnasium_adapters_pass_check_env(name):
    env = LABYRINTH_TASKS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no spec, so no render-mode check
        check_env(GymnasiumAdapter(env, env.default_params))
    vector = GymnasiumVectorAdapter(env, env.default_params, num_envs=4)
    vector.reset(seed=0)
    for _ in range(3):
        obs, reward, terminated, truncated, info = vector.step(vector.action_space.sample())
    assert obs.shape == (4, 54) and np.isfinite(reward).all()


# ---------------------------------------------------------------------------------------------
# the mazes: mazelib's distribution, built across an episode


def maze_statistics(walls: np.ndarray) -> tuple[int, int, int]:
    """``(reached lattice cells, dead ends, junctions)`` of a maze grid (True for a wall)."""
    open_ = (~walls).astype(int)
    cells = open_[1::2, 1::2].astype(bool)
    degree = open_[:-2:2, 1::2] + open_[2::2, 1::2] + open_[1::2, :-2:2] + open_[1::2, 2::2]
    return int(cells.sum()), int(np.sum(cells & (degree == 1))), int(np.sum(cells & (degree >= 3)))


@pytest.mark.slow(seconds=12)
@pytest.mark.parametrize("rows", [5, 9])
def test_mazes_have_mazelibs_distribution(rows):
    """2,000 mazes of mazelib's random Hunt-and-Kill and 2,000 of :func:`hunt_and_kill` on a ``rows x rows``
    lattice (popgym's Easy and Hard): every one a tree spanning the lattice (no cell stays a wall in either), and
    their numbers of dead ends and of junctions drawn alike (two-sample Kolmogorov-Smirnov, p > 0.001; fixed
    seeds). The walk's choices and the hunts' order shape both: a depth-first backtracker, say, would give far
    fewer dead ends."""
    random.seed(0)
    np.random.seed(0)
    theirs = np.array([maze_statistics(HuntAndKill(rows, rows).generate().astype(bool)) for _ in range(2000)])
    mazes = np.asarray(jax.jit(jax.vmap(lambda key: hunt_and_kill(key, rows, rows)))(
        jax.random.split(jax.random.key(rows), 2000)))
    ours = np.array([maze_statistics(walls) for walls in mazes])
    assert (ours[:, 0] == rows * rows).all() and (theirs[:, 0] == rows * rows).all()
    assert (np.sum(~mazes, axis=(1, 2)) == 2 * rows * rows - 1).all()  # a tree: one opening fewer than its cells
    for column in (1, 2):
        assert stats.ks_2samp(ours[:, column], theirs[:, column]).pvalue > 1e-3


def test_entrances_face_uniform_cells_of_opposite_walls():
    """4,000 draws of :func:`outer_entrances` on a 5 x 7 lattice: the start's side uniform, the start and the exit
    on opposite outer walls, each at a uniform odd cell of its wall (chi-square, p > 0.001)."""
    rows, cols = 5, 7
    starts, exits = map(np.asarray, jax.jit(jax.vmap(lambda key: outer_entrances(key, rows, cols)))(
        jax.random.split(jax.random.key(0), 4000)))
    side = np.select([starts[:, 0] == 0, starts[:, 0] == 2 * rows, starts[:, 1] == 0], [0, 1, 2], 3)
    assert stats.chisquare(np.bincount(side, minlength=4)).pvalue > 1e-3
    opposite = {0: (2 * rows, None), 1: (0, None), 2: (None, 2 * cols), 3: (None, 0)}
    for s in range(4):
        row, col = opposite[s]
        pick = exits[side == s]
        along = pick[:, 1] if row is not None else pick[:, 0]
        assert ((pick[:, 0] == row) if row is not None else (pick[:, 1] == col)).all()
        assert (along % 2 == 1).all()
        assert stats.chisquare(np.bincount(along // 2)).pvalue > 1e-3


def test_a_maze_built_in_pieces_is_finished_and_the_loop_bound_suffices():
    """The builder run a few steps at a time (as an episode runs it), then finished where the episode ended
    early, gives a tree spanning the lattice; the whole loop's bound (``2 rows cols - 1`` steps) always ends it;
    and where no finish is needed (the episode goes on) it is left as it is."""
    rows, cols = 7, 5

    @jax.jit
    def run(key):
        builder = maze_builder(key, rows, cols)
        whole = build_steps(builder, maze_build_steps(rows, cols)).done
        for _ in range(3):
            builder = build_steps(builder, 4)
        return whole, finish_maze(builder), finish_maze(builder, needed=False)

    for seed in range(20):
        whole, walls, unfinished = map(np.asarray, run(jax.random.key(seed)))
        assert whole and maze_statistics(walls)[0] == rows * cols and np.sum(~walls) == 2 * rows * cols - 1
        assert maze_statistics(unfinished)[0] < rows * cols and (unfinished >= walls).all()


@pytest.mark.slow(seconds=13)
def test_a_new_maze_every_episode_through_gymnax_auto_reset():
    """Episodes ended by the step limit (1 023 steps) and by the exit: every new episode gets a new maze, a tree
    spanning the lattice, the agent on its start cell."""
    env, params = make_jax("memgym/popgym-LabyrinthEscapeEasy-v0")
    obs, state = env.reset(jax.random.key(0), params)
    step = jax.jit(env.step)
    mazes = {np.asarray(state.task.grid).tobytes()}
    key = jax.random.key(1)
    for t in range(2 * 1023):
        key, step_key, action_key = jax.random.split(key, 3)
        obs, state, reward, terminated, truncated, info = step(step_key, state, jax.random.randint(action_key, (), 0, 4),
                                                               params)
        if bool(terminated | truncated):
            grid = np.asarray(state.task.grid)
            mazes.add(grid.tobytes())
            assert maze_statistics(grid == 1)[0] == 25 and grid[tuple(np.asarray(state.task.position))] == 2
    assert len(mazes) >= 3
