"""marketplace: a privacy-preserving AI data marketplace.

The Python API (:mod:`marketplace.api`) is importable from here: ``load``, ``validate``, ``run``,
``start``, ``plan``, ``sweep``, and for a marketplace that stays open ``serve``, ``request``,
``resume``, ``connect`` (a ``Client`` sending many requests on one connection), ``catalogue`` and
``quote`` (what a served marketplace sells, and what a request would cost, before buying;
:mod:`marketplace.service.api`) and ``add_consumer`` (:mod:`marketplace.service.keys`); the types
``Scenario``, ``Report``, ``SweepResult``, ``RunHandle``, ``Validation``; the errors ``ScenarioError``,
``RunFailed``, ``RunFolderError``, ``DatasetMissing``, ``RequestRefused``, ``RequestFailed`` (a
``RunFailed``), ``MaxPriceExceeded`` (a ``RequestRefused``); and for a market played from a
file (:mod:`marketplace.market`) ``play_market``, ``MarketReport``, ``MarketError``.
They are imported when first used, so ``import marketplace`` stays light (the command line's start).
"""

import lazy_loader

from marketplace.version import __version__

__getattr__, __dir__, _names = lazy_loader.attach_stub(__name__, __file__)
__all__ = ["__version__", *_names]
"""The public names are those of ``__init__.pyi``, each imported from its module on first use."""
