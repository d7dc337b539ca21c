"""Start bubblewrap as an unprivileged user, with folders bound in that the user cannot reach.

A root verifier starts bubblewrap as :data:`~memgym.leaderboard.submissions.sandbox.AGENT_USER`, so that outside
its namespaces too the agent is an unprivileged user. bubblewrap then binds only what that user can reach: an
interpreter under a folder it cannot enter (pyenv's Python under ``/root``, mode 700) is out of its reach, and so
is a descriptor of it that root opened (bubblewrap resolves ``/proc/self/fd/N`` as the user, and is refused).

Where a folder of the interpreter's lies out of the user's reach (and only there), this program bridges the two,
as root, with the standard library alone (``python -I -S staging.py``: nothing of the verifier's path is
imported). It enters a mount namespace of its own (private: nothing mounted in it propagates out), binds each
such folder read-only onto a folder of the launch's private tree that the user can enter, drops to the user (no
supplementary groups) and executes bubblewrap, whose arguments bind those folders back to their own paths in the
container. The bindings live in that namespace only and go with bubblewrap's last process; no other process on
the machine sees them.

Usage: ``python -I -S staging.py PLAN -- BWRAP ARGUMENT...``, PLAN the JSON ``{"uid", "gid", "binds": [[source,
mount point], ...]}``. A failure exits with status 125 and a line on stderr before bubblewrap starts.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x20, 0x1000, 0x4000, 0x40000
#: the exit status of a failure before bubblewrap starts
FAILED = 125


def _call(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def stage(uid: int, gid: int, binds: list[list[str]]) -> None:
    """In a private mount namespace, bind each ``[source, mount point]`` read-only, then become ``uid``:``gid``."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    _call(libc.unshare(CLONE_NEWNS), "a mount namespace of its own (unshare)")
    _call(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making its mounts private")
    for source, point in binds:
        _call(libc.mount(os.fsencode(source), os.fsencode(point), None, MS_BIND | MS_REC, None),
              f"binding {source} onto {point}")
        _call(libc.mount(None, os.fsencode(point), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None),
              f"making {point} read-only")
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError(f"still uid {os.geteuid()} after becoming {uid}")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: staging.py PLAN -- BWRAP ARGUMENT...", file=sys.stderr)
        return FAILED
    try:
        plan = json.loads(argv[0])
        stage(int(plan["uid"]), int(plan["gid"]), plan["binds"])
        os.execv(argv[2], argv[2:])
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"memgym staging: {error}", file=sys.stderr)
    return FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
