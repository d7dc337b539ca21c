"""The options of a memory model class, read from the class itself: what :func:`memgym.memory.make` checks
and quotes.

An option is a dataclass field of the flax module (not flax's ``parent`` or ``name``); what it means is the
entry for it in an ``Attributes:`` section of the docstring of the class or one of its bases.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

_FLAX_FIELDS = ("parent", "name")  # dataclass fields every flax module has; not options


def options(cls: type) -> list[str]:
    """The options of the module class ``cls``: its dataclass fields but flax's ``parent`` and ``name``."""
    return [field.name for field in dataclasses.fields(cls) if field.name not in _FLAX_FIELDS]


def required_options(cls: type) -> list[str]:
    """The options of ``cls`` without a default, in declaration order."""
    return [
        field.name
        for field in dataclasses.fields(cls)
        if field.name not in _FLAX_FIELDS
        and field.default is dataclasses.MISSING
        and field.default_factory is dataclasses.MISSING
    ]


def option_descriptions(cls: type) -> dict[str, str]:
    """``{option: description}`` from the ``Attributes:`` sections of the docstrings of ``cls`` and its bases.

    An entry is a line ``name: text`` (or ``a, b: text`` for several options) at the first
    indentation under ``Attributes:``; deeper-indented lines continue it. reStructuredText
    backticks are dropped. The nearest class wins.
    """
    descriptions: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        lines = inspect.cleandoc(klass.__dict__.get("__doc__") or "").splitlines()
        if "Attributes:" not in lines:
            continue
        indent, names = None, []
        for line in lines[lines.index("Attributes:") + 1 :]:
            if not line.strip():
                continue
            depth = len(line) - len(line.lstrip())
            indent = depth if indent is None else indent
            if depth < indent or depth == 0:
                break  # the section ended
            entry = re.fullmatch(r"([\w, ]+):\s+(.*)", line.strip())
            if depth == indent and entry:
                names = [name.strip() for name in entry.group(1).split(",")]
                for name in names:
                    descriptions[name] = entry.group(2)
            else:
                for name in names:
                    descriptions[name] += " " + line.strip()
    return {name: text.replace("``", "").rstrip(".") for name, text in descriptions.items()}
