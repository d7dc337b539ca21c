"""Memory Maze (Pašukonis et al., ICLR 2023; thesis §5.2.1, Fig. 5.4) as Gymnasium 1.x environments.

:class:`MemoryMazeEnv` drives the upstream ``memory_maze.tasks`` environments
(``pip install "memgym[memory-maze]"``) and translates ``dm_env`` into Gymnasium:
``Dict(image=(64, 64, 3) uint8, target_color=(3,))`` observations, ``Discrete(6)``
actions, reward +1 per target touched, episodes truncated after the upstream length.
Ids ``memgym/MemoryMaze-{9x9,11x11,13x13,15x15}-v0`` are registered only when the
packages are installed; ``import memgym`` imports neither dm_control nor MuJoCo. How
seeding, the import without upstream's ``__init__`` and headless rendering work:
docs/internals.md. Each environment compiles only the textures its episode shows
(:class:`UnusedTextures`: 0.30× upstream's memory, the same pixels) and refuses to be built
when the memory left cannot hold it: docs/memory_maze.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import struct
import subprocess
import sys
import zlib
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from memgym.envs.memory_check import NotEnoughMemory, available_bytes, gib, release_freed_memory, resident_bytes

TESTED_VERSIONS = {"memory-maze": "1.0.3", "dm-control": "1.0.50", "mujoco": "3.17.0", "labmaze": "1.0.6"}
INSTALL_HINT = 'pip install "memgym[memory-maze]"'

SIZES = ("9x9", "11x11", "13x13", "15x15")
# Upstream ``memory_maze.tasks``: time limits of 250 / 500 / 750 / 1000 seconds at the
# default control frequency of 4 Hz (``DEFAULT_CONTROL_FREQ``) give these episode lengths.
EPISODE_STEPS = {"9x9": 1000, "11x11": 2000, "13x13": 3000, "15x15": 4000}
CONTROL_FREQUENCY_HZ = 4
IMAGE_SHAPE = (64, 64, 3)
NUM_ACTIONS = 6
ACTION_NAMES = ("noop", "forward", "left", "right", "forward_left", "forward_right")
MAX_TASK_SEED = 2**32  # exclusive: numpy.random.RandomState's seed range

ENTRY_POINT = "memgym.envs.memory_maze:MemoryMazeEnv"


def memory_maze_env_id(size: str) -> str:
    """Gymnasium id of a maze size: ``memgym/MemoryMaze-<size>-v0``."""
    return f"memgym/MemoryMaze-{size}-v0"


def memory_maze_installed() -> bool:
    """Whether memory-maze and dm_control can be imported (looked up, not imported)."""
    return all(importlib.util.find_spec(name) is not None for name in ("memory_maze", "dm_control"))


def register_memory_maze_envs() -> list[str]:
    """Register the four Memory Maze sizes if memory-maze is installed (idempotent).

    Only looks the packages up; nothing is imported until an env is made.
    Returns the registered ids (empty without memory-maze).
    """
    if not memory_maze_installed():
        return []
    ids = []
    for size in SIZES:
        env_id = memory_maze_env_id(size)
        if env_id not in gym.registry:
            # MemoryMazeEnv refuses to step before reset itself: no OrderEnforcing wrapper.
            gym.register(
                id=env_id,
                entry_point=ENTRY_POINT,
                kwargs={"size": size},
                max_episode_steps=EPISODE_STEPS[size],
                order_enforce=False,
            )
        ids.append(env_id)
    return ids


# ---------------------------------------------------------------------------------------
# Choosing MuJoCo's OpenGL backend before dm_control is imported.

_GL_CANDIDATES = ("egl", "osmesa")
_GL_PACKAGES = {"egl": "libegl1 (plus a GPU driver or Mesa's libegl-mesa0)", "osmesa": "libosmesa6"}
_PROBE_MARKER = "memgym-gl-probe-ok"
_PROBE_CODE = f"""
from dm_control import mujoco
physics = mujoco.Physics.from_xml_string("<mujoco/>")
pixels = physics.render(height=8, width=8)
physics.free()
assert pixels.shape == (8, 8, 3), pixels.shape
print("{_PROBE_MARKER}")
"""
_PROBE_TIMEOUT_S = 120


def _probe_gl_backend(backend: str) -> tuple[bool, str]:
    """Render a tiny model in a fresh Python with ``MUJOCO_GL=backend``: ``(works, error text)``."""
    env = dict(os.environ, MUJOCO_GL=backend)
    try:
        result = subprocess.run(
            [sys.executable, "-c", _PROBE_CODE],
            env=env,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"{type(error).__name__}: {error}"
    if result.returncode == 0 and _PROBE_MARKER in result.stdout:
        return True, ""
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    return False, lines[-1] if lines else f"exit status {result.returncode}"


def select_mujoco_gl() -> str:
    """Pick MuJoCo's OpenGL backend for headless rendering and return its name.

    Order: a user-set ``MUJOCO_GL``; the backend dm_control already chose if it has
    been imported; otherwise the first of EGL, OSMesa that renders in a subprocess
    probe, which is then written to ``os.environ["MUJOCO_GL"]``.

    Raises ``RuntimeError`` naming the system packages to install when no backend works.
    """
    chosen = os.environ.get("MUJOCO_GL")
    if chosen:
        return chosen
    render_module = sys.modules.get("dm_control._render")
    if render_module is not None:  # too late to choose: dm_control has read MUJOCO_GL already
        backend = getattr(render_module, "BACKEND", None)
        if backend is None:
            raise RuntimeError(
                "dm_control was imported without a working OpenGL backend; set MUJOCO_GL=egl or "
                "MUJOCO_GL=osmesa before importing dm_control"
            )
        return str(backend)
    errors = []
    for backend in _GL_CANDIDATES:
        works, error = _probe_gl_backend(backend)
        if works:
            os.environ["MUJOCO_GL"] = backend
            return backend
        errors.append(f"{backend}: {error}")
    raise RuntimeError(
        "Memory Maze needs headless OpenGL rendering, but neither MuJoCo backend works here "
        f"({'; '.join(errors)}). Install the system libraries: `apt-get install -y libegl1 libosmesa6` "
        f"(EGL: {_GL_PACKAGES['egl']}; OSMesa, software rendering: {_GL_PACKAGES['osmesa']}), "
        "or set MUJOCO_GL to a backend that works on this machine."
    )


def load_memory_maze_tasks() -> ModuleType:
    """Import ``memory_maze.tasks`` without running ``memory_maze/__init__.py``.

    docs/internals.md says why and how. Chooses ``MUJOCO_GL`` first.
    """
    if "memory_maze.tasks" in sys.modules:
        return sys.modules["memory_maze.tasks"]
    if not memory_maze_installed():
        raise ImportError(
            f"memory-maze and dm-control are needed for Memory Maze: {INSTALL_HINT} "
            f"(tested with {', '.join(f'{k}=={v}' for k, v in TESTED_VERSIONS.items())})"
        )
    select_mujoco_gl()
    inserted = False
    if "memory_maze" not in sys.modules:
        spec = importlib.util.find_spec("memory_maze")
        package = importlib.util.module_from_spec(spec)  # __path__ set, __init__.py not executed
        sys.modules["memory_maze"] = package
        inserted = True
    try:
        return importlib.import_module("memory_maze.tasks")
    except BaseException:
        if inserted:  # leave no half-made package behind
            for name in [n for n in sys.modules if n == "memory_maze" or n.startswith("memory_maze.")]:
                del sys.modules[name]
        raise


# ---------------------------------------------------------------------------------------
# Compiling only the textures a maze shows.


def _one_pixel_png() -> bytes:
    """A valid 1×1 grey RGB PNG: what an unused texture compiles to."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # width, height, 8 bits, RGB, no interlace
    pixels = zlib.compress(b"\x00\x80\x80\x80")  # filter byte 0, then one grey pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


class UnusedTextures:
    """``initialize_episode_mjcf`` hook of a dm_control Composer environment: a 2-D texture loaded from a
    file that no material of this episode's model uses compiles as one pixel.

    Upstream's arena loads every wall texture of its style for each of its ten wall variations (83
    textures of 1024×1024 in an 11×11 maze), then each episode draws one texture per variation: about 13
    are shown. Compiled in full, the unshown ones cost about 210 MiB in the ``MjModel`` and twice that in
    the OpenGL context that holds their mipmaps, per environment (docs/memory_maze.md). The hook runs after
    the arena has drawn the episode's textures and before the model is compiled; it swaps the ``file`` of
    each unshown texture for a 1×1 image and gives a shown one its file back. Texture ids, materials and
    every drawn pixel stay the same (tested against upstream), and no random number is drawn.
    """

    def __init__(self, mjcf_root: Any):
        from dm_control import mjcf

        self._root = mjcf_root
        self._tiny = mjcf.Asset(_one_pixel_png(), ".png")
        self._files: dict[int, tuple[Any, Any]] = {}  # id(texture) -> (texture, its own file)

    def __call__(self, random_state: Any) -> None:
        shown = set()
        for material in self._root.find_all("material"):
            texture = material.texture
            if texture is not None:
                shown.add(texture if isinstance(texture, str) else id(texture))
        for texture in self._root.find_all("texture"):
            key = id(texture)
            in_use = texture.type != "2d" or key in shown or texture.name in shown
            if in_use and key in self._files:
                texture.file = self._files.pop(key)[1]
            elif not in_use and key not in self._files and texture.file is not None:
                self._files[key] = (texture, texture.file)
                texture.file = self._tiny


# The last upstream build's resident memory in this process (it compiles the model with every texture
# before the first reset trims them: the peak of a build) and how many upstream environments are alive.
_BUILDS = {"bytes": 0, "live": 0}


def _refuse_a_build_that_cannot_fit(size: str) -> None:
    """Raise :class:`NotEnoughMemory` when the memory available is less than the last build took: the
    safety net wherever environments are built in bulk (``gymnasium.make_vec``, a vector env's workers).
    Runs that know their number of environments check it up front (``memgym train``)."""
    need, available = _BUILDS["bytes"], available_bytes()
    if need and available is not None and available < need:
        raise NotEnoughMemory(
            f"building Memory Maze {size} environment number {_BUILDS['live'] + 1} of this process needs about "
            f"{gib(need)} (what the last build took here), but this machine has {gib(available)} of memory "
            f"available: build at most {_BUILDS['live']} in this process, fewer to leave memory for learning "
            "(memgym train: --num-envs)"
        )


def _composer_environment(task: Any) -> Any:
    """The ``composer.Environment`` inside upstream's chain of ``dm_env`` wrappers (each holds ``.env``)."""
    from dm_control import composer

    env = task
    while not isinstance(env, composer.Environment):
        env = getattr(env, "env", None)
        if env is None:
            raise RuntimeError(f"no dm_control composer.Environment inside {type(task).__name__}; "
                               f"memgym is tested with {TESTED_VERSIONS}")
    return env


# ---------------------------------------------------------------------------------------


class MemoryMazeEnv(gym.Env):
    """Gymnasium view of an upstream Memory Maze task (thesis §5.2.1). docs/internals.md has the details.

    Args:
        size: ``"9x9"``, ``"11x11"``, ``"13x13"`` or ``"15x15"`` (maze size without the
            outer walls; 3, 4, 5, 6 targets; 1000, 2000, 3000, 4000 steps).
        render_mode: ``None`` or ``"rgb_array"`` (the current 64×64×3 observation image).

    Observations are ``{"image": [64, 64, 3] uint8, "target_color": [3] float32}``.
    Stepping before the first ``reset`` or after an episode has ended raises
    ``RuntimeError`` (upstream would silently start a new episode).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": CONTROL_FREQUENCY_HZ}

    def __init__(self, size: str = "9x9", render_mode: str | None = None):
        if not isinstance(size, str) or size not in SIZES:
            raise ValueError(f"size must be one of {SIZES}, got {size!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.size = size
        self.render_mode = render_mode
        self.max_episode_steps = EPISODE_STEPS[size]
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, IMAGE_SHAPE, np.uint8),
                "target_color": spaces.Box(0.0, 1.0, (3,), np.float32),
            }
        )
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        # Fail at construction, not at the first reset, when the packages or OpenGL are missing.
        self._tasks = load_memory_maze_tasks()
        self._task: Any = None  # the upstream dm_env environment, built at the first reset
        self._task_seed: int | None = None
        self._image: np.ndarray | None = None
        self._episode_over = True

    @property
    def task_seed(self) -> int | None:
        """Seed the current upstream environment was built with (``None`` before the first reset)."""
        return self._task_seed

    @property
    def task(self) -> Any:
        """The upstream ``dm_env.Environment`` (``None`` before the first reset)."""
        return self._task

    def _build_task(self, task_seed: int) -> None:
        self._close_task()
        _refuse_a_build_that_cannot_fit(self.size)
        before = resident_bytes()
        make = getattr(self._tasks, f"memory_maze_{self.size}")
        self._task = make(seed=task_seed)
        self._task_seed = task_seed
        _BUILDS["bytes"] = max(0, resident_bytes() - before)
        _BUILDS["live"] += 1
        composer_env = _composer_environment(self._task)
        composer_env.add_extra_hook("initialize_episode_mjcf", UnusedTextures(composer_env.task.root_entity.mjcf_model))

    def _observation(self, timestep: Any) -> dict[str, np.ndarray]:
        upstream = timestep.observation
        # Copies: dm_control may hand out views of buffers it overwrites on the next step.
        image = np.array(upstream["image"], dtype=np.uint8, copy=True)
        if self.render_mode == "rgb_array":
            self._image = image.copy()  # kept apart from the observation the caller may modify
        return {"image": image, "target_color": np.array(upstream["target_color"], dtype=np.float32)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if options:
            raise ValueError(f"options are not supported by MemoryMazeEnv, got {options!r}")
        if seed is not None and not (
            isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and 0 <= seed < MAX_TASK_SEED
        ):
            raise ValueError(f"seed must be None or an integer in [0, 2**32), got {seed!r}")
        super().reset(seed=seed)
        built = seed is not None or self._task is None
        if seed is not None:
            self._build_task(int(seed))
        elif self._task is None:
            self._build_task(int(self.np_random.integers(MAX_TASK_SEED)))
        timestep = self._task.reset()
        if built:  # the first reset replaced the model upstream compiled with every texture: return that memory
            release_freed_memory()
        self._episode_over = False
        return self._observation(timestep), {}

    def step(self, action):
        if self._episode_over:
            raise RuntimeError(
                "MemoryMazeEnv.step called before reset or after the episode ended; call reset() first"
            )
        if not self.action_space.contains(action):
            raise ValueError(
                f"action must be an integer in [0, {NUM_ACTIONS - 1}] ({', '.join(ACTION_NAMES)}), got {action!r}"
            )
        timestep = self._task.step(int(action))
        last = bool(timestep.last())
        # dm_env: a LAST step with discount 0 is a termination, otherwise a truncation (time limit).
        terminated = last and float(timestep.discount) == 0.0
        truncated = last and not terminated
        self._episode_over = last
        return self._observation(timestep), float(timestep.reward), terminated, truncated, {}

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        if self._image is None:
            raise RuntimeError("MemoryMazeEnv.render called before reset; call reset() first")
        return self._image.copy()

    def _close_task(self) -> None:
        if self._task is not None:
            task, self._task = self._task, None
            task.close()  # frees the MuJoCo physics and its OpenGL context
            _BUILDS["live"] -= 1

    def close(self) -> None:
        self._close_task()
        self._episode_over = True
        super().close()
