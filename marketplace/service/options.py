"""What ``marketplace serve`` is told: where it keeps its state, where it listens, how it admits
requests (:class:`ServeOptions`), the error for options that cannot serve a marketplace, and what it
says about whose rows its owners hold (:func:`data_banner`); and what ``marketplace agent`` is told
(:class:`AgentOptions`). The command line and the Python API (:mod:`marketplace.service.api`) both
build these, so each option has one name, one default and one check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marketplace.data.own_files import ReadLimits
from marketplace.scenario import Scenario
from marketplace.service.keys import check_consumer_name

__all__ = ["AgentOptions", "ServeOptions", "ServeOptionsError", "data_banner"]


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
    references: bool = False
    """Compute the central references of a simulated marketplace for every session (``--references``);
    otherwise only for a request that asks (``marketplace request --references``): they cost the server
    the protocol's work again on everyone's rows."""
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

    def __post_init__(self) -> None:
        """Every consumer name checked (ValueError names a bad one) and the owners' folder made
        absolute: the agents that read it run in folders of their own."""
        self.state = Path(self.state)
        self.consumers = tuple(check_consumer_name(name) for name in self.consumers)
        if self.owner_data is not None:
            self.owner_data = Path(self.owner_data).resolve()

    def control_host_port(self) -> tuple[str, int]:
        rest = self.endpoint.split("://", 1)[-1]
        host, _, port = rest.rpartition(":")
        return host, int(port)


@dataclass
class AgentOptions:
    """What an owner agent is told (:class:`marketplace.service.agent.OwnerAgent`): the marketplace
    it connects to, the owners it hosts and their keys, where it keeps what, their own rows, and the
    fields of their sale terms they set themselves."""

    market: str
    """The marketplace's control endpoint (``tcp://HOST:PORT``)."""
    keys: Path
    """The owners' secret keys (``<owner>.key_secret``) and the server's public key (``server.key``)."""
    owners: list[str]
    """The owners to host."""
    work: Path | None = None
    """Session folders: each hosted owner's own report of each session (default: ``keys/sessions``)."""
    ledgers: Path | None = None
    """Where the owners' lifetime ledgers are kept (default: ``keys``)."""
    data: Mapping[str, Path] | None = None
    """Each hosted owner's own file (:func:`marketplace.data.own_files.parse_data_files`); None: a
    simulated marketplace, whose owners' rows the agent builds from the scenario."""
    exit_with: int | None = None
    """Leave when this process is gone (what ``serve`` gives the agents it starts)."""
    schema: Path | None = None
    """The marketplace's file (its public data schema) that ``data`` is checked against (default:
    ``market.yaml`` in ``keys``, when there)."""
    limits: ReadLimits = ReadLimits()
    """The most of an owner's file that is read."""
    price: float | None = None
    """The hosted owners' price per point they sell, instead of the marketplace's (None: its own)."""
    points: int | None = None
    """The most points each hosted owner sells in its lifetime (None: the marketplace's limit)."""
    points_per_consumer: int | None = None
    """The most points each hosted owner sells to any one consumer (None: the marketplace's limit)."""
    price_per_eps: float | None = None
    """The hosted owners' price per unit eps of privacy loss under their ledgers' relation, paid by every
    release (None: the marketplace's)."""

    def terms(self) -> dict[str, Any]:
        """The fields of the hosted owners' sale terms given here: each replaces that field of the
        marketplace's terms, the others stay the marketplace's (:func:`marketplace.service.agent.own_terms`,
        which refuses a bad value naming it)."""
        given = {
            "price": self.price,
            "points": self.points,
            "points_per_consumer": self.points_per_consumer,
            "price_per_eps": self.price_per_eps,
        }
        return {name: value for name, value in given.items() if value is not None}


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
