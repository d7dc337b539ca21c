"""``memgym leaderboard verify``: a submission checked offline (:mod:`~memgym.leaderboard.submissions.format`), every
JAX-tier cell's stored policy evaluated, a random sample of its cells re-trained where the submitted code
cannot reach the counting (:mod:`~memgym.leaderboard.submissions.isolation`), compared
(:mod:`~memgym.leaderboard.submissions.comparison`), and the verdict written beside it.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memgym.leaderboard.running.code_identity import COMPUTATION, code_hash
from memgym.leaderboard.submissions.comparison import (NOT_REPRODUCED, REPRODUCED, WITHIN_SPREAD, Z, compare,
                                           compare_evaluation, compare_training, pooled_bias, same_backend,
                                           spreads)
from memgym.leaderboard.limits import CellFailure, alarm
from memgym.leaderboard.store import provenance
from memgym.leaderboard.submissions.format import (VERIFICATION, Submission, SubmissionError, digest, first_results, load,
                                           offline_problems, relative)
from memgym.validation import check_real, is_int


def verify(path: str | os.PathLike, *, k: int | str = 3, sample_seed: int | None = None, z: float = Z,
           cell_timeout: float | None = None, preset: str | None = None, exact: bool = False,
           unsandboxed: bool = False, memory_limit: float | None = None,
           log: Callable[[str], None] = print) -> dict[str, Any]:
    """Check the submission at ``path`` offline, evaluate every JAX-tier cell's stored policy, re-train ``k``
    cells (``"all"``: every cell) drawn with ``sample_seed`` (None: a fresh random seed, printed) out of the
    submission's reach, and compare; the verdict is written to ``path/verification.json`` and returned.

    Verdicts: ``verified`` (every evaluation agrees and no re-trained cell is conclusively not
    reproduced), ``mismatch`` or ``malformed`` (the offline checks failed, nothing was run; or the files
    changed during the verification). ``preset`` requires the submission's preset (CI: ``smoke``);
    ``exact`` requires every comparison to be exact, whatever backend the records say they come from
    (their provenance is the submitter's word). The rules: docs/submitting.md.
    """
    if k != "all" and (not isinstance(k, int) or isinstance(k, bool) or k < 0):
        raise ValueError(f"k must be an int >= 0 or 'all', got {k!r}")
    check_real("z", z, 0.0, include_low=False)
    if cell_timeout is not None:
        check_real("cell_timeout", cell_timeout, 0.0, include_low=False)
    if memory_limit is not None:
        check_real("memory_limit", memory_limit, 0.0, include_low=False)
    if sample_seed is None:
        sample_seed = int.from_bytes(os.urandom(4), "little")
    here = provenance()
    started = time.perf_counter()
    try:
        submission = load(path)
    except SubmissionError as error:
        verdict = {"verdict": "malformed", "problems": error.problems, "cells": []}
        _write_verdict(Path(path), verdict, None, here)
        return verdict
    problems = offline_problems(submission)
    if preset is not None and submission.meta["preset"] != preset:
        problems.append(f"the submission's preset is {submission.meta['preset']!r}; this verification requires "
                        f"{preset!r}")
    base = {"submission": submission.name, "agent": submission.spec, "track": submission.track.name,
            "preset": submission.meta["preset"], "k": k, "sample_seed": sample_seed, "z": z}
    if problems:
        verdict = base | {"verdict": "malformed", "problems": problems, "cells": []}
        _write_verdict(submission.root, verdict, submission, here)
        return verdict
    before, results = digest(submission), first_results(submission)
    track = submission.track
    tier = next(r["tier"] for r in results.values())
    if tier == "any" and k == 0:
        raise ValueError("k must be at least 1 for an any-framework submission: its cells are verified only by "
                         "re-running them (no policy is stored); allowed: an int >= 1 or 'all'")
    log(f"[{submission.name}] offline checks passed: metadata, {len(results)} cells present, "
        f"records readable and of code {code_hash(submission.code_modules())[:12]}…")
    cells = sorted(results, key=lambda c: (track.sweep.index(c[0]), c[1]))
    sample = sorted(random.Random(sample_seed).sample(cells, len(cells) if k == "all" else min(k, len(cells))),
                    key=lambda c: (track.sweep.index(c[0]), c[1]))
    drawn = ", ".join(f"{track.sweep.column(v)} seed {s}" for v, s in sample) or "none"
    # fail closed: where no sandbox works, stop here, before any of the agent's code runs (SandboxUnavailable).
    # Any-framework tier: a process per re-run cell; JAX tier: one process exports the act and re-trains the
    # sample, its limits a cell's for each and one more.
    from memgym.leaderboard.submissions import isolation, sandbox

    limits = sandbox.Limits.for_cells(submission.budget.total_steps, 1 if tier == "any" else len(sample) + 1,
                                      cell_timeout, memory_limit)
    protection = isolation.protection(submission.spec, submission.code_dir, [submission.root], limits, unsandboxed)
    log(f"[{submission.name}] the agent's process runs sandboxed as {protection['mode']!r}: "
        + "; ".join(protection["in_force"]))
    if tier == "any":
        log(f"[{submission.name}] re-running {len(sample)} of {len(cells)} cells (sample seed {sample_seed}; the "
            f"agent in a child process, counted here): {drawn}")
        reruns = _rerun_any(submission, sample, cell_timeout, limits, unsandboxed, log)
        rows = [compare(results[cell], rerun, track, exact=exact, z=z, same_machine=same_backend(results[cell], here))
                for cell, rerun in zip(sample, reruns)]
        training: list[dict[str, Any]] = []
        base["evaluation"] = {"checked": len(rows), "cells": len(cells), "how": "re-trained and evaluated here"}
    else:
        log(f"[{submission.name}] evaluating the stored policy of every cell here, then re-training {len(sample)} "
            f"of {len(cells)} cells (sample seed {sample_seed}; the agent in a child process): {drawn}")
        rows, training, computed = _verify_jax(submission, results, sample, here, exact, z, cell_timeout, limits,
                                               unsandboxed, log)
        base["problems_of_code"] = _computation_problems(submission, results, computed)
        base["evaluation"] = {"checked": len(rows), "cells": len(cells), "how": "stored policies evaluated here"}
        if not exact and not all(same_backend(results[cell], here) for cell in cells):
            made = next(iter(results.values())).get("provenance", {})
            base["note"] = (f"the records were made on {made.get('device')} ({made.get('cpu') or made.get('machine')}, "
                            f"jax {made.get('jax')}, backend {(made.get('backend') or {}).get('fingerprint', 'not recorded')}), "
                            f"this verification runs on {here.get('device')} ({here.get('cpu') or here.get('machine')}, "
                            f"jax {here.get('jax')}, backend {here['backend']['fingerprint']}): evaluations are "
                            "compared within evaluation noise, and a re-trained cell, whose training takes another "
                            "path here, within the spread of the submission's seeds")
            log(f"[{submission.name}] note: {base['note']}")
        base["training"] = _training_summary(training, len(cells))
    base["isolation"] = protection
    agreeing = sum(r["agrees"] for r in rows)
    problems = base.pop("problems_of_code", []) + ([] if digest(submission) == before else [
        "the submission's files changed while it was being verified (by the agent's process?)"])
    bias = pooled_bias(rows, z)
    if bias is not None:
        base["pooled"] = bias
    conclusive = [r for r in training if r["outcome"] == NOT_REPRODUCED and r["conclusive"]]
    verified = agreeing == len(rows) and not problems and (bias is None or bias["agrees"]) and not conclusive
    verdict = base | {"verdict": "verified" if verified else ("malformed" if problems else "mismatch"),
                      "problems": problems, "cells": rows, "agreeing": agreeing, "retrained": training,
                      "seconds": round(time.perf_counter() - started, 1)}
    _write_verdict(submission.root, verdict, submission, here)
    return verdict


def _training_summary(rows: list[dict[str, Any]], cells: int) -> dict[str, Any]:
    """How the re-trained cells came out, and the chance that one cell whose policy was trained otherwise (and
    whose figures are that policy's own) escapes a sample of this size: it is caught only if drawn."""
    outcomes = [row["outcome"] for row in rows]
    return {"sampled": len(rows), "cells": cells, "exact": outcomes.count(REPRODUCED),
            "within_spread": outcomes.count(WITHIN_SPREAD), "not_reproduced": outcomes.count(NOT_REPRODUCED),
            "conclusive_failures": sum(r["outcome"] == NOT_REPRODUCED and r["conclusive"] for r in rows),
            "unsampled_escape": (cells - len(rows)) / cells if cells else 0.0}


def _computation_problems(submission: Submission, results: dict[tuple[Any, int], dict[str, Any]],
                          computed: dict[Any, str | None]) -> list[str]:
    """The records made by other code than the submission holds whose computation hash is not what the code
    computes (``computed``: per env, ``Track.env_key``, from the agent's process; None or absent: it could not
    be traced there, and the record is refused)."""
    digest, track, problems = code_hash(submission.code_modules()), submission.track, []
    for cell, record in sorted(results.items(), key=lambda item: (track.sweep.index(item[0][0]), item[0][1])):
        info = record.get("agent_info", {})
        if info.get("code_sha256") == digest or COMPUTATION not in info:
            continue
        now = computed.get(track.env_key(cell[0]))
        if now is None:
            problems.append(f"record {relative(Path(record['path']), submission)} was produced by other code than "
                            f"the submission holds (code_sha256 {str(info.get('code_sha256'))[:12]}… recorded, "
                            f"{digest[:12]}… now), and what that code computes cannot be traced on the track's "
                            "environment to compare")
        elif info.get(COMPUTATION) != now:
            problems.append(f"record {relative(Path(record['path']), submission)} was produced by other code than "
                            f"the submission holds (code_sha256 {str(info.get('code_sha256'))[:12]}… recorded, "
                            f"{digest[:12]}… now), which computes something else (computation_sha256 "
                            f"{str(info.get(COMPUTATION))[:12]}… recorded, {now[:12]}… now)")
    return problems


def _rerun_any(submission: Submission, sample: list[tuple[Any, int]], cell_timeout: float | None,
               limits: Any, unsandboxed: bool, log: Callable[[str], None]) -> list[tuple[dict, dict] | str]:
    """The sampled cells of an any-framework agent re-run with the agent in a child process (one per cell, in the
    sandbox, :class:`~memgym.leaderboard.submissions.isolation.AgentProcess`) and counted here; per cell its outcome or failure
    reason."""
    from memgym.leaderboard.running import any_tier
    from memgym.leaderboard.submissions import isolation
    from memgym.leaderboard.running.planning import NUM_ENVS

    track, budget = submission.track, submission.budget
    outcomes: list[tuple[dict, dict] | str] = []
    for value, seed in sample:
        started = time.perf_counter()
        deadline = math.inf if cell_timeout is None else started + cell_timeout
        try:
            with isolation.AgentProcess(submission.spec, submission.code_dir, protect=[submission.root],
                                        limits=limits, unsandboxed=unsandboxed) as process, \
                    alarm(cell_timeout):
                agent = isolation.RemoteAgent(process, track, value, seed, budget.total_steps, NUM_ENVS)
                train = any_tier.train(agent, track, budget, value, seed, NUM_ENVS, deadline)
                outcomes.append((train, any_tier.evaluate(agent, track, budget, value, NUM_ENVS, deadline)))
        except (CellFailure, isolation.AgentProcessError) as error:
            outcomes.append(str(error))
        log(f"[{submission.name}] {track.sweep.column(value)} seed {seed}: re-run in "
            f"{time.perf_counter() - started:.0f}s")
    return outcomes


def _verify_jax(submission: Submission, results: dict[tuple[Any, int], dict[str, Any]],
                sample: list[tuple[Any, int]], here: dict[str, Any], exact: bool, z: float,
                cell_timeout: float | None, limits: Any, unsandboxed: bool, log: Callable[[str], None]):
    """A JAX-tier submission: every ``ok`` cell's stored policy evaluated here with the agent's exported ``act``
    (the evaluation rows), then the ``sample`` re-trained in the agent's process (the training rows); and what
    the agent computes, per env (``Track.env_key``), as its process traced it."""
    from memgym.leaderboard.submissions import isolation
    from memgym.leaderboard.store import policies
    from memgym.leaderboard.running.jax_tier import cell_outcome, evaluation_figures
    from memgym.leaderboard.running.planning import NUM_ENVS
    from memgym.leaderboard.scoring import ScoredState, seal_weights

    track, budget = submission.track, submission.budget
    flags = {r.get("provenance", {}).get("xla_flags") for r in results.values()}
    # the agent's process trains with the records' XLA_FLAGS (as the run did) where they all name the same ones
    environment = {"XLA_FLAGS": flags.pop() or ""} if len(flags) == 1 and None not in flags else {}
    child_flags = environment.get("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
    rows, training = [], []
    with isolation.AgentProcess(submission.spec, submission.code_dir, environment, protect=[submission.root],
                                limits=limits, unsandboxed=unsandboxed) as process:
        started = time.perf_counter()
        exports: dict[Any, tuple[dict[str, Any], Callable]] = {}  # per env (Track.env_key): the act, its evaluator

        def exported_for(value: Any) -> tuple[dict[str, Any], Callable]:
            key = track.env_key(value)
            if key not in exports:
                exported = isolation.export_jax(process, track, budget, key,
                                                timeout=None if cell_timeout is None else cell_timeout)
                agent = isolation.exported_agent(exported["act"], exported["carry"], NUM_ENVS)
                exports[key] = exported, isolation.exported_evaluator(agent, track, budget, key)
            return exports[key]

        for cell in sorted(results, key=lambda c: (track.sweep.index(c[0]), c[1])):
            record = results[cell]
            if record["status"] != "ok":
                continue
            repeatable = False
            exported, evaluate = exported_for(cell[0])
            try:
                leaves = policies.read(record["path"], record.get("policy"))
                if policies.layout(leaves) != exported["leaves"]:
                    raise policies.PolicyError(f"its stored policy's leaves {policies.layout(leaves)} are not those "
                                               f"the agent's train returns {exported['leaves']}")
                first = evaluate(cell[0], cell[1], leaves)
                repeatable = all(np.array_equal(a, b) for a, b in zip(first, evaluate(cell[0], cell[1], leaves)))
                figures = evaluation_figures(track, budget, first, cell[0])
            except policies.PolicyError as error:
                figures = f"record {relative(Path(record['path']), submission)}: {error}"
            except Exception as error:  # noqa: BLE001 - the exported act cannot evaluate this policy
                figures = f"the stored policy cannot be evaluated ({type(error).__name__}: {str(error)[:300]})"
            rows.append(compare_evaluation(record, figures, track, z=z,
                                           exact=exact or (repeatable and same_backend(record, here))))
        log(f"[{submission.name}] evaluated {len(rows)} stored policies here in {time.perf_counter() - started:.0f}s "
            f"({sum(r['agrees'] for r in rows)} agree)")
        # XLA's numerics depend on a batch's size and form: each sampled cell is re-trained in a batch of the size
        # its record was trained in (`batch`; records without one: the budget's seeds, what `run` trains a value's
        # seeds in), padded by repeating its last cell, as the padding for devices does, and a lone cell vmapped
        # or alone as its record says (`vmapped`; records without one were made vmapped)
        by_batch: dict[tuple[Any, int, bool], list[int]] = defaultdict(list)
        for value, seed in sample:
            by_batch[(value, *trained_batch(results[value, seed], budget))].append(seed)
        spread = spreads(results, track)
        chunks = [(value, size, vmapped, sampled[i:i + size]) for (value, size, vmapped), sampled in by_batch.items()
                  for i in range(0, len(sampled), size)]
        for value, size, vmapped, seeds in chunks:
            started = time.perf_counter()
            seal = seal_weights()
            cells = [(value, seed) for seed in seeds]
            batch = cells + [cells[-1]] * (size - len(cells))
            outcomes: dict[tuple[Any, int], Any] = {}
            try:
                trained = isolation.train_jax(process, track, budget, batch, seal, vmap_lone=vmapped,
                                              timeout=None if cell_timeout is None else cell_timeout * len(batch))
                retrained = isolation.exported_evaluator(
                    isolation.exported_agent(trained["act"], trained["carry"], NUM_ENVS), track, budget,
                    track.env_key(value))
                for i, (cell, params) in enumerate(zip(cells, trained["params"])):
                    state = ScoredState(inner=None, **{n: c[i] for n, c in trained["counters"].items()})
                    outcomes[cell] = cell_outcome(track, budget, state, seal, params, retrained(*cell, params),
                                                  value)
            except isolation.AgentProcessError as error:
                outcomes |= {cell: str(error) for cell in cells}
            except Exception as error:  # noqa: BLE001 - what the agent's process sent cannot be evaluated here
                outcomes |= {cell: f"the agent's process sent a training result that cannot be evaluated "
                                   f"({type(error).__name__}: {str(error)[:300]})" for cell in cells
                             if cell not in outcomes}
            for cell in cells:
                training.append(compare_training(results[cell], outcomes[cell], spread[value], track, z=z,
                                                 exact=exact or same_backend(results[cell], here, child_flags)))
            log(f"[{submission.name}] {track.sweep.column(value)} seeds {', '.join(map(str, seeds))}: re-trained in "
                f"the agent's process, evaluated here, in {time.perf_counter() - started:.0f}s")
    return rows, training, {key: exported["computation"] for key, (exported, _) in exports.items()}


def trained_batch(record: dict[str, Any], budget: Any) -> tuple[int, bool]:
    """The size of the batch ``record``'s cell was trained in, and whether it was vmapped: its ``batch`` where that
    is a whole number from 1 to the budget's seeds, else the budget's seeds (records made before ``batch`` was
    recorded); its ``vmapped`` where that is ``false``, else vmapped (records made before a lone cell trained
    unbatched; :class:`~memgym.leaderboard.running.jax_tier.OverCells`)."""
    size = record.get("batch")
    return size if is_int(size) and 1 <= size <= budget.seeds else budget.seeds, record.get("vmapped") is not False


def _write_verdict(root: Path, verdict: dict[str, Any], submission: Submission | None,
                   here: dict[str, Any]) -> None:
    """``verification.json``: the verdict, the digest of the files it was reached on and the machine."""
    verdict |= {"digest": digest(submission) if submission is not None else None,
                "verified_with": {k: here.get(k) for k in ("memgym", "jax", "jaxlib", "device", "cpu", "platform",
                                                           "created", "git_commit") if k in here}}
    if root.is_dir() and not root.is_symlink():
        text = json.dumps(verdict, indent=1, default=_json_number) + "\n"
        temporary = root / f".{VERIFICATION}.tmp"
        temporary.write_text(text)
        temporary.replace(root / VERIFICATION)


def _json_number(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")
