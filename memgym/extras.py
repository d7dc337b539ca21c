"""memgym's optional extras: which one a feature needs, and the error that names it.

``pip install memgym`` gives the environments alone; the extras of ``pyproject.toml``
(``[jax]``, ``[agents]``, ``[memax]``, ``[popgym]``, ``[memory-maze]``, ``[ray]``, …) add
what a feature needs. A feature whose extra is missing raises :class:`MissingExtra`,
which says what needed it, which module is missing and the ``pip install`` line, so a
missing extra fails only what uses it (an A2C agent with a GRU runs without memax). No
JAX here: any module may import it.
"""

from __future__ import annotations


class MissingExtra(ModuleNotFoundError):
    """``what`` needs memgym's ``extra``, and its module ``name`` cannot be imported."""

    def __init__(self, what: str, extra: str, name: str | None, detail: str = ""):
        self.what, self.extra = what, extra
        reason = f"module {name!r} is missing" if name else "it cannot be imported"
        message = f"{what} needs memgym's [{extra}] extra ({reason}{'; ' + detail if detail else ''}): {self.install}"
        super().__init__(message, name=name)

    @property
    def install(self) -> str:
        """The command that installs the extra."""
        return f'pip install "memgym[{self.extra}]"'


def missing(what: str, extra: str, error: ImportError) -> MissingExtra:
    """The :class:`MissingExtra` for ``error``, raised while importing what ``what`` needs from ``extra``."""
    if isinstance(error, MissingExtra):
        return error
    return MissingExtra(what, extra, getattr(error, "name", None), "" if error.name else str(error))
