"""One module per exchange (protocol) of the marketplace: what turns a scenario into roles, and a
finished run into its report sections, tables and sweep columns.

The runtime (drivers, nodes, launcher, report skeleton, sweeps) is the same for every protocol; an
exchange module supplies the protocol-specific parts through these functions:

* ``build_role(config, party, world, owner_data) -> Role``: the party's sans-I/O role;
* ``check_plan(config)``: refuse, before anything starts, a run whose privacy plan exceeds a budget
  (raises :class:`~marketplace.schema.SchemaError` naming the key);
* ``check_world(config, world)`` (optional): settings that need the data's shape; raises
  ValueError("key.path: what is wrong"), which the runner reports as a bad scenario;
* ``progress(config, curator_role) -> (done, total)``: for the in-process progress bar (the
  processes driver reads "round i/N done" lines from the curator's log instead);
* ``report(config, world, results) -> dict``: the protocol's report sections (``results`` maps
  party id -> that party's ``Role.result()``); must include ``privacy``;
* ``head_rows(report)`` and ``tables(report)``: the terminal summary;
* ``sweep_row(report)``, ``sweep_table(summary, keys, title)``, ``plot_sweep(summary, keys, path,
  title)``: what a sweep records and shows.
* optional ``nothing_released(config, results) -> str | None``: why the run ended with nothing
  from the owners (no point selected, no sketch, no release, no synthetic record), or None; the
  runner then reports the run ``failed`` (its metrics would be the consumer's alone);
* optional ``artifacts(report, out_dir)``: write protocol files into the run folder (and say so
  in ``report``) before report.json is written.
"""

from __future__ import annotations

import importlib
from types import ModuleType

EXCHANGES = {
    "summarize": "marketplace.exchanges.summarize",
    "stc": "marketplace.exchanges.stc",
    "sketch": "marketplace.exchanges.sketch",
    "pfds": "marketplace.exchanges.pfds",
}
"""Protocol name (the scenario's ``protocol:``) -> its exchange module."""


def exchange(protocol: str) -> ModuleType:
    """The exchange module of ``protocol`` (imported on first use)."""
    try:
        return importlib.import_module(EXCHANGES[protocol])
    except KeyError:
        raise ValueError(f"unknown protocol {protocol!r}: use one of {sorted(EXCHANGES)}") from None
