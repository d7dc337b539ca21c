"""What a submitted agent's process can reach of the verifier that starts it.

:class:`~memgym.leaderboard.isolation.AgentProcess` keeps the submitted code out of the process
that counts. This module keeps it away from that process's memory, signals and files as far as
the machine allows:

- The verifier makes itself *non-dumpable* (``prctl(PR_SET_DUMPABLE, 0)``) before it starts a
  child: a process of another user, and of its own user, cannot read or write its memory
  (``/proc/<pid>/mem``), read its environment (``/proc/<pid>/environ``) or trace it. Root is not
  bound by this.
- A verifier running as root on Linux starts the agent's process as an unprivileged user
  (:data:`AGENT_USER`, uid and gid 65534 on most systems), without supplementary groups, with a
  private HOME, TMPDIR and cache folder owned by that user. It cannot signal the verifier, nor
  write the verifier's files unless they are writable by every user; the verifier's umask loses
  the others' write bit so that what it writes next is not. While such a process lives the
  verifier is its *subreaper*: processes the agent starts and orphans come back to the verifier,
  which kills them when the agent's process is closed.
- Before relying on that user, :func:`probe` checks, as that user, that it can run this
  interpreter, import memgym, read the agent's code folder and its module, and write its private
  folders. The probe never imports the agent's code (code that could make the probe fail on
  purpose, to be run as root). If the probe fails, the agent runs as the verifier's user and
  :func:`describe` says why.
- Environment variables whose names mark a secret (:data:`SECRET_NAMES`) are not passed on.

:func:`describe` returns what is in force, and what the agent's process can still do, as a
JSON-serialisable dict (``AgentProcess.protection``; :func:`memgym.leaderboard.isolation.protection`).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import json
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the user a root verifier runs the agent's process as, and its group (the first of these that exists)
AGENT_USER = "nobody"
AGENT_GROUPS = ("nogroup", "nobody")
#: the uid and gid used when the system has no such user or group (the conventional "nobody")
UNPRIVILEGED_ID = 65534
#: seconds the probe may take (it starts an interpreter and imports memgym)
PROBE_TIMEOUT = 120.0
#: environment variables whose names match are not passed to the agent's process
SECRET_NAMES = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY", re.I)
#: cache folders moved into the agent's private cache folder when the verifier's environment sets them
CACHE_VARIABLES = {"JAX_COMPILATION_CACHE_DIR": "jax", "MEMGYM_COMPILATION_CACHE": "memgym-jax",
                   "TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
                   "CUDA_CACHE_PATH": "nv", "MPLCONFIGDIR": "matplotlib", "TORCH_HOME": "torch",
                   "HF_HOME": "huggingface"}
_CACHE_OFF = ("off", "0", "false", "no", "")  # memgym.compilation_cache's words for "no cache"
_XDG_ELSEWHERE = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")

#: accelerators' device files (NVIDIA, AMD, render nodes, TPU): the agent's user must be able to open those there are,
#: or its process would train on the CPU where the verifier's runs on the accelerator
DEVICES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dri/renderD*",
           "/dev/accel/accel*")

_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


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


class PrivateFolders:
    """A temporary tree for one agent's process: ``home``, ``tmp``, ``cache`` and (``pycache``) a compilation
    prefix, each owned by ``user`` (mode 0700) under a root-owned folder (mode 0711); with ``user`` None only the
    compilation prefix, owned by this process's user (as the verifier always had it)."""

    def __init__(self, user: User | None, pycache: bool):
        self.user = user
        self.root = Path(tempfile.mkdtemp(prefix="memgym-agent-"))
        names = (["home", "tmp", "cache"] if user is not None else []) + (["pycache"] if pycache else [])
        try:
            if user is not None:
                os.chmod(self.root, 0o711)
            for name in names:
                folder = self.root / name
                folder.mkdir(mode=0o700)
                if user is not None:
                    os.chown(folder, user.uid, user.gid)
        except BaseException:
            self.remove()
            raise
        self.pycache = self.root / "pycache" if pycache else None

    def environment(self, environment: dict[str, str]) -> dict[str, str]:
        """``environment`` with HOME, TMPDIR, the caches and the compilation prefix in these folders."""
        environment = dict(environment)
        if self.pycache is not None:
            environment["PYTHONPYCACHEPREFIX"] = str(self.pycache)
        if self.user is None:
            return environment
        home, tmp, cache = (str(self.root / name) for name in ("home", "tmp", "cache"))
        environment |= {"HOME": home, "USER": self.user.name, "LOGNAME": self.user.name, "TMPDIR": tmp,
                        "TMP": tmp, "TEMP": tmp, "XDG_CACHE_HOME": cache}
        for name in _XDG_ELSEWHERE:  # the verifier's: they default to folders under the new HOME
            environment.pop(name, None)
        for name, folder in CACHE_VARIABLES.items():
            if name in environment and not (name == "MEMGYM_COMPILATION_CACHE"
                                            and environment[name].strip().lower() in _CACHE_OFF):
                environment[name] = os.path.join(cache, folder)
        return environment

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def passed_on(environment: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``environment`` without the variables whose names mark a secret, and those names (sorted)."""
    withheld = sorted(name for name in environment if SECRET_NAMES.search(name))
    return {k: v for k, v in environment.items() if k not in withheld}, withheld


def popen_arguments(user: User | None) -> dict[str, Any]:
    """``subprocess.Popen``'s arguments that start a process as ``user`` with no supplementary groups (none for
    None: as this process's user)."""
    return {} if user is None else {"user": user.uid, "group": user.gid, "extra_groups": []}


_probed: dict[tuple, dict[str, Any]] = {}
_probed_lock = threading.Lock()


def probe(user: User, environment: Mapping[str, str], spec: str | None = None,
          code_dir: str | os.PathLike | None = None, protect: Sequence[str | os.PathLike] = ()) -> dict[str, Any]:
    """Whether ``user`` can run the agent's process: ``{"problem": None or why not, "writable": [paths of
    `protect` (and their folders) it could change]}``.

    Runs ``python -m memgym.leaderboard.sandbox`` as ``user`` with ``environment`` (without the code folder on
    its path, in an empty private folder: nothing of the submission is imported) and its own private folders.
    It checks that the interpreter runs and imports memgym, that HOME, TMPDIR and the compilation prefix are
    writable, that the accelerators' devices (:data:`DEVICES`) open, that every folder and file of ``code_dir``
    is readable, and that the module of ``spec`` is found and readable. The answer is remembered for this
    process (per user, interpreter, code folder, spec, paths and PYTHONPATH)."""
    code = None if code_dir is None else str(Path(code_dir).resolve())
    paths = [str(Path(p).resolve()) for p in protect]
    key = (user, sys.executable, code, spec, tuple(paths), environment.get("PYTHONPATH"))
    with _probed_lock:
        if key in _probed:
            return dict(_probed[key])
    request = {"spec": spec, "code_dir": code, "protect": paths}
    folders = PrivateFolders(user, pycache=code is not None)
    try:
        done = subprocess.run([sys.executable, "-m", "memgym.leaderboard.sandbox", json.dumps(request)],
                              env=folders.environment(dict(environment)), cwd=folders.root / "home",
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT,
                              **popen_arguments(user))
        answer = _probe_answer(done, user)
    except subprocess.TimeoutExpired:
        answer = {"problem": f"a process of user {user.name!r} did not start and import memgym within "
                             f"{PROBE_TIMEOUT:.0f}s", "writable": []}
    except OSError as error:
        answer = {"problem": f"user {user.name!r} cannot run the interpreter {sys.executable} "
                             f"({error.strerror or error})", "writable": []}
    finally:
        folders.remove()
    with _probed_lock:
        _probed[key] = answer
    return dict(answer)


def _probe_answer(done: subprocess.CompletedProcess, user: User) -> dict[str, Any]:
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1])
        if done.returncode == 0 and isinstance(answer, dict) and "problem" in answer:
            return {"problem": answer["problem"], "writable": list(answer.get("writable", []))}
    except (IndexError, ValueError):
        pass
    error = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return {"problem": f"a process of user {user.name!r} cannot import memgym (exit code {done.returncode}: "
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


def plan(spec: str | None, code_dir: str | os.PathLike | None, protect: Sequence[str | os.PathLike],
         environment: Mapping[str, str]) -> tuple[User | None, dict[str, str], dict[str, Any]]:
    """Harden this process (:func:`harden`) and decide how to run agent ``spec``'s process: the user (None: this
    process's), the environment it starts from (``environment`` less :func:`passed_on`'s secrets) and the
    protection in force (:func:`describe`). A root verifier whose :func:`probe` fails says why on standard
    error, once per reason."""
    non_dumpable = harden()
    base, withheld = passed_on(environment)
    user, reason, writable = agent_user(), None, []
    if user is None:
        if not sys.platform.startswith("linux"):
            reason = f"a separate user is used on Linux only, not on {sys.platform}"
        elif os.geteuid() != 0:
            reason = "the verifier does not run as root, so it cannot start a process as another user"
        else:
            reason = f"no unprivileged user: {AGENT_USER!r} has uid or gid 0 here"
    else:
        checked = ([] if code_dir is None else [code_dir]) + list(protect)
        answer = probe(user, base, spec, code_dir, checked)
        if answer["problem"] is not None:
            reason = answer["problem"]
            _say_once(f"memgym: the agent's process runs as {verifier_user()}, the verifier's user, not as "
                      f"{user.name!r}: {reason}")
            user = None
        else:
            writable = answer["writable"]
    return user, base, describe(user, non_dumpable, reason, writable, withheld)


_said: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        print(message, file=sys.stderr, flush=True)


def describe(user: User | None, non_dumpable: bool, reason: str | None = None,
             writable: Sequence[str] = (), withheld: Sequence[str] = ()) -> dict[str, Any]:
    """The protection in force for an agent's process run as ``user`` (None: as this process's user, for
    ``reason``), as a JSON-serialisable dict: ``separate_user``, ``user`` (name), ``uid``, ``gid``,
    ``verifier_non_dumpable``, ``reason``, ``withheld_environment`` and ``unprotected``, plain sentences saying
    what the agent's process can still do."""
    unprotected = []
    if user is not None:
        unprotected.append(f"runs as {user.name!r} (uid {user.uid}), a user other processes may share: it can "
                           "signal, and where the kernel allows trace, that user's other processes")
        unprotected.append("can read every file that all users may read (the repository, the submission, the "
                           "installed packages) and write where all users may (the shared temporary folders)")
        unprotected += [f"can change {path}: writable by its user" for path in writable]
        name, uid, gid = user.name, user.uid, user.gid
    else:
        name, uid, gid = verifier_user(), _getid("geteuid"), _getid("getegid")
        if uid == 0:
            unprotected.append("runs as root, the verifier's user: it can read and write the verifier's memory, "
                               "signal it, and read and write every file (non-dumpable does not bind root)")
        else:
            unprotected.append(f"runs as the verifier's user ({name}, not root): it can signal the verifier and "
                               "write every file the verifier can, its results and the submission included")
            if not non_dumpable:
                unprotected.append("can read the verifier's memory and environment (/proc/<pid>/mem, environ) "
                                   "and trace it: the verifier could not make itself non-dumpable here")
        unprotected.append("processes it starts outside its process group outlive the verification")
    unprotected.append("can use the network, and as much CPU time, memory and disk as the machine gives (no "
                       "limits are set)")
    if withheld:
        unprotected.append("receives the verifier's environment variables, except those whose names mark a "
                           f"secret ({', '.join(withheld)})")
    else:
        unprotected.append("receives the verifier's environment variables")
    return {"separate_user": user is not None, "user": name, "uid": uid, "gid": gid,
            "verifier_non_dumpable": bool(non_dumpable), "reason": reason, "withheld_environment": list(withheld),
            "unprotected": unprotected}


def _getid(name: str) -> int | None:
    function = getattr(os, name, None)
    return None if function is None else function()


# ---- the probe, run as the agent's user -------------------------------------------------------------------------

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
    import memgym.leaderboard.isolation  # noqa: F401 - what the agent's process imports first

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
