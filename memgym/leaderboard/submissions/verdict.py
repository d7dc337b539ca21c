"""A submission's verdict as the board shows it (:func:`status`) and as ``verify`` prints it (:func:`table`)."""

from __future__ import annotations

import json
from typing import Any

from memgym.leaderboard.submissions.comparison import NOT_REPRODUCED
from memgym.leaderboard.submissions.sandbox import UNSANDBOXED
from memgym.leaderboard.submissions.format import VERIFICATION, Submission, digest
from memgym.leaderboard.tracks import Track


def status(submission: Submission) -> str:
    """The board's ``verified`` cell. Verified: ``eval 6/6, train 2/2`` (JAX tier: stored policies evaluated
    here / agreeing; cells re-trained / reproduced, exactly or within the seeds' spread) or ``re-run 2/2 of 6``
    (any-framework tier: cells re-trained and evaluated here / agreeing, of the grid). Otherwise ``mismatch
    …`` with the same counts, ``malformed``, ``not verified`` (no verdict) or ``stale`` (files changed since
    the verdict)."""
    try:
        verdict = json.loads((submission.root / VERIFICATION).read_text())
    except (OSError, ValueError):
        return "not verified"
    if not isinstance(verdict, dict) or verdict.get("digest") != digest(submission):
        return "stale"
    if verdict.get("verdict") == "malformed":
        return "malformed"
    rows = [row for row in verdict.get("cells") or [] if isinstance(row, dict)]
    agreeing = sum(bool(row.get("agrees")) for row in rows)
    training = verdict.get("training")
    if isinstance(training, dict):
        text = (f"eval {agreeing}/{len(rows)}, train "
                f"{training.get('exact', 0) + training.get('within_spread', 0)}/{training.get('sampled', 0)}")
    else:
        text = f"re-run {agreeing}/{len(rows)} of {(verdict.get('evaluation') or {}).get('cells', len(rows))}"
    if (verdict.get("isolation") or {}).get("mode") == UNSANDBOXED:  # asked for by name: shown wherever it is read
        text += ", unsandboxed"
    return text if verdict.get("verdict") == "verified" else f"mismatch: {text}"


def table(verdict: dict[str, Any], track: Track) -> str:
    """The per-cell tables and the verdict, as ``verify`` prints them."""
    lines = []
    if verdict.get("problems"):
        lines += ["problems:", *(f"  - {p}" for p in verdict["problems"])]
    jax_tier = isinstance(verdict.get("training"), dict)
    if verdict.get("cells"):
        lines.append("evaluation of every stored policy, here:" if jax_tier else
                     "re-run cells (trained and evaluated here):")
        lines.append(f"{'cell':<16} {'eval stored':>11} {'here':>7} {'tol':>6}"
                     + ("" if jax_tier else f" {'train stored':>12} {'here':>7} {'tol':>6}") + "  rule / verdict")
        for row in verdict["cells"]:
            cell = f"{track.sweep.column(row['value'])} seed {row['seed']}"
            if row.get("rerun_status") == "ok" and row.get("stored_status") == "ok":
                line = f"{cell:<16} {row['eval_stored']:>11.3f} {row['eval_rerun']:>7.3f} {row['eval_tolerance']:>6.3f}"
                if not jax_tier:
                    line += f" {row['train_stored']:>12.3f} {row['train_rerun']:>7.3f} {row['train_tolerance']:>6.3f}"
                lines.append(line + f"  {row['rule']}: "
                             + ("agrees" if row["agrees"] else f"MISMATCH ({row.get('reason', '')})"))
            else:
                lines.append(f"{cell:<16} stored {row['stored_status']}, here {row['rerun_status']} "
                             f"({row.get('reason', '')}): " + ("agrees" if row["agrees"] else "MISMATCH"))
    if verdict.get("pooled"):
        pooled = verdict["pooled"]
        lines.append(f"pooled over {pooled['cells']} cells: stored scores exceed their re-runs by "
                     f"{pooled['mean_excess']:+.3f} on average (tolerance {pooled['tolerance']:.3f}): "
                     + ("agrees" if pooled["agrees"] else "MISMATCH"))
    if verdict.get("retrained"):
        lines.append("re-trained cells (trained in the agent's process, evaluated here):")
        lines.append(f"{'cell':<16} {'eval stored':>11} {'re-run':>7} {'train stored':>12} {'re-run':>7}  "
                     "rule / outcome")
        for row in verdict["retrained"]:
            cell = f"{track.sweep.column(row['value'])} seed {row['seed']}"
            outcome = row["outcome"] + ("" if row["outcome"] != NOT_REPRODUCED else
                                        f" ({row.get('reason', '')}{'' if row['conclusive'] else '; not conclusive on another backend'})")
            if row.get("rerun_status") == "ok" and row.get("stored_status") == "ok":
                lines.append(f"{cell:<16} {row['eval_stored']:>11.3f} {row['eval_rerun']:>7.3f} "
                             f"{row['train_stored']:>12.3f} {row['train_rerun']:>6.3f}*  {row['rule']}: {outcome}")
            else:
                lines.append(f"{cell:<16} stored {row['stored_status']}, re-run {row['rerun_status']}: {outcome}")
        lines.append("* training score counted in the agent's process (JAX tier): self-reported (its counters sealed "
                     f"against edits after stepping); {track.score.name} in evaluation is counted here")
    if jax_tier:
        summary = verdict["training"]
        lines.append(f"training: {summary['sampled']} of {summary['cells']} cells re-trained: {summary['exact']} "
                     f"reproduced exactly, {summary['within_spread']} within the seeds' spread, "
                     f"{summary['not_reproduced']} not reproduced ({summary['conclusive_failures']} conclusively); "
                     f"a cell whose policy was trained otherwise escapes this sample with probability "
                     f"{summary['unsampled_escape']:.2f}")
    if verdict.get("note"):
        lines.append(f"note: {verdict['note']}")
    isolated = verdict.get("isolation")
    if isinstance(isolated, dict):
        mode = isolated.get("mode", "separate user" if isolated.get("separate_user") else UNSANDBOXED)
        lines.append(f"isolation: {mode.upper() if mode == UNSANDBOXED else mode}, as {isolated.get('user')}"
                     + (f" (not a stronger mode: {isolated['reason']})" if isolated.get("reason") else "")
                     + "".join(f"\n  - in force: {line}" for line in isolated.get("in_force") or [])
                     + "".join(f"\n  - it could still: {line}" for line in isolated.get("unprotected") or []))
    if verdict.get("cells"):
        counts = (f"evaluation {verdict.get('agreeing', 0)}/{len(verdict['cells'])} cells agree" if jax_tier else
                  f"{verdict.get('agreeing', 0)}/{len(verdict['cells'])} re-run cells agree")
        if jax_tier:
            counts += (f", training {verdict['training']['exact'] + verdict['training']['within_spread']}/"
                       f"{verdict['training']['sampled']} reproduced")
        lines.append(f"verdict: {verdict['verdict'].upper()} ({counts})")
    else:
        lines.append(f"verdict: {verdict['verdict'].upper()}")
    return "\n".join(lines)
