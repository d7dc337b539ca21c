"""Submissions by pull request, their format: ``submissions/<name>/`` holds an agent, its metadata and the
results store of its run; :func:`load` reads one and :func:`offline_problems` checks it before any compute.
Verifying it is :mod:`~memgym.leaderboard.submissions.verification`'s job; comparing a re-run with a record,
:mod:`~memgym.leaderboard.submissions.comparison`'s; the verdict on the board, :mod:`~memgym.leaderboard.submissions.verdict`'s.

The format, the tolerances and what is and is not protected: docs/submitting.md ("Submitting by pull
request").
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from memgym.deprecation import forward
from memgym.leaderboard.running.code_identity import COMPUTATION, code_hash, code_modules
from memgym.leaderboard.limits import LIMITS
from memgym.leaderboard.protocol import agent_id, entry_points, parse_spec
from memgym.leaderboard.store import CURVE_POINTS, ResultsStore, result_order
from memgym.leaderboard.tracks import TRACKS, Preset, Track
from memgym.validation import check_number

METADATA = "submission.json"
VERIFICATION = "verification.json"
TEXT_FIELDS = ("framework", "licence", "hardware")
COMPILED = (".pyc", ".pyo", ".so", ".pyd", ".dylib")  # importable code that is not a source file
DERIVED = {"LEADERBOARD.md", "index.html", "board.json", "success_by_length.png", "learning_curves.png"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_LINK = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/?#=&+:@-]*)?$")
_MARKUP = re.compile(r"[<>\[\]|`\\\x00-\x1f\x7f]")
_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}  # Unicode categories a reader cannot see as text


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
    problems = [f"record {relative(path, submission)} cannot be read: {problem}"
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
        where = relative(Path(record["path"]), submission)
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
        expected = score.window_score(train)
        per_episode = 1.0 if score.counted else max(abs(low), abs(high))  # how much one episode can add
        checks = [  # a score outside the track's range is refused on reading (the store's record checks)
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
    """What keeps an ``ok`` JAX-tier record's stored policy from being evaluated (:mod:`~memgym.leaderboard.store.policies`):
    none stored, or a file that is missing, altered, too large or not of the format."""
    from memgym.leaderboard.store.policies import PolicyError, read

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


def relative(path: Path, submission: Submission) -> str:
    """``path`` as messages name it: relative to the submission's folder where it lies inside it."""
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


# Names that memgym.leaderboard.submission (this module's old path) held before it was split by job.
__getattr__ = forward("memgym.leaderboard.submission", {
    **{name: f"memgym.leaderboard.submissions.comparison.{name}" for name in (
        "Z", "DETERMINISTIC_GPU", "same_backend", "tolerance", "compare", "compare_evaluation", "spreads",
        "compare_training", "pooled_bias", "REPRODUCED", "WITHIN_SPREAD", "NOT_REPRODUCED")},
    "verify": "memgym.leaderboard.submissions.verification.verify",
    **{name: f"memgym.leaderboard.submissions.verdict.{name}" for name in ("status", "table")},
})
