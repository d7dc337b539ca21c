"""Which agent a record is of: the code an agent is (:func:`describe_code`), with its config
(:func:`describe_agent`), and, in the JAX tier, what it computes (:func:`computation_sha256`).

The code hash covers the factory's module and every module of its own package that it imports, read
from the source files (:func:`code_modules`). The computation hash covers the jaxprs of the agent's
``train`` on the track's environment and of its ``act``
(:func:`memgym.leaderboard.running.jax_tier.agent_computation`), canonicalised so that moving, renaming,
re-commenting or re-formatting code leaves it as it is. A run treats an agent as the same version as
stored records when either hash matches and the config is the same (:mod:`~memgym.leaderboard.running.planning`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.machinery
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memgym.leaderboard.protocol import entry_points, parse_spec

_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(:[A-Za-z_][\w.]*)?$")
#: The record field (in ``agent_info``) of a JAX-tier agent's :func:`computation_sha256`.
COMPUTATION = "computation_sha256"
# Equation parameters that name Python functions rather than say what is computed (a jitted function's name,
# custom-derivative rules and host callbacks, whose computation is traced into the jaxpr where it is used).
_NAMES = frozenset({"name", "jvp", "jvp_jaxpr_fun", "jvp_jaxpr_thunk", "bwd", "fwd_jaxpr_thunk", "callback"})
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")

def describe_code(spec: str, factory: Callable) -> dict[str, Any]:
    """Which code an agent is: its spec, factory, installed package and the hash of its code (:func:`code_hash`)."""
    module_name = getattr(factory, "__module__", None) or "?"
    info: dict[str, Any] = {"spec": spec, "factory": f"{module_name}:{getattr(factory, '__qualname__', '?')}"}
    entry = entry_points().get(parse_spec(spec)[0])
    if entry is not None and entry.dist is not None:
        info["package"] = f"{entry.dist.name} {entry.dist.version}"
    modules = code_modules(module_name)
    if modules:
        info["code_sha256"] = code_hash(modules)
        info["code_modules"] = modules
    return info


def describe_agent(spec: str, factory: Callable, agent: Any) -> dict[str, Any]:
    """:func:`describe_code` plus the agent's ``config`` dataclass, when it has one, as JSON values (a NumPy
    scalar or array in it, such as a space's ``n``, becomes a number or a list)."""
    info = describe_code(spec, factory)
    config = getattr(agent, "config", None)
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        info["config"] = json.loads(json.dumps(dataclasses.asdict(config), default=_json_value))
    return info


def _json_value(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)  # NumPy and JAX scalars and arrays
    if callable(tolist):
        return tolist()
    raise TypeError(f"its config holds {value!r}, which is not a JSON value (numbers, strings, lists, mappings)")


def code_hash(modules: dict[str, str]) -> str:
    """One SHA-256 (hex) over the per-module hashes of :func:`code_modules`."""
    text = "".join(f"{name}\0{digest}\n" for name, digest in sorted(modules.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def code_modules(module_name: str, search_path: Sequence[str | os.PathLike] | None = None) -> dict[str, str]:
    """SHA-256 (hex) of the source of every module of the agent's own code, by module name.

    The agent's code is the factory's module and, transitively, every module of
    the same top-level package that it imports (``import``/``from … import``
    statements anywhere in the source, function bodies included, relative ones
    resolved) or names in a string (``"pkg.module:Class"``, the entries of a
    registry that imports by name), together with the packages (``__init__``)
    that Python runs on the way, as far as their source files exist. The set is read from the sources,
    not from ``sys.modules``, so it does not depend on what else the process
    imported before or imports later (a lazy import inside ``train`` counts from
    the start). Modules imported by a name computed at run time are not followed.
    ``search_path``: find the top-level package in these directories (a submission's
    code folder) instead of from the imported module; nothing is imported either way.
    """
    top = module_name.split(".")[0]
    roots = _package_roots(top, search_path)
    if roots is None:
        return {}
    found: dict[str, str] = {}
    pending = [module_name]
    while pending:
        name = pending.pop()
        if name in found or not (name == top or name.startswith(top + ".")):
            continue
        path = _module_file(name, top, roots)
        if path is None:
            continue
        digest, imports, is_package = _read_module(str(path), *_stamp(path))
        found[name] = digest
        package = name if is_package else name.rpartition(".")[0]
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]  # the packages Python runs first
        for level, target, names in imports:
            if level:  # relative: from the module's package, ``level - 1`` packages up
                base = package.split(".")
                base = base[: len(base) - (level - 1)] if level > 1 else base
                target = ".".join([*base, *([target] if target else [])])
            pending.append(target)
            pending += [f"{target}.{n}" for n in names]  # ``from pkg import module`` imports a module
    return found


def _package_roots(top: str, search_path: Sequence[str | os.PathLike] | None = None
                   ) -> tuple[list[Path], bool] | None:
    """The directories of the top-level package (or the file of a top-level module): from its imported module,
    or (``search_path``, or not imported) from the import system's finder, which reads no module's code."""
    module = sys.modules.get(top) if search_path is None else None
    if module is None:
        spec = importlib.machinery.PathFinder.find_spec(top, None if search_path is None
                                                        else [str(p) for p in search_path])
        if spec is None:
            return None
        locations, file = spec.submodule_search_locations, spec.origin
    else:
        locations, file = getattr(module, "__path__", None), getattr(module, "__file__", None)
    if locations:
        return [Path(p) for p in locations], True
    return ([Path(file)], False) if file else None


def _module_file(name: str, top: str, roots: tuple[list[Path], bool]) -> Path | None:
    paths, is_package = roots
    if not is_package:
        return paths[0] if name == top and paths[0].suffix == ".py" and paths[0].is_file() else None
    rest = name.split(".")[1:]
    for root in paths:
        for candidate in (root.joinpath(*rest, "__init__.py"), root.joinpath(*rest).with_suffix(".py") if rest
                          else None):
            if candidate is not None and candidate.is_file():
                return candidate
    return None


def _stamp(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_mtime_ns, status.st_size


@functools.lru_cache(maxsize=4096)
def _read_module(path: str, mtime_ns: int, size: int) -> tuple[str, tuple[tuple[int, str, tuple[str, ...]], ...], bool]:
    """A source file's SHA-256 and its imports ``(level, module, names)``; cached per file version."""
    source = Path(path).read_bytes()
    imports: list[tuple[int, str, tuple[str, ...]]] = []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            imports += [(0, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports.append((node.level, node.module or "", tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.match(node.value):
            imports.append((0, node.value.partition(":")[0], ()))  # "pkg.module:attr" of a registry
    return hashlib.sha256(source).hexdigest(), tuple(imports), Path(path).name == "__init__.py"


def computation_sha256(*jaxprs: Any) -> str:
    """One SHA-256 (hex) of what ``jaxprs`` (``jax.make_jaxpr``'s closed jaxprs) compute, and nothing else.

    The hash reads a canonical text of each jaxpr (:func:`_canonical`): every equation's primitive, parameters,
    inputs and outputs with their shapes and dtypes, in dataflow order (:func:`_dataflow_order`), nested jaxprs
    written out in full, variables named by their place in that order, and no function names (jitted helpers, custom-derivative rules, host callbacks) or
    object addresses. It also reads the value (dtype, shape and bytes) of every constant a jaxpr closes over,
    nested ones included. So it changes when an equation, a shape, a dtype, a literal (a default, an
    initializer's gain, a reward) or a closed-over array changes, and not when code is moved, renamed,
    re-commented or re-formatted. (JAX's own printing is not canonical: it prints a sub-jaxpr that tracing
    reused from its caches once, by reference.) Tracing is JAX's, so another JAX version may trace the same code
    to another jaxpr: records keep their JAX version in their provenance.
    """
    digest = hashlib.sha256()
    for closed in jaxprs:
        constants: list[Any] = []
        text = _canonical(closed, constants)
        digest.update(len(text).to_bytes(8, "little") + text.encode())
        for value in constants:
            array = _array(value)
            header = f"{array.dtype.str}{array.shape}".encode()
            digest.update(len(header).to_bytes(8, "little") + header + array.tobytes())
    return digest.hexdigest()


def _canonical(jaxpr: Any, constants: list[Any]) -> str:
    """A jaxpr (closed or open) as text that depends on what it computes only; its constants (a closed jaxpr's,
    and its nested jaxprs' in order) are appended to ``constants``."""
    constants += list(getattr(jaxpr, "consts", ()))
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    names: dict[Any, str] = {}

    def atom(variable: Any) -> str:
        aval = variable.aval.str_short()
        if hasattr(variable, "val"):  # a literal
            return f"{_ADDRESS.sub('', repr(variable.val))}:{aval}"
        if type(variable).__name__ == "DropVar":
            return f"_:{aval}"
        return names.setdefault(variable, f"v{len(names)}:{aval}")

    def parameter(value: Any) -> str:
        if hasattr(value, "eqns") or hasattr(getattr(value, "jaxpr", None), "eqns"):
            return "{" + _canonical(value, constants) + "}"
        if isinstance(value, (tuple, list)):
            return "(" + ",".join(parameter(item) for item in value) + ")"
        if callable(value) and not isinstance(value, type):
            return "<function>"
        if hasattr(value, "item") and getattr(value, "shape", None) == ():  # np.int64(1) is 1
            value = value.item()
        return _ADDRESS.sub("", repr(value))

    lines = [" ".join(map(atom, jaxpr.constvars)) + " ; " + " ".join(map(atom, jaxpr.invars))]
    for equation in _dataflow_order(jaxpr):
        params = " ".join(f"{key}={parameter(value)}" for key, value in sorted(equation.params.items())
                          if key not in _NAMES)
        lines.append(f"{' '.join(map(atom, equation.outvars))} = {equation.primitive.name}[{params}] "
                     f"{' '.join(map(atom, equation.invars))}")
    lines.append("return " + " ".join(map(atom, jaxpr.outvars)))
    return "\n".join(lines)


def _dataflow_order(jaxpr: Any) -> list[Any]:
    """The equations that the outputs depend on, each after its inputs' equations, in the order a depth-first
    walk from the outputs meets them (then the equations with side effects, in their order, with what they
    need): an order that independent equations' order in the source does not change. Equations whose results
    nothing uses compute nothing and are left out."""
    producer = {id(variable): equation for equation in jaxpr.eqns for variable in equation.outvars}
    done: set[int] = set()
    order: list[Any] = []

    def visit(equation: Any) -> None:
        stack = [(equation, False)]
        while stack:
            current, expanded = stack.pop()
            if id(current) in done:
                continue
            if expanded:
                done.add(id(current))
                order.append(current)
                continue
            stack.append((current, True))
            for variable in reversed(current.invars):
                before = producer.get(id(variable))
                if before is not None and id(before) not in done:
                    stack.append((before, False))

    for variable in jaxpr.outvars:
        if id(variable) in producer:
            visit(producer[id(variable)])
    for equation in jaxpr.eqns:
        if equation.effects:
            visit(equation)
    return order


def _array(value: Any) -> Any:
    """A constant as a NumPy array (a typed PRNG key as its key data)."""
    import jax
    import numpy as np

    if hasattr(value, "dtype") and jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        value = jax.random.key_data(value)
    return np.asarray(value)
