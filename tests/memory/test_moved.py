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
