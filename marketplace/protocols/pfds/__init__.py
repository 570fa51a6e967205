"""Pure core of the `pfds` protocol (docs/design.md §4; Fioretto & Van Hentenryck, AAMAS 2019).

Private federated data sharing: every sharer grows a differentially private decision tree and shares
it (:mod:`.tree`), builds a consistent synthetic version of its rows from the tree (:mod:`.synth`),
labels the records by the majority vote of all shared trees (:mod:`.label`) and shares them. The
public attribute domains live in :mod:`.schema`, the budget split and spend records in
:mod:`.budget`, the DP-Pred baselines in :mod:`.baselines`, the two phases of a sharer and the
split of rows among agents in :mod:`.sharer`. numpy arrays in and out, no I/O.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
"""Each name of ``__init__.pyi`` is imported from its module on first use, so reading a scenario does not
import the protocol's cores (and scikit-learn and SciPy with them)."""
