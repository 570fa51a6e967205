"""What ``marketplace serve`` is told: where it keeps its state, where it listens, how it admits
requests (:class:`ServeOptions`), the error for options that cannot serve a marketplace, and what it
says about whose rows its owners hold (:func:`data_banner`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from marketplace.scenario import Scenario

__all__ = ["ServeOptions", "ServeOptionsError", "data_banner"]


class ServeOptionsError(ValueError):
    """Options that cannot serve this marketplace (the owners' data, a locked state folder): nothing
    was started."""


@dataclass
class ServeOptions:
    """Where the server keeps its state, where it listens, and how it admits requests."""

    state: Path
    endpoint: str = "tcp://127.0.0.1:7700"
    """The control endpoint (``tcp://0.0.0.0:7700`` in a container)."""
    session_port: int | None = None
    """Unused: sessions run on the control connections. Accepted so older command lines still work."""
    advertise: str | None = None
    """Unused, as ``session_port``."""
    consumers: tuple[str, ...] = ()
    """Consumers to make keys and kits for (``STATE/consumers/<name>/``), when missing."""
    start_owners: bool = True
    """Start owner agents for every owner of the marketplace (else owners connect on their own)."""
    owners_per_process: int | None = None
    collect_s: float = 30.0
    """After a session's curator ends, how long to wait for the parties' reports."""
    owner_data: Path | None = None
    """A folder of ``<owner>.csv`` (or ``.npz``) files, one per owner: the agents ``serve`` starts
    give each owner its own file (a marketplace described by its public schema, on one machine)."""
    max_sessions: int = 8
    """Sessions that run at once, at most."""
    ramp: int = 2
    """Sessions younger than a second that may run at once (0: no ramp; :mod:`.market_policy`)."""
    rule: str = "fcfs"
    """The scheduling rule of admission: ``fcfs`` or ``dpf`` (:mod:`.admission`)."""
    unlock_steps: int | None = None
    """DPF's N: each arriving request unlocks 1/N of every owner's budget."""

    def control_host_port(self) -> tuple[str, int]:
        rest = self.endpoint.split("://", 1)[-1]
        host, _, port = rest.rpartition(":")
        return host, int(port)


def data_banner(market: Scenario) -> str:
    """What ``serve`` says about whose rows its owners hold."""
    data = market.config.data
    schema = data.schema
    if schema is not None:  # data.schema_only
        return (
            f"parties bring their own data: the public schema of {schema.dim} features and "
            f"{len(schema.label.classes)} classes; this server holds no party's rows"
        )
    return (
        f"a simulation: every owner's rows are built from one dataset ({data.source.kind}) and the seed, and "
        f"the server builds them too to check requests and evaluate sessions; describe the data by its public "
        f"schema (data.schema) for owners and consumers that bring their own"
    )
