"""``marketplace run``: a scenario folder run with one driver, sweeps, and what the terminal shows.

:mod:`.run` runs a scenario in a folder (the in-process driver, or :mod:`.processes`: every party an OS
process, forked or exec'd, watched to the end) and writes its report; :mod:`.sweep` runs a grid of
them; :mod:`.display` and :mod:`.blame` are what the terminal shows of a run; :mod:`.report_schema`
checks and documents a report; :mod:`.shares` writes a dataset's owner shares (``marketplace
shares``). The parties themselves, their reports and the run report assembled from those are
:mod:`marketplace.runtime`'s, which a served marketplace and a market use as well.
"""
