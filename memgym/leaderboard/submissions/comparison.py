"""How a re-run cell is compared with its record (:func:`compare`, :func:`compare_evaluation`,
:func:`compare_training`): exactly on the backend that made it, otherwise within a statistical tolerance
(:func:`tolerance`) or the spread of the submission's seeds (:func:`spreads`); :func:`pooled_bias` looks for
a bias too small for any one cell. The rules: docs/submitting.md ("Submitting by pull request").
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from memgym.leaderboard.store import backend
from memgym.leaderboard.tracks import Track


Z = 3.0  # the default statistical tolerance, in standard errors
DETERMINISTIC_GPU = "--xla_gpu_deterministic_ops=true"


def same_backend(record: dict[str, Any], here: dict[str, Any], xla_flags: str | None = None) -> bool:
    """Whether a computation here repeats the record's bitwise: the same backend fingerprint
    (:func:`~memgym.leaderboard.store.backend`: jax and jaxlib, device kind, XLA flags — ``xla_flags`` where
    the computation runs with other flags than this process —, and on a CPU the processor, its instruction-set
    extensions and core count), on a CPU (XLA's CPU code is deterministic) or on a GPU run with
    ``--xla_gpu_deterministic_ops=true`` (without it XLA's GPU reductions add in varying order, and a re-run on
    the very same GPU diverges). A record without a fingerprint (made before memgym recorded one) never is: it
    is compared statistically."""
    theirs = record.get("provenance", {}).get("backend")
    if not isinstance(theirs, dict) or "jax" not in here:
        return False
    mine = backend(here, xla_flags)
    return theirs.get("fingerprint") == mine["fingerprint"] and (
        str(mine.get("device", "")).lower() == "cpu" or DETERMINISTIC_GPU in mine["xla_flags"])


def tolerance(stored: float, rerun: float, episodes: int, track: Track, z: float) -> float:
    """How far a re-run's score may lie from the stored one: ``z`` standard errors of the difference of two
    independent means over ``episodes`` episodes each (the re-run's count). The standard deviation per
    episode is ``sqrt(p(1−p))`` for a counted score (``p`` the mean of both, at least ``1/episodes``), half
    the score's range otherwise (its largest possible value). Nothing the submission stores widens it."""
    low, high = track.score.bounds
    if track.score.counted:
        p = min(max((stored + rerun) / 2, 0.0), 1.0)
        sigma = math.sqrt(max(p * (1 - p), 1.0 / max(episodes, 1)))
    else:
        sigma = (high - low) / 2
    return z * sigma * math.sqrt(2.0 / max(episodes, 1))


def _cell(stored: dict[str, Any], track: Track) -> dict[str, Any]:
    return {"value": stored[track.sweep.name], "seed": stored["seed"], "stored_status": stored["status"]}


def compare(stored: dict[str, Any], rerun: tuple[dict, dict] | str, track: Track, *, exact: bool,
            z: float, same_machine: bool = False) -> dict[str, Any]:
    """One re-run cell of the any-framework tier (trained and evaluated here, counted by the harness): the
    stored record against its re-run (``(train counters, evaluation)`` or a failure reason).

    ``exact`` (``--exact``): the re-run must equal the record. ``same_machine`` (the record's backend, see
    :func:`same_backend`): where the re-run's training figures equal the record's, every one, the agent has
    shown that it repeats its run here (it seeds all its randomness from the cell's seed, as the protocol
    requires), so its evaluation must equal the record's too: a score edited by any amount is a mismatch.
    Otherwise each score must lie within :func:`tolerance` of the stored one.
    """
    name = track.score.name
    row = _cell(stored, track)
    if isinstance(rerun, str) or stored["status"] != "ok":
        row["rerun_status"] = "failed" if isinstance(rerun, str) else "ok"
        row["reason"] = rerun if isinstance(rerun, str) else stored.get("reason", "")
        row["agrees"] = row["rerun_status"] == stored["status"]
        row["rule"] = "both must fail" if stored["status"] != "ok" else "the re-run failed"
        return row
    train, evaluation = rerun[:2]
    window = track.score.window_score(train)
    row |= {"rerun_status": "ok", "eval_stored": stored["eval"][name], "eval_rerun": evaluation[name],
            "train_stored": stored["train"][name], "train_rerun": window}
    same_train = all(stored["train"].get(k) == v for k, v in train.items())
    if exact or (same_machine and same_train):
        same_eval = all(stored["eval"].get(k) == v for k, v in evaluation.items())
        rule = "exact (--exact)" if exact else "exact (its training repeated on the record's backend)"
        row |= {"rule": rule, "eval_tolerance": 0.0, "train_tolerance": 0.0, "agrees": same_train and same_eval}
        if not row["agrees"]:
            row["reason"] = ", ".join(f"{part} differs" for part, same in (("training", same_train),
                                                                            ("evaluation", same_eval)) if not same)
        return row
    eval_tol = tolerance(row["eval_stored"], row["eval_rerun"], evaluation["episodes"], track, z)
    train_tol = tolerance(row["train_stored"], window, train["window_episodes"], track, z)
    row |= {"eval_sigma": eval_tol / z, "train_sigma": train_tol / z}
    eval_ok = abs(row["eval_rerun"] - row["eval_stored"]) <= eval_tol + 1e-9
    train_ok = abs(window - row["train_stored"]) <= train_tol + 1e-9
    row |= {"rule": f"statistical ({z:g} standard errors)", "eval_tolerance": eval_tol,
            "train_tolerance": train_tol, "agrees": eval_ok and train_ok}
    if not row["agrees"]:
        row["reason"] = ", ".join(f"{part} score off by more than its tolerance" for part, ok
                                  in (("evaluation", eval_ok), ("training", train_ok)) if not ok)
    return row


def compare_evaluation(stored: dict[str, Any], figures: dict[str, Any] | str, track: Track, *, exact: bool,
                       z: float) -> dict[str, Any]:
    """One JAX-tier cell's stored evaluation against the verifier's own evaluation of the cell's stored policy
    (``figures``, a record's ``eval``; or why the policy could not be evaluated).

    ``exact`` (the verifier's evaluation repeats bitwise and runs on the record's backend, or ``--exact``):
    every figure must be equal. Otherwise the score must lie within :func:`tolerance` (two independent
    evaluations: a bound on what the same policy's rounding on another backend can change).
    """
    name = track.score.name
    row = _cell(stored, track) | {"eval_stored": stored["eval"][name]}
    if isinstance(figures, str):
        return row | {"rerun_status": "failed", "reason": figures, "agrees": False,
                      "rule": "the stored policy must evaluate"}
    row |= {"rerun_status": "ok", "eval_rerun": figures[name]}
    if exact:
        same = all(stored["eval"].get(k) == v for k, v in figures.items())
        return row | {"rule": "exact (same backend)", "eval_tolerance": 0.0, "agrees": same,
                      **({} if same else {"reason": "evaluation differs"})}
    tol = tolerance(row["eval_stored"], row["eval_rerun"], figures["episodes"], track, z)
    agrees = abs(row["eval_rerun"] - row["eval_stored"]) <= tol + 1e-9
    return row | {"rule": f"statistical ({z:g} standard errors)", "eval_tolerance": tol, "eval_sigma": tol / z,
                  "agrees": agrees, **({} if agrees else {"reason": "evaluation score off by more than its tolerance"})}


REPRODUCED, WITHIN_SPREAD, NOT_REPRODUCED = "reproduced exactly", "within the seeds' spread", "not reproduced"


def spreads(results: dict[tuple[Any, int], dict[str, Any]], track: Track) -> dict[Any, dict[str, list[float]]]:
    """Per swept value, the lowest and highest stored evaluation and training score over the submission's seeds
    (a failed cell scores the track's worst value, as on the board)."""
    worst = track.score.bounds[0]
    scores: dict[Any, dict[str, list[float]]] = defaultdict(lambda: {"eval": [], "train": []})
    for (value, _), record in results.items():
        ok = record["status"] == "ok"
        scores[value]["eval"].append(record["eval"][track.score.name] if ok else worst)
        scores[value]["train"].append(record["train"][track.score.name] if ok else worst)
    return {value: {part: [min(s), max(s)] for part, s in parts.items()} for value, parts in scores.items()}


def compare_training(stored: dict[str, Any], rerun: tuple[dict, dict, list] | str, spread: dict[str, list[float]],
                     track: Track, *, exact: bool, z: float) -> dict[str, Any]:
    """One re-trained JAX-tier cell (trained in the agent's process, its policy evaluated here).

    ``exact`` (the re-run repeats the record's backend, or ``--exact``): the training counters, the
    trained parameters (their content hash) and the evaluation must all equal the record's, else the cell
    is *not reproduced*, conclusively: the same program on the same backend computes the same bits. On
    another backend training takes another path (a fresh draw of the seed), so the re-trained policy's
    evaluation and training scores must lie within ``spread``, the range of the submission's own seeds at
    that value, widened by :func:`tolerance`; outside it the cell is *not reproduced*, which an honest cell
    can be on another backend: the row says it is not conclusive (``"conclusive": False``).
    """
    from memgym.leaderboard.store.policies import content_hash

    name = track.score.name
    row = _cell(stored, track) | {"conclusive": exact}
    if isinstance(rerun, str) or stored["status"] != "ok":
        row["rerun_status"] = "failed" if isinstance(rerun, str) else "ok"
        row["reason"] = rerun if isinstance(rerun, str) else stored.get("reason", "")
        same = row["rerun_status"] == stored["status"]
        return row | {"rule": "a failed cell must fail again" if stored["status"] != "ok" else "the re-run failed",
                      "outcome": (REPRODUCED if exact else WITHIN_SPREAD) if same else NOT_REPRODUCED}
    train, evaluation, leaves = rerun
    window = track.score.window_score(train)
    row |= {"rerun_status": "ok", "eval_stored": stored["eval"][name], "eval_rerun": evaluation[name],
            "train_stored": stored["train"][name], "train_rerun": window, "train_self_reported": True}
    if exact:
        same = {"training counters": all(stored["train"].get(k) == v for k, v in train.items()),
                "trained parameters": content_hash(leaves) == (stored.get("policy") or {}).get("params_sha256"),
                "evaluation": all(stored["eval"].get(k) == v for k, v in evaluation.items())}
        row |= {"rule": "exact (same backend)", "outcome": REPRODUCED if all(same.values()) else NOT_REPRODUCED}
        if not all(same.values()):
            row["reason"] = ", ".join(f"{part} differ" for part, ok in same.items() if not ok)
        return row
    inside = {}
    for part, rerun_score, episodes in (("eval", evaluation[name], evaluation["episodes"]),
                                        ("train", window, train["window_episodes"])):
        low, high = spread[part]
        tol = tolerance(min(max(rerun_score, low), high), rerun_score, episodes, track, z)
        row[f"{part}_tolerance"] = tol
        inside[part] = low - tol - 1e-9 <= rerun_score <= high + tol + 1e-9
    row |= {"rule": f"another backend: the seeds' range ± {z:g} standard errors", "spread": spread,
            "outcome": WITHIN_SPREAD if all(inside.values()) else NOT_REPRODUCED}
    if not all(inside.values()):
        row["reason"] = " and ".join(f"{'evaluation' if part == 'eval' else 'training'} score outside "
                                     f"[{spread[part][0]:.3f}, {spread[part][1]:.3f}] ± {row[f'{part}_tolerance']:.3f}"
                                     for part, ok in inside.items() if not ok)
    return row


def pooled_bias(rows: list[dict[str, Any]], z: float) -> dict[str, Any] | None:
    """The mean excess of the stored evaluation scores over their re-runs across the statistically compared
    cells, against ``z`` standard errors of that mean: a small edit on every cell, each within its own
    tolerance, adds up here. None when fewer than two cells were compared statistically."""
    compared = [r for r in rows if "eval_sigma" in r]
    if len(compared) < 2:
        return None
    excess = sum(r["eval_stored"] - r["eval_rerun"] for r in compared) / len(compared)
    allowed = z * math.sqrt(sum(r["eval_sigma"] ** 2 for r in compared)) / len(compared)
    return {"cells": len(compared), "mean_excess": excess, "tolerance": allowed, "agrees": abs(excess) <= allowed + 1e-9}
