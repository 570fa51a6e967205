"""What each party receives of a run, declared: every field is public, a release, or a disclosure.

A protocol declares, for each observer of an owner's data (the curator, the consumer, and the other
owners), every field the observer receives: in the messages it is sent (``"<kind>.<field>"``, the
message kind and a field of its body, as deep as it cares to say) and, for the consumer in a
deployment, in the run report it gets (``"report.<key path>"``). Each :class:`Seen` says which of
three things the field is:

* ``public``: a function of public settings and of declared releases alone;
* ``release``: the output of a release of the protocol's plan (:mod:`marketplace.privacy.plan`);
* ``disclosure``: handed over in the clear, by the owner's consent, and stated as unprotected (the
  points a sale hands over, the bids a trusted curator is told), with why in ``note``.

The coupled differential test (:mod:`marketplace.differential`) holds a protocol to its declaration:
with every release coupled, a field that differs between an owner's dataset and a neighbour must be
a declared disclosure, and every field an observer receives must be declared at all. docs/privacy.md's
table of what each party sees is made from the same declarations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["KINDS", "OBSERVERS", "REPORT", "RUNTIME", "Seen", "covering"]

KINDS = ("public", "release", "disclosure")
OBSERVERS = ("curator", "consumer", "owners")
"""Who may observe an owner's data: the curator, the consumer, and the other owners (``owners``)."""

_FIELD = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*$")


@dataclass(frozen=True)
class Seen:
    """One field ``observer`` receives: ``field`` (``"<kind>.<field>"`` of a message, or
    ``"report.<key path>"``), what it is (``kind``: public, release or disclosure) and ``note``, what
    it holds or, for a disclosure, why it is handed over unprotected."""

    observer: Literal["curator", "consumer", "owners"]
    field: str
    kind: Literal["public", "release", "disclosure"]
    note: str = ""

    def __post_init__(self) -> None:
        if self.observer not in OBSERVERS:
            raise ValueError(f"Seen: 'observer' must be one of {list(OBSERVERS)}. Got {self.observer!r} instead.")
        if self.kind not in KINDS:
            raise ValueError(f"Seen {self.field!r}: 'kind' must be one of {list(KINDS)}. Got {self.kind!r} instead.")
        if not isinstance(self.field, str) or not _FIELD.match(self.field):
            raise ValueError(
                f"Seen: 'field' must be a dotted path ('point.x', 'report.selection'). Got {self.field!r} instead."
            )
        if self.kind == "disclosure" and not self.note:
            raise ValueError(f"Seen {self.field!r}: a disclosure must say why it is handed over unprotected (note)")

    def covers(self, path: str) -> bool:
        """Whether the field path ``path`` (indices and senders left out) is this field or inside it."""
        return path == self.field or path.startswith(self.field + ".")


def covering(declared: list[Seen] | tuple[Seen, ...], observer: str, path: str) -> Seen | None:
    """The most specific declaration of ``observer``'s field ``path`` (the longest field that covers it)."""
    found = [seen for seen in declared if seen.observer == observer and seen.covers(path)]
    return max(found, key=lambda seen: len(seen.field)) if found else None


RUNTIME: tuple[Seen, ...] = tuple(
    Seen(observer, kind, "public", note)  # type: ignore[arg-type]
    for observer in OBSERVERS
    for kind, note in (
        ("hello", "a party's role, protocol, scenario name and fingerprint of the public settings"),
        ("heartbeat", "liveness, with no content"),
        ("error", "why a message was not accepted: a code and a text that names no private value"),
        ("shutdown", "the run's end: its status and a reason that names no private value"),
        ("bye", "a party's acknowledgement of the end, with no content"),
    )
)
"""The runtime's own messages, which every protocol's parties exchange: public, as every protocol
declares them (the differential test still holds them to it)."""

REPORT: tuple[Seen, ...] = tuple(
    Seen("consumer", f"report.{key}", "public", note)
    for key, note in (
        ("scenario", "the scenario's name"),
        ("protocol", "the protocol's name"),
        ("seed", "the run's seed"),
        ("run_id", "the session's id"),
        ("status", "whether the session completed"),
        ("end_reason", "why it ended, in words that name no private value"),
        ("driver", "what moved the messages"),
        ("pid_of_runner", "the assembling process"),
        ("versions", "the software's versions"),
        ("transport_security", "whether the transport was encrypted"),
        ("config", "the scenario, as every party read it"),
        ("data", "the public schema (or source) of the data: attributes, bounds, classes"),
        ("deployment", "that each party held only its own rows, and what the report therefore lacks"),
        ("references_absent", "the figures a deployment cannot compute, and why"),
        ("noise", "where each party's noise came from"),
        ("parties", "each party's id, role and status"),
        ("party_details", "what each party published of its result: its ledgers and its message counts"),
        ("privacy", "each party's ledger: what its releases cost, from the plan"),
        ("privacy_per_owner", "which ledgers bound what each observer learns of an owner"),
        ("lifetime", "the lifetime ledgers' charges, from the plans"),
        ("messages", "how many messages and bytes each party sent, by kind"),
        ("owners_lost", "the owners that left the session, and why in public words"),
        ("dropouts", "the owners that left the session"),
        ("failures", "why a party failed, in public words"),
        ("history", "the per-round history, computed from releases"),
        ("parsimony", "how much of the owners' data the curator received"),
    )
)
"""The run report's sections that the runtime itself assembles, as the consumer gets them in a
deployment: public, as every protocol declares them (the differential test still holds them to it)."""
