"""Hostile agents against ``memgym leaderboard verify``, written from the documented submission format alone
(docs/submitting.md): a submission folder with ``submission.json``, ``code/`` and the ``results`` of
``memgym leaderboard run``.

One any-framework agent plays honestly when its records are made and attacks when it is verified
(``MEMGYM_HOSTILE=1``): at import it reads the verifier's memory and environment, opens a network connection,
signals the verifier, writes into the results, the submission, ``verification.json`` and its code, forks until
it is stopped, allocates until it is stopped, fills its disk until it is stopped and leaves a process behind. Each
attempt is printed as an ``agent | attempt NAME: succeeded (…)`` or ``denied (…)`` line, which the verifier relays.

It is verified in each mode the sandbox has (:mod:`memgym.leaderboard.submissions.sandbox`), from a folder of mode 0700 (as
``mktemp -d`` makes) and from one open to all: by root, with bubblewrap (the container) and without it (the
separate user); by an ordinary user with bubblewrap (the container, in its own user namespace) and without it
(refused before any of the agent's code runs; run with ``--unsandboxed``, the verdict and the board say so). In
every case the verdict stands (the honest scores verify), nothing stored is lost, the verifier finishes within its
time limit and no process of the agent's outlives it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from memgym.leaderboard.submissions import sandbox
from tests.leaderboard.test_sandbox import LINUX_ROOT, reachable  # noqa: F401 - a fixture
from tests.leaderboard.test_submissions import RANDOM_AGENT, make_submission

pytestmark = [pytest.mark.skipif(not LINUX_ROOT, reason="the modes are made by a verifier running as root on Linux"),
              pytest.mark.slow]

SECRET = "memgym-test-secret-7f3a"

HOSTILE_AGENT = RANDOM_AGENT + '''
import errno
import os
import pathlib
import signal
import socket
import subprocess
import time

ATTACK = os.environ.get("MEMGYM_HOSTILE") == "1"  # set only for the verification, not for the run that made records
TARGET = int(os.environ.get("MEMGYM_HOSTILE_TARGET") or os.getppid())  # the verifier's pid
PORT = int(os.environ.get("MEMGYM_HOSTILE_PORT") or 9)
MARK = os.environ.get("MEMGYM_HOSTILE_MARK", "617")
SECRET = "''' + SECRET + '''"


def attempt(name, action):
    try:
        print(f"attempt {name}: succeeded ({action()})", flush=True)
    except (OSError, MemoryError) as error:
        code = errno.errorcode.get(getattr(error, "errno", None) or 0, type(error).__name__)
        print(f"attempt {name}: denied ({code}{': ' + str(error.args[-1]) if error.args else ''})", flush=True)


def read_memory():
    with open(f"/proc/{TARGET}/mem", "rb") as memory, open(f"/proc/{TARGET}/maps") as maps:
        memory.seek(int(next(line for line in maps if " r" in line).split("-")[0], 16))
        return f"{len(memory.read(4096))} bytes"


def read_environment():
    with open(f"/proc/{TARGET}/environ", "rb") as environ:
        return f"the secret {'in' if SECRET.encode() in environ.read() else 'not in'} it"


def connect():
    socket.create_connection(("127.0.0.1", PORT), timeout=5).close()
    return f"connected to port {PORT}"


def send(name):
    os.kill(TARGET, getattr(signal, name))
    if name == "SIGSTOP":  # it got through: let the verifier go on, the attempt is recorded
        os.kill(TARGET, signal.SIGCONT)
    return f"{name} delivered"


def write(path, mode="w"):
    with open(path, mode) as file:
        file.write("planted by the agent")
    return str(path)


def fork_until_stopped():
    children = []
    try:
        while len(children) < 3000:
            pid = os.fork()
            if pid == 0:
                time.sleep(600)
                os._exit(0)
            children.append(pid)
        return f"{len(children)} processes, never stopped"
    except OSError as error:
        raise OSError(error.errno, f"stopped after {len(children)} processes") from None
    finally:
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def allocate_until_stopped():
    blocks = []
    try:
        while len(blocks) < 48:  # 12 GiB: the test's limit is far below
            blocks.append(bytearray(256 << 20))
        return f"{len(blocks) / 4:.2f} GiB, never stopped"
    except MemoryError:
        raise MemoryError(f"stopped after {len(blocks) / 4:.2f} GiB") from None


def fill_disk():
    path, written = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / "fill", 0
    try:
        with open(path, "wb") as file:
            while written < 3 << 30:
                file.write(bytes(64 << 20))
                file.flush()
                written += 64 << 20
        return f"{written >> 20} MiB, never stopped"
    except OSError as error:
        raise OSError(error.errno, f"stopped after {written >> 20} MiB") from None
    finally:
        path.unlink(missing_ok=True)


def leave_a_process_behind():
    subprocess.Popen(["sleep", MARK], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return "sleep " + MARK


if ATTACK:
    submission = pathlib.Path("..")  # the agent's process runs in its code folder
    record = next((submission / "results").rglob("seed*.json"), submission / "results" / "seed0.json")
    print(f"identity: uid {os.getuid()}, the secret {'in' if SECRET in os.environ.values() else 'not in'} my "
          "environment", flush=True)
    attempt("read the verifier's memory", read_memory)
    attempt("read the verifier's environment", read_environment)
    attempt("open a network connection", connect)
    attempt("send SIGSTOP", lambda: send("SIGSTOP"))
    attempt("send SIGTERM", lambda: send("SIGTERM"))
    attempt("write the results folder", lambda: write(submission / "results" / "planted.json"))
    attempt("append to a record", lambda: write(record, "a"))
    attempt("write the submission folder", lambda: write(submission / "planted.txt"))
    attempt("write a verdict", lambda: write(submission / "verification.json"))
    attempt("write the code folder", lambda: write(pathlib.Path("planted.py")))
    attempt("fork until stopped", fork_until_stopped)
    attempt("allocate until stopped", allocate_until_stopped)
    attempt("fill the disk", fill_disk)
    attempt("leave a process behind", leave_a_process_behind)
'''

#: the attempts every mode denies
DENIED = ["read the verifier's memory", "read the verifier's environment", "send SIGSTOP", "send SIGTERM",
          "write the results folder", "append to a record", "write the submission folder", "write a verdict",
          "write the code folder", "fork until stopped", "allocate until stopped", "fill the disk"]
MEMORY_LIMIT_GIB = 3  # --memory-limit: the agent's address space
TIME_LIMIT = 420  # seconds the verification may take, the agent's attacks included


def attempts(err: str) -> dict[str, str]:
    """``attempt -> outcome`` from the relayed ``agent | attempt ...`` lines."""
    found = {}
    for line in err.splitlines():
        if "agent | attempt " in line:
            name, outcome = line.split("agent | attempt ", 1)[1].split(": ", 1)
            found[name] = outcome
    return found


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """The hostile agent's submission, its records made honestly (as root, in an open folder)."""
    root = tmp_path_factory.mktemp("hostile")
    return make_submission(root, "hostile-agent", HOSTILE_AGENT, "hostile",
                           grid=["--preset", "smoke", "--values", "2", "--seeds", "1", "--steps", "2000",
                                 "--eval-episodes", "64"])


def placed(made: Path, closed: bool, owner: int = 0) -> Path:
    """A copy of the submission in a fresh folder of mode 0700 (``closed``) or 0755, owned by ``owner``."""
    folder = Path(tempfile.mkdtemp(prefix="memgym-hostile-"))
    target = folder / "submissions" / made.name
    shutil.copytree(made, target)
    os.chmod(folder, 0o700 if closed else 0o755)
    for path in [folder, *folder.rglob("*")]:
        os.lchown(path, owner, owner)
    return target


def verify(prefix: list[str], submission: Path, *flags: str,
           bubblewrap: bool = True) -> tuple[subprocess.CompletedProcess, str, float]:
    """``memgym leaderboard verify`` of ``submission`` as ``prefix`` runs it (with bubblewrap hidden from it
    unless ``bubblewrap``), the hostile agent attacking; a local listener stands for the network. Returns the
    run, the mark of the process the agent leaves behind and the seconds it took."""
    listener = socket.create_server(("127.0.0.1", 0))
    mark = str(random.randrange(100_000, 999_999))
    before = {path: path.read_bytes() for path in submission.rglob("*") if path.is_file()}
    code = ("import sys; from memgym.leaderboard.submissions import sandbox; from memgym.cli import main; "
            + ("" if bubblewrap else "sandbox.BUBBLEWRAP = 'memgym-test-no-bwrap'; ")
            + "sys.exit(main(sys.argv[1:]))")
    environment = dict(os.environ, MEMGYM_HOSTILE="1", MEMGYM_HOSTILE_PORT=str(listener.getsockname()[1]),
                       MEMGYM_HOSTILE_MARK=mark, MEMGYM_TEST_SECRET_TOKEN=SECRET)
    started = time.perf_counter()
    try:
        # exec: the shell's pid becomes the verifier's, which the agent is told to attack
        done = subprocess.run([*prefix, "sh", "-c", 'MEMGYM_HOSTILE_TARGET=$$ exec "$@"', "sh", sys.executable, "-c",
                               code, "leaderboard", "verify", str(submission), "--k", "1", "--sample-seed", "0",
                               "--cell-timeout", "300", "--memory-limit", str(MEMORY_LIMIT_GIB), *flags],
                              capture_output=True, text=True, timeout=TIME_LIMIT, env=environment)
    finally:
        listener.close()
    seconds = time.perf_counter() - started
    for path, content in before.items():  # nothing stored is lost or changed (a verdict may be added or replaced)
        if path.name != "verification.json":
            assert path.read_bytes() == content, path
    planted = [p for p in submission.rglob("*") if p.is_file() and p not in before and p.name != "verification.json"]
    assert not planted, planted
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _cmdline(pid) == f"sleep {mark}"]
    for pid in left:  # do not leave it behind, whatever the outcome
        os.kill(int(pid), 9)
    assert not left, f"the agent's process 'sleep {mark}' outlived the verification"
    return done, mark, seconds


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def check_contained(done: subprocess.CompletedProcess, submission: Path, mode: str) -> dict[str, str]:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "verdict: VERIFIED" in done.stdout
    verdict = json.loads((submission / "verification.json").read_text())
    assert verdict["verdict"] == "verified" and verdict["isolation"]["mode"] == mode
    assert f"isolation: {mode}" in done.stdout
    assert "identity: uid 65534, the secret not in my environment" in done.stderr
    outcomes = attempts(done.stderr)
    for name in DENIED:
        assert outcomes.get(name, "").startswith("denied"), (name, outcomes.get(name), done.stderr[-3000:])
    gib = float(outcomes["allocate until stopped"].split("stopped after ")[1].split(" GiB")[0])
    assert gib < MEMORY_LIMIT_GIB
    assert int(outcomes["fill the disk"].split("stopped after ")[1].split(" MiB")[0]) <= 1024
    return outcomes


@pytest.mark.slow(seconds=60)
@pytest.mark.parametrize("closed", [True, False], ids=["mode-700-folder", "open-folder"])
def test_root_with_bubblewrap_contains_the_agent(made, closed):
    if not shutil.which(sandbox.BUBBLEWRAP):
        pytest.skip("bubblewrap is not installed")
    submission = placed(made, closed)
    done, _, seconds = verify([], submission)
    outcomes = check_contained(done, submission, sandbox.CONTAINER)
    assert outcomes["open a network connection"].startswith("denied (ECONNREFUSED")  # its own, empty network
    assert outcomes["leave a process behind"].startswith("succeeded")  # and it died with the container
    assert seconds < TIME_LIMIT


@pytest.mark.slow(seconds=60)
def test_root_without_bubblewrap_runs_the_agent_as_a_separate_user_with_a_private_copy_of_its_code(made, reachable):
    submission = placed(made, closed=True)  # the separate user could not read it: it gets a private copy
    done, _, _ = verify(reachable, submission, bubblewrap=False)
    outcomes = check_contained(done, submission, sandbox.SEPARATE_USER)
    assert outcomes["open a network connection"].startswith("succeeded")  # as the verdict says
    verdict = json.loads((submission / "verification.json").read_text())
    assert "can use the network" in verdict["isolation"]["unprotected"]
    assert "bubblewrap is not installed" in verdict["isolation"]["reason"]


@pytest.mark.slow(seconds=60)
@pytest.mark.parametrize("closed", [True, False], ids=["mode-700-folder", "open-folder"])
def test_an_ordinary_user_with_bubblewrap_contains_the_agent_in_a_user_namespace(made, reachable, closed):
    if not shutil.which(sandbox.BUBBLEWRAP):
        pytest.skip("bubblewrap is not installed")
    user = sandbox.agent_user()
    submission = placed(made, closed, owner=user.uid)
    as_user = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
    done, _, _ = verify([*reachable, *as_user], submission)
    outcomes = check_contained(done, submission, sandbox.CONTAINER)
    assert outcomes["open a network connection"].startswith("denied (ECONNREFUSED")


@pytest.mark.slow(seconds=40)
def test_an_ordinary_user_without_bubblewrap_is_refused_unless_unsandboxed_and_then_the_board_says_so(made,
                                                                                                   reachable):
    user = sandbox.agent_user()
    submission = placed(made, closed=True, owner=user.uid)
    as_user = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
    done, _, _ = verify([*reachable, *as_user], submission, bubblewrap=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "cannot be sandboxed here, so none of its code was run" in done.stderr and "--unsandboxed" in done.stderr
    assert "agent |" not in done.stderr and not (submission / "verification.json").exists()
    # asked for by name: it runs as the verifier's user, and the verdict and the board's status say so
    done = subprocess.run([*reachable, *as_user, sys.executable, "-c",
                           "import sys; from memgym.leaderboard.submissions import sandbox; from memgym.cli import main; "
                           "sandbox.BUBBLEWRAP = 'memgym-test-no-bwrap'; sys.exit(main(sys.argv[1:]))",
                           "leaderboard", "verify", str(submission), "--k", "1", "--sample-seed", "0",
                           "--unsandboxed"], capture_output=True, text=True, timeout=TIME_LIMIT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "isolation: UNSANDBOXED" in done.stdout
    from memgym.leaderboard.submissions import format as submissions
    from memgym.leaderboard.submissions.verdict import status

    assert status(submissions.load(submission)).endswith(", unsandboxed")
