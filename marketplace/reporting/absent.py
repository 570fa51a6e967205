"""The figures a report does not give because nobody holds everyone's rows, stated in one shape.

A simulation's world holds every party's rows (:attr:`marketplace.data.dataset.World.central`): the
runner computes from them the references a run is compared with (uniform sampling, a central greedy,
the truth of a sketch's statistics, the true source set of stc) and the row counts of every part. A
marketplace described by its public schema (``data.schema``) has no such world: each party holds
only its own rows, and the server assembling the report holds none. Its report then keeps the
quality figures the consumer computed from its own rows, and states every figure it lacks, the same
way for every protocol:

* the top-level key ``references_absent`` maps the key path of each missing figure in the report
  (``metrics.baselines``, ``checks.central_replay``, ``history.mmd2``, ``data.rows``, ...) to why it
  is missing;
* at the figure's own place, a section (an object) is replaced by ``{"absent": why}``, and a number
  is null.

A report of a simulation has no ``references_absent`` key, and nothing in it is absent, unless it is
the report of a served session that did not ask for the references (:data:`NOT_ASKED`): a served
marketplace computes them only when asked, since they cost the server the protocol's work again on
everyone's rows. Such a report states the references it lacks in the same shape.
"""

from __future__ import annotations

from typing import Any

REFERENCES_ABSENT = "references_absent"
"""The report's top-level key: ``{figure key path: why it is absent}``."""

NO_ROWS = (
    "this marketplace is described by its public schema (data.schema) and nobody holds every party's rows: "
    "each owner and the consumer keep their own, and the server assembling the report holds none"
)
"""Why a figure that needs everyone's rows cannot be computed."""


NOT_ASKED = (
    "not computed: a served marketplace computes the central references of a simulation only when asked "
    "(marketplace serve --references, or a request's references: true in marketplace request --references)"
)
"""Why a reference a simulation could compute is absent from a served session's report: nobody asked."""


def why_absent(needs: str) -> str:
    """ "not computed: it needs ``needs``; <NO_ROWS>" (``needs``: what the figure is computed from)."""
    return f"not computed: it needs {needs}; {NO_ROWS}"


def absent(why: str) -> dict[str, str]:
    """What stands at the place of an absent section: ``{"absent": why}``."""
    return {"absent": why}


def is_absent(value: Any) -> bool:
    """Whether ``value`` is an absent section (:func:`absent`)."""
    return isinstance(value, dict) and isinstance(value.get("absent"), str)


def absent_line(report: dict[str, Any], limit: int = 8) -> str | None:
    """One line for the terminal naming the figures the report lacks (None: it lacks none)."""
    missing = report.get(REFERENCES_ABSENT) or {}
    if not missing:
        return None
    names = list(missing)
    shown = ", ".join(names[:limit]) + (f", and {len(names) - limit} more" if len(names) > limit else "")
    return (
        f"{shown}: not computed, nobody holds every party's rows (data.schema); "
        f"why each is missing: references_absent in report.json"
    )
