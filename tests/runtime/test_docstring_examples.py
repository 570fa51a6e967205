"""Every example in a docstring of the package runs and prints what it shows (doctest): an example that
no longer holds misleads a reader more than no example."""

from __future__ import annotations

import doctest
import importlib

import pytest
from conftest import ROOT

MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for path in (ROOT / "marketplace").rglob("*.py")
    if ">>> " in path.read_text(encoding="utf-8")
)


def test_the_package_has_docstring_examples():
    assert "marketplace.protocols.summarize.payments" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_a_docstring_example_shows_what_it_prints(name: str):
    result = doctest.testmod(
        importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples fail (see above)"
