"""Who runs next when owners' privacy budgets are shared by many requests: the scheduling rules
(first come first served, Dominant Privacy Fairness) and what a request costs each owner, declared
from public configuration only. Used by market workloads (:mod:`marketplace.market`) and by a
served marketplace's admission (:mod:`marketplace.service.admission`) alike.

* :mod:`.rules`: ``fcfs`` and ``dpf``, pure logic on declared costs and spent budgets;
* :mod:`.costs`: each owner's declared cost of a request, in its ledger's filter.
"""
