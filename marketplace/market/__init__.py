"""Markets: a stream of consumer requests against owners with lifetime privacy budgets.

A market file (YAML with a top-level ``market:``) names the marketplace (owners, their data and
their lifetime budgets) and a stream of requests (sketch, stc, pfds or summarize runs, each for a
consumer). :func:`play` runs the stream once per scheduling rule (``fcfs``, ``dpf``:
:mod:`marketplace.scheduling.rules`), every rule from fresh owner ledgers, ``market.repeats`` times
(seeds seed, seed+1, ...), and returns a :class:`MarketReport`::

    import marketplace

    report = marketplace.play_market("scenarios/market.yaml", "runs/market", driver="inprocess")
    report.summary("dpf")["served_total"], report.statuses("fcfs")

* :mod:`.spec`: the market file, read and checked (:class:`MarketError`);
* :mod:`marketplace.scheduling.costs`: each request's declared cost per owner;
* :mod:`marketplace.scheduling.rules`: the scheduling rules;
* :mod:`.player`: plays the stream under one rule; :mod:`.run`: under each rule, then the report;
* :mod:`.report`, :mod:`.tables`, :mod:`.plots`: ``market.json``, ``market.md``, the figures;
  :mod:`.spread`: each figure's mean, sd and n over the repeats; :mod:`.sales`: what was bought and
  paid; :mod:`.quality`: which way each quality figure points.

The names above are imported on first use, so that telling a market file from a scenario stays light.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
