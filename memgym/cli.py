"""The ``memgym`` command.

    memgym envs                                  list the registered environments
    memgym play tmaze --corridor-length 10       play T-Maze in the terminal
    memgym demo --corridor-length 20             scripted vs random policy on T-Maze
    memgym train --algorithm a2c --memory arelit train an agent (T-Maze or any Gymnasium env)
    memgym leaderboard run|show|report|check|list  the leaderboards (--track tmaze | popgym-repeat-previous | popgym)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from memgym.leaderboard.limits import LIMITS, POSITIVE, STEPS
from memgym.validation import Limit, check_number


def _number(limit: Limit, flag: str = "value") -> Callable[[str], int | float]:
    """An argparse type: a number (``1e6`` allowed) within ``limit``; anything else is refused with the flag,
    the value and the range, before anything runs (:func:`memgym.validation.check_number`)."""

    def parse(text: str) -> int | float:
        try:
            return check_number(flag, text, limit)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _bounded(flag: str) -> Callable[[str], int | float]:
    """:func:`_number` with the range of ``flag`` in the leaderboard's ``LIMITS``."""
    return _number(LIMITS[flag], flag)


def _positive(flag: str) -> Callable[[str], int | float]:
    """:func:`_number`: a positive integer (``1e3`` allowed)."""
    return _number(POSITIVE, flag)


# ---------------------------------------------------------------------------------------
# memgym envs


def cmd_envs(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from memgym.envs import registered_ids

    rows = []
    for env_id in registered_ids():
        try:
            env = gym.make(env_id)
            rows.append((env_id, str(env.observation_space), str(env.action_space)))
            env.close()
        except (ImportError, RuntimeError) as error:  # an optional extra or its system library is missing
            rows.append((env_id, f"(unavailable: {error})", ""))
    width = max(len(r[0]) for r in rows)
    obs_width = max(len(r[1]) for r in rows)
    print(f"{'id':<{width}}  {'observation space':<{obs_width}}  action space")
    for env_id, obs, act in rows:
        print(f"{env_id:<{width}}  {obs:<{obs_width}}  {act}")
    return 0


# ---------------------------------------------------------------------------------------
# memgym play tmaze

_KEYS = {"w": 0, "s": 1, "a": 2, "d": 3, "\x1b[A": 0, "\x1b[B": 1, "\x1b[D": 2, "\x1b[C": 3}
_QUIT = "quit"


def read_keys(stream: TextIO) -> Iterator[str]:
    """Yield T-Maze key presses read from ``stream``: ``w/a/s/d`` and arrow-key escape
    sequences as themselves, ``quit`` for ``q``, Ctrl-C, Ctrl-D or end of input.
    Other characters are ignored."""
    while True:
        char = stream.read(1)
        if char in ("", "q", "Q", "\x03", "\x04"):
            yield _QUIT
            return
        if char == "\x1b":
            sequence = char + stream.read(2)
            if sequence in _KEYS:
                yield sequence
            continue
        if char.lower() in _KEYS:
            yield char.lower()


@contextmanager
def _cbreak(stream: TextIO) -> Iterator[None]:
    """Single-key input without echo while inside, when ``stream`` is a terminal."""
    if not stream.isatty():
        yield
        return
    import termios
    import tty

    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def play_tmaze(
    corridor_length: int,
    seed: int | None,
    keys: Iterator[str],
    write: Callable[[str], object],
    max_episode_steps: int = 1000,
) -> tuple[int, int]:
    """Play T-Maze from ``keys``; returns ``(episodes finished, successes)``."""
    from memgym.envs.tmaze import ACTION_NAMES, TMazeEnv

    env = TMazeEnv(corridor_length=corridor_length, max_episode_steps=max_episode_steps, render_mode="ansi")
    env.reset(seed=seed)
    episodes = successes = 0
    episode_return = 0.0
    write("T-Maze: remember the cue, walk up the corridor, turn the right way.\n")
    write("keys: w/up-arrow forward, s/down-arrow back, a/left-arrow left, d/right-arrow right, q quit\n\n")
    write(env.render())
    for key in keys:
        if key == _QUIT:
            break
        action = _KEYS[key]
        _, reward, terminated, truncated, info = env.step(action)
        episode_return += reward
        write(f"\n{ACTION_NAMES[action]}: reward {reward:+.1f}\n")
        write(env.render())
        if terminated or truncated:
            episodes += 1
            successes += int(info["success"])
            outcome = "correct turn!" if info["success"] else ("time out" if truncated else "wrong turn")
            write(f"\nEpisode over: {outcome}  return {episode_return:.1f}  ({successes}/{episodes} successes)\n")
            write("New episode.\n\n")
            env.reset()
            episode_return = 0.0
            write(env.render())
    write(f"\nBye: {successes}/{episodes} episodes won.\n")
    return episodes, successes


def cmd_play(args: argparse.Namespace) -> int:
    if args.game != "tmaze":
        print(f"memgym play: unknown game {args.game!r}; available: tmaze", file=sys.stderr)
        return 2
    try:
        with _cbreak(sys.stdin):
            play_tmaze(args.corridor_length, args.seed, read_keys(sys.stdin), sys.stdout.write)
    except KeyboardInterrupt:
        print("\nBye.")
    return 0


# ---------------------------------------------------------------------------------------
# memgym demo


def scripted_tmaze_policy(obs: np.ndarray, start: bool, memory: int, at_junction: bool) -> tuple[int, int]:
    """The optimal T-Maze policy: remember the cue, go up, turn to the cued side.
    Returns ``(action, memory)``; ``memory`` holds the goal side (0 left, 1 right)."""
    if start:
        memory = 1 if obs[0] == 1.0 else 0
    if at_junction:
        return 2 + memory, memory
    return 0, memory


def cmd_demo(args: argparse.Namespace) -> int:
    from memgym.envs.tmaze import TMazeEnv

    rng = np.random.default_rng(args.seed)
    print(f"T-Maze, corridor length {args.corridor_length}, {args.episodes} episodes per policy")
    print(f"{'policy':<10} {'success rate':>12} {'mean return':>12} {'mean length':>12}")
    for name in ("scripted", "random"):
        env = TMazeEnv(corridor_length=args.corridor_length)
        successes, returns, lengths = 0, [], []
        for episode in range(args.episodes):
            obs, _ = env.reset(seed=args.seed + episode)
            start, memory, done, total, steps = True, 0, False, 0.0, 0
            while not done:
                if name == "scripted":
                    at_junction = env.position == env.corridor_length - 1
                    action, memory = scripted_tmaze_policy(obs, start, memory, at_junction)
                else:
                    action = int(rng.integers(4))
                obs, reward, terminated, truncated, info = env.step(action)
                start, done = False, terminated or truncated
                total += reward
                steps += 1
            successes += int(info["success"])
            returns.append(total)
            lengths.append(steps)
        print(f"{name:<10} {successes / args.episodes:>12.2f} {np.mean(returns):>12.2f} {np.mean(lengths):>12.1f}")
    print("The scripted policy remembers the cue; the random one wanders, times out, and turns either way at random.")
    return 0


# --- leaderboard ---------------------------------------------------------------------------


def _values(text: str) -> list[str]:
    """Values of a track's swept parameter, separated by commas or spaces (the track parses them)."""
    values = text.replace(",", " ").split()
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated values, got {text!r}")
    return values


_steps = _number(STEPS)


def _board_text(results: str | None, track, submissions=()) -> str:
    """The ranked table of the store at ``results`` and ``submissions``; an empty board is refused
    (:func:`~memgym.leaderboard.boards.report.require_results`)."""
    from memgym.leaderboard.boards import report

    board = report.build_board(None if results is None else track.store(results), track, submissions)
    report.require_results(board, results)
    return report.markdown(board, track=track)


def _submissions(args: argparse.Namespace, track) -> list:
    """The submissions of ``--submissions DIR`` on ``track`` (each that cannot be read is reported and left out)."""
    from memgym.leaderboard.submissions.format import load_all

    if args.submissions is None:
        return []
    if not Path(args.submissions).is_dir():
        raise ValueError(f"--submissions {args.submissions!r} is not a directory")
    found, problems = load_all(args.submissions, track)
    for problem in problems:
        print(f"left off the board: {problem}", file=sys.stderr)
    return found


def _budget_and_results(args: argparse.Namespace, track, default_results: str):
    """The budget (``--preset`` with the budget flags) and a writable results directory of a command that runs cells."""
    from dataclasses import replace

    base = track.preset(args.preset)
    try:
        values = None if args.values is None else [track.sweep.parse(value) for value in args.values]
        if values is not None and len(set(values)) < len(values):
            raise ValueError("a value is named twice")
        if values is not None:
            track.check(replace(base, values=tuple(values)))
    except ValueError as error:
        raise ValueError(f"--values {','.join(args.values)}: {error}") from None
    budget = track.preset(args.preset, values=values, seeds=args.seeds, total_steps=args.steps,
                          eval_episodes=args.eval_episodes, first_seed=args.first_seed)
    results = args.results or default_results
    store = track.store(results)
    try:
        store.check_writable()
    except ValueError as error:
        raise ValueError(f"--results {results}: {error}") from None
    for path, problem in store.unreadable():
        print(f"unreadable record, kept and not counted: {path} {problem}", flush=True)
    return budget, results


def _announce(command: str, track, budget, results: str) -> None:
    print(f"{command} ({track.title}): preset {budget.name}, {track.sweep.plural.replace('_', ' ')} "
          f"{list(budget.values)}, {_seeds(budget)}, {budget.total_steps:,} steps per cell -> {results}",
          flush=True)


def _seeds(budget) -> str:
    """``5 seeds``, ``1 seed``, or ``5 seeds (100-104)`` for a preset whose seeds do not start at 0."""
    seeds = budget.seed_range
    counted = f"{budget.seeds} seed{'s' if budget.seeds != 1 else ''}"
    return counted + (f" ({seeds[0]}-{seeds[-1]})" if seeds[0] and len(seeds) > 1 else f" ({seeds[0]})" if seeds[0] else "")


def _backend(args: argparse.Namespace):
    backend = None
    if args.backend == "ray":
        from memgym.leaderboard.running.ray_backend import RayBackend

        if args.checkpoints is not None:
            raise ValueError("--checkpoints applies to --backend local only (a Ray task's folder is on its node)")
        backend = RayBackend(address=args.address, num_cpus=args.cpus_per_task, num_gpus=args.gpus_per_task)
    elif args.address is not None:
        raise ValueError("--address applies to --backend ray only")
    elif args.checkpoints is not None:
        from memgym.leaderboard.running.runner import LocalBackend

        if Path(args.checkpoints).exists() and not Path(args.checkpoints).is_dir():
            raise ValueError(f"--checkpoints {args.checkpoints}: it is a file, not a folder")
        backend = LocalBackend(checkpoints=args.checkpoints)
    return backend


def cmd_leaderboard_run(args: argparse.Namespace) -> int:
    from memgym.leaderboard.boards import report

    from memgym.leaderboard.running import runner
    from memgym.leaderboard import tracks
    track = tracks.get(args.track)
    budget, results = _budget_and_results(args, track, track.results_dir)
    backend = _backend(args)
    report.read_about(Path(results))  # the board written after training sets it: refused now, not then
    _announce("memgym leaderboard", track, budget, results)
    runner.run(args.agent, budget, results, track=track, log=lambda line: print(line, flush=True),
               cell_timeout=args.cell_timeout, repeat=args.repeat, backend=backend,
               new_version=args.new_version, policies=args.policies, seeds_per_batch=args.seeds_per_batch)
    written = report.write_report(results, track=track)
    print(_board_text(results, track))
    print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


def _numbers(text: str) -> list[float]:
    """Comma-separated positive numbers, e.g. ``1e-3,5e-4``, each once."""
    try:
        values = [float(part) for part in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers such as 1e-3,5e-4, got {text!r}") from None
    if not values or any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}")
    twice = sorted({v for v in values if values.count(v) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"{text!r} names {', '.join(f'{v:g}' for v in twice)} twice")
    return values


def cmd_leaderboard_tune(args: argparse.Namespace) -> int:
    from memgym.leaderboard import tracks

    from memgym.leaderboard.boards import tuning
    track = tracks.get(args.track)
    if args.preset is None and track.tuning_preset is None:
        raise ValueError(f"--preset: track {track.name!r} has no tuning preset; name one of "
                         f"{', '.join(track.presets)}")
    args.preset = args.preset or track.tuning_preset
    budget, results = _budget_and_results(args, track, f"{track.results_dir}-tuning")
    grid = {"learning_rate": tuple(args.learning_rates or tuning.THESIS_GRID["learning_rate"]),
            "entropy_coef": tuple(args.entropy_coefs or tuning.THESIS_GRID["entropy_coef"])}
    _announce("memgym leaderboard tune", track, budget, results)
    outcome = tuning.tune(args.agent, budget, results, grid=grid, track=track,
                          log=lambda line: print(line, flush=True), cell_timeout=args.cell_timeout,
                          backend=_backend(args), new_version=args.new_version, seeds_per_batch=args.seeds_per_batch)
    print(tuning.table(outcome, track))
    selected = outcome["selected"]
    if selected is None:
        print("no configuration has all its cells yet: nothing selected")
        return 1
    print(f"selected: {selected['spec']} (training {track.score.label} {selected['train_score']:.3f}); "
          f"wrote {outcome['path']}")
    return 0


def cmd_leaderboard_report(args: argparse.Namespace) -> int:
    from memgym.leaderboard.boards import report

    from memgym.leaderboard import tracks
    track = tracks.get(args.track)
    submissions = _submissions(args, track)
    results = args.results or (None if submissions else track.results_dir)
    written = report.write_report(results, args.out or track.report_dir, track=track, submissions=submissions,
                                  sources={"results": results, "submissions": args.submissions})
    print(_board_text(results, track, submissions))
    print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


def cmd_leaderboard_show(args: argparse.Namespace) -> int:
    from memgym.leaderboard import tracks

    track = tracks.get(args.track)
    submissions = _submissions(args, track)
    results = args.results or (None if submissions else track.results_dir)
    if results is not None and not Path(results).is_dir():
        raise ValueError(f"--results {results!r} is not a directory; run `memgym leaderboard run` first")
    print(_board_text(results, track, submissions))
    return 0


def _sample_size(text: str) -> int | str:
    """``verify --k``: a count of cells >= 0, or ``all``."""
    if text == "all":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--k {text!r} is not a number of cells; allowed: an int >= 0 or all") from None


def cmd_leaderboard_verify(args: argparse.Namespace) -> int:
    # this process and the agent's share an accelerator: neither takes most of its memory up front
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    from memgym.leaderboard import tracks
    from memgym.leaderboard.submissions.sandbox import SandboxUnavailable
    from memgym.leaderboard.submissions.format import VERIFICATION
    from memgym.leaderboard.submissions.verdict import table
    from memgym.leaderboard.submissions.verification import verify

    try:
        verdict = verify(args.submission, k=args.k, sample_seed=args.sample_seed, z=args.z,
                         cell_timeout=args.cell_timeout, preset=args.preset, exact=args.exact,
                         unsandboxed=args.unsandboxed, memory_limit=args.memory_limit)
    except SandboxUnavailable as error:  # nothing of the agent ran, no verdict written
        print(f"memgym leaderboard verify: {error}", file=sys.stderr)
        return 3
    track = tracks.TRACKS.get(verdict.get("track"), tracks.TMAZE)
    print(table(verdict, track))
    print(f"wrote {Path(args.submission) / VERIFICATION}")
    return 0 if verdict["verdict"] == "verified" else 1


def cmd_leaderboard_check(args: argparse.Namespace) -> int:
    from memgym.leaderboard import tracks
    from memgym.leaderboard.submissions.check import check_agent, check_cell, other_spaces

    track = tracks.get(args.track)
    value = None
    if args.value is not None:
        try:
            value, _ = check_cell(track, track.sweep.parse(args.value))
        except ValueError as error:
            raise ValueError(f"--value {args.value}: {error}") from None
    checked = track.check_cell[0] if value is None else value
    print(f"checking {args.agent} on track {track.name}, {track.sweep.name} {checked}")
    results = check_agent(args.agent, track=track, budget=args.steps, step_timeout=args.step_timeout, value=value)
    for name, passed, explanation in results:
        print(f"{'PASS' if passed else 'FAIL'}  {name}")
        if not passed:
            print("      " + explanation.strip().replace("\n", "\n      "))
    failed = sum(not passed for _, passed, _ in results)
    print(f"{len(results) - failed}/{len(results)} checks passed"
          + ("; the checks that build on a failed one were not run" if failed else ""))
    others = other_spaces(track, value)
    if others:
        print(f"checked on {checked}'s {type(track.spaces(checked)[1]).__name__} actions; the track's "
              f"{track.sweep.plural} also act in " + ", ".join(f"{kind} (e.g. {v})" for kind, v in others.items())
              + ": check those with --value " + " and --value ".join(map(str, others.values())))
    return 1 if failed else 0


def cmd_leaderboard_stamp(args: argparse.Namespace) -> int:
    from memgym.leaderboard import tracks
    from memgym.leaderboard.running.migration import stamp

    if not Path(args.results).is_dir():
        raise ValueError(f"--results {args.results!r} is not a directory")
    stamp(args.results, tracks.get(args.track))
    return 0


def cmd_leaderboard_list(args: argparse.Namespace) -> int:
    from memgym.extras import MissingExtra
    from memgym.leaderboard.protocol import entry_points, unavailable
    from memgym.leaderboard.tracks import TRACKS

    print("registered agents (entry point group memgym.agents):")
    for name, entry in sorted(entry_points().items()):
        try:
            error = unavailable(name)
        except (ValueError, TypeError) as broken:  # a registered agent that cannot be built: listed, not fatal
            error = broken
        why = "" if error is None else (
            f"  [unavailable: {error.install}]" if isinstance(error, MissingExtra) else f"  [unavailable: {error}]")
        print(f"  {name:24s} {entry.value}{why}")
    for track in TRACKS.values():
        print(f"track {track.name} ({track.title}; {' and '.join(track.tiers)} tier; results in {track.results_dir}):")
        for budget in track.presets.values():
            default = " (default)" if budget.name == track.default_preset else ""
            print(f"  {budget.name:16s} {track.sweep.plural.replace('_', ' ')} {list(budget.values)}, "
                  f"{_seeds(budget)}, {budget.total_steps:,} steps, eval {budget.eval_episodes} episodes{default}")
    return 0


# --- train ---------------------------------------------------------------------------------

TRAIN_FIXED = {"total_steps", "memory"}  # set by --steps, --memory
ALGORITHM_NAMES = ("a2c", "ppo", "dqn")  # memgym.agents.registry.ALGORITHMS, named here without importing JAX


def _segment_lengths(text: str) -> list[int]:
    return [_positive("--segment-lengths")(value) for value in _values(text)]


def cmd_experiment_run(args: argparse.Namespace) -> int:
    from memgym.experiments import tbb_vs_sbb

    study = tbb_vs_sbb.make_study(args.preset, tasks=args.tasks, models=args.models,
                                  segment_lengths=args.segment_lengths, seeds=args.seeds, total_steps=args.steps,
                                  eval_episodes=args.eval_episodes, sensitivity=not args.no_sensitivity)
    results = tbb_vs_sbb.run(study, args.results, log=lambda line: print(line, flush=True),
                             cell_timeout=args.cell_timeout, new_version=args.new_version)
    written = tbb_vs_sbb.write_report(results, args.out)
    print(written["markdown"].read_text())
    print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


def cmd_experiment_report(args: argparse.Namespace) -> int:
    from memgym.experiments import tbb_vs_sbb

    written = tbb_vs_sbb.write_report(args.results, args.out)
    print(written["markdown"].read_text())
    print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


def cmd_experiment_list(args: argparse.Namespace) -> int:
    from memgym.experiments import tbb_vs_sbb

    for study in tbb_vs_sbb.STUDIES.values():
        print(f"{study.name}: {study.description}")
    return 0


def _config_fields(cls) -> list:
    import dataclasses

    return [f for f in dataclasses.fields(cls) if f.name not in TRAIN_FIXED]


def _config_classes() -> dict[str, type]:
    """Each algorithm's config class, by name."""
    from memgym.agents.registry import ALGORITHMS

    return {name: config for name, (config, _) in ALGORITHMS.items()}


def train_setup(args: argparse.Namespace) -> tuple[Any, str]:
    """``(config, env id)`` of ``memgym train``: the config's defaults, then ``--preset``'s fields, then the flags."""
    from memgym.agents.config import TRAIN_PRESETS
    from memgym.agents.run import TMAZE_IDS

    if args.agent is not None:  # memgym 0.1's name of --algorithm
        print("memgym train: --agent is deprecated (it stops working in memgym 0.3): use --algorithm "
              f"{args.agent}", file=sys.stderr)
        if args.algorithm not in (None, args.agent):
            raise ValueError(f"--agent {args.agent} and --algorithm {args.algorithm} disagree; give --algorithm only")
    chosen = args.algorithm or args.agent
    algorithm, env, options = chosen or "a2c", args.env or TMAZE_IDS[0], {}
    if args.preset is not None:
        algorithm, env, options = TRAIN_PRESETS[args.preset]
        if chosen not in (None, algorithm):
            raise ValueError(f"--preset {args.preset} trains --algorithm {algorithm}, not --algorithm {chosen}")
        env, options = args.env or env, dict(options)
    classes = _config_classes()
    cls = classes[algorithm]
    allowed = {f.name for f in _config_fields(cls)}
    for name in {f.name for c in classes.values() for f in _config_fields(c)} | {"memory"}:
        value = getattr(args, name, None)
        if value is None:
            continue
        if name not in allowed | {"memory"}:
            raise ValueError(f"--{name.replace('_', '-')} does not apply to --algorithm {algorithm}")
        options[name] = value
    if args.steps is not None:
        options["total_steps"] = args.steps
    options.setdefault("memory", "arelit")
    options.setdefault("total_steps", 1_000_000)
    return cls(**options), env


def default_run_dir(env: str, config: Any, root: str | os.PathLike = "runs") -> Path:
    """A run directory that does not exist yet: ``runs/<env>__<algorithm>__<memory>__<date-time>`` (the
    CleanRL naming), with ``-2``, ``-3``, … appended when that name is taken."""
    from memgym.agents.registry import algorithm_name

    stamp = time.strftime("%Y%m%d-%H%M%S")
    parts = [env.rpartition("/")[2], algorithm_name(config), str(config.memory), stamp]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", "__".join(parts))
    candidate, n = Path(root) / name, 1
    while candidate.exists():
        n += 1
        candidate = Path(root) / f"{name}-{n}"
    return candidate


def cmd_train(args: argparse.Namespace) -> int:
    from memgym.agents.run import TMAZE_IDS, train_gymnasium, train_tmaze

    config, env = train_setup(args)
    if args.out is None:
        if args.resume:
            raise ValueError("--resume continues the run in --out: give --out RUN_DIR (the folder of the run)")
        args.out = str(default_run_dir(env, config))
    log = lambda line: print(line, flush=True)  # noqa: E731
    print(f"memgym train: {config} -> {args.out}", flush=True)
    if env in TMAZE_IDS:
        train_tmaze(config, args.out, corridor_length=args.corridor_length, max_episode_steps=args.max_episode_steps,
                    seeds=args.seeds, resume=args.resume, log=log)
        print(f"metrics: {args.out}/metrics.csv, checkpoint: {args.out}/checkpoint.npz")
        return 0
    # Any other Gymnasium env: a host loop per seed, each in its own directory.
    for seed in range(args.seeds):
        out = Path(args.out) / f"seed{seed}" if args.seeds > 1 else Path(args.out)
        log(f"--- {env}, seed {seed} -> {out}")
        train_gymnasium(config, env, out, seed=seed, resume=args.resume, log=log)
        print(f"metrics: {out}/metrics.csv, checkpoint: {out}/checkpoint.npz")
    return 0


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    """A flag per config field (of every ``--algorithm``), its help the field's docstring and default.

    A field of several configs is one flag; where their docs or defaults differ, the help
    gives each algorithm's.
    """
    from memgym.agents.config import field_docs

    classes = _config_classes()
    fields: dict[str, list] = {}
    for name, cls in classes.items():
        docs = field_docs(cls)
        for field in _config_fields(cls):
            fields.setdefault(field.name, []).append((name, field, docs.get(field.name, "")))
    for name, entries in fields.items():
        texts = [f"{doc} (default {field.default!r})".strip() for _, field, doc in entries]
        if len(set(texts)) == 1:
            help_text = texts[0]
        else:
            help_text = "; ".join(f"{algorithm}: {text}" for (algorithm, _, _), text in zip(entries, texts))
        if len(entries) < len(classes):
            help_text += f" [--algorithm {'/'.join(algorithm for algorithm, _, _ in entries)} only]"
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        field = entries[0][1]
        flag = f"--{name.replace('_', '-')}"
        if type(field.default) is bool:
            parser.add_argument(flag, type=lambda t: t.lower() in ("1", "true", "yes"), default=None, metavar="BOOL",
                                help=help_text)
        else:
            parser.add_argument(flag, type=type(field.default), default=None, help=help_text)


# ---------------------------------------------------------------------------------------


def _add_budget_flags(parser: argparse.ArgumentParser) -> None:
    """The harness flags of every command that runs cells: budget overrides, the cell timeout, versions."""
    parser.add_argument("--seeds", type=_bounded("--seeds"), default=None, help="training seeds per value (1-1000)")
    parser.add_argument("--steps", type=_bounded("--steps"), default=None,
                        help="training steps per cell, e.g. 1e6 (at most 2**31-1)")
    parser.add_argument("--eval-episodes", type=_bounded("--eval-episodes"), default=None,
                        help="evaluation episodes per cell (1-1000)")
    parser.add_argument("--cell-timeout", type=_bounded("--cell-timeout"), default=None, metavar="SECONDS",
                        help="wall-clock limit per cell; a slower cell is recorded as failed")
    parser.add_argument("--new-version", action="store_true",
                        help="an agent whose code or config changed since its cells were stored: record its cells "
                             "as its next version (a new row, NAME@v2) instead of refusing")


def _track_help() -> str:
    """``--track``'s help: every registered track's name."""
    from memgym.leaderboard.tracks import TRACKS  # no JAX

    return (" | ".join(f"{name} (default)" if name == "tmaze" else name for name in TRACKS)
            + "; each has its own board (`memgym leaderboard list` describes them)")


def _add_cell_flags(parser: argparse.ArgumentParser, results_default: str) -> None:
    """The flags of every leaderboard command that runs cells: track, results, values, budget, backend."""
    parser.add_argument("--track", default="tmaze", help=_track_help())
    parser.add_argument("--results", default=None, help=f"results directory (resumes if it exists; {results_default})")
    parser.add_argument("--values", "--corridor-lengths", dest="values", type=_values, default=None,
                        help="values of the track's swept parameter, e.g. 120,140,160 (tmaze corridor lengths), "
                             "Easy,Hard (popgym-repeat-previous) or RepeatFirstEasy,CountRecallEasy (popgym)")
    _add_budget_flags(parser)
    parser.add_argument("--first-seed", type=_bounded("--first-seed"), default=None,
                        help="the first training seed (seeds FIRST … FIRST + seeds − 1; default: the preset's, 0 for "
                             "every preset but a tuning one, whose seeds lie past the board's)")
    parser.add_argument("--seeds-per-batch", type=_bounded("--seeds-per-batch"), default=None, metavar="N",
                        help="train a JAX-tier agent's seeds of a value in vmapped batches of at most N (default: all "
                             "in one batch; on a 2-core CPU one seed alone trains faster per seed than three vmapped, "
                             "and a batch cut off loses only its seeds)")
    parser.add_argument("--checkpoints", default=None, metavar="DIR",
                        help="keep each JAX-tier batch's training state in DIR as it trains (every 5%% of its "
                             "updates) and resume a batch that was cut off from there: for cells too long for one "
                             "sitting, such as the thesis configuration on a CPU (local backend)")
    parser.add_argument("--backend", choices=["local", "ray"], default="local",
                        help="local: this process; ray: Ray tasks on a cluster (needs memgym[ray])")
    parser.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    parser.add_argument("--cpus-per-task", type=_bounded("--cpus-per-task"), default=1.0,
                        help="Ray: CPUs reserved per task")
    parser.add_argument("--gpus-per-task", type=_bounded("--gpus-per-task"), default=0.0,
                        help="Ray: GPUs reserved per task")


def build_parser(train_flags: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memgym", description="Memory tasks and agents for reinforcement learning.")
    sub = parser.add_subparsers(dest="command", required=True)

    envs = sub.add_parser("envs", help="list the registered environments and their spaces")
    envs.set_defaults(func=cmd_envs)

    play = sub.add_parser("play", help="play an environment in the terminal")
    play.add_argument("game", help="the game to play (tmaze)")
    play.add_argument("--corridor-length", type=_positive("--corridor-length"), default=10)
    play.add_argument("--seed", type=int, default=None)
    play.set_defaults(func=cmd_play)

    demo = sub.add_parser("demo", help="T-Maze with a scripted and a random policy")
    demo.add_argument("--corridor-length", type=_positive("--corridor-length"), default=20)
    demo.add_argument("--episodes", type=_positive("--episodes"), default=100)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=cmd_demo)

    train = sub.add_parser("train", help="train an agent on T-Maze or any Gymnasium env (progress, CSV log, "
                                         "checkpoints, curve)")
    from memgym.agents.config import TRAIN_PRESETS

    train.add_argument("--algorithm", choices=ALGORITHM_NAMES, default=None,
                       help="a2c, ppo or dqn (the fields of its config are the flags below; default a2c, or the "
                            "preset's)")
    train.add_argument("--agent", choices=ALGORITHM_NAMES, default=None, help=argparse.SUPPRESS)  # 0.1's --algorithm
    train.add_argument("--preset", default=None, choices=list(TRAIN_PRESETS),
                       help="a named setup of the thesis: the memory-maze-* presets are PPO with thesis Table A.3's "
                            "settings and a Table A.4 model, on memgym/MemoryMaze-11x11-v0 unless --env is given; "
                            "flags override its fields")
    train.add_argument("--memory", default=None,
                       help="a memory preset (e.g. arelit, gtrxl-256, tiny-gru) or model (default arelit, or the "
                            "preset's)")
    train.add_argument("--env", default=None,
                       help="memgym/TMaze-v0 (default; jitted, all seeds at once) or any registered Gymnasium env "
                            "with discrete actions, e.g. memgym/popgym-RepeatFirstEasy-v0 (host loop, seed by seed)")
    train.add_argument("--corridor-length", type=_positive("--corridor-length"), default=120, help="T-Maze only")
    train.add_argument("--max-episode-steps", type=_positive("--max-episode-steps"), default=1000, help="T-Maze only")
    train.add_argument("--steps", type=_steps, default=None,
                       help="environment steps per seed, e.g. 1e6 (default 1e6, or the preset's)")
    train.add_argument("--seeds", type=_positive("--seeds"), default=1, help="seeds trained together (vmap)")
    train.add_argument("--out", default=None,
                       help="run directory (default: a new one, runs/<env>__<algorithm>__<memory>__<date-time>; an "
                            "existing one is never reused without --resume)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its checkpoint")
    if train_flags:  # the config flags import the algorithms (and JAX): only for `memgym train`
        _add_config_flags(train)
    train.set_defaults(func=cmd_train)

    from memgym.leaderboard.limits import DEFAULT_STEP_TIMEOUT  # no JAX
    from memgym.leaderboard.tracks import TRACKS  # no JAX

    board = sub.add_parser("leaderboard", help="score agents on a track (default: T-Maze success across corridor "
                                                "lengths; also the POPGym tracks: `memgym leaderboard list`)")
    board_sub = board.add_subparsers(dest="leaderboard_command", required=True)
    run = board_sub.add_parser("run", help="train and evaluate agents; results are stored and never overwritten")
    run.add_argument("--agent", action="append", required=True,
                     help="'package.module:factory' or a registered name, optionally with options, e.g. "
                          "'a2c-arelit[learning_rate=5e-4]' (repeat for several agents)")
    run.add_argument("--preset", default=None,
                     help="default: the track's (tmaze: thesis, the thesis protocol: lengths 120-200, 10M steps, 50 "
                          "seeds, meant for a GPU). Presets: " + "; ".join(
                              f"{name}: {' | '.join(track.presets)}" for name, track in TRACKS.items())
                          + " (smoke: about a minute on a CPU; `memgym leaderboard list` gives each one's budget)")
    _add_cell_flags(run, "default: leaderboard-results for tmaze, leaderboard-results-<track> otherwise")
    run.add_argument("--repeat", action="store_true", help="run finished cells again (kept as repeats)")
    run.add_argument("--no-policies", dest="policies", action="store_false",
                     help="do not store each JAX-tier cell's trained parameters beside its record (they take "
                          "0.25 MiB per cell for the tiny agents, 6.9 MiB for the thesis-size AReLiT; a submission "
                          "needs them)")
    run.set_defaults(func=cmd_leaderboard_run)
    tune = board_sub.add_parser("tune", help="select an agent's learning rate and entropy coefficient as the thesis "
                                             "does (Table A.1 grid; cells stored like a board's)")
    tune.add_argument("--agent", required=True, help="an agent that takes options, e.g. a2c-arelit (see "
                                                     "`memgym leaderboard list`)")
    tune.add_argument("--preset", default=None, help="default: the track's tuning preset (tmaze: tune, the thesis "
                                                      "sweep: lengths 120-200, 5 seeds, 5M steps, for a GPU; POPGym "
                                                      "tracks: cpu-tune); or any preset of the track, e.g. smoke")
    tune.add_argument("--learning-rates", type=_numbers, default=None,
                      help="default: Table A.1, 1e-3,5e-4,1e-4,5e-5,1e-5")
    tune.add_argument("--entropy-coefs", type=_numbers, default=None,
                      help="default: Table A.1, 1e-1,1e-2,1e-3,1e-4,1e-5")
    _add_cell_flags(tune, "default: leaderboard-results-tuning for tmaze")
    tune.set_defaults(func=cmd_leaderboard_tune)
    show = board_sub.add_parser("show", help="print the ranked table of stored results")
    show.add_argument("--track", default="tmaze", help=_track_help())
    show.add_argument("--results", default=None, help="default: the track's results directory")
    show.add_argument("--submissions", default=None, metavar="DIR",
                      help="add the submissions under DIR (e.g. submissions), each a row with its verified status")
    show.set_defaults(func=cmd_leaderboard_show)
    rep = board_sub.add_parser("report", help="write LEADERBOARD.md, index.html, board.json and plots")
    rep.add_argument("--track", default="tmaze", help=_track_help())
    rep.add_argument("--results", default=None, help="default: the track's results directory")
    rep.add_argument("--out", default=None,
                     help="output directory (default: docs/leaderboard for tmaze, docs/leaderboard-<track> otherwise)")
    rep.add_argument("--submissions", default=None, metavar="DIR",
                     help="add the submissions under DIR (e.g. submissions), each a row with its verified status")
    rep.set_defaults(func=cmd_leaderboard_report)
    ver = board_sub.add_parser("verify", help="check a submission (submissions/<name>): evaluate every cell's stored "
                                              "policy here and re-train a random sample of its cells with the agent "
                                              "in a child process")
    ver.add_argument("submission", help="the submission's directory, submissions/<name>")
    ver.add_argument("--k", type=_sample_size, default=3,
                     help="cells to re-train, or 'all' (default 3; a JAX-tier submission's stored policies are all "
                          "evaluated whatever k is)")
    ver.add_argument("--sample-seed", type=int, default=None,
                     help="seed of the sample of cells (default: a fresh random one, printed and recorded)")
    ver.add_argument("--z", type=float, default=3.0,
                     help="statistical tolerance in standard errors (any-framework tier, other backends; default 3)")
    ver.add_argument("--cell-timeout", type=_bounded("--cell-timeout"), default=None, metavar="SECONDS",
                     help="wall-clock limit per re-run cell")
    ver.add_argument("--preset", default=None, help="require this preset of the submission (CI: smoke)")
    ver.add_argument("--exact", action="store_true",
                     help="require every evaluation and re-trained cell to equal its record (run on the hardware the "
                          "records were made on; their provenance is the submitter's word)")
    ver.add_argument("--memory-limit", type=_bounded("--memory-limit"), default=None, metavar="GIB",
                     help="address space of the agent's process, in GiB (default: 3/4 of the memory available, at "
                          "least 8; none with an accelerator)")
    ver.add_argument("--unsandboxed", action="store_true",
                     help="run the agent's code as your own user, with your privileges, where no sandbox works here "
                          "(bubblewrap, or a separate user as root); recorded in the verdict and shown on the board")
    ver.set_defaults(func=cmd_leaderboard_verify)
    chk = board_sub.add_parser("check", help="fast conformance check of a submission")
    chk.add_argument("agent")
    chk.add_argument("--track", default="tmaze", help=_track_help())
    chk.add_argument("--value", default=None, help="the cell's value of the track's swept parameter, e.g. a POPGym "
                                                  "task (its spaces differ by task); default: the track's check cell")
    chk.add_argument("--steps", type=_bounded("--steps"), default=None, help="training steps of the check (JAX tier)")
    chk.add_argument("--step-timeout", type=_bounded("--step-timeout"), default=DEFAULT_STEP_TIMEOUT,
                     metavar="SECONDS", help=f"wall-clock limit of each call into the agent (its factory, train, "
                                             f"initialize_carry, act, observe; a JAX call's time includes its compilation); "
                                             f"default {DEFAULT_STEP_TIMEOUT:g}")
    chk.set_defaults(func=cmd_leaderboard_check)
    stm = board_sub.add_parser("stamp", help="add what each JAX-tier agent computes to records made before memgym "
                                             "0.2 (which name their agent by code hash alone), where the installed "
                                             "code is the code that made them")
    stm.add_argument("--track", default="tmaze", help=_track_help())
    stm.add_argument("--results", required=True, help="the results directory (or a submission's results/)")
    stm.set_defaults(func=cmd_leaderboard_stamp)
    lst = board_sub.add_parser("list", help="registered agents, tracks and presets")
    lst.set_defaults(func=cmd_leaderboard_list)

    experiment = sub.add_parser("experiment", help="run a study of the papers (tbb-vs-sbb: the monoid paper §6)")
    studies = experiment.add_subparsers(dest="experiment", required=True)
    tbb = studies.add_parser("tbb-vs-sbb", help="recurrent DQN with tape- vs segment-based batching on POPGym "
                                                "(monoid paper Fig. 3, 5-6, Table 1)")
    tbb_sub = tbb.add_subparsers(dest="experiment_command", required=True)
    results_help = "results directory (resumes if it exists; default: tbb-vs-sbb-results)"
    out_help = "report directory (default: the results directory)"
    erun = tbb_sub.add_parser("run", help="train and evaluate the grid (results stored, never overwritten), "
                                          "then write the report")
    erun.add_argument("--preset", default="smoke",
                      help="smoke (a CPU, minutes) | cpu (Figure 6's grid, a CPU, hours) | paper (GPU); see `list`")
    erun.add_argument("--results", default=None, help=results_help)
    erun.add_argument("--out", default=None, help=out_help)
    erun.add_argument("--tasks", type=_values, default=None,
                      help="POPGym tasks (Easy), e.g. RepeatFirst,CountRecall (default: the preset's)")
    erun.add_argument("--models", type=_values, default=None,
                      help="memory models of ffm,s5,lru,linear_attention_monoid")
    erun.add_argument("--segment-lengths", type=_segment_lengths, default=None, help="SBB segment lengths, e.g. 10,50")
    _add_budget_flags(erun)
    erun.add_argument("--no-sensitivity", action="store_true", help="skip the Fig. 3 gradient analysis")
    erun.set_defaults(func=cmd_experiment_run)
    erep = tbb_sub.add_parser("report", help="write REPORT.md, study.json and the plots from stored results")
    erep.add_argument("--results", default="tbb-vs-sbb-results", help=results_help)
    erep.add_argument("--out", default=None, help=out_help)
    erep.set_defaults(func=cmd_experiment_report)
    elist = tbb_sub.add_parser("list", help="the presets")
    elist.set_defaults(func=cmd_experiment_list)
    return parser


#: the commands that compile training or evaluation: they use JAX's persistent compilation cache
#: (:mod:`memgym.compilation_cache`; ``MEMGYM_COMPILATION_CACHE`` moves or disables it). Not ``verify``: it
#: counts a submission's results in its own process, which must not load executables that a submitted
#: agent's code (run by ``run`` or ``check`` in the user's process) could have written into the cache.
COMPILING_COMMANDS = (cmd_train, cmd_leaderboard_run, cmd_leaderboard_tune, cmd_leaderboard_check,
                      cmd_experiment_run)


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    args = build_parser(train_flags="train" in words[:1]).parse_args(argv)
    try:
        if args.func in COMPILING_COMMANDS:
            from memgym import compilation_cache

            compilation_cache.enable()
        return args.func(args)
    except ValueError as error:  # bad configuration: say what is wrong, no traceback
        print(f"memgym {args.command}: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a file or folder the command cannot use (read-only, full, missing)
        where = f" ({error.filename})" if error.filename else ""
        print(f"memgym {args.command}: {error.strerror or error}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the user's Ctrl-C: what finished is kept, and saying so is all that is needed
        kept = (" (the cells that finished are stored; the same command resumes from them)"
                if getattr(args, "leaderboard_command", None) in ("run", "tune") else "")
        print(f"memgym {args.command}: interrupted{kept}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
