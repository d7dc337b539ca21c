"""The agent's process cannot reach the verifier's memory, signals or files (docs/submitting.md, "What is
verified, what is self-reported"; :mod:`memgym.leaderboard.sandbox`).

A hostile any-framework agent tries, at import and in ``act``, to read the verifier's memory and environment
(``/proc/<ppid>/mem``, ``environ``), to stop and terminate it, and to write into the submission, its results and
its code; each attempt is printed as an ``agent | attempt ...`` line, which the verifier relays to its standard
error. Run by ``memgym leaderboard verify`` as root, every attempt is denied and the honest scores verify.

The separate user must be able to run this interpreter. Where it lies under a folder closed to other users (a
home folder of mode 0700), the commands run in a private mount namespace (``unshare``) in which that folder is
covered by an open one holding only the interpreter's entries (nothing changes outside the namespace). The
submissions are written into a folder of this test's own, open to other users for reading.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import memgym
from memgym.leaderboard import isolation, sandbox
from tests.leaderboard.test_submissions import JAX_AGENT, MEMGYM, RANDOM_AGENT, make_submission

LINUX_ROOT = sys.platform.startswith("linux") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not LINUX_ROOT, reason="a separate user needs a verifier running as root on Linux")

SECRET = "memgym-test-secret-7f3a"

HOSTILE_AGENT = RANDOM_AGENT + '''
import errno
import os
import pathlib
import signal

# set only for the verification, not for the run that made the records
ATTACK = os.environ.get("MEMGYM_HOSTILE") == "1"
SIGNALS = [s for s in os.environ.get("MEMGYM_HOSTILE_SIGNALS", "SIGSTOP,SIGTERM").split(",") if s]
SECRET = "''' + SECRET + '''"


def attempt(phase, name, action):
    try:
        print(f"attempt {phase} {name}: succeeded ({action()})", flush=True)
    except OSError as error:
        print(f"attempt {phase} {name}: denied ({errno.errorcode.get(error.errno, error.errno)})", flush=True)


def read_memory(pid):
    with open(f"/proc/{pid}/mem", "rb") as memory:
        with open(f"/proc/{pid}/maps") as maps:
            start = int(next(line for line in maps if " r" in line).split("-")[0], 16)
        memory.seek(start)
        return f"{len(memory.read(4096))} bytes at {start:#x}"


def read_environment(pid):
    with open(f"/proc/{pid}/environ", "rb") as environ:
        text = environ.read()
    return f"{len(text)} bytes, the secret {'in' if SECRET.encode() in text else 'not in'} it"


def send(pid, name):
    os.kill(pid, getattr(signal, name))
    if name == "SIGSTOP":  # it got through: let the verifier go on, the attempt is recorded
        os.kill(pid, signal.SIGCONT)
    return f"{name} delivered"


def write(path, mode="w"):
    with open(path, mode) as file:
        file.write("planted by the agent")
    return str(path)


def attack(phase):
    parent = os.getppid()
    print(f"identity {phase}: uid {os.getuid()} gid {os.getgid()} groups {os.getgroups()} "
          f"secret {'in' if SECRET in os.environ.values() else 'not in'} my environment", flush=True)
    attempt(phase, "read /proc/<ppid>/mem", lambda: read_memory(parent))
    attempt(phase, "read /proc/<ppid>/environ", lambda: read_environment(parent))
    for name in SIGNALS:
        attempt(phase, f"send {name}", lambda name=name: send(parent, name))
    submission = pathlib.Path("..")  # the agent's process runs in the code folder
    record = next((submission / "results").rglob("seed*.json"))
    attempt(phase, "write the results folder", lambda: write(submission / "results" / "planted.json"))
    attempt(phase, "append to a record", lambda: write(record, "a"))
    attempt(phase, "write the submission folder", lambda: write(submission / "planted.txt"))
    attempt(phase, "write a verdict", lambda: write(submission / "verification.json"))
    attempt(phase, "write the code folder", lambda: write(pathlib.Path("planted.py")))


if ATTACK:
    attack("import")


class Hostile(Agent):
    attacked = False

    def act(self, obs, start):
        if ATTACK and not Hostile.attacked:
            Hostile.attacked = True
            attack("act")
        return super().act(obs, start)


def factory(context):
    return Hostile(context)
'''

ATTEMPTS = ["read /proc/<ppid>/mem", "read /proc/<ppid>/environ", "send SIGSTOP", "send SIGTERM",
            "write the results folder", "append to a record", "write the submission folder", "write a verdict",
            "write the code folder"]


# ---- running as the separate user where the interpreter lies in a closed folder -------------------------------

def _closed_folders(paths: list[str]) -> dict[str, set[str]]:
    """The folders on the way to ``paths`` that other users cannot enter, each with the entries to keep open."""
    closed: dict[str, set[str]] = {}
    for path in paths:
        parts = Path(path).parts
        for depth in range(1, len(parts)):
            folder = str(Path(*parts[:depth]))
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                closed.setdefault(folder, set()).add(parts[depth])
    return closed


def _interpreter_paths() -> list[str]:
    paths = {sys.executable, sys.base_prefix, sys.prefix, str(Path(memgym.__file__).parent)}
    paths |= {p for p in sys.path if p and os.path.exists(p)}
    return sorted({os.path.realpath(p) for p in paths})


@pytest.fixture(scope="module")
def reachable() -> list[str]:
    """A command prefix under which the user ``nobody`` can run this interpreter and import memgym: nothing
    where it already can; else a private mount namespace in which each closed folder on the way is covered by
    an open one (a tmpfs) holding bind mounts of the entries needed."""
    if not LINUX_ROOT:
        pytest.skip("a separate user needs a verifier running as root on Linux")
    closed = _closed_folders(_interpreter_paths())
    if not closed:
        return []
    lines = ["set -e"]
    for folder in sorted(closed, key=lambda f: len(Path(f).parts)):
        lines += ['stage=$(mktemp -d)', 'mount -t tmpfs -o mode=0755 memgym-test "$stage"']
        for entry in sorted(closed[folder]):
            source = os.path.join(folder, entry)
            lines.append(f'{"mkdir" if os.path.isdir(source) else "touch"} "$stage"/{shlex.quote(entry)}')
            lines.append(f'mount --bind {shlex.quote(source)} "$stage"/{shlex.quote(entry)}')
        lines += [f'mount --move "$stage" {shlex.quote(folder)}', 'rmdir "$stage"']
    lines.append('exec "$@"')
    prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines), "sh"]
    try:
        tried = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        pytest.skip(f"{sorted(closed)} closed to other users and no unshare to open them in a namespace")
    if tried.returncode != 0:
        pytest.skip(f"{sorted(closed)} closed to other users and no mount namespace here: {tried.stderr[-300:]}")
    return prefix


@pytest.fixture(scope="module")
def open_folder():
    """A folder of this test's own that other users can enter and read (pytest's are closed to them)."""
    folder = Path(tempfile.mkdtemp(prefix="memgym-sandbox-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def hostile(open_folder) -> Path:
    return make_submission(open_folder, "hostile-agent", HOSTILE_AGENT, "hostile")


def _python(prefix: list[str], script: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=600, **kwargs)


def _attempts(err: str) -> dict[tuple[str, str], list[str]]:
    """``(phase, attempt) -> [outcome, ...]`` (one per agent's process) from the relayed ``agent | attempt ...``
    lines."""
    found: dict[tuple[str, str], list[str]] = {}
    for line in err.splitlines():
        if "agent | attempt " in line:
            phase, rest = line.split("agent | attempt ", 1)[1].split(" ", 1)
            name, outcome = rest.split(": ", 1)
            found.setdefault((phase, name), []).append(outcome)
    return found


# ---- the tests -----------------------------------------------------------------------------------------------

def test_protection_says_what_is_in_force_here():
    described = isolation.protection()
    assert json.loads(json.dumps(described)) == described
    assert set(described) >= {"separate_user", "user", "verifier_non_dumpable", "unprotected"}
    assert all(isinstance(line, str) and line for line in described["unprotected"])
    if sys.platform.startswith("linux"):  # asking made this process non-dumpable, as starting an agent does
        assert described["verifier_non_dumpable"] and sandbox._prctl(3) == 0
    if not LINUX_ROOT:
        assert not described["separate_user"] and "not run as root" in described["reason"]
        assert any("can signal the verifier" in line for line in described["unprotected"])
    elif not described["separate_user"]:  # a root verifier that cannot use the user says why
        assert described["user"] == "root" and described["reason"]
        assert any(line.startswith("runs as root") for line in described["unprotected"])


def test_secrets_in_the_environment_are_withheld():
    passed, withheld = sandbox.passed_on({"PATH": "/bin", "GITHUB_TOKEN": "x", "AWS_SECRET_ACCESS_KEY": "y",
                                          "SSH_AUTH_SOCK": "z", "XLA_FLAGS": "--a", "WANDB_API_KEY": "w"})
    assert passed == {"PATH": "/bin", "XLA_FLAGS": "--a"}
    assert withheld == ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "WANDB_API_KEY"]
    described = sandbox.describe(None, True, "a reason", withheld=withheld)
    assert "GITHUB_TOKEN" in described["unprotected"][-1] and described["withheld_environment"] == withheld


@needs_root
def test_protection_with_the_separate_user(reachable, open_folder):
    writable = open_folder / "writable-by-all"
    writable.mkdir(exist_ok=True)
    writable.chmod(0o777)
    done = _python(reachable, f"""
        import json
        from memgym.leaderboard import isolation
        print(json.dumps([isolation.protection(), isolation.protection(protect=[{str(writable)!r}]),
                          isolation.protection("a2c-tiny-gru")]))
    """)
    assert done.returncode == 0, done.stderr
    plain, exposed, package = json.loads(done.stdout.splitlines()[-1])
    # an agent of an installed package (its module a single file or a package folder) is read where it lies
    assert package["separate_user"] and package["reason"] is None, package
    assert plain["separate_user"] and plain["reason"] is None and plain["verifier_non_dumpable"], plain
    user = sandbox.agent_user()
    assert (plain["user"], plain["uid"], plain["gid"]) == (user.name, user.uid, user.gid) and user.uid != 0
    assert plain["unprotected"][0].startswith(f"runs as {user.name!r}")
    assert not any("verifier's user" in line for line in plain["unprotected"])
    assert f"can change {writable}: writable by its user" in exposed["unprotected"]


@needs_root
def test_an_accelerator_device_the_user_cannot_open_fails_the_probe(reachable, open_folder):
    """The probe, run as the separate user, refuses an accelerator device it cannot open (the agent would train
    on the CPU): two copies of /dev/null's device, one open to all, one to root only."""
    user = sandbox.agent_user()
    devices = open_folder / "devices"
    devices.mkdir(exist_ok=True)
    for name, mode in (("accel0", 0o666), ("accel1", 0o600)):
        if not (devices / name).exists():
            os.mknod(devices / name, mode | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod(devices / name, mode)
    as_user = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv to run the probe as another user")
    answers = []
    for pattern in ("accel0", "accel*"):
        done = _python([*reachable, *as_user], f"""
            import json
            from memgym.leaderboard import sandbox

            sandbox.DEVICES = ({str(devices / pattern)!r},)
            print(json.dumps(sandbox._probe({{"code_dir": None, "spec": None, "protect": []}})))
        """, env={k: v for k, v in os.environ.items() if k not in ("HOME", "TMPDIR", "PYTHONPYCACHEPREFIX")})
        assert done.returncode == 0, done.stderr
        answers.append(json.loads(done.stdout.splitlines()[-1])["problem"])
    assert answers == [None, f"cannot use the accelerator's device {devices / 'accel1'}"]


@needs_root
def test_a_hostile_agent_reaches_nothing_of_a_root_verifier_and_its_honest_scores_verify(reachable, hostile):
    environment = dict(os.environ, MEMGYM_HOSTILE="1", MEMGYM_TEST_SECRET_TOKEN=SECRET)
    done = subprocess.run([*reachable, *MEMGYM, "leaderboard", "verify", str(hostile), "--k", "2",
                           "--sample-seed", "0"], capture_output=True, text=True, timeout=600, env=environment,
                          umask=0)  # what the verifier writes must not be writable by all, whatever its umask
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: VERIFIED (2/2 " in done.stdout
    verdict = json.loads((hostile / "verification.json").read_text())
    assert verdict["verdict"] == "verified" and not verdict["problems"]
    assert not (hostile / "verification.json").stat().st_mode & stat.S_IWOTH
    user = sandbox.agent_user()
    assert f"identity import: uid {user.uid} gid {user.gid} groups [] secret not in my environment" in done.stderr
    outcomes = _attempts(done.stderr)
    for phase in ("import", "act"):
        for name in ATTEMPTS:  # once in each of the two cells' processes
            assert len(outcomes.get((phase, name), [])) == 2, (phase, name, done.stderr[-3000:])
            assert all(o.startswith("denied") for o in outcomes[(phase, name)]), (phase, name, outcomes)
    for planted in (hostile / "results" / "planted.json", hostile / "planted.txt", hostile / "code" / "planted.py"):
        assert not planted.exists()
    assert "planted by the agent" not in "".join(p.read_text() for p in (hostile / "results").rglob("*.json"))


@needs_root
@pytest.mark.slow(seconds=45)
def test_a_jax_tier_agent_trains_as_the_separate_user_and_reproduces_exactly(reachable, open_folder):
    """The JAX tier's child trains as the separate user (JAX and Python caches in its private folders) and
    reproduces the records made in the user's own process exactly."""
    source = JAX_AGENT.format(forge_counters=False, patch_env=False) + textwrap.dedent("""
        import os

        home = os.path.expanduser("~")
        private = os.path.basename(os.path.dirname(home)).startswith("memgym-agent-") and os.access(home, os.W_OK)
        print(f"uid {os.getuid()} private home {private}", flush=True)
    """)
    folder = make_submission(open_folder, "jax-random", source, "jax_random", framework="JAX")
    done = subprocess.run([*reachable, *MEMGYM, "leaderboard", "verify", str(folder), "--k", "2",
                           "--sample-seed", "0"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"agent | uid {sandbox.agent_user().uid} private home True" in done.stderr
    verdict = json.loads((folder / "verification.json").read_text())
    assert verdict["verdict"] == "verified"
    assert all(row["rule"] == "exact (same backend)" and row["agrees"] for row in verdict["cells"])


@needs_root
def test_a_code_folder_the_user_cannot_read_falls_back_to_the_verifiers_user_and_says_why(reachable, open_folder):
    folder = open_folder / "closed-code"
    code = folder / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "random_walker.py").write_text(textwrap.dedent(RANDOM_AGENT))
    code.chmod(0o700)
    done = _python(reachable, f"""
        import json
        import numpy as np
        from memgym.leaderboard import isolation
        from memgym.leaderboard.tracks import TMAZE

        described = isolation.protection("random_walker:factory", {str(code)!r})
        with isolation.AgentProcess("random_walker:factory", {str(code)!r}) as process:
            agent = isolation.RemoteAgent(process, TMAZE, 2, 0, 100, 4)
            actions = agent.act(np.zeros((4, 16)), np.ones(4, bool))
            print(json.dumps([described, process.protection, actions.tolist(), process.process.pid]))
    """)
    assert done.returncode == 0, done.stderr
    described, used, actions, _ = json.loads(done.stdout.splitlines()[-1])
    assert used == described and not used["separate_user"] and used["user"] == "root"
    assert used["reason"] == f"cannot read {code} (the agent's code folder {code})"
    assert any(line.startswith("runs as root, the verifier's user") for line in used["unprotected"])
    assert len(actions) == 4 and all(0 <= a < 4 for a in actions)  # the agent still runs, as root
    said = f"the agent's process runs as root, the verifier's user, not as '{sandbox.agent_user().name}'"
    assert done.stderr.count(said) == 1  # said once, not once per process


@needs_root
def test_a_verifier_that_is_not_root_is_non_dumpable_but_can_be_signalled(reachable, hostile):
    """The verifier run as the unprivileged user itself (``setpriv``): the agent's process runs as the same user.
    Reading a same-user parent's environment works (a control, before the verifier hardens itself) and is denied
    once it is non-dumpable, and so is its memory; a signal gets through, as the protection says."""
    user = sandbox.agent_user()
    code = hostile / "code"
    as_user = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv to run the verifier as another user")
    done = _python([*reachable, *as_user], f"""
        import json, os, subprocess, sys
        import numpy as np

        control = subprocess.run([sys.executable, "-c", "import os; "
                                  "print(len(open(f'/proc/{{os.getppid()}}/environ', 'rb').read()) > 0)"],
                                 capture_output=True, text=True)
        from memgym.leaderboard import isolation
        from memgym.leaderboard.tracks import TMAZE

        with isolation.AgentProcess("hostile:factory", {str(code)!r}) as process:
            agent = isolation.RemoteAgent(process, TMAZE, 2, 0, 100, 4)
            agent.act(np.zeros((4, 16)), np.ones(4, bool))
            print(json.dumps([control.stdout.strip(), control.returncode, os.getuid(), process.protection]))
    """, env=dict(os.environ, MEMGYM_HOSTILE="1", MEMGYM_HOSTILE_SIGNALS="SIGSTOP", MEMGYM_TEST_SECRET_TOKEN=SECRET))
    assert done.returncode == 0, done.stderr
    control, control_code, uid, used = json.loads(done.stdout.splitlines()[-1])
    assert uid == user.uid and (control, control_code) == ("True", 0)  # same user, dumpable: its environ is open
    assert not used["separate_user"] and used["uid"] == user.uid and used["verifier_non_dumpable"]
    assert "does not run as root" in used["reason"]
    assert any("can signal the verifier" in line for line in used["unprotected"])
    outcomes = _attempts(done.stderr)
    for phase in ("import", "act"):
        assert outcomes[(phase, "read /proc/<ppid>/mem")][0].startswith("denied"), done.stderr
        assert outcomes[(phase, "read /proc/<ppid>/environ")][0].startswith("denied"), done.stderr
        assert outcomes[(phase, "send SIGSTOP")] == ["succeeded (SIGSTOP delivered)"]
    assert "secret not in my environment" in done.stderr  # withheld from the agent's process


@needs_root
def test_processes_the_agent_orphans_are_killed_when_it_closes(reachable, open_folder):
    """A daemon that leaves the agent's process group survives killing the group; with a separate user, the
    verifier is its subreaper and kills it when the agent's process closes."""
    folder = open_folder / "daemon"
    code = folder / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "daemonizing.py").write_text(textwrap.dedent(RANDOM_AGENT) + textwrap.dedent("""
        import os
        import time

        if os.fork() == 0:  # a child that leaves the group and its parent: a daemon
            os.setsid()
            if os.fork() == 0:
                print(f"daemon {os.getpid()}", flush=True)
                time.sleep(600)
            os._exit(0)
        time.sleep(1)
    """))
    done = _python(reachable, f"""
        import json, os, time
        from memgym.leaderboard import isolation
        from memgym.leaderboard.tracks import TMAZE

        with isolation.AgentProcess("daemonizing:factory", {str(code)!r}) as process:
            isolation.RemoteAgent(process, TMAZE, 2, 0, 100, 4)
            separate = process.protection["separate_user"]
        time.sleep(0.5)
        print(json.dumps(separate))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) is True
    [pid] = [int(line.rsplit(" ", 1)[1]) for line in done.stderr.splitlines() if "agent | daemon " in line]
    alive = Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    if alive:  # do not leave it behind, whatever the outcome
        os.kill(pid, signal.SIGKILL)
    assert not alive
