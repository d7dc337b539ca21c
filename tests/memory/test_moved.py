"""Names that moved within memgym.memory still import from their old paths until memgym 0.3, each with a
``DeprecationWarning`` naming the new path."""

from __future__ import annotations

import importlib
import re

import pytest

from memgym.memory import validation as old_validation

MOVED = sorted((name, new) for name, new in old_validation.MOVED.items() if isinstance(new, str))


@pytest.mark.parametrize("name, new", MOVED)
def test_old_validation_imports_warn_and_give_the_moved_name(name, new):
    with pytest.warns(DeprecationWarning, match=rf"^memgym\.memory\.validation\.{name} is now {re.escape(new)}; the old "
                                                r"name stops working in memgym 0\.3$"):
        moved = getattr(old_validation, name)
    module, _, attribute = new.rpartition(".")
    assert attribute == name and moved is getattr(importlib.import_module(module), attribute)


def test_check_chunk_size_still_checks_and_names_its_replacement():
    with pytest.warns(DeprecationWarning, match=r"now memgym\.validation\.check_optional_positive\(name, value, none_means\)"):
        check_chunk_size = old_validation.check_chunk_size
    check_chunk_size(None)
    check_chunk_size(4)
    with pytest.raises(ValueError, match=r"^chunk_size must be None \(one chunk\) or a positive integer, got chunk_size=0$"):
        check_chunk_size(0)


def test_a_name_that_never_was_there_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'nonexistent'"):
        old_validation.nonexistent  # noqa: B018


@pytest.mark.parametrize(
    "old, name, new",
    [("memgym.memory.s5", "s5_monoid", "memgym.memory.diagonal_ssm.diagonal_linear_monoid"),
     ("memgym.memory.s5", "complex_normal", "memgym.memory.diagonal_ssm.complex_normal"),
     ("memgym.memory.s5", "diagonal_linear_monoid", "memgym.memory.diagonal_ssm.diagonal_linear_monoid"),
     ("memgym.memory.lru", "lru_monoid", "memgym.memory.diagonal_ssm.diagonal_linear_monoid")],
)
def test_aliases_of_the_diagonal_monoid_forward_to_it(old, name, new):
    with pytest.warns(DeprecationWarning, match=rf"^{re.escape(old)}\.{name} is now {re.escape(new)};"):
        moved = getattr(importlib.import_module(old), name)
    module, _, attribute = new.rpartition(".")
    assert moved is getattr(importlib.import_module(module), attribute)


def test_gating_unit_is_the_fused_gru_gate():
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    from memgym.memory import gtrxl
    from memgym.memory.transformer import GRUGate

    with pytest.warns(DeprecationWarning, match=r"^memgym\.memory\.gtrxl\.GatingUnit is now "
                                                r"memgym\.memory\.transformer\.GRUGate with fused=True;"):
        gating_unit = gtrxl.GatingUnit
    x = jnp.arange(6.0).reshape(2, 3)
    old: nn.Module = gating_unit(1.5)
    new = GRUGate(1.5, fused=True)
    params = new.init(jax.random.key(0), x, -x)
    assert old == new and jax.tree.structure(old.init(jax.random.key(0), x, -x)) == jax.tree.structure(params)
