"""Submissions by pull request: ``submissions/<name>/`` holds an agent, its metadata and the results store of
its run; :func:`offline_problems` checks one before any compute and :func:`verify` re-runs a random sample
of its cells where the submitted code cannot reach the counting (:mod:`~memgym.leaderboard.isolation`).

The format, the tolerances and what is and is not protected: docs/submitting.md ("Submitting by pull
request").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import re
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memgym.leaderboard.code_identity import code_hash, code_modules
from memgym.leaderboard.limits import LIMITS
from memgym.leaderboard.protocol import agent_id, entry_points, parse_spec
from memgym.leaderboard.store import CURVE_POINTS, ResultsStore, provenance, result_order
from memgym.leaderboard.tracks import TRACKS, Preset, Track
from memgym.validation import check_number, check_real

METADATA = "submission.json"
VERIFICATION = "verification.json"
TEXT_FIELDS = ("framework", "licence", "hardware")
COMPILED = (".pyc", ".pyo", ".so", ".pyd", ".dylib")  # importable code that is not a source file
DERIVED = {"LEADERBOARD.md", "index.html", "board.json", "success_by_length.png", "learning_curves.png"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_LINK = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/?#=&+:@-]*)?$")
_MARKUP = re.compile(r"[<>\[\]|`\\\x00-\x1f\x7f]")
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}  # Unicode categories a reader cannot see as text
Z = 3.0  # the default statistical tolerance, in standard errors


class SubmissionError(ValueError):
    """A submission that cannot be read or checked; ``problems`` says everything that is wrong with it."""

    def __init__(self, path: Path, problems: list[str]):
        super().__init__(f"submission {path}: " + "; ".join(problems))
        self.problems = problems


@dataclasses.dataclass(frozen=True)
class Submission:
    """A checked ``submission.json`` and the paths it names (all inside ``root``)."""

    root: Path
    meta: dict[str, Any]
    track: Track
    code_dir: Path | None
    results_dir: Path

    @property
    def name(self) -> str:
        return self.meta["name"]

    @property
    def spec(self) -> str:
        return self.meta["agent"]

    @property
    def budget(self) -> Preset:
        """The submission's budget: its named preset, or (``<preset>+custom``) the budget its records carry."""
        name = self.meta["preset"]
        if name in self.track.presets:
            return self.track.presets[name]
        for record in self.track.records(self.store()):
            if record["preset"].get("name") == name:
                try:
                    budget = self.track.budget_from_record(record["preset"])
                    for flag, number in (("--seeds", budget.seeds), ("--eval-episodes", budget.eval_episodes),
                                         ("--steps", budget.total_steps)):
                        check_number(flag, number, LIMITS[flag])
                    self.track.check(budget)
                except (TypeError, ValueError, KeyError) as error:
                    raise ValueError(f"the budget of preset {name!r} in {record['path']} is not one memgym runs "
                                     f"({error})") from None
                return budget
        raise ValueError(f"no record carries the budget of preset {name!r}")

    def store(self) -> ResultsStore:
        return self.track.store(self.results_dir)

    def module(self) -> str:
        """The module of the agent's factory, found without importing it (entry point or ``module:factory``)."""
        base = parse_spec(self.spec)[0]
        if ":" in base:
            return base.partition(":")[0]
        return entry_points()[base].value.partition(":")[0]

    def code_modules(self) -> dict[str, str]:
        """The SHA-256 of each module of the agent's code, read from the files (the code is not imported)."""
        return code_modules(self.module(), search_path=None if self.code_dir is None else [self.code_dir])


def load(path: str | os.PathLike) -> Submission:
    """Read and check ``path/submission.json`` and the submission's paths; :class:`SubmissionError` lists every
    problem found."""
    root = Path(path)
    problems: list[str] = []
    if root.is_symlink() or not root.is_dir():
        raise SubmissionError(root, [f"{root} is not a directory"])
    resolved = root.resolve()
    if resolved.parent.name != "submissions":
        problems.append(f"a submission lives in a directory named submissions/, not in {resolved.parent.name}/")
    for folder, dirs, files in os.walk(resolved):
        for entry in [*dirs, *files]:
            where = (Path(folder) / entry).relative_to(resolved)
            if (Path(folder) / entry).is_symlink():
                problems.append(f"{where} is a symbolic link; a submission holds its files itself")
            elif entry.endswith(COMPILED) and "__pycache__" not in where.parts:
                problems.append(f"{where} is compiled code, which the code hash cannot cover; submit sources")
    try:
        meta = json.loads((root / METADATA).read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise SubmissionError(root, problems + [f"{METADATA} cannot be read ({type(error).__name__}: "
                                                f"{str(error)[:200]})"]) from None
    if not isinstance(meta, dict):
        raise SubmissionError(root, problems + [f"{METADATA} holds a {type(meta).__name__}, not an object"])
    problems += _metadata_problems(meta, resolved.name)
    track = TRACKS.get(meta.get("track")) if isinstance(meta.get("track"), str) else None
    if track is not None and str(meta.get("preset")).removesuffix("+custom") not in track.presets:
        problems.append(f"preset {meta.get('preset')!r} is not a preset of track {track.name!r}; allowed: "
                        f"{', '.join(track.presets)} (or <preset>+custom, a grid changed by flags)")
    if isinstance(meta.get("package"), str):
        problems += _package_problems(meta["package"])
    code_dir = _inside(resolved, meta.get("code"), "code", problems) if "code" in meta else None
    results_dir = _inside(resolved, meta.get("results", "results"), "results", problems)
    if problems:
        raise SubmissionError(root, problems)
    return Submission(resolved, meta, track, code_dir, results_dir)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all different (JSON lets a later duplicate silently win)."""
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise ValueError(f"the key(s) {', '.join(map(repr, twice))} appear more than once")
    return dict(pairs)


def _plain(text: str) -> bool:
    """Text without markup characters, control or format characters (bidirectional overrides, zero-width
    spaces) and line or paragraph separators: what the board can show as it is."""
    return not _MARKUP.search(text) and not any(unicodedata.category(c) in _HIDDEN for c in text)


def load_all(directory: str | os.PathLike, track: Track) -> tuple[list[Submission], list[str]]:
    """The submissions of ``track`` under ``directory`` (each folder with a ``submission.json``) that pass the
    offline checks and, for each other folder, what is wrong with it."""
    found, problems = [], []
    for folder in sorted(Path(directory).iterdir()):
        if not (folder / METADATA).is_file():
            continue
        try:
            submission = load(folder)
        except SubmissionError as error:
            problems.append(str(error))
            continue
        if submission.track is not track:
            continue
        wrong = offline_problems(submission)  # a board counts only records that pass the offline checks
        if wrong:
            problems.append(f"submission {submission.root.name}: " + "; ".join(wrong))
        else:
            found.append(submission)
    return found, problems


def _metadata_problems(meta: dict[str, Any], directory: str) -> list[str]:
    problems = []
    required = {"name": str, "agent": str, "track": str, "preset": str, "authors": list, "link": str,
                "framework": str, "licence": str, "hardware": str}
    optional = {"code": str, "results": str, "package": str}
    for field, kind in required.items():
        if field not in meta:
            problems.append(f"{METADATA} lacks {field!r}")
        elif not isinstance(meta[field], kind) or not meta[field]:
            problems.append(f"{METADATA}: {field!r} must be a non-empty {kind.__name__}, got {meta[field]!r}")
    for field in set(meta) - set(required) - set(optional):
        problems.append(f"{METADATA}: unknown field {field!r}; allowed: {', '.join([*required, *optional])}")
    for field, kind in optional.items():
        if field in meta and not (isinstance(meta[field], kind) and meta[field]):
            problems.append(f"{METADATA}: {field!r} must be a non-empty {kind.__name__}, got {meta[field]!r}")
    if problems:
        return problems
    if not _NAME.match(meta["name"]):
        problems.append(f"name {meta['name']!r} must start with a-z or 0-9 and use only a-z 0-9 . _ - "
                        "(at most 64 characters)")
    elif meta["name"] != directory:
        problems.append(f"name {meta['name']!r} must equal the name of the submission's directory ({directory!r})")
    if "code" not in meta and "package" not in meta:
        problems.append(f"{METADATA} needs 'code' (the folder of the agent's code) or 'package' (the pip "
                        "requirement the agent comes from)")
    if meta["track"] not in TRACKS:
        problems.append(f"track {meta['track']!r} is not a track; allowed: {', '.join(TRACKS)}")
    if not _LINK.match(meta["link"]):
        problems.append(f"link {meta['link']!r} is not a plain http(s) URL")
    authors = meta["authors"]
    if len(authors) > 50 or not all(isinstance(a, str) and a for a in authors):
        problems.append("authors must be a list of at most 50 non-empty names")
    if len(meta["agent"]) > 200 or not _plain(meta["agent"].replace("[", "").replace("]", "")):
        problems.append(f"agent {meta['agent'][:80]!r} must be an agent spec of at most 200 characters, without "
                        "< > | ` \\ or control or invisible characters")
    texts = [*((f, meta[f]) for f in TEXT_FIELDS),
             *(("authors", a) for a in authors if isinstance(a, str)),
             *((f, meta[f]) for f in ("package", "code", "results") if f in meta)]
    for field, text in texts:
        if len(text) > 200 or not _plain(text):
            problems.append(f"{field} {text[:80]!r} must be plain text of at most 200 characters, without "
                            "< > [ ] | ` \\ or control or invisible characters (the board shows it as text, never as markup)")
    return problems


def _package_problems(requirement: str) -> list[str]:
    """Whether the installed packages satisfy ``package``, the pip requirement of an agent that comes from one."""
    from importlib import metadata

    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # packaging absent: the name alone is checked
        name, specifier = re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0], None
    else:
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement as error:
            return [f"package {requirement!r} is not a pip requirement ({error})"]
        name, specifier = parsed.name, parsed.specifier
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return [f"package {name!r} is not installed; install the submission's requirement first: "
                f"pip install '{requirement}'"]
    if specifier is not None and specifier and not specifier.contains(version, prereleases=True):
        return [f"package {name} {version} is installed, but the submission requires {requirement!r}"]
    return []


def _inside(root: Path, relative: Any, field: str, problems: list[str]) -> Path | None:
    """``root/relative`` if it is a directory inside ``root``; else a problem naming ``field``."""
    if not isinstance(relative, str):
        return None
    target = (root / relative).resolve()
    if Path(relative).is_absolute() or not target.is_relative_to(root) or target == root:
        problems.append(f"{field} {relative!r} escapes the submission's directory; it must name a folder inside it")
        return None
    if not target.is_dir():
        problems.append(f"{field} {relative!r} is not a directory of the submission")
        return None
    return target


def offline_problems(submission: Submission) -> list[str]:
    """Everything wrong with the submission's results, checked without running anything: unreadable records,
    records of another track, agent, budget or code, and planned cells without a result."""
    store, track = submission.store(), submission.track
    try:
        budget = submission.budget
    except ValueError as error:
        return [str(error)]
    problems = [f"record {_relative(path, submission)} cannot be read: {problem}"
                for path, problem in store.unreadable()]
    own = agent_id(submission.spec)
    for entry in sorted(submission.results_dir.iterdir()):
        if entry.name != own and entry.name not in DERIVED:
            problems.append(f"results/{entry.name} is not the agent's directory (results/{own}): a submission "
                            "holds the records of its own agent only")
    try:
        modules = submission.code_modules()
    except (KeyError, ImportError, ValueError) as error:
        return problems + [f"the agent's code cannot be found ({error})"]
    if not modules:
        problems.append(f"no source of the agent's module {submission.module()!r} was found"
                        + ("" if submission.code_dir is None else " in the submission's code folder"))
    digest = code_hash(modules)
    planned = {(value, seed) for value in budget.values for seed in range(budget.seeds)}
    present, expected_budget = set(), json.loads(json.dumps(track.budget_record(budget)))  # as records hold it
    try:
        records = list(track.records(store))
    except ValueError as error:
        return problems + [str(error)]
    for record in records:
        where = _relative(Path(record["path"]), submission)
        if record["agent"] != submission.spec or Path(record["path"]).parent.parent.name != own:
            problems.append(f"record {where} is of agent {record['agent']!r}, not of this submission's "
                            f"{submission.spec!r}")
            continue
        if record["preset"] != expected_budget:
            problems.append(f"record {where} has the budget of preset {record['preset'].get('name')!r} "
                            f"({record['preset']}), not preset {budget.name!r}'s")
            continue
        if int(record.get("version", 1)) != 1:
            problems.append(f"record {where} is version {record['version']} of the agent; a submission holds one")
            continue
        stored = record.get("agent_info", {}).get("code_sha256")
        if stored != digest:
            changed = sorted(name for name in set(modules) | set(record.get("agent_info", {}).get("code_modules", {}))
                             if modules.get(name) != record.get("agent_info", {}).get("code_modules", {}).get(name))
            problems.append(f"record {where} was produced by other code than the submission holds (code_sha256 "
                            f"{str(stored)[:12]}… recorded, {digest[:12]}… now; changed: "
                            f"{', '.join(changed) or 'the hash itself'})")
            continue
        cell = (record[track.sweep.name], record["seed"])
        if cell not in planned:
            problems.append(f"record {where} is of {track.sweep.column(cell[0])} seed {cell[1]}, outside the grid of "
                            f"preset {budget.name!r} ({len(budget.values)} values x seeds 0-{budget.seeds - 1})")
            continue
        inconsistent = _inconsistency(record, track, budget)
        if inconsistent:
            problems.append(f"record {where} contradicts itself: {inconsistent}")
            continue
        present.add(cell)
    missing = sorted(planned - present, key=lambda c: (track.sweep.index(c[0]), c[1]))
    if missing:
        problems.append("planned cells without a result: " + ", ".join(
            f"{track.sweep.column(v)} seed {s}" for v, s in missing))
    return problems


def _inconsistency(record: dict[str, Any], track: Track, budget: Preset) -> str | None:
    """What in an ``ok`` record disagrees with the rest of it, as the harness writes it: the training score is
    the window's successes over its episodes, the learning curve sums to the totals, the window lies within
    them, the evaluation has the budget's episodes."""
    if record["status"] != "ok":
        return None
    score, train, evaluation = track.score, record["train"], record["eval"]
    total, window = score.total, f"window_{score.total}"
    low, high = score.bounds
    try:
        curve = np.asarray(train["curve"], float)
        expected = train[window] / train["window_episodes"] if train["window_episodes"] else 0.0
        per_episode = 1.0 if score.counted else max(abs(low), abs(high))  # how much one episode can add
        checks = [
            (low <= evaluation[score.name] <= high and low <= train[score.name] <= high,
             f"a score outside the track's range [{low:g}, {high:g}]"),
            (not score.counted or abs(evaluation[score.name] * evaluation["episodes"]
                                      - round(evaluation[score.name] * evaluation["episodes"])) < 1e-6,
             f"eval {score.name} {evaluation[score.name]!r} is no count out of {evaluation['episodes']} episodes"),
            (abs(train[total]) <= per_episode * train["episodes"]
             and abs(train[window]) <= per_episode * train["window_episodes"]
             and (np.abs(curve[:, 1]) <= per_episode * curve[:, 0] + 1e-9).all() if curve.ndim == 2 else False,
             f"more {total} than episodes can give (in the totals, the window or the curve)"),
            (curve.shape == (CURVE_POINTS, 2), f"a learning curve of shape {curve.shape}, not ({CURVE_POINTS}, 2)"),
            (abs(train[score.name] - expected) <= 1e-9 * max(1.0, abs(expected)),
             f"train {score.name} {train[score.name]!r} is not {window} / window_episodes = {expected!r}"),
            (0 <= train["window_episodes"] <= train["episodes"] <= train["steps"],
             "train window_episodes <= episodes <= steps does not hold"),
            (curve.shape == (len(curve), 2) and curve[:, 0].sum() == train["episodes"]
             and abs(curve[:, 1].sum() - train[total]) <= 1e-6 * max(1.0, abs(train[total])),
             "the learning curve does not sum to the training totals"),
            (train["steps"] <= budget.total_steps, f"train steps {train['steps']} exceed the budget"),
            (evaluation["episodes"] == budget.eval_episodes,
             f"eval episodes {evaluation['episodes']} are not the budget's {budget.eval_episodes}"),
        ]
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as error:
        return f"its counters cannot be read ({type(error).__name__}: {error})"
    return next((message for ok, message in checks if not ok), None)


def _relative(path: Path, submission: Submission) -> str:
    try:
        return str(path.resolve().relative_to(submission.root))
    except ValueError:
        return str(path)


def digest(submission: Submission) -> str:
    """SHA-256 over every file of the submission but its verdict, the board files that ``run`` writes into its
    results folder (regenerated, PNGs differ by matplotlib) and Python's caches: what a verdict was reached on."""
    derived = {submission.root / VERIFICATION, *(submission.results_dir / name for name in DERIVED)}
    lines = [f"{hashlib.sha256(path.read_bytes()).hexdigest()} {json.dumps(str(path.relative_to(submission.root)))}"
             for path in sorted(p for p in submission.root.rglob("*") if p.is_file() and p not in derived
                                and "__pycache__" not in p.parts)]  # one line per file: nothing can shift
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def first_results(submission: Submission) -> dict[tuple[Any, int], dict[str, Any]]:
    """Each cell's counted result (its first ``ok`` one, else its first one), as the board counts it."""
    cells: dict[tuple[Any, int], list[dict[str, Any]]] = defaultdict(list)
    for record in submission.track.records(submission.store()):
        cells[(record[submission.track.sweep.name], record["seed"])].append(record)
    chosen = {}
    for cell, records in cells.items():
        records.sort(key=result_order)
        chosen[cell] = next((r for r in records if r["status"] == "ok"), records[0])
    return chosen


DETERMINISTIC_GPU = "--xla_gpu_deterministic_ops=true"


def reproducible_here(record: dict[str, Any], here: dict[str, Any]) -> bool:
    """Whether a re-run here must reproduce a JAX-tier record exactly: the same JAX and jaxlib, device kind,
    machine and CPU model, on a CPU (XLA's CPU code is deterministic) or on a GPU with the record's XLA_FLAGS
    holding ``--xla_gpu_deterministic_ops=true`` (the child re-runs with the record's flags; without
    them XLA's GPU reductions run in varying order and a re-run on the very same GPU diverges)."""
    theirs = record.get("provenance", {})
    same = all(theirs.get(k) == here.get(k) for k in ("jax", "jaxlib", "device", "machine", "cpu"))
    return same and (str(theirs.get("device", "")).lower() == "cpu"
                     or DETERMINISTIC_GPU in str(theirs.get("xla_flags", "")))


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


def compare(stored: dict[str, Any], rerun: tuple[dict, dict] | str, track: Track, *,
            exact: bool, z: float, self_reported_train: bool) -> dict[str, Any]:
    """One sampled cell: stored record against its re-run (``(train counters, evaluation)`` or a failure reason).

    ``exact``: the re-run must equal the record (a JAX-tier cell on the record's backend); otherwise
    each score must lie within :func:`tolerance`. ``self_reported_train``: the training figure was
    counted in the agent's process (JAX tier) and is compared but marked so.
    """
    name = track.score.name
    row: dict[str, Any] = {"value": stored[track.sweep.name], "seed": stored["seed"], "stored_status": stored["status"]}
    if isinstance(rerun, str) or stored["status"] != "ok":
        row["rerun_status"] = "failed" if isinstance(rerun, str) else "ok"
        row["reason"] = rerun if isinstance(rerun, str) else stored.get("reason", "")
        row["agrees"] = row["rerun_status"] == stored["status"]
        row["rule"] = "both must fail" if stored["status"] != "ok" else "the re-run failed"
        return row
    train, evaluation = rerun
    window = train[f"window_{track.score.total}"] / train["window_episodes"] if train["window_episodes"] else 0.0
    row |= {"rerun_status": "ok", "eval_stored": stored["eval"][name], "eval_rerun": evaluation[name],
            "train_stored": stored["train"][name], "train_rerun": window,
            "train_self_reported": self_reported_train}
    if exact:
        same_train = all(stored["train"].get(k) == v for k, v in train.items())
        same_eval = all(stored["eval"].get(k) == v for k, v in evaluation.items())
        row |= {"rule": "exact (same backend)", "eval_tolerance": 0.0, "train_tolerance": 0.0,
                "agrees": same_train and same_eval}
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


def verify(path: str | os.PathLike, *, k: int = 3, sample_seed: int | None = None, z: float = Z,
           cell_timeout: float | None = None, preset: str | None = None, exact: bool = False,
           log: Callable[[str], None] = print) -> dict[str, Any]:
    """Check the submission at ``path`` offline, then re-run ``k`` cells drawn with ``sample_seed`` (None: a
    fresh random seed, printed) out of the submission's reach and compare; the verdict is written to
    ``path/verification.json`` and returned.

    Verdicts: ``verified`` (every sampled cell agrees), ``mismatch`` (one does not) or
    ``malformed`` (the offline checks failed, nothing was run; or the files changed during the
    re-run). ``preset`` requires the submission's preset (CI: ``smoke``); ``exact`` requires
    every re-run to equal its record, whatever backend the records say they come from (their
    provenance is the submitter's word).
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    check_real("z", z, 0.0, include_low=False)
    if cell_timeout is not None:
        check_real("cell_timeout", cell_timeout, 0.0, include_low=False)
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
    log(f"[{submission.name}] offline checks passed: metadata, {len(results)} cells present, "
        f"records readable and of code {code_hash(submission.code_modules())[:12]}…")
    cells = sorted(results, key=lambda c: (submission.track.sweep.index(c[0]), c[1]))
    sample = sorted(random.Random(sample_seed).sample(cells, min(k, len(cells))),
                    key=lambda c: (submission.track.sweep.index(c[0]), c[1]))
    tier = next(r["tier"] for r in results.values())
    log(f"[{submission.name}] re-running {len(sample)} of {len(cells)} cells (sample seed {sample_seed}; "
        f"{tier} tier, the agent in a child process): "
        + ", ".join(f"{submission.track.sweep.column(v)} seed {s}" for v, s in sample))
    if tier == "jax" and not exact and not all(reproducible_here(results[cell], here) for cell in sample):
        made = results[sample[0]].get("provenance", {})
        base["note"] = (f"the records were made on {made.get('device')} (jax {made.get('jax')}, "
                        f"{made.get('cpu') or made.get('machine')}), this re-run is on {here.get('device')} (jax "
                        f"{here.get('jax')}, {here.get('cpu') or here.get('machine')}): a training run is repeated "
                        "exactly only on the same CPU type, or GPU with XLA_FLAGS="
                        f"{DETERMINISTIC_GPU}; elsewhere its float rounding differs, training takes another "
                        "path and the cells are compared statistically")
        log(f"[{submission.name}] note: {base['note']}")
    reruns = _rerun(submission, tier, sample, cell_timeout, log)
    rows = []
    for cell, rerun in zip(sample, reruns):
        stored = results[cell]
        rows.append(compare(stored, rerun, submission.track, exact=exact or (tier == "jax" and
                                                                             reproducible_here(stored, here)),
                            z=z, self_reported_train=tier == "jax"))
    agreeing = sum(r["agrees"] for r in rows)
    problems = [] if digest(submission) == before else [
        "the submission's files changed while it was being verified (by the agent's process?)"]
    bias = pooled_bias(rows, z)
    if bias is not None:
        base["pooled"] = bias
    verified = agreeing == len(rows) and not problems and (bias is None or bias["agrees"])
    verdict = base | {"verdict": "verified" if verified else ("malformed" if problems else "mismatch"),
                      "problems": problems, "cells": rows, "agreeing": agreeing,
                      "seconds": round(time.perf_counter() - started, 1)}
    _write_verdict(submission.root, verdict, submission, here)
    return verdict


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


def _rerun(submission: Submission, tier: str, sample: list[tuple[Any, int]], cell_timeout: float | None,
           log: Callable[[str], None]) -> list[tuple[dict, dict] | str]:
    """The sampled cells re-run with the agent in a child process; per cell its outcome or failure reason."""
    from memgym.leaderboard import any_tier, isolation
    from memgym.leaderboard.planning import NUM_ENVS

    track, budget = submission.track, submission.budget
    code_dir = submission.code_dir
    outcomes: list[tuple[dict, dict] | str] = []
    if tier == "any":
        for value, seed in sample:
            started = time.perf_counter()
            deadline = math.inf if cell_timeout is None else started + cell_timeout
            try:
                with isolation.AgentProcess(submission.spec, code_dir) as process, any_tier._alarm(cell_timeout):
                    agent = isolation.RemoteAgent(process, track, value, seed, budget.total_steps, NUM_ENVS)
                    train = any_tier.train(agent, track, budget, value, seed, NUM_ENVS, deadline)
                    outcomes.append((train, any_tier.evaluate(agent, track, budget, value, NUM_ENVS, deadline)))
            except (any_tier.CellFailure, isolation.AgentProcessError) as error:
                outcomes.append(str(error))
            log(f"[{submission.name}] {track.sweep.column(value)} seed {seed}: re-run in "
                f"{time.perf_counter() - started:.0f}s")
        return outcomes
    from memgym.leaderboard.jax_tier import cell_outcome
    from memgym.leaderboard.scoring import ScoredState, seal_weights

    by_value: dict[Any, list[int]] = defaultdict(list)
    for value, seed in sample:
        by_value[value].append(seed)
    results: dict[tuple[Any, int], tuple[dict, dict] | str] = {}
    flags = {r.get("provenance", {}).get("xla_flags") for r in first_results(submission).values()} - {None}
    environment = {"XLA_FLAGS": flags.pop()} if len(flags) == 1 else {}  # train as the run did
    with isolation.AgentProcess(submission.spec, code_dir, environment) as process:
        for value, seeds in by_value.items():
            started = time.perf_counter()
            seal = seal_weights()
            cells = [(value, seed) for seed in seeds]
            # XLA's numerics depend on the batch's size: `run` trains a value's seeds in one batch, so the
            # sampled cells are padded (repeating the last) to that size, as the padding for devices does
            batch = cells + [cells[-1]] * (budget.seeds - len(cells))
            try:
                trained = isolation.train_jax(process, track, budget, batch, seal,
                                              timeout=None if cell_timeout is None else cell_timeout * len(batch))
                agent = isolation.exported_agent(trained["act"], trained["carry"], NUM_ENVS)
                evaluate = isolation.exported_evaluator(agent, track, budget)
                for i, (cell, params) in enumerate(zip(cells, trained["params"])):
                    state = ScoredState(inner=None, **{n: c[i] for n, c in trained["counters"].items()})
                    evaluated = evaluate(value, cell[1], params)
                    results[cell] = cell_outcome(track, budget, state, seal, params, evaluated)
            except isolation.AgentProcessError as error:
                results.update({cell: str(error) for cell in cells})
            except Exception as error:  # noqa: BLE001 - what the agent's process sent cannot be evaluated here
                results.update({cell: f"the agent's process sent a training result that cannot be evaluated "
                                      f"({type(error).__name__}: {str(error)[:300]})" for cell in cells
                                if cell not in results})
            log(f"[{submission.name}] {track.sweep.column(value)} seeds {', '.join(map(str, seeds))}: trained in "
                f"the agent's process, evaluated here, in {time.perf_counter() - started:.0f}s")
    return [results[cell] for cell in sample]


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


def status(submission: Submission) -> str:
    """The board's ``verified`` cell: ``3/3`` (cells re-run / agreeing), ``mismatch 2/3``, ``malformed``,
    ``not verified`` (no verdict) or ``stale`` (files changed since the verdict)."""
    try:
        verdict = json.loads((submission.root / VERIFICATION).read_text())
    except (OSError, ValueError):
        return "not verified"
    if not isinstance(verdict, dict) or verdict.get("digest") != digest(submission):
        return "stale"
    if verdict.get("verdict") == "malformed":
        return "malformed"
    cells = verdict.get("cells") or []
    agreeing = sum(bool(c.get("agrees")) for c in cells if isinstance(c, dict))
    text = f"{agreeing}/{len(cells)}"
    return text if verdict.get("verdict") == "verified" else f"mismatch {text}"


def table(verdict: dict[str, Any], track: Track) -> str:
    """The per-cell table and the verdict, as ``verify`` prints them."""
    lines = []
    if verdict.get("problems"):
        lines += ["problems:", *(f"  - {p}" for p in verdict["problems"])]
    if verdict.get("cells"):
        score = track.score.name
        lines.append(f"{'cell':<16} {'eval stored':>11} {'re-run':>7} {'tol':>6} {'train stored':>12} "
                     f"{'re-run':>7} {'tol':>6}  rule / verdict")
        for row in verdict["cells"]:
            cell = f"{track.sweep.column(row['value'])} seed {row['seed']}"
            if row.get("rerun_status") == "ok" and row.get("stored_status") == "ok":
                train_mark = "*" if row.get("train_self_reported") else " "
                lines.append(f"{cell:<16} {row['eval_stored']:>11.3f} {row['eval_rerun']:>7.3f} "
                             f"{row['eval_tolerance']:>6.3f} {row['train_stored']:>12.3f} "
                             f"{row['train_rerun']:>6.3f}{train_mark} {row['train_tolerance']:>6.3f}  {row['rule']}: "
                             + ("agrees" if row["agrees"] else f"MISMATCH ({row.get('reason', '')})"))
            else:
                lines.append(f"{cell:<16} stored {row['stored_status']}, re-run {row['rerun_status']} "
                             f"({row.get('reason', '')}): " + ("agrees" if row["agrees"] else "MISMATCH"))
        if any(row.get("train_self_reported") for row in verdict["cells"]):
            lines.append("* training score counted in the agent's process (JAX tier): self-reported (its "
                         f"counters sealed against edits after stepping); {score} in evaluation is counted here")
    if verdict.get("pooled"):
        pooled = verdict["pooled"]
        lines.append(f"pooled over {pooled['cells']} cells: stored scores exceed their re-runs by "
                     f"{pooled['mean_excess']:+.3f} on average (tolerance {pooled['tolerance']:.3f}): "
                     + ("agrees" if pooled["agrees"] else "MISMATCH"))
    if verdict.get("note"):
        lines.append(f"note: {verdict['note']}")
    lines.append(f"verdict: {verdict['verdict'].upper()}" + (
        f" ({verdict.get('agreeing', 0)}/{len(verdict['cells'])} sampled cells agree)" if verdict.get("cells") else ""))
    return "\n".join(lines)
