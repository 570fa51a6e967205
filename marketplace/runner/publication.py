"""What of a party's account of a run may leave it, and what it keeps to itself.

A party's report (:func:`marketplace.runner.party_reports.party_report`) is what it hands to whoever
assembles the run report: the server of ``marketplace serve``, or the step that runs ``marketplace
assemble``. The run report goes to the consumer, so a party's report holds only what the party may
publish, public values and declared releases:

* an **owner** publishes the keys of its result that its protocol lists in
  :attr:`~marketplace.plugins.ProtocolSpec.owner_publishes`, and nothing else: a key the protocol
  does not list is private (its row count, which of its rows it handed over). Its timings stay with
  it too (its compute time grows with its rows), and of its driver's details it publishes only how it
  was connected (:data:`OWNER_DRIVER_KEYS`), and of the error replies it received who sent them and
  their code, not their text (:data:`OWNER_ERROR_KEYS`);
* the **curator** publishes its result as its protocol's
  :attr:`~marketplace.plugins.ProtocolSpec.curator_publishes` gives it (why an owner was excluded,
  without the private figures that decided it), or whole;
* the **consumer** publishes its result whole: the run report is its own.

What a party withholds is its **own** part (:data:`OWN`): its own report file keeps it
(``--own-report``), and a simulation's report, whose runner held every party's data anyway, shows it
as the simulator's view (``party_details.<party>.simulator_view``). A deployment's report never
does, whatever a party's report holds: :func:`published` is applied again where the run report is
assembled.
"""

from __future__ import annotations

from typing import Any

from marketplace import plugins

OWN = "own"
"""The key of a party's report that holds what the party keeps to itself."""

SIMULATION_DRIVERS = frozenset({"inprocess", "processes"})
"""Drivers whose runner started every party and held every party's data: a simulation. Its report may
show what each party kept to itself, as the simulator's view."""

PARTS = ("result", "timing", "driver", "errors_received")
"""The parts of a party's account that publication splits."""

RUNTIME_OWNER_KEYS = frozenset({"declined"})
"""Result keys the runtime itself gives an owner, published whatever its protocol: an owner whose
lifetime ledger declined the run (:class:`marketplace.roles.lifetime.DeclinedParty`) reports why (the
decline it sent the curator, which depends on public figures only)."""

OWNER_DRIVER_KEYS = frozenset(
    {
        "endpoint",
        "shared_links",
        "hosted_with",
        "scheduling",
        "lost_peers",
        "dropped_connections",
        "quarantined",
        "replies_dropped",
        "max_batch",
        "arrivals",
    }
)
"""What an owner publishes of its driver's details: how it was connected and what it saw of its links,
never a timing (its waiting and I/O times, as its compute time, follow its rows)."""

OWNER_ERROR_KEYS = ("from", "code")
"""What an owner publishes of an error reply it received: who refused which of its messages, and how;
not the text, which may name figures of its own data (why a point was refused: its bid values)."""


def split(protocol: str | None, role: str | None, account: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``account`` (the :data:`PARTS`) as (what the party publishes, what it keeps):
    the first has every part (None where nothing is published), the second only what is withheld, or
    published in another form (the original then), and is empty when the party withholds nothing."""
    shown = published(protocol, role, account)
    kept: dict[str, Any] = {}
    result, public = account.get("result"), shown.get("result")
    if isinstance(result, dict):
        withheld = {k: v for k, v in result.items() if not isinstance(public, dict) or public.get(k, _NONE) != v}
        if withheld:
            kept["result"] = withheld
    if account.get("timing") and shown.get("timing") is None:
        kept["timing"] = account["timing"]
    driver, public = account.get("driver"), shown.get("driver") or {}
    if isinstance(driver, dict) and (withheld := {k: v for k, v in driver.items() if k not in public}):
        kept["driver"] = withheld
    if account.get("errors_received") and account["errors_received"] != shown.get("errors_received"):
        kept["errors_received"] = account["errors_received"]
    return shown, kept


def published(protocol: str | None, role: str | None, account: dict[str, Any]) -> dict[str, Any]:
    """The parts of ``account`` that a party of ``role`` may hand to another party (module docstring).
    An owner of a protocol that cannot be found publishes nothing of its result."""
    if role == "owner":
        return _owner_published(protocol, account)
    shown = {part: account.get(part) for part in PARTS}
    if role == "curator" and isinstance(shown["result"], dict) and protocol is not None and _known(protocol):
        rewrite = plugins.curator_publication(protocol)
        if rewrite is not None:
            shown["result"] = rewrite(shown["result"])
    return shown


def _owner_published(protocol: str | None, account: dict[str, Any]) -> dict[str, Any]:
    keys = RUNTIME_OWNER_KEYS | (frozenset(plugins.spec(protocol).owner_publishes) if _known(protocol) else frozenset())
    result, driver, errors = account.get("result"), account.get("driver"), account.get("errors_received")
    return {
        "result": {k: v for k, v in result.items() if k in keys} if isinstance(result, dict) else None,
        "timing": None,
        "driver": {k: v for k, v in driver.items() if k in OWNER_DRIVER_KEYS} if isinstance(driver, dict) else None,
        "errors_received": (
            [{k: e[k] for k in OWNER_ERROR_KEYS if k in e} for e in errors if isinstance(e, dict)]
            if isinstance(errors, list)
            else None
        ),
    }


def _known(protocol: str | None) -> bool:
    return protocol is not None and protocol in plugins.protocols()


_NONE = object()
