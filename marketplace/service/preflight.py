"""What ``marketplace serve`` refuses before it takes its state folder: a way of starting the owners
that does not fit where their keys are or where their data comes from.

* Owners whose keys are in their own kits (``serve --init --kits``) are started from their kits
  (``marketplace agent --keys KIT``), never by ``serve``: it is then started with ``--no-owners``.
* ``--owner-data`` (a folder of ``<owner>.csv`` files) is for a marketplace described by its public
  schema (``data.schema``); such a marketplace's owners bring their own rows, so the agents ``serve``
  starts need it.
"""

from __future__ import annotations

from pathlib import Path

from marketplace.scenario import Scenario
from marketplace.service.keys import owners_with_kits
from marketplace.service.options import ServeOptions, ServeOptionsError


def refuse_unservable(market: Scenario, options: ServeOptions, owners: int) -> None:
    """Raise :class:`~.options.ServeOptionsError`, saying what to do instead, when ``options`` cannot
    serve ``market`` with its ``owners`` (module docstring)."""
    kits = owners_with_kits(Path(options.state).resolve(), owners) if options.start_owners else []
    if kits:
        few = ", ".join(kits[:5]) + (f" and {len(kits) - 5} more" if len(kits) > 5 else "")
        raise ServeOptionsError(
            f"{options.state}: the keys of {few} are in their own kits (made by serve --init --kits), not in "
            "the state: expected --no-owners (start_owners=False), with each owner's agent started from its "
            "kit (marketplace agent --keys KIT), not agents started by serve"
        )
    data = market.config.data
    if options.owner_data is not None:
        if not data.schema_only:
            raise ServeOptionsError(
                "--owner-data gives owners their own files, for a marketplace described by its public "
                "schema (data.schema); this one simulates its owners' rows from data.source"
            )
        if not Path(options.owner_data).is_dir():
            raise ServeOptionsError(f"--owner-data {options.owner_data}: expected a folder of <owner>.csv files")
    elif data.schema_only and options.start_owners:
        raise ServeOptionsError(
            "this marketplace is described by its public schema (data.schema): its owners bring their "
            "own rows. Give the agents serve starts a folder of <owner>.csv files (--owner-data DIR), "
            "or start none (--no-owners) and run `marketplace agent --data` on each owner's machine"
        )
