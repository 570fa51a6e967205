"""marketplace: a privacy-preserving AI data marketplace.

The Python API (:mod:`marketplace.api`) is importable from here: ``load``, ``validate``, ``run``,
``start``, ``plan``, ``sweep``, and for a marketplace that stays open ``serve`` and ``request``
(:mod:`marketplace.service.api`); the types ``Scenario``, ``Report``, ``SweepResult``, ``RunHandle``,
``Validation``; the errors ``ScenarioError``, ``RunFailed``, ``RunFolderError``, ``DatasetMissing``,
``RequestRefused``; and for a market played from a file (:mod:`marketplace.market`) ``play_market``,
``MarketReport``, ``MarketError``.
They are imported when first used, so ``import marketplace`` stays light (the command line's start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from marketplace.version import __version__

_LAZY = {
    "load": "marketplace.api", "validate": "marketplace.api", "run": "marketplace.api", "start": "marketplace.api",
    "plan": "marketplace.api", "sweep": "marketplace.api", "RunFailed": "marketplace.api",
    "RunHandle": "marketplace.api", "Validation": "marketplace.api",
    "Report": "marketplace.runner.results", "SweepResult": "marketplace.runner.results",
    "Scenario": "marketplace.scenario", "ScenarioError": "marketplace.scenario",
    "RunFolderError": "marketplace.runner.run", "DatasetMissing": "marketplace.datasets",
    "serve": "marketplace.service.api", "request": "marketplace.service.api", "Marketplace": "marketplace.service.api",
    "RequestRefused": "marketplace.service.client",
    "play_market": "marketplace.market", "MarketReport": "marketplace.market", "MarketError": "marketplace.market",
}
__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from marketplace.api import RunFailed, RunHandle, Validation, load, plan, run, start, sweep, validate
    from marketplace.datasets import DatasetMissing
    from marketplace.market import MarketError, MarketReport, play_market
    from marketplace.runner.results import Report, SweepResult
    from marketplace.runner.run import RunFolderError
    from marketplace.scenario import Scenario, ScenarioError
    from marketplace.service.api import Marketplace, request, serve
    from marketplace.service.client import RequestRefused


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'marketplace' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
