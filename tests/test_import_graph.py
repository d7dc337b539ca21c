"""The import graph of memgym.leaderboard and memgym.agents (docs/architecture.md, "Stages and their imports").

Every import counts, those inside functions and under ``TYPE_CHECKING`` too: an import deferred into a function to
dodge a circle still runs back up. Read from the source with ``ast``; nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memgym

SOURCE = Path(memgym.__file__).parent

#: The leaderboard's stages as floors: a module imports only from its own floor's stage or from a floor below it.
#: The numbers in the stage docstrings follow a cell's path instead (tracks, running, scoring, store, boards,
#: submissions); docs/architecture.md draws both.
FLOORS = [
    {"protocol", "limits", "reference"},
    {"store"},
    {"tracks", "scoring"},
    {"running"},
    {"submissions"},
    {"boards"},
]


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (``memgym.leaderboard``) by dotted name; a package by its ``__init__``'s."""
    folder = SOURCE.joinpath(*package.split(".")[1:])
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = ["memgym", *path.relative_to(SOURCE).with_suffix("").parts]
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that the file at ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            candidates = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(name for name in candidates if name in known)
    return found


def graph(package: str) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(path, known) - {name} for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``edges``: each a path that returns to its start (depth-first search)."""
    found, state, path = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        path.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == "open":
                found.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", ["memgym.leaderboard", "memgym.agents"])
def test_no_import_circles(package):
    edges = graph(package)
    assert len(edges) > 10, f"{package}: found only {sorted(edges)}"
    assert circles(edges) == []


def stage(module: str) -> str:
    """The stage of a leaderboard module: its subpackage, or the module itself (``tracks``)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else ""


def test_every_leaderboard_module_has_a_floor_and_no_import_runs_back_up():
    floor = {name: level for level, names in enumerate(FLOORS) for name in names}
    edges = graph("memgym.leaderboard")
    unplaced = {stage(module) for module in edges} - set(floor) - {"", "cells", "track"}
    assert not unplaced, f"stages without a floor: {sorted(unplaced)}"
    upward = [(module, target) for module, targets in edges.items() for target in targets
              if stage(module) in floor and stage(target) in floor and floor[stage(target)] > floor[stage(module)]]
    assert upward == []


def test_each_stage_says_its_stage_on_its_first_line():
    for number, name in enumerate(("tracks", "running", "scoring", "store", "boards", "submissions"), start=1):
        path = modules("memgym.leaderboard")[f"memgym.leaderboard.{name}"]
        first = ast.get_docstring(ast.parse(path.read_text())).splitlines()[0]
        assert first.startswith(f"Stage {number}, "), (name, first)
