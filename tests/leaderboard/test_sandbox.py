"""The sandbox's parts (:mod:`memgym.leaderboard.submissions.sandbox`): what it says is in force, the environment's
allow-list, the resource limits, the probe, a JAX-tier agent trained in the container. Hostile agents against the
whole verifier: tests/leaderboard/test_hostile_agents.py.

A verifier running as an unprivileged user, and an agent's process run as one without a container, must be able to
run this interpreter. Where it lies under a folder closed to other users (a home folder of mode 0700), such commands
run in a private mount namespace (``unshare``, :func:`reachable`) in which that folder is covered by an open one
holding only the interpreter's entries (nothing changes outside the namespace).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import memgym
from memgym.leaderboard.submissions import isolation, sandbox
from tests.leaderboard.test_submissions import JAX_AGENT, MEMGYM, make_submission

LINUX_ROOT = sys.platform.startswith("linux") and os.geteuid() == 0
needs_root = pytest.mark.skipif(not LINUX_ROOT, reason="a separate user needs a verifier running as root on Linux")


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


def _python(prefix: list[str], script: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=600, **kwargs)


# ---- the tests -----------------------------------------------------------------------------------------------

def test_protection_says_what_is_in_force_here():
    try:
        described = isolation.protection()
    except sandbox.SandboxUnavailable as error:  # fails closed: says why and names the flag
        assert "--unsandboxed" in str(error) and not LINUX_ROOT
        described = isolation.protection(unsandboxed=True)
        assert described["mode"] == sandbox.UNSANDBOXED and described["unprotected"][0].startswith("UNSANDBOXED")
    assert json.loads(json.dumps(described)) == described
    assert set(described) >= {"mode", "contained", "user", "network", "limits", "verifier_non_dumpable",
                              "in_force", "unprotected"}
    assert all(isinstance(line, str) and line for line in described["in_force"] + described["unprotected"])
    if sys.platform.startswith("linux"):  # asking made this process non-dumpable, as starting an agent does
        assert described["verifier_non_dumpable"] and sandbox._prctl(3) == 0
    if shutil.which(sandbox.BUBBLEWRAP):  # where bubblewrap is installed and works, it is what runs the agent
        assert described["mode"] == sandbox.CONTAINER and described["contained"] and not described["network"]


@needs_root
def test_a_root_verifiers_container_runs_an_interpreter_its_user_cannot_reach():
    """Started by root, bubblewrap runs as ``nobody``, who cannot enter a folder of mode 700 (pyenv's Python under
    ``/root``). A verifier whose interpreter lies in one still runs the agent in the container: the interpreter and
    its packages are bound in from where root reaches them (``submissions.staging``)."""
    if shutil.which(sandbox.BUBBLEWRAP) is None:
        pytest.skip("bubblewrap is not installed")
    closed = Path(tempfile.mkdtemp(prefix="memgym-closed-"))
    try:
        closed.chmod(0o700)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(closed / "venv")], check=True, timeout=120)
        interpreter = closed / "venv" / "bin" / "python"
        (site,) = (closed / "venv").glob("lib/python*/site-packages")
        paths = [str(Path(memgym.__file__).parents[1]), *(p for p in sys.path[1:] if p and os.path.isdir(p))]
        (site / "memgym-test.pth").write_text("\n".join(paths) + "\n")
        assert sandbox.closed_folder(sandbox.agent_user(), [str(interpreter)]) is not None
        done = subprocess.run([str(interpreter), "-c", "import json; from memgym.leaderboard.submissions import "
                               "isolation; print(json.dumps(isolation.protection()))"],
                              capture_output=True, text=True, timeout=600, cwd=closed)
        assert done.returncode == 0, done.stderr[-2000:]
        described = json.loads(done.stdout.splitlines()[-1])
        assert described["mode"] == sandbox.CONTAINER and described["contained"] and described["user"] == "nobody"
    finally:
        shutil.rmtree(closed, ignore_errors=True)


def test_the_environment_is_an_allow_list_and_secrets_are_withheld_from_it():
    passed, withheld = sandbox.passed_on({"PATH": "/bin", "GITHUB_TOKEN": "x", "AWS_SECRET_ACCESS_KEY": "y",
                                          "SSH_AUTH_SOCK": "z", "XLA_FLAGS": "--a", "WANDB_API_KEY": "w",
                                          "MEMGYM_API_TOKEN": "t", "JAX_PLATFORMS": "cpu", "MY_DATABASE_URL": "u",
                                          "LC_ALL": "C"})
    assert passed == {"PATH": "/bin", "XLA_FLAGS": "--a", "JAX_PLATFORMS": "cpu", "LC_ALL": "C"}
    assert withheld == ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "MEMGYM_API_TOKEN", "MY_DATABASE_URL",
                        "SSH_AUTH_SOCK", "WANDB_API_KEY"]


def test_limits_follow_the_budget_and_bind_the_process_that_sets_them():
    limits = sandbox.Limits.for_cells(1_000_000, 3, cell_timeout=100.0, memory_gib=6)
    cores = os.cpu_count() or 1
    assert limits.cpu_seconds == cores * 300 + 120 and limits.address_space == 6 << 30
    assert sandbox.Limits.for_cells(1_000_000, 3).cpu_seconds == cores * 3 * 20_000 + 120  # 50 steps/s a cell
    assert sandbox.Limits.for_cells(10, 1).cpu_seconds == cores * 600 + 120  # at least ten minutes a cell
    small = sandbox.Limits(cpu_seconds=30, address_space=2 << 30, file_size=1 << 20, processes=4096)
    done = _python([], f"""
        import os, resource
        from memgym.leaderboard.submissions import sandbox

        sandbox.apply_limits({{sandbox.LIMITS_VARIABLE: {json.dumps(json.dumps(sandbox.asdict(small)))}}})
        print(resource.getrlimit(resource.RLIMIT_CPU), resource.getrlimit(resource.RLIMIT_AS))
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
        except ValueError:
            print("cannot raise")
        try:
            blob = bytearray(3 << 30)
        except MemoryError:
            print("memory stopped")
        with open(os.path.join({str(tempfile.gettempdir())!r}, f"memgym-fsize-{{os.getpid()}}"), "wb") as file:
            try:
                file.write(bytes(2 << 20))
            except OSError as error:
                print("file stopped", error.errno)
            finally:
                os.remove(file.name)
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"(30, 30) ({2 << 30}, {2 << 30})" and lines[1:3] == ["cannot raise", "memory stopped"]
    assert lines[3].startswith("file stopped")


def test_a_folder_the_agent_user_cannot_enter_above_the_interpreter_is_named():
    """A pyenv Python under a ``/root`` of mode 700 cannot be started as the agent's user: the refusal names the
    folder and how to open it (a searchable folder, or one the user owns, is not named)."""
    user = sandbox.User("agent", 54321, 54321)
    base = Path(tempfile.mkdtemp())
    try:
        os.chmod(base, 0o755)
        python = base / "home" / ".pyenv" / "bin" / "python3"
        python.parent.mkdir(parents=True)
        python.touch()
        os.chmod(base / "home", 0o700)
        said = sandbox.closed_folder(user, [python])
        assert said is not None and f"cannot enter {base / 'home'} (mode 700)" in said
        assert f"chmod o+x {base / 'home'}" in said
        os.chmod(base / "home", 0o711)
        assert sandbox.closed_folder(user, [python]) is None
        os.chmod(base / "home", 0o700)
        if os.geteuid() == 0:  # a folder of the agent's own is open to it
            os.chown(base / "home", user.uid, user.gid)
            assert sandbox.closed_folder(user, [python]) is None
    finally:
        shutil.rmtree(base)


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
            from memgym.leaderboard.submissions import sandbox

            sandbox.DEVICES = ({str(devices / pattern)!r},)
            print(json.dumps(sandbox._probe({{"code_dir": None, "spec": None, "protect": []}})))
        """, env={k: v for k, v in os.environ.items() if k not in ("HOME", "TMPDIR", "PYTHONPYCACHEPREFIX")})
        assert done.returncode == 0, done.stderr
        answers.append(json.loads(done.stdout.splitlines()[-1])["problem"])
    assert answers == [None, f"cannot use the accelerator's device {devices / 'accel1'}"]


@needs_root
@pytest.mark.slow(seconds=45)
def test_a_jax_tier_agent_trains_contained_and_reproduces_exactly(open_folder):
    """The JAX tier's child trains in the container (JAX and Python caches in its private tmpfs) and reproduces
    the records made in the user's own process exactly."""
    if not shutil.which(sandbox.BUBBLEWRAP):
        pytest.skip("bubblewrap is not installed")
    source = JAX_AGENT.format(forge_counters=False, patch_env=False) + textwrap.dedent("""
        import os

        print(f"uid {os.getuid()} home {os.path.expanduser('~')} {os.access(os.path.expanduser('~'), os.W_OK)}",
              flush=True)
    """)
    folder = make_submission(open_folder, "jax-random", source, "jax_random", framework="JAX")
    done = subprocess.run([*MEMGYM, "leaderboard", "verify", str(folder), "--k", "2", "--sample-seed", "0"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"agent | uid {sandbox.UNPRIVILEGED_ID} home {sandbox.CONTAINER_TMP}/home True" in done.stderr
    assert "Fontconfig error" not in done.stderr  # the container holds fontconfig's configuration (gymnax's matplotlib)
    verdict = json.loads((folder / "verification.json").read_text())
    assert verdict["verdict"] == "verified" and verdict["isolation"]["mode"] == sandbox.CONTAINER
    assert all(row["rule"] == "exact (same backend)" and row["agrees"] for row in verdict["cells"])
