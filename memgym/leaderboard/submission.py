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

from memgym.leaderboard.code_identity import COMPUTATION, code_hash, code_modules
from memgym.leaderboard.limits import LIMITS
from memgym.leaderboard.protocol import agent_id, entry_points, parse_spec
from memgym.leaderboard.sandbox import UNSANDBOXED
from memgym.leaderboard.store import CURVE_POINTS, ResultsStore, backend, provenance, result_order
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
    planned = {(value, seed) for value in budget.values for seed in budget.seed_range}
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
        if stored != digest and not _computation_decides(record):
            changed = sorted(name for name in set(modules) | set(record.get("agent_info", {}).get("code_modules", {}))
                             if modules.get(name) != record.get("agent_info", {}).get("code_modules", {}).get(name))
            problems.append(f"record {where} was produced by other code than the submission holds (code_sha256 "
                            f"{str(stored)[:12]}… recorded, {digest[:12]}… now; changed: "
                            f"{', '.join(changed) or 'the hash itself'})")
            continue
        cell = (record[track.sweep.name], record["seed"])
        if cell not in planned:
            problems.append(f"record {where} is of {track.sweep.column(cell[0])} seed {cell[1]}, outside the grid of "
                            f"preset {budget.name!r} ({len(budget.values)} values x seeds {budget.seed_range[0]}-{budget.seed_range[-1]})")
            continue
        inconsistent = _inconsistency(record, track, budget)
        if inconsistent:
            problems.append(f"record {where} contradicts itself: {inconsistent}")
            continue
        unusable = _policy_problem(record)
        if unusable:
            problems.append(f"record {where} {unusable}")
        present.add(cell)
    missing = sorted(planned - present, key=lambda c: (track.sweep.index(c[0]), c[1]))
    if missing:
        problems.append("planned cells without a result: " + ", ".join(
            f"{track.sweep.column(v)} seed {s}" for v, s in missing))
    return problems


def _computation_decides(record: dict[str, Any]) -> bool:
    """Whether a record of other code than the submission holds may still be of the same agent: a JAX-tier
    record with a computation hash, which the verification compares with what the code computes (traced in
    the agent's process, :func:`_computation_problems`), since code can move without computing otherwise."""
    return record.get("tier") == "jax" and isinstance(record.get("agent_info", {}).get(COMPUTATION), str)


def _computation_problems(submission: Submission, results: dict[tuple[Any, int], dict[str, Any]],
                          computed: dict[Any, str]) -> list[str]:
    """The records made by other code than the submission holds whose computation hash is not what the code
    computes (``computed``: per env, ``Track.env_key``, from the agent's process)."""
    digest, track, problems = code_hash(submission.code_modules()), submission.track, []
    for cell, record in sorted(results.items(), key=lambda item: (track.sweep.index(item[0][0]), item[0][1])):
        info = record.get("agent_info", {})
        now = computed.get(track.env_key(cell[0]))
        if info.get("code_sha256") != digest and now is not None and info.get(COMPUTATION) != now:
            problems.append(f"record {_relative(Path(record['path']), submission)} was produced by other code than "
                            f"the submission holds (code_sha256 {str(info.get('code_sha256'))[:12]}… recorded, "
                            f"{digest[:12]}… now), which computes something else (computation_sha256 "
                            f"{str(info.get(COMPUTATION))[:12]}… recorded, {now[:12]}… now)")
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


def _policy_problem(record: dict[str, Any]) -> str | None:
    """What keeps an ``ok`` JAX-tier record's stored policy from being evaluated (:mod:`~memgym.leaderboard.policies`):
    none stored, or a file that is missing, altered, too large or not of the format."""
    from memgym.leaderboard.policies import PolicyError, read

    if record["status"] != "ok" or record.get("tier") != "jax":
        return None
    if "policy" not in record:
        return ("stores no trained policy: a JAX-tier submission carries each cell's trained parameters, which "
                "memgym leaderboard run stores beside its records since records carry a backend fingerprint; "
                "run the cells again with this memgym")
    try:
        read(record["path"], record["policy"])
    except PolicyError as error:
        return str(error)
    return None


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


def _window_score(train: dict[str, Any], track: Track) -> float:
    return train[f"window_{track.score.total}"] / train["window_episodes"] if train["window_episodes"] else 0.0


def compare(stored: dict[str, Any], rerun: tuple[dict, dict] | str, track: Track, *, exact: bool,
            z: float) -> dict[str, Any]:
    """One re-run cell of the any-framework tier (trained and evaluated here, counted by the harness): the
    stored record against its re-run (``(train counters, evaluation)`` or a failure reason).

    ``exact`` (``--exact``): the re-run must equal the record; otherwise each score must lie within
    :func:`tolerance` of the stored one.
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
    window = _window_score(train, track)
    row |= {"rerun_status": "ok", "eval_stored": stored["eval"][name], "eval_rerun": evaluation[name],
            "train_stored": stored["train"][name], "train_rerun": window}
    if exact:
        same_train = all(stored["train"].get(k) == v for k, v in train.items())
        same_eval = all(stored["eval"].get(k) == v for k, v in evaluation.items())
        row |= {"rule": "exact (--exact)", "eval_tolerance": 0.0, "train_tolerance": 0.0,
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
    from memgym.leaderboard.policies import content_hash

    name = track.score.name
    row = _cell(stored, track) | {"conclusive": exact}
    if isinstance(rerun, str) or stored["status"] != "ok":
        row["rerun_status"] = "failed" if isinstance(rerun, str) else "ok"
        row["reason"] = rerun if isinstance(rerun, str) else stored.get("reason", "")
        same = row["rerun_status"] == stored["status"]
        return row | {"rule": "a failed cell must fail again" if stored["status"] != "ok" else "the re-run failed",
                      "outcome": (REPRODUCED if exact else WITHIN_SPREAD) if same else NOT_REPRODUCED}
    train, evaluation, leaves = rerun
    window = _window_score(train, track)
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
    from memgym.leaderboard import isolation, sandbox

    limits = sandbox.Limits.for_cells(submission.budget.total_steps, 1 if tier == "any" else len(sample) + 1,
                                      cell_timeout, memory_limit)
    protection = isolation.protection(submission.spec, submission.code_dir, [submission.root], limits, unsandboxed)
    log(f"[{submission.name}] the agent's process runs sandboxed as {protection['mode']!r}: "
        + "; ".join(protection["in_force"]))
    if tier == "any":
        log(f"[{submission.name}] re-running {len(sample)} of {len(cells)} cells (sample seed {sample_seed}; the "
            f"agent in a child process, counted here): {drawn}")
        reruns = _rerun_any(submission, sample, cell_timeout, limits, unsandboxed, log)
        rows = [compare(results[cell], rerun, track, exact=exact, z=z) for cell, rerun in zip(sample, reruns)]
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


def _rerun_any(submission: Submission, sample: list[tuple[Any, int]], cell_timeout: float | None,
               limits: Any, unsandboxed: bool, log: Callable[[str], None]) -> list[tuple[dict, dict] | str]:
    """The sampled cells of an any-framework agent re-run with the agent in a child process (one per cell, in the
    sandbox, :class:`~memgym.leaderboard.isolation.AgentProcess`) and counted here; per cell its outcome or failure
    reason."""
    from memgym.leaderboard import any_tier, isolation
    from memgym.leaderboard.planning import NUM_ENVS

    track, budget = submission.track, submission.budget
    outcomes: list[tuple[dict, dict] | str] = []
    for value, seed in sample:
        started = time.perf_counter()
        deadline = math.inf if cell_timeout is None else started + cell_timeout
        try:
            with isolation.AgentProcess(submission.spec, submission.code_dir, protect=[submission.root],
                                        limits=limits, unsandboxed=unsandboxed) as process, \
                    any_tier._alarm(cell_timeout):
                agent = isolation.RemoteAgent(process, track, value, seed, budget.total_steps, NUM_ENVS)
                train = any_tier.train(agent, track, budget, value, seed, NUM_ENVS, deadline)
                outcomes.append((train, any_tier.evaluate(agent, track, budget, value, NUM_ENVS, deadline)))
        except (any_tier.CellFailure, isolation.AgentProcessError) as error:
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
    from memgym.leaderboard import isolation, policies
    from memgym.leaderboard.jax_tier import cell_outcome, evaluation_figures
    from memgym.leaderboard.planning import NUM_ENVS
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
                figures = f"record {_relative(Path(record['path']), submission)}: {error}"
            except Exception as error:  # noqa: BLE001 - the exported act cannot evaluate this policy
                figures = f"the stored policy cannot be evaluated ({type(error).__name__}: {str(error)[:300]})"
            rows.append(compare_evaluation(record, figures, track, z=z,
                                           exact=exact or (repeatable and same_backend(record, here))))
        log(f"[{submission.name}] evaluated {len(rows)} stored policies here in {time.perf_counter() - started:.0f}s "
            f"({sum(r['agrees'] for r in rows)} agree)")
        by_value: dict[Any, list[int]] = defaultdict(list)
        for value, seed in sample:
            by_value[value].append(seed)
        spread = spreads(results, track)
        for value, seeds in by_value.items():
            started = time.perf_counter()
            seal = seal_weights()
            cells = [(value, seed) for seed in seeds]
            # XLA's numerics depend on the batch's size: `run` trains a value's seeds in one batch, so the
            # sampled cells are padded (repeating the last) to that size, as the padding for devices does
            batch = cells + [cells[-1]] * (budget.seeds - len(cells))
            outcomes: dict[tuple[Any, int], Any] = {}
            try:
                trained = isolation.train_jax(process, track, budget, batch, seal,
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
