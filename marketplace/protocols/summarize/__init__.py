"""Pure core of the `summarize` protocol (docs/design.md §3): h1 features, the derived bid, greedy rules,
baselines and scores. numpy arrays in and out, no I/O.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
"""Each name of ``__init__.pyi`` is imported from its module on first use, so reading a scenario does not
import the protocol's cores (and scikit-learn and SciPy with them)."""
