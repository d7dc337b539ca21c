"""What a submitted agent's process can reach: the sandbox ``memgym leaderboard verify`` starts it in.

:class:`~memgym.leaderboard.submissions.isolation.AgentProcess` keeps the submitted code out of the process
that counts. This module decides how that child is started, and fails closed: submitted code
runs with the verifier's own privileges only when the maintainer asks for it by name
(``unsandboxed``; ``memgym leaderboard verify --unsandboxed``), which the verdict records.
Otherwise :func:`plan` takes the first mode that works here, checked by a probe run exactly as the
agent will be (:func:`probe`), and raises :class:`SandboxUnavailable` where none does, before any
agent code runs:

1. :data:`CONTAINER`: bubblewrap (``bwrap``), the
   unprivileged sandbox that Flatpak is built on, maintained and packaged by every Linux
   distribution. The child runs in new user, PID, network, IPC, UTS and cgroup namespaces
   (:func:`container_arguments`): as user ``nobody`` inside, with no network (only a loopback
   device), seeing no process but its own, in a root file system that holds read-only only what
   it needs (the system's programs and libraries, the interpreter, its packages, memgym and a
   private copy of the agent's code), and one private, size-limited writable folder (``/tmp``, a
   tmpfs: HOME, TMPDIR and the caches). Started by a root verifier, bubblewrap itself runs as
   :data:`AGENT_USER`, so that outside the namespaces too the child is an unprivileged user;
   started by an ordinary user, it runs in a user namespace of theirs (unprivileged user
   namespaces, where the kernel allows them). Everything the child starts dies with it.
2. :data:`SEPARATE_USER` (root, where bubblewrap is missing or cannot run): the child starts as
   :data:`AGENT_USER` with private HOME, TMPDIR and caches and a private copy of the agent's code;
   the verifier is its subreaper and kills what it orphans (:class:`Subreaper`). It keeps the
   network and sees the machine's world-readable files.

In every mode the verifier makes itself non-dumpable first (:func:`harden`), the child's
environment is built from an allow-list (:data:`PASSED_ENVIRONMENT`, less anything whose name
marks a secret), and the child sets resource limits on itself and all it starts before it
imports the agent (:class:`Limits`: CPU time, address space, file size, processes).

:func:`describe` says what is in force and what the agent's process can still do, as a
JSON-serialisable dict (``AgentProcess.protection``, the verdict's ``isolation``).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: the user a root verifier starts the agent's process (bubblewrap, or the process itself) as, and its group
AGENT_USER = "nobody"
AGENT_GROUPS = ("nogroup", "nobody")
#: the uid and gid used when the system has no such user or group (the conventional "nobody"); also the agent's
#: identity inside the container
UNPRIVILEGED_ID = 65534
#: the modes, strongest first (module docstring)
CONTAINER, SEPARATE_USER, UNSANDBOXED = "container", "separate user", "unsandboxed"
#: the container tool
BUBBLEWRAP = "bwrap"
#: seconds the probe may take (it starts an interpreter and imports memgym)
PROBE_TIMEOUT = 120.0
#: the verifier's environment variables passed on to the agent's process: an allow-list of what an interpreter,
#: JAX, an accelerator and memgym read; every other variable is withheld, and so is any whose name marks a secret
PASSED_ENVIRONMENT = re.compile(
    r"(PATH|LANG|LANGUAGE|LC_[A-Z]+|TZ|TERM|PYTHONHASHSEED|PYTHONUNBUFFERED|PYTHONWARNINGS|PYTHONDONTWRITEBYTECODE"
    r"|PYTHONPATH|(JAX|XLA|TF_CPP|MEMGYM|NCCL|CUDA|ROCR|HIP)_[A-Z0-9_]+|NVIDIA_VISIBLE_DEVICES|[A-Z]+_NUM_THREADS"
    r"|MPLBACKEND|LD_LIBRARY_PATH)")
#: names that mark a secret: withheld even where the allow-list matches (MEMGYM_API_TOKEN, say)
SECRET_NAMES = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY", re.I)
#: cache folders moved into the agent's private cache folder when the verifier's environment sets them
CACHE_VARIABLES = {"JAX_COMPILATION_CACHE_DIR": "jax", "MEMGYM_COMPILATION_CACHE": "memgym-jax",
                   "TRITON_CACHE_DIR": "triton", "CUDA_CACHE_PATH": "nv"}
_CACHE_OFF = ("off", "0", "false", "no", "")  # memgym.compilation_cache's words for "no cache"

#: accelerators' device files (NVIDIA, AMD, render nodes, TPU): the agent's user must be able to open those there are,
#: or its process would train on the CPU where the verifier's runs on the accelerator
DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia[0-9]*", "/dev/kfd",
           "/dev/dri/renderD*", "/dev/accel/accel*")
#: what of the system's root the container holds, read-only: programs and libraries (or merged-/usr links to them),
#: the kernel's view of devices and CPUs, and the few files of /etc that a C library and an interpreter read
#: (fontconfig's among them: gymnax imports matplotlib, whose font cache runs ``fc-list``, which without its
#: configuration prints "Fontconfig error" into the agent's output)
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys", "/opt")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
                "/etc/nsswitch.conf", "/etc/localtime", "/etc/alternatives", "/etc/fonts")
#: inside the container: the private writable folder (a tmpfs) and its folders
CONTAINER_TMP = "/tmp"
#: inside the container: the agent's code folder (read-only, in the read-only root: its parents are not writable)
CONTAINER_CODE = "/submission/code"

_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


class SandboxUnavailable(RuntimeError):
    """No sandbox works here: the agent's code was not run (the message says why and names ``--unsandboxed``)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of the agent's process and of every process it starts, set by that process on itself
    (``setrlimit``, soft = hard, so they cannot be raised) before it imports the agent.

    ``cpu_seconds``: CPU time (all its threads); ``address_space``: bytes of virtual memory (None with an
    accelerator, whose driver maps more address space than the card has memory); ``file_size``: bytes of any file
    it writes, also the container's private tmpfs size; ``processes``: processes and threads of its user
    (``RLIMIT_NPROC`` counts the user's, so the user's count when it starts is added)."""

    cpu_seconds: int
    address_space: int | None
    file_size: int
    processes: int

    #: wall-clock seconds a cell may take when the verification sets no cell timeout: one second per this many
    #: of its steps, and at least ten minutes
    STEPS_PER_SECOND = 50
    #: processes and threads the agent may add to its user's (JAX starts a few threads per core)
    PROCESS_BUDGET = 256
    #: the private tmpfs / the largest file
    DISK = 1 << 30

    @classmethod
    def for_cells(cls, total_steps: int, cells: int, cell_timeout: float | None = None,
                  memory_gib: float | None = None) -> Limits:
        """The limits of a process that trains and evaluates ``cells`` cells of ``total_steps`` steps: CPU time of
        every core for the cells' wall-clock allowance (``cell_timeout`` each, else :data:`STEPS_PER_SECOND`),
        ``memory_gib`` GiB of address space (default: three quarters of the memory available now, at least 8 GiB;
        none with an accelerator), :data:`DISK`, :data:`PROCESS_BUDGET` (+ the user's count, added by
        :func:`plan`)."""
        wall = cell_timeout if cell_timeout is not None else max(600.0, total_steps / cls.STEPS_PER_SECOND)
        cores = os.cpu_count() or 1
        if memory_gib is not None:
            memory = int(memory_gib * (1 << 30))
        else:
            memory = None if _accelerators() else max(8 << 30, int(0.75 * _available_memory()))
        return cls(int(math.ceil(cores * wall * max(1, cells))) + 120, memory, cls.DISK,
                   cls.PROCESS_BUDGET + 4 * cores)

    def apply(self) -> None:
        """Set these limits on this process (the agent's, before it imports the agent)."""
        import resource

        wanted = {resource.RLIMIT_CPU: self.cpu_seconds, resource.RLIMIT_FSIZE: self.file_size,
                  resource.RLIMIT_NPROC: self.processes}
        if self.address_space is not None:
            wanted[resource.RLIMIT_AS] = self.address_space
        for kind, value in wanted.items():
            soft, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (value, value))

    def text(self) -> str:
        memory = ("no address-space limit (an accelerator's driver maps more than its memory)"
                  if self.address_space is None else f"{self.address_space / (1 << 30):.1f} GiB of address space")
        return (f"{self.cpu_seconds:,} s of CPU time, {memory}, files of at most {self.file_size / (1 << 30):.1f} "
                f"GiB, {self.processes} processes and threads of its user")


def _available_memory() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 16 << 30


def _accelerators() -> list[str]:
    """The accelerators' device files there are here."""
    return sorted(path for pattern in DEVICES for path in glob.glob(pattern))


@dataclass(frozen=True)
class User:
    """A user to run the agent's process as."""

    name: str
    uid: int
    gid: int


# ---- the verifier's side -----------------------------------------------------------------------------------------

def _prctl(option: int, argument: int | Any = 0) -> int | None:
    """``prctl(option, argument)`` on Linux (``argument`` an int or a ctypes pointer); None where there is no
    such call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    zero = ctypes.c_ulong(0)
    value = ctypes.c_ulong(argument) if isinstance(argument, int) else argument
    return libc.prctl(ctypes.c_int(option), value, zero, zero, zero)


def harden() -> bool:
    """Make this process non-dumpable (no ``/proc/<pid>/mem``, ``environ`` or ptrace for other processes of a
    user other than root, its own user included); as root on Linux, also drop the others' write bit from the
    umask, so that files written from now on are not writable by the agent's user. Returns whether this process
    is non-dumpable. Idempotent."""
    if _switching_possible():
        mask = os.umask(0o077)
        os.umask(mask | 0o002)
    _prctl(_PR_SET_DUMPABLE, 0)
    return _prctl(_PR_GET_DUMPABLE) == 0


def _switching_possible() -> bool:
    return sys.platform.startswith("linux") and os.geteuid() == 0


def agent_user() -> User | None:
    """The unprivileged user to run the agent's process as: :data:`AGENT_USER` with group ``nogroup`` (or
    ``nobody``), else uid/gid :data:`UNPRIVILEGED_ID`. None unless this process is root on Linux (only root can
    start a process as another user)."""
    if not _switching_possible():
        return None
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(AGENT_USER)
        name, uid, gid = AGENT_USER, entry.pw_uid, entry.pw_gid
    except KeyError:
        name, uid, gid = str(UNPRIVILEGED_ID), UNPRIVILEGED_ID, UNPRIVILEGED_ID
    for group in AGENT_GROUPS:
        try:
            gid = grp.getgrnam(group).gr_gid
            break
        except KeyError:
            continue
    if uid == 0 or gid == 0:
        return None
    return User(name, uid, gid)


def verifier_user() -> str:
    """This process's user, by name where the system knows it."""
    try:
        import pwd

        return pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, AttributeError):
        import getpass

        try:
            return getpass.getuser()
        except (KeyError, OSError):
            return "the current user"


class Launch:
    """How one agent's process (or the probe) starts in ``mode`` (started as ``user``; None: the verifier's), with
    its private folders: a temporary tree (mode 0711) holding a private copy of the code folder (a root verifier's:
    files the agent's user can read and not change, whatever the submission's modes) and, in
    :data:`SEPARATE_USER` mode, HOME, TMPDIR, caches (owned by the user, 0700) and a compilation prefix. In
    :data:`CONTAINER` mode those are folders of the container's tmpfs.

    :meth:`popen` starts a command; :meth:`remove` deletes the tree."""

    def __init__(self, mode: str, user: User | None, code_dir: str | os.PathLike | None, limits: Limits | None):
        self.mode, self.user, self.limits = mode, user, limits
        self.code_dir = None if code_dir is None else str(Path(code_dir).resolve())
        self.root = Path(tempfile.mkdtemp(prefix="memgym-agent-"))
        try:
            os.chmod(self.root, 0o711)
            self.code = self.code_dir
            if self.code_dir is not None and _switching_possible() and mode != UNSANDBOXED:
                self.code = str(self.root / "code")
                _readable_copy(self.code_dir, self.code)
            if mode == SEPARATE_USER:
                assert user is not None
                for name in ("home", "tmp", "cache", "pycache"):
                    (self.root / name).mkdir(mode=0o700)
                    os.chown(self.root / name, user.uid, user.gid)
            elif mode == UNSANDBOXED:
                (self.root / "pycache").mkdir(mode=0o700)
        except BaseException:
            self.remove()
            raise

    def cwd(self, agent: bool = True) -> str:
        """The child's working folder: the agent's, its code folder (where it sees it); else (the probe, and an
        agent without a code folder) its HOME."""
        if agent and self.code_dir is not None:
            return self.code_inside
        return self._folder("home") if self.mode != UNSANDBOXED else str(self.root)

    @property
    def code_inside(self) -> str | None:
        """The code folder where the child sees it."""
        return CONTAINER_CODE if self.mode == CONTAINER and self.code_dir is not None else self.code

    def _folder(self, name: str) -> str:
        return f"{CONTAINER_TMP}/{name}" if self.mode == CONTAINER else str(self.root / name)

    def environment(self, environment: Mapping[str, str], agent: bool = True) -> dict[str, str]:
        """``environment`` with HOME, TMPDIR, the caches and the compilation prefix in the private folders; for the
        agent (not the probe, which imports nothing of the submission) also the code folder first on PYTHONPATH and
        the limits for the child to set."""
        environment = dict(environment)
        environment["PYTHONPYCACHEPREFIX"] = self._folder("pycache")  # a submitted __pycache__ is never read
        if self.mode != UNSANDBOXED:
            home, tmp, cache = (self._folder(name) for name in ("home", "tmp", "cache"))
            name = AGENT_USER if self.user is not None or self.mode == CONTAINER else verifier_user()
            environment |= {"HOME": home, "USER": name, "LOGNAME": name, "TMPDIR": tmp, "TMP": tmp, "TEMP": tmp,
                            "XDG_CACHE_HOME": cache}
            for variable, folder in CACHE_VARIABLES.items():
                if variable in environment and not (variable == "MEMGYM_COMPILATION_CACHE"
                                                    and environment[variable].strip().lower() in _CACHE_OFF):
                    environment[variable] = os.path.join(cache, folder)
        if agent and self.code_dir is not None:
            environment["PYTHONPATH"] = os.pathsep.join([self.code_inside,
                                                         *filter(None, [environment.get("PYTHONPATH")])])
        if agent and self.limits is not None:
            environment[LIMITS_VARIABLE] = json.dumps(asdict(self.limits))
        return environment

    def popen(self, argv: Sequence[str], environment: Mapping[str, str], pass_fds: Sequence[int] = (),
              agent: bool = True, **kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` (an interpreter's command: the agent's process, or with ``agent=False`` the probe) in
        this mode, with :meth:`environment` of ``environment``."""
        environment = self.environment(environment, agent)
        user = {} if self.user is None else {"user": self.user.uid, "group": self.user.gid, "extra_groups": []}
        if self.mode != CONTAINER:
            return subprocess.Popen(list(argv), env=environment, cwd=self.cwd(agent), pass_fds=tuple(pass_fds),
                                    **user, **kwargs)
        arguments, staged = container_arguments(self, environment, self.cwd(agent))
        command = [shutil.which(BUBBLEWRAP) or BUBBLEWRAP, *arguments, "--", *argv]
        if staged:  # staging binds them, then becomes the user and executes bubblewrap
            plan = {"uid": self.user.uid, "gid": self.user.gid, "binds": staged}
            command = [sys.executable, "-I", "-S", str(Path(__file__).with_name("staging.py")), json.dumps(plan),
                       "--", *command]
            user = {}
        return subprocess.Popen(command, env={}, pass_fds=tuple(pass_fds), **user, **kwargs)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


#: the environment variable that carries the :class:`Limits` to the agent's process
LIMITS_VARIABLE = "MEMGYM_AGENT_LIMITS"


def apply_limits(environment: Mapping[str, str]) -> None:
    """In the agent's process: set the limits its environment carries (:data:`LIMITS_VARIABLE`), if any."""
    text = environment.get(LIMITS_VARIABLE)
    if text:
        Limits(**json.loads(text)).apply()


def _readable_copy(source: str, target: str) -> None:
    """Copy the folder ``source`` to ``target``: folders 0755 and files 0644 (0755 where executable), links kept
    as links (never followed: a link to a secret must not become a readable copy of it)."""
    shutil.copytree(source, target, symlinks=True)
    for folder, folders, files in os.walk(target):
        os.chmod(folder, 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o755 if os.stat(path).st_mode & stat.S_IXUSR else 0o644)


def _outermost(paths: Sequence[str]) -> list[str]:
    """``paths`` (resolved, existing) less those inside another of them, parents first."""
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}, key=lambda p: (len(p), p)):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def python_paths() -> list[str]:
    """What the agent's interpreter reads: this interpreter's prefixes, the folders on its path but the first (the
    verifier's script's folder or working folder, which a ``python -m`` child does not read) and memgym's
    package (an editable install's lies outside them)."""
    import memgym

    return _outermost([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                       os.path.dirname(os.path.realpath(sys.executable)), str(Path(memgym.__file__).parent),
                       *[p for p in sys.path[1:] if p and os.path.isdir(p)]])


def container_arguments(launch: Launch, environment: Mapping[str, str], cwd: str) -> tuple[list[str], list[list[str]]]:
    """bubblewrap's arguments for ``launch`` (up to its ``--``) and the folders :mod:`staging` binds for it first.

    New user, PID, network, IPC, UTS and cgroup namespaces, no further user namespaces inside; the child is uid and
    gid :data:`UNPRIVILEGED_ID` in its own session and dies with the verifier. Its root is an empty, read-only
    tmpfs holding, read-only: :data:`SYSTEM_PATHS`, :data:`SYSTEM_FILES`, :func:`python_paths` and the code at
    :data:`CONTAINER_CODE`; its own /proc and a minimal /dev with the accelerators' devices; a tmpfs of
    ``Limits.file_size`` at :data:`CONTAINER_TMP` (HOME, TMPDIR, caches). The environment is ``environment`` alone
    (``--clearenv``).

    Started by a root verifier, bubblewrap runs as :data:`AGENT_USER` and binds what that user can reach: a folder
    of the interpreter's under one the user cannot enter (:func:`closed_folder`) is bound from a mount point in the
    launch's private tree, onto which :mod:`staging` binds it first (``[source, mount point]`` pairs). Every other
    folder, and every folder of an ordinary user's bubblewrap, is bound from its own path."""
    arguments = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
                 "--uid", str(UNPRIVILEGED_ID), "--gid", str(UNPRIVILEGED_ID)]
    staged: list[list[str]] = []

    def bind(source: str, target: str) -> None:
        if launch.user is None or closed_folder(launch.user, [source]) is None:
            arguments.extend(["--ro-bind", source, target])
            return
        point = launch.root / "staged" / str(len(staged))
        point.parent.mkdir(mode=0o711, exist_ok=True)
        if os.path.isdir(source):
            point.mkdir(mode=0o711)
        else:
            point.touch(mode=0o644)
        staged.append([source, str(point)])
        arguments.extend(["--ro-bind", str(point), target])

    # the private tmpfs first: a folder bound below comes from elsewhere even where it lies under /tmp
    arguments.extend(["--proc", "/proc", "--dev", "/dev"])
    for device in _accelerators():
        arguments.extend(["--dev-bind", device, device])
    size = launch.limits.file_size if launch.limits is not None else Limits.DISK
    arguments.extend(["--size", str(size), "--tmpfs", CONTAINER_TMP])
    for name in ("home", "tmp", "cache", "pycache"):
        arguments.extend(["--dir", f"{CONTAINER_TMP}/{name}"])
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            arguments.extend(["--symlink", os.readlink(path), path])
        elif os.path.isdir(path):
            arguments.extend(["--ro-bind", path, path])
    for path in SYSTEM_FILES:
        arguments.extend(["--ro-bind-try", path, path])
    for path in python_paths():
        bind(path, path)
    if launch.code_dir is not None:
        bind(launch.code, CONTAINER_CODE)
    arguments.extend(["--remount-ro", "/", "--chdir", cwd, "--clearenv"])
    for name, value in environment.items():
        arguments.extend(["--setenv", name, value])
    return arguments, staged


def passed_on(environment: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``environment``'s variables that :data:`PASSED_ENVIRONMENT` allows and whose names mark no secret, and the
    names of the others (sorted): withheld."""
    passed = {k: v for k, v in environment.items() if PASSED_ENVIRONMENT.fullmatch(k) and not SECRET_NAMES.search(k)}
    return passed, sorted(k for k in environment if k not in passed)


_probed: dict[tuple, dict[str, Any]] = {}
_probed_lock = threading.Lock()


def probe(mode: str, user: User | None, environment: Mapping[str, str], spec: str | None = None,
          code_dir: str | os.PathLike | None = None, protect: Sequence[str | os.PathLike] = (),
          entry: str = "memgym") -> dict[str, Any]:
    """Whether the agent's process can run in ``mode`` (started as ``user``): ``{"problem": None or why not,
    "writable": [paths of `protect` (and their folders) it could change]}``.

    Runs ``python -m memgym.leaderboard.submissions.sandbox`` exactly as the agent's process will run (:class:`Launch`), with
    ``environment``, without importing anything of the submission. It checks that the interpreter runs and imports
    ``entry`` (the module the agent's process starts in: the caller's), that HOME, TMPDIR and the compilation prefix are writable, that the accelerators' devices
    (:data:`DEVICES`) open, that every folder and file of the code folder is readable, and that the module of
    ``spec`` is found and readable. The answer is remembered for this process."""
    code = None if code_dir is None else str(Path(code_dir).resolve())
    paths = [str(Path(p).resolve()) for p in protect]
    key = (mode, user, sys.executable, code, spec, tuple(paths), environment.get("PYTHONPATH"), entry)
    with _probed_lock:
        if key in _probed:
            return dict(_probed[key])
    who = f"user {user.name!r}" if user is not None else verifier_user()
    launch = None
    try:
        launch = Launch(mode, user, code, None)
        request = {"spec": spec, "code_dir": launch.code_inside, "protect": paths, "entry": entry}
        process = launch.popen([sys.executable, "-m", "memgym.leaderboard.submissions.sandbox", json.dumps(request)],
                               environment, agent=False, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        try:
            out, err = process.communicate(timeout=PROBE_TIMEOUT)
            answer = _probe_answer(process.returncode, out, err, who)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            answer = {"problem": f"a process of {who} did not start and import {entry} within {PROBE_TIMEOUT:.0f}s",
                      "writable": []}
    except OSError as error:
        answer = {"problem": f"{who} cannot start it ({error.strerror or error})", "writable": []}
    finally:
        if launch is not None:
            launch.remove()
    with _probed_lock:
        _probed[key] = answer
    return dict(answer)


def _probe_answer(code: int, out: bytes, err: bytes, who: str) -> dict[str, Any]:
    lines = out.decode("utf-8", "replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        if code == 0 and isinstance(answer, dict) and "problem" in answer:
            return {"problem": answer["problem"], "writable": list(answer.get("writable", []))}
    except (IndexError, ValueError):
        pass
    error = err.decode("utf-8", "replace").strip().splitlines()
    return {"problem": f"a process of {who} cannot import memgym (exit code {code}: "
                       f"{error[-1] if error else 'no message'})", "writable": []}


class Subreaper:
    """While an agent's process of a separate user lives, this process is a child subreaper: what that process
    starts and then orphans (a daemon that left its process group) is re-parented here, and :meth:`close` kills
    it when the agent's process closes. :meth:`open` comes before the agent's process starts (nothing it starts
    escapes before), :meth:`started` names its session once it has."""

    _lock = threading.Lock()
    _open = 0
    _live: set[int] = set()  # the sessions (agent processes' pids) open now
    _was_subreaper: bool | None = None

    @classmethod
    def open(cls) -> None:
        with cls._lock:
            if cls._was_subreaper is None:
                state = ctypes.c_int(0)
                cls._was_subreaper = bool(_prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(state)) == 0 and state.value)
            if cls._open == 0:
                _prctl(_PR_SET_CHILD_SUBREAPER, 1)
            cls._open += 1

    @classmethod
    def started(cls, session: int) -> None:
        with cls._lock:
            cls._live.add(session)

    @classmethod
    def close(cls, session: int | None, uid: int) -> list[int]:
        """Kill (and reap) the processes of user ``uid`` re-parented to this one that belong to no agent's
        process still open; returns their pids."""
        with cls._lock:
            cls._live.discard(session)
            cls._open = max(0, cls._open - 1)
            killed = kill_strays(uid, keep=set(cls._live))
            if cls._open == 0 and not cls._was_subreaper:
                _prctl(_PR_SET_CHILD_SUBREAPER, 0)
            return killed


def _children(uid: int) -> Iterator[tuple[int, int]]:
    """(pid, session) of this process's children whose real uid is ``uid``."""
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
            real_uid = next(int(line.split()[1]) for line in Path(entry.path, "status").read_text().splitlines()
                            if line.startswith("Uid:"))
        except (OSError, ValueError, IndexError, StopIteration):
            continue  # gone meanwhile
        if int(fields[1]) == me and real_uid == uid:
            yield int(entry.name), int(fields[3])


def kill_strays(uid: int, keep: set[int] = frozenset()) -> list[int]:
    """SIGKILL and reap this process's children of user ``uid`` outside the sessions ``keep`` and this process's
    own; repeated until none is left (a stray may fork while it is killed), at most 20 rounds."""
    keep = set(keep) | {os.getsid(0)}  # this process's own session: what it runs itself (a probe), not a stray
    killed: list[int] = []
    for _ in range(20):
        strays = [pid for pid, session in _children(uid) if session not in keep]
        if not strays:
            break
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        killed += strays
    return killed


@dataclass(frozen=True)
class Plan:
    """How the agent's process starts: ``mode``, started as ``user`` (None: the verifier's), from ``environment``
    (the verifier's, allow-listed), with ``limits``; ``protection`` is :func:`describe`'s dict of it."""

    mode: str
    user: User | None
    environment: dict[str, str]
    limits: Limits | None
    protection: dict[str, Any]

    def launch(self, code_dir: str | os.PathLike | None) -> Launch:
        return Launch(self.mode, self.user, code_dir, self.limits)


def plan(spec: str | None, code_dir: str | os.PathLike | None, protect: Sequence[str | os.PathLike],
         environment: Mapping[str, str], limits: Limits | None = None, unsandboxed: bool = False,
         entry: str = "memgym") -> Plan:
    """Harden this process (:func:`harden`) and decide how to start agent ``spec``'s process: the first mode of
    the module docstring's whose :func:`probe` passes here, or, with ``unsandboxed``, as the verifier's own user.
    ``limits``: :class:`Limits` (None: :meth:`Limits.for_cells` of one cell of the smallest budget, ten minutes).
    ``entry``: the module the agent's process starts in, which the probes import.

    Raises :class:`SandboxUnavailable`, before anything of the agent runs, where no mode works; its message says
    what failed and names ``--unsandboxed``."""
    non_dumpable = harden()
    base, withheld = passed_on(environment)
    limits = limits or Limits.for_cells(0, 1)
    if unsandboxed:
        return Plan(UNSANDBOXED, None, base, limits, describe(UNSANDBOXED, None, non_dumpable, limits, withheld))
    checked = ([] if code_dir is None else [code_dir]) + list(protect)
    user, problems = agent_user(), []
    if not sys.platform.startswith("linux"):
        problems.append(f"bubblewrap and a separate user are used on Linux only, not on {sys.platform}")
    else:
        if shutil.which(BUBBLEWRAP) is None:
            problems.append("bubblewrap is not installed (no bwrap on PATH)")
        else:
            answer = probe(CONTAINER, user, base, spec, code_dir, checked, entry)
            if answer["problem"] is None:
                used = _with_own_processes(limits, UNPRIVILEGED_ID if user is not None else os.getuid())
                return Plan(CONTAINER, user, base, used,
                            describe(CONTAINER, user, non_dumpable, used, withheld, answer["writable"]))
            problems.append(f"bubblewrap cannot run it: {answer['problem']}")
        if user is None:
            problems.append("the verifier does not run as root, so it cannot start it as another user"
                            if os.geteuid() != 0 else f"no unprivileged user: {AGENT_USER!r} has uid or gid 0 here")
        else:
            answer = probe(SEPARATE_USER, user, base, spec, code_dir, checked, entry)
            if answer["problem"] is None:
                used = _with_own_processes(limits, user.uid)
                return Plan(SEPARATE_USER, user, base, used,
                            describe(SEPARATE_USER, user, non_dumpable, used, withheld, answer["writable"],
                                     problems[-1]))
            problems.append(f"as user {user.name!r}: {answer['problem']}")
        closed = closed_folder(user)
        if closed is not None:
            problems.append(closed)
    raise SandboxUnavailable(
        "the agent's process cannot be sandboxed here, so none of its code was run: " + "; ".join(problems)
        + ". Install bubblewrap (apt install bubblewrap, dnf install bubblewrap), or verify as root, or pass "
        f"--unsandboxed to run it as {verifier_user()}, with your privileges (the verdict then says so).")


def closed_folder(user: User | None, targets: Sequence[str | os.PathLike] | None = None) -> str | None:
    """Why ``user`` cannot reach ``targets`` (default: this interpreter and the folder of the packages it imports),
    where the reason is a folder above one of them that ``user`` cannot enter (``/root`` of mode 700 above a pyenv
    Python, say), else None: both sandboxed modes run the agent's process as ``user`` with this interpreter."""
    if user is None:
        return None
    import sysconfig

    if targets is None:
        targets = (os.path.realpath(sys.executable), sysconfig.get_paths()["purelib"])
    for target in targets:
        for folder in reversed(Path(target).parents):
            try:
                info = folder.stat()
            except OSError:
                continue
            searchable = (info.st_mode & stat.S_IXOTH or (info.st_uid == user.uid and info.st_mode & stat.S_IXUSR)
                          or (info.st_gid == user.gid and info.st_mode & stat.S_IXGRP))
            if not searchable:
                return (f"user {user.name!r} cannot enter {folder} (mode {stat.S_IMODE(info.st_mode):o}), which holds "
                        f"{target}: make it searchable (chmod o+x {folder}) or install Python where every user can "
                        "read it")
    return None


def _with_own_processes(limits: Limits, uid: int) -> Limits:
    """``limits`` whose process count adds the tasks that user ``uid`` runs now (RLIMIT_NPROC counts them all)."""
    from dataclasses import replace

    return replace(limits, processes=limits.processes + _tasks_of(uid))


def _tasks_of(uid: int) -> int:
    """Processes and threads whose real uid is ``uid``, now."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                status = Path(entry.path, "status").read_text()
                real = int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))
                threads = int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))
            except (OSError, ValueError, StopIteration, IndexError):
                continue
            count += threads if real == uid else 0
    return count


def describe(mode: str, user: User | None, non_dumpable: bool, limits: Limits | None,
             withheld: Sequence[str] = (), writable: Sequence[str] = (), reason: str | None = None) -> dict[str, Any]:
    """The protection in force for an agent's process started in ``mode`` as ``user`` (None: as this process's
    user), as a JSON-serialisable dict: ``mode``, ``contained`` (the container), ``separate_user`` (not the
    verifier's user), ``user`` (the name it runs as), ``uid``, ``gid``, ``network``, ``limits``,
    ``verifier_non_dumpable``, ``reason`` (why not a stronger mode, or None), ``withheld_environment``, ``in_force``
    and ``unprotected``: plain sentences saying what protects the verifier and what the agent's process can still
    do."""
    in_force = [f"limits: {limits.text()}"] if limits is not None else []
    unprotected = []
    if mode == CONTAINER:
        name, uid, gid = AGENT_USER, UNPRIVILEGED_ID, UNPRIVILEGED_ID
        in_force += [
            "bubblewrap: own user, PID, network, IPC, UTS and cgroup namespaces (no network, no process of the "
            "verifier's to see, signal or trace), no user namespaces inside",
            "a read-only root holding only the system's programs and libraries, the interpreter, its packages, "
            "memgym and a private copy of the agent's code; a private tmpfs of "
            f"{(limits.file_size if limits else Limits.DISK) / (1 << 30):.1f} GiB is its only writable folder",
            "outside the namespaces it runs as " + (f"{user.name!r} (uid {user.uid})" if user is not None else
                                                    f"the verifier's user ({verifier_user()}) in a user namespace "
                                                    "of its own, without its capabilities"),
            "everything it starts dies with it"]
        unprotected.append("can read what the container holds: the installed packages, memgym and its own code")
        if limits is not None and limits.address_space is None:
            unprotected.append("can use as much memory as the machine gives (an accelerator is present: no "
                               "address-space limit)")
    elif mode == SEPARATE_USER:
        assert user is not None
        name, uid, gid = user.name, user.uid, user.gid
        in_force.append(f"runs as {user.name!r} (uid {user.uid}) with private HOME, TMPDIR and caches and a private "
                        "copy of its code; what it orphans is killed when it closes")
        unprotected.append(f"runs as {user.name!r}, a user other processes may share: it can signal, and where the "
                           "kernel allows trace, that user's other processes")
        unprotected.append("can read every file that all users may read and write where all users may (the "
                           "shared temporary folders): its disk use there is not limited")
        unprotected.append("can use the network")
        unprotected += [f"can change {path}: writable by its user" for path in writable]
    else:
        name, uid, gid = verifier_user(), _getid("geteuid"), _getid("getegid")
        reason = reason or "asked for (--unsandboxed)"
        unprotected.append("UNSANDBOXED (asked for): runs as the verifier's user"
                           + (", root: it can read and write the verifier's memory, signal it, and read and write "
                              "every file" if uid == 0 else
                              f" ({name}): it can signal the verifier and write every file the verifier can, its "
                              "results and the submission included"))
        unprotected.append("can use the network; processes it starts outside its process group outlive it")
    if non_dumpable:
        in_force.append("the verifier is non-dumpable (no /proc/<pid>/mem, environ or ptrace for other users' "
                        "processes and its own user's)")
    in_force.append("its environment is built from an allow-list (of the verifier's variables, "
                    f"{len(withheld)} withheld: withheld_environment)")
    return {"mode": mode, "contained": mode == CONTAINER, "separate_user": mode != UNSANDBOXED, "user": name,
            "uid": uid, "gid": gid, "network": mode != CONTAINER,
            "limits": None if limits is None else asdict(limits), "verifier_non_dumpable": bool(non_dumpable),
            "reason": reason, "withheld_environment": list(withheld), "in_force": in_force,
            "unprotected": unprotected}


def _getid(name: str) -> int | None:
    function = getattr(os, name, None)
    return None if function is None else function()


# ---- the probe, run as the agent's process will run -------------------------------------------------------------------------

def _unreadable(root: str) -> str | None:
    """The first folder or file under ``root`` this process cannot read (folders: list and enter), or None."""
    if not os.access(root, os.R_OK | (os.X_OK if os.path.isdir(root) else 0)):
        return root
    if not os.path.isdir(root):  # a module's file (os.walk would report it as a folder it cannot list)
        return None
    failed: list[str] = []
    for folder, folders, files in os.walk(root, onerror=lambda error: failed.append(error.filename)):
        if failed:
            return failed[0]
        for name in folders:
            path = os.path.join(folder, name)
            if not os.path.islink(path) and not os.access(path, os.R_OK | os.X_OK):
                return path
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path) and not os.access(path, os.R_OK):
                return path
    return failed[0] if failed else None


def _changeable(root: str, limit: int = 10) -> list[str]:
    """Paths under ``root`` (and folders above it) that this process could write, rename or remove (a folder
    with the sticky bit lets it remove only its own entries); at most ``limit``."""
    found: list[str] = []
    for parent in list(Path(root).parents)[::-1]:
        try:
            sticky = os.stat(parent).st_mode & stat.S_ISVTX
        except OSError:
            continue
        if not sticky and os.access(parent, os.W_OK | os.X_OK):
            found.append(str(parent))
    for folder, folders, files in os.walk(root):
        for path in [folder, *(os.path.join(folder, name) for name in files)]:
            if os.access(path, os.W_OK) and not os.path.islink(path):
                found.append(path)
        if len(found) >= limit:
            break
    return found[:limit]


def _module_problem(spec: str, code_dir: str | None) -> str | None:
    """Why the agent's module would not be readable here (found without importing it), or None."""
    from memgym.leaderboard.protocol import entry_points, parse_spec

    base = parse_spec(spec)[0]
    if ":" in base:
        module = base.partition(":")[0]
    else:
        registered = entry_points()
        if base not in registered:
            return None  # not an agent at all: the agent's process reports that, whoever runs it
        module = registered[base].value.partition(":")[0]
    top = module.split(".")[0]
    if code_dir is not None and (os.path.isdir(os.path.join(code_dir, top))
                                 or os.path.exists(os.path.join(code_dir, f"{top}.py"))):
        return None  # in the code folder, read in full above
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError) as error:
        return f"cannot find the agent's module {top!r} ({error})"
    if found is None:
        return f"cannot find the agent's module {top!r}"
    for place in [*(found.submodule_search_locations or []), *([found.origin] if found.has_location else [])]:
        unreadable = _unreadable(place) if os.path.exists(place) else None
        if unreadable is not None:
            return f"cannot read {unreadable} (the agent's module {top!r})"
    return None


def _probe(request: dict[str, Any]) -> dict[str, Any]:
    importlib.import_module(request.get("entry") or "memgym")  # what the agent's process imports first

    answer: dict[str, Any] = {"problem": None, "writable": []}
    for variable in ("HOME", "TMPDIR", "PYTHONPYCACHEPREFIX"):
        if variable in os.environ:
            try:
                with tempfile.TemporaryFile(dir=os.environ[variable]):
                    pass
            except OSError as error:
                answer["problem"] = f"cannot write its {variable} {os.environ[variable]} ({error.strerror})"
                return answer
    for pattern in DEVICES:
        for device in sorted(glob.glob(pattern)):
            if stat.S_ISCHR(os.stat(device).st_mode) and not os.access(device, os.R_OK | os.W_OK):
                answer["problem"] = f"cannot use the accelerator's device {device}"
                return answer
    code_dir, spec = request.get("code_dir"), request.get("spec")
    if code_dir is not None:
        unreadable = _unreadable(code_dir)
        if unreadable is not None:
            answer["problem"] = f"cannot read {unreadable} (the agent's code folder {code_dir})"
            return answer
    if spec is not None:
        answer["problem"] = _module_problem(spec, code_dir)
    for path in request.get("protect", []):
        if os.path.exists(path):
            answer["writable"] += [p for p in _changeable(path) if p not in answer["writable"]]
    return answer


if __name__ == "__main__":
    print(json.dumps(_probe(json.loads(sys.argv[1]))))
