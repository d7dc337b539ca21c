"""Agents in a child process, counting in this one: how ``memgym leaderboard verify`` re-runs cells.

The process that scores never imports the submitted code. :class:`AgentProcess` starts
``python -m memgym.leaderboard.submissions.isolation`` with one end of a socket pair; the child imports the
agent and answers calls. A message is a JSON header and the raw bytes of plain NumPy arrays
(:func:`encode`; never a pickle), so nothing the child sends can run code here.

- Any-framework tier: :class:`RemoteAgent` forwards ``act`` and ``observe``; this process steps
  the Gymnasium env and counts (:func:`memgym.leaderboard.running.any_tier.train` / ``evaluate``, the
  same functions ``run`` uses).
- JAX tier: the child trains (:meth:`~memgym.leaderboard.running.jax_tier.JaxCells.train_cells`) and
  sends back the trained parameters, the final :class:`~memgym.leaderboard.scoring.ScoredState`
  counters and its ``act`` as a serialized computation (``jax.export``, batched over episodes);
  this process evaluates that computation on its own episodes
  (:func:`~memgym.leaderboard.scoring.evaluate_jax`) and checks the counters' seal itself.
  The training counters are still computed in the child: they are the agent's own report.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from memgym.leaderboard.tracks import TRACKS, Preset, Track
from memgym.leaderboard.store import AGENT_FAULTS, failure_reason

_MAX_MESSAGE = 1 << 31


class AgentProcessError(Exception):
    """The agent's process failed a call (its exception), broke the protocol, exited or ran out of time."""


def encode(meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> bytes:
    """One message: a JSON header (``meta`` and each array's name, dtype and shape), then the arrays' bytes."""
    arrays = {name: np.asarray(value, order="C") for name, value in (arrays or {}).items()}  # 0-d stays 0-d
    for name, value in arrays.items():
        if value.dtype.hasobject:
            raise TypeError(f"{name} is an array of Python objects ({value.dtype})")
    layout = [[name, value.dtype.str, list(value.shape)] for name, value in arrays.items()]
    header = json.dumps({"meta": meta, "arrays": layout}).encode()
    return b"".join([struct.pack("!I", len(header)), header, *(value.tobytes() for value in arrays.values())])


def decode(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The inverse of :func:`encode`. Only plain NumPy dtypes are read (no Python objects), and the arrays must
    account for the message's bytes exactly; anything else is a ``ValueError``."""
    try:
        return _decode(data)
    except (struct.error, TypeError, KeyError, IndexError, AttributeError, RecursionError) as error:
        raise ValueError(f"a malformed message ({type(error).__name__}: {error})") from None


def _decode(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    size = struct.unpack("!I", data[:4])[0]
    header = json.loads(data[4: 4 + size].decode())
    meta, layout = header["meta"], header["arrays"]
    if not isinstance(meta, dict) or not isinstance(layout, list):
        raise ValueError("a message's header is not {meta: object, arrays: list}")
    arrays, offset = {}, 4 + size
    for name, dtype, shape in layout:
        kind = np.dtype(dtype)
        if kind.hasobject or kind.kind not in "biufcSU?" or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise ValueError(f"array {name!r} has dtype {dtype!r} and shape {shape!r}")
        count = int(np.prod(shape, dtype=np.int64))
        end = offset + count * kind.itemsize
        if end > len(data):
            raise ValueError(f"array {name!r} runs past the message's end")
        arrays[str(name)] = np.frombuffer(data, kind, count, offset).reshape(shape).copy()
        offset = end
    if offset != len(data):
        raise ValueError("a message holds bytes that no array accounts for")
    return meta, arrays


def _send(sock: socket.socket, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    data = encode(meta, arrays)
    sock.sendall(struct.pack("!Q", len(data)) + data)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    size = struct.unpack("!Q", _exactly(sock, 8))[0]
    if size > _MAX_MESSAGE:
        raise AgentProcessError(f"the agent's process sent a message of {size} bytes")
    return decode(_exactly(sock, size))


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the agent's process closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def protection(spec: str | None = None, code_dir: str | os.PathLike | None = None,
               protect: Sequence[str | os.PathLike] = (), limits: Any = None,
               unsandboxed: bool = False) -> dict[str, Any]:
    """The protection an :class:`AgentProcess` of agent ``spec`` (code in ``code_dir``) would have if started
    now (:func:`memgym.leaderboard.submissions.sandbox.describe`: ``mode``, ``contained``, ``user``, ``network``, ``limits``,
    ``in_force``, ``unprotected``, ...). Without ``spec``, whether the interpreter and memgym run in the sandbox.
    Like starting an AgentProcess, it makes this process non-dumpable first, and raises
    :class:`~memgym.leaderboard.submissions.sandbox.SandboxUnavailable` where no sandbox works and ``unsandboxed`` is False."""
    from memgym.leaderboard.submissions import sandbox

    return sandbox.plan(spec, code_dir, protect, dict(os.environ), limits, unsandboxed, entry=__name__).protection


class AgentProcess:
    """A child Python process that imports agent ``spec`` (with ``code_dir`` first on its path) and serves it.

    ``environment`` adds variables to the child's (``XLA_FLAGS``). The child's standard output and
    error are relayed to this process's standard error, marked ``agent |`` (:func:`_relay`). The
    child leads a process group of its own; :meth:`close` kills the group.

    The child starts in the strongest sandbox that works here (:mod:`memgym.leaderboard.submissions.sandbox`:
    bubblewrap's container, else as a separate user), with ``limits``
    (:class:`~memgym.leaderboard.submissions.sandbox.Limits`, set by the child on itself before it imports the
    agent); where none works it is not started (``SandboxUnavailable``) unless ``unsandboxed``.
    ``protect``: paths (besides ``code_dir``) the child must not be able to change, such as the
    submission's folder; those it could are named in :attr:`protection`, the dict
    :func:`protection` describes, as used for this process.
    """

    def __init__(self, spec: str, code_dir: str | os.PathLike | None = None,
                 environment: dict[str, str] | None = None, protect: Sequence[str | os.PathLike] = (),
                 limits: Any = None, unsandboxed: bool = False):
        from memgym.leaderboard.submissions import sandbox

        # the child allocates accelerator memory as it needs it: the verifier's process holds some of it too
        wanted = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        plan = sandbox.plan(spec, code_dir, protect, wanted, limits, unsandboxed, entry=__name__)
        self.protection, self.mode = plan.protection, plan.mode
        # the separate user's strays are this process's to kill (it is their subreaper); a container's die with it
        self.user = plan.user if plan.mode == sandbox.SEPARATE_USER else None
        self.private = plan.launch(code_dir)
        ours, theirs = socket.socketpair()
        if self.user is not None:
            sandbox.Subreaper.open()
        try:
            self.process = self.private.popen(
                [sys.executable, "-m", "memgym.leaderboard.submissions.isolation", str(theirs.fileno()), spec],
                plan.environment | (environment or {}), pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True)  # its own process group, killed as a whole
        except BaseException:
            ours.close()
            if self.user is not None:
                sandbox.Subreaper.close(None, self.user.uid)
            self.private.remove()
            raise
        finally:
            theirs.close()
        if self.user is not None:
            sandbox.Subreaper.started(self.process.pid)
        self.socket = ours
        self.output = threading.Thread(target=_relay, args=(self.process.stdout,), daemon=True)
        self.output.start()

    def call(self, meta: dict[str, Any], arrays: dict[str, np.ndarray] | None = None,
             timeout: float | None = None, reply: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Send one request and wait (at most ``timeout`` seconds) for its answer. ``reply=False``: do not wait;
        the request's error, if it raises, is the answer to the next request."""
        self.socket.settimeout(timeout)
        try:
            _send(self.socket, dict(meta, reply=reply), arrays)
            if not reply:
                return {}, {}
            answer, answer_arrays = _receive(self.socket)
        except TimeoutError:
            raise AgentProcessError(f"the agent's process did not answer {meta.get('op')!r} "
                                    f"within {timeout:.0f}s") from None
        except (EOFError, ConnectionError, OSError) as error:
            try:
                code = self.process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            raise AgentProcessError(f"the agent's process exited (code {code}) during {meta.get('op')!r}"
                                    if code is not None else f"lost the agent's process ({error})") from None
        except (ValueError, KeyError, UnicodeDecodeError) as error:
            raise AgentProcessError(f"the agent's process broke the protocol ({error})") from None
        if "error" in answer:
            raise AgentProcessError(str(answer["error"]))
        return answer, answer_arrays

    def close(self) -> None:
        """Kill the agent's process and every process of its group; with a separate user, also what it started
        and orphaned (re-parented to this process, :class:`~memgym.leaderboard.submissions.sandbox.Subreaper`)."""
        from memgym.leaderboard.submissions import sandbox

        self.socket.close()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        if self.user is not None:
            sandbox.Subreaper.close(self.process.pid, self.user.uid)
        self.output.join(timeout=5)
        self.private.remove()

    def __enter__(self) -> AgentProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


OUTPUT_LIMIT = 1 << 20  # bytes of the agent's output relayed; the rest is read and dropped


def _relay(stream: Any) -> None:
    """Copy the agent's output to this process's standard error, each line marked as the agent's, up to
    :data:`OUTPUT_LIMIT` bytes (so that it can neither flood the verifier's log nor pass for its lines)."""
    relayed = 0
    for line in iter(stream.readline, b""):
        if relayed < OUTPUT_LIMIT:
            relayed += len(line)
            text = line.decode("utf-8", "replace").rstrip("\n")
            print(f"  agent | {text}" if relayed < OUTPUT_LIMIT else
                  f"  agent | (its output beyond {OUTPUT_LIMIT >> 20} MiB is dropped)", file=sys.stderr, flush=True)
    stream.close()


class RemoteAgent:
    """An any-framework agent living in an :class:`AgentProcess`, built there for one cell."""

    def __init__(self, process: AgentProcess, track: Track, value: Any, seed: int, total_steps: int, num_envs: int):
        self.process = process
        process.call({"op": "build", "track": track.name, "value": value, "seed": int(seed),
                      "total_steps": int(total_steps), "num_envs": int(num_envs)})

    def act(self, obs: np.ndarray, start: np.ndarray) -> np.ndarray:
        return self.process.call({"op": "act"}, {"obs": np.asarray(obs), "start": np.asarray(start)})[1]["actions"]

    def observe(self, action, reward, next_obs, terminated, truncated) -> None:
        """Sent without waiting (one round trip per step, not two): an error comes back with the next ``act``."""
        self.process.call({"op": "observe"}, {"action": np.asarray(action), "reward": np.asarray(reward),
                                              "next_obs": np.asarray(next_obs),
                                              "terminated": np.asarray(terminated),
                                              "truncated": np.asarray(truncated)}, reply=False)


def train_jax(process: AgentProcess, track: Track, budget: Preset, cells: Sequence[tuple[Any, int]],
              seal: np.ndarray, timeout: float | None = None, vmap_lone: bool = False) -> dict[str, Any]:
    """Train ``cells`` of a JAX-tier agent in its process; what it sends back. ``vmap_lone``: a lone cell too
    trains under ``vmap`` (:class:`~memgym.leaderboard.running.jax_tier.OverCells`).

    ``counters``: the :class:`~memgym.leaderboard.scoring.ScoredState` fields (no inner state),
    each batched over ``cells``; ``params``: one parameter pytree's leaves per cell; ``carry``:
    the leaves of ``initialize_carry()``; ``act``: the batched act
    (:func:`exported_agent` rebuilds an agent from it).
    """
    from memgym.leaderboard.scoring import COUNTERS

    meta, arrays = process.call({"op": "train_jax", "track": track.name, "budget": track.budget_record(budget),
                                 "cells": [[value, int(seed)] for value, seed in cells], "vmap_lone": bool(vmap_lone)},
                                {"seal": np.asarray(seal, np.uint32)}, timeout=timeout)
    try:
        names = [*COUNTERS, "curve_episodes", "curve_successes", "tag"]
        counters = {name: arrays[f"counter.{name}"] for name in names}
        params = [[arrays[f"param.{i}"][cell] for i in range(int(meta["params"]))] for cell in range(len(cells))]
        carry = [arrays[f"carry.{i}"] for i in range(int(meta["carry"]))]
        blob = arrays["act"].tobytes()
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise AgentProcessError(f"the agent's process sent an incomplete training result ({error})") from None
    if any(len(np.asarray(value)) != len(cells) for value in counters.values()):
        raise AgentProcessError("the agent's process sent counters for another number of cells")
    return {"counters": counters, "params": params, "carry": carry, "act": blob}


def export_jax(process: AgentProcess, track: Track, budget: Preset, value: Any = None,
               timeout: float | None = None) -> dict[str, Any]:
    """A JAX-tier agent's batched ``act`` for the parameters its ``train`` returns on ``budget``, exported in its
    process without training (to evaluate stored policies): ``act`` and ``carry`` as :func:`train_jax` returns
    them, ``leaves``, each parameter leaf's ``[dtype, shape]``, and ``computation``, what the agent computes
    (:func:`~memgym.leaderboard.running.jax_tier.agent_computation`). ``value``: the cells' value where each value has
    its own env (``Track.env_key``), else None."""
    meta, arrays = process.call({"op": "export_jax", "track": track.name, "budget": track.budget_record(budget),
                                 "value": value}, timeout=timeout)
    try:
        carry = [arrays[f"carry.{i}"] for i in range(int(meta["carry"]))]
        leaves = [[str(np.dtype(dtype).str), [int(n) for n in shape]] for dtype, shape in meta["leaves"]]
        blob = arrays["act"].tobytes()
        computation = meta["computation"] if meta["computation"] is None else str(meta["computation"])
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise AgentProcessError(f"the agent's process sent an incomplete export ({error})") from None
    return {"act": blob, "carry": carry, "leaves": leaves, "computation": computation}


def exported_agent(blob: bytes, carry: Sequence[np.ndarray], num_envs: int) -> Any:
    """A JAX-tier agent whose ``act`` is the serialized computation ``blob`` (from the agent's process).

    Its ``params`` are the list of parameter leaves :func:`train_jax` returns, its carry a list of
    leaves. ``act`` is defined under ``vmap`` over episodes (the exported computation is batched;
    :func:`~memgym.leaderboard.scoring.evaluate_jax` vmaps it) and refuses host callbacks: the
    computation runs here, and must not call back into Python.
    """
    import jax
    import jax.numpy as jnp
    from jax import export

    try:
        exported = export.deserialize(bytearray(blob))
    except Exception as error:  # noqa: BLE001 - whatever the bytes are, they are not a computation
        raise AgentProcessError(f"the agent's act is not a serialized JAX computation ({error})") from None
    targets = set(re.findall(r"custom_call\s*@([\w.]+)", exported.mlir_module()))
    if any("callback" in target for target in targets):
        raise AgentProcessError(f"the agent's act calls back into Python ({sorted(targets)}); "
                                "a verified act must be a pure computation")
    initial = [jnp.asarray(leaf) for leaf in carry]

    def broadcast(x: jax.Array, batched: bool, size: int) -> jax.Array:
        return x if batched else jnp.broadcast_to(x, (size, *jnp.shape(x)))

    @jax.custom_batching.custom_vmap
    def act(params, carry, obs, start, key):
        action, carry = exported.call(params, [c[None] for c in carry], obs[None], start[None],
                                      jax.random.key_data(key)[None])
        return action[0], [c[0] for c in carry]

    @act.def_vmap
    def act_batched(axis_size, in_batched, params, carry, obs, start, key):
        params_batched, carry_batched, *rest = in_batched
        if any(jax.tree.leaves(params_batched)):
            raise ValueError("the exported act takes one cell's parameters (evaluate one cell per call)")
        carry = [broadcast(c, b, axis_size) for c, b in zip(carry, carry_batched)]
        obs, start, key = (broadcast(x, b, axis_size) for x, b in zip((obs, start, key), rest))
        action, carry = exported.call(params, carry, obs, start, jax.random.key_data(key))
        return (action, carry), (True, [True] * len(carry))

    class Exported:
        def initialize_carry(self):
            return list(initial)

        def act(self, params, carry, obs, start, key):
            return act(params, carry, obs, start, key)

    agent = Exported()
    agent.num_envs = num_envs
    return agent


def exported_evaluator(agent: Any, track: Track, budget: Preset, env_value: Any = None):
    """``evaluate(value, seed, params)``: one cell's evaluation arrays ``(success, return, length, invalid)``
    with the harness's episode and policy keys (:func:`~memgym.leaderboard.running.jax_tier.evaluation_keys`), as
    ``run`` evaluates in-process; compiled once for every cell of ``budget`` whose env is ``env_value``'s
    (``Track.env_key``)."""
    import jax

    from memgym.leaderboard.running.jax_tier import evaluation_keys, evaluation_policy_keys
    from memgym.leaderboard.scoring import evaluate_jax

    steps = track.evaluation_steps(budget, env_value)
    run = jax.jit(lambda p, e, k, pk: evaluate_jax(agent, p, track.jax_env(env_value), e, k, steps,
                                                   score_key=track.score.key, policy_keys=pk,
                                                   counted=track.score.counted))

    def evaluate(value: Any, seed: int, params: Sequence[np.ndarray]) -> list[np.ndarray]:
        index = track.sweep.index(value)
        inner = jax.tree.map(lambda x: x[0], track.jax_params([value], budget.max_episode_steps))
        out = run(list(params), inner, evaluation_keys(index, budget.eval_episodes),
                  evaluation_policy_keys(index, seed, budget.eval_episodes))
        return [np.asarray(x) for x in out]

    return evaluate


# ---- the child's side ------------------------------------------------------------------------------------------

def serve(fd: int, spec: str) -> None:
    """Answer the harness's calls about agent ``spec`` on socket ``fd`` until it closes (runs in the agent's
    process)."""
    sock = socket.socket(fileno=fd)
    state: dict[str, Any] = {"spec": spec}
    while True:
        try:
            meta, arrays = _receive(sock)
        except (EOFError, ConnectionError):
            return
        try:
            if "error" in state:  # a request sent without waiting failed: this request's answer says so
                raise state.pop("error")
            answer = _answer(meta, arrays, state)
        except AGENT_FAULTS as error:  # the agent's fault (sys.exit included) is reported, the parent decides

            answer = ({"error": failure_reason(error)}, {})
        if not meta.get("reply", True):
            if "error" in answer[0]:
                state["error"] = AgentProcessError(f"{meta.get('op')}: {answer[0]['error']}")
            continue
        try:
            _send(sock, *answer)
        except (ValueError, TypeError) as error:  # an answer that cannot be encoded (an object array)
            _send(sock, {"error": f"{meta.get('op')} returned what cannot be sent: {error}"})


def _answer(meta: dict[str, Any], arrays: dict[str, np.ndarray], state: dict[str, Any]):
    from memgym.leaderboard.running.planning import NUM_ENVS
    from memgym.leaderboard.protocol import load_factory, tier

    op = meta["op"]
    if op == "build":
        track = TRACKS[meta["track"]]
        factory = load_factory(state["spec"])
        agent = factory(track.context(num_envs=meta["num_envs"], seed=meta["seed"],
                                      total_steps=meta["total_steps"], value=meta["value"]))
        if tier(agent) != "any":
            raise TypeError("the agent is not an any-framework agent (act, observe)")
        state["agent"] = agent
        return {}, {}
    if op == "act":
        return {}, {"actions": np.asarray(state["agent"].act(arrays["obs"], arrays["start"]))}
    if op == "observe":
        state["agent"].observe(arrays["action"], arrays["reward"], arrays["next_obs"], arrays["terminated"],
                               arrays["truncated"])
        return {}, {}
    if op == "export_jax":
        track = TRACKS[meta["track"]]
        return _export_jax(load_factory(state["spec"]), track, track.budget_from_record(meta["budget"]), NUM_ENVS,
                           tier, meta.get("value"))
    if op == "train_jax":
        track = TRACKS[meta["track"]]
        return _train_jax(load_factory(state["spec"]), track, track.budget_from_record(meta["budget"]),
                          [tuple(c) for c in meta["cells"]], arrays["seal"], NUM_ENVS, tier,
                          bool(meta.get("vmap_lone", False)))
    raise ValueError(f"unknown request {op!r}")


def _train_jax(factory: Any, track: Track, budget: Preset, cells: list[tuple[Any, int]], seal: np.ndarray,
               num_envs: int, tier: Any, vmap_lone: bool = False):
    import jax

    from memgym.leaderboard.running import progress
    from memgym.leaderboard.running.jax_tier import JaxCells
    from memgym.leaderboard.scoring import COUNTERS

    value = track.env_key(cells[0][0])
    agent = factory(track.context(num_envs=num_envs, seed=0, total_steps=budget.total_steps, value=value))
    if tier(agent) != "jax":
        raise TypeError("the agent is not a JAX-tier agent")
    total, shown = budget.total_steps * len(cells), set()

    def report(steps: float, resumed: bool = False) -> None:  # every tenth, on the verifier's standard error
        tenth = min(10, int(10 * steps / total))
        if tenth and tenth not in shown:
            shown.add(tenth)
            print(f"  training {10 * tenth}% ({steps:,.0f}/{total:,} steps)", file=sys.stderr, flush=True)

    with progress.listening(report):
        policy_params, env_state, _ = JaxCells(agent, track, budget, value, vmap_lone).train_cells(cells, seal)
    leaves = jax.tree.leaves(policy_params)
    arrays = {f"counter.{name}": np.asarray(getattr(env_state, name))[: len(cells)]
              for name in [*COUNTERS, "curve_episodes", "curve_successes", "tag"]}
    arrays |= {f"param.{i}": np.asarray(leaf)[: len(cells)] for i, leaf in enumerate(leaves)}
    carry = _exported_act(agent, track, jax.tree.map(lambda leaf: leaf[0], policy_params), arrays, value)
    return {"params": len(leaves), "carry": carry}, arrays


def _export_jax(factory: Any, track: Track, budget: Preset, num_envs: int, tier: Any, value: Any = None):
    """The agent's batched ``act`` for the parameters its ``train`` returns on ``budget``, exported without
    training: the parameters' structure comes from tracing ``train`` abstractly (``jax.eval_shape``)."""
    import jax

    from memgym.leaderboard.running.jax_tier import JaxCells, agent_computation
    from memgym.leaderboard.scoring import seal_weights

    agent = factory(track.context(num_envs=num_envs, seed=0, total_steps=budget.total_steps, value=value))
    if tier(agent) != "jax":
        raise TypeError("the agent is not a JAX-tier agent")
    try:
        computation = agent_computation(agent, track, budget, value)
    except Exception:  # noqa: BLE001 - not traceable on the inner env: records of other code cannot be compared
        computation = None
    cells = JaxCells(agent, track, budget, value)
    keys, params, *_ = cells.batch([(budget.values[0] if value is None else value, 0)], seal_weights())
    policy_params, _ = jax.eval_shape(cells.train, keys, params)
    structure = jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype), policy_params)
    arrays: dict[str, np.ndarray] = {}
    carry = _exported_act(agent, track, structure, arrays, value)
    layout = [[np.dtype(leaf.dtype).str, list(leaf.shape)] for leaf in jax.tree.leaves(structure)]
    return {"carry": carry, "leaves": layout, "computation": computation}, arrays


def _exported_act(agent: Any, track: Track, params: Any, arrays: dict[str, np.ndarray], value: Any = None) -> int:
    """Export ``act`` batched over episodes for parameters shaped like ``params`` (one cell's) into
    ``arrays["act"]``, and ``initialize_carry()``'s leaves into ``arrays["carry.<i>"]``; their number.
    ``value``: the cells' value, for its observation space (None: the track's ``check_cell``'s)."""
    import jax
    import jax.numpy as jnp
    from jax import export

    from memgym.leaderboard.protocol import initialize_carry

    leaves, params_tree = jax.tree.flatten(params)
    carry, carry_tree = jax.tree.flatten(initialize_carry(agent))

    def batched_act(params, carry, obs, start, key_data):
        action, carry = jax.vmap(agent.act, in_axes=(None, 0, 0, 0, 0))(
            jax.tree.unflatten(params_tree, params), jax.tree.unflatten(carry_tree, carry), obs, start,
            jax.random.wrap_key_data(key_data))
        return action, jax.tree.leaves(carry)

    (b,) = export.symbolic_shape("b")
    space = track.spaces(value)[0]
    key_shape = jax.random.key_data(jax.random.key(0)).shape
    exported = export.export(jax.jit(batched_act))(
        [jax.ShapeDtypeStruct(jnp.shape(leaf), leaf.dtype) for leaf in leaves],
        [jax.ShapeDtypeStruct((b, *jnp.shape(c)), jnp.asarray(c).dtype) for c in carry],
        jax.ShapeDtypeStruct((b, *space.shape), space.dtype), jax.ShapeDtypeStruct((b,), jnp.bool_),
        jax.ShapeDtypeStruct((b, *key_shape), jnp.uint32))
    arrays |= {f"carry.{i}": np.asarray(c) for i, c in enumerate(carry)}
    arrays["act"] = np.frombuffer(bytes(exported.serialize()), np.uint8)
    return len(carry)


if __name__ == "__main__":
    from memgym.leaderboard.submissions.sandbox import apply_limits

    apply_limits(os.environ)  # before the agent's code is imported: it and all it starts inherit them
    serve(int(sys.argv[1]), sys.argv[2])
