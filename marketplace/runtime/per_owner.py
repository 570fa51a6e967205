"""The ``privacy_per_owner`` section of a run: the run's exchange states who observes what of each
owner's data (``owner_exposure``), and :mod:`marketplace.reporting.per_owner` reads the ledgers that
bound it. This part reads the run's owners, which only the runner knows, and asks the run's exchange."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from marketplace.reporting.per_owner import per_owner_section

if TYPE_CHECKING:
    from marketplace.plugins import Exchange


def owner_section(config: Any, report: dict[str, Any], exchange: Exchange) -> dict[str, Any] | None:
    """The ``privacy_per_owner`` section of a run of ``config`` whose protocol sections are in
    ``report`` (``None`` if the protocol states no per-owner model). A model that cannot be read
    from a broken run's sections says so in ``unavailable`` instead of losing the report.
    ``exchange`` is the run's exchange, resolved once where the run starts."""
    from marketplace.parties import party_ids

    owners = [p for p in party_ids(config) if p.startswith("owner-")]
    stated = report.get("privacy")
    privacy = stated if isinstance(stated, dict) else {}
    try:
        exposures = exchange.owner_exposure(config, report)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        return {"groups": [], "unavailable": f"{type(err).__name__}: {err}"}
    if exposures is None:  # the protocol states no per-owner model
        return None
    return per_owner_section(owners, exposures, privacy)
