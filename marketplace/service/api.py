"""``marketplace.serve`` and ``marketplace.request``: the marketplace that stays open, from Python
(and :func:`agent`, an owner agent in this process). The commands ``serve`` and ``agent`` call
:func:`open_market` and :func:`run_agent` with the options they build from their flags.

import marketplace

with marketplace.serve("scenarios/market-serve.yaml", state="market", consumers=["alice"]) as market:
    report = marketplace.request("scenarios/sketch-quickstart.yaml", market=market.endpoint,
                                 keys="market/consumers/alice", overrides={"sketch.epsilon": 0.4})
    report.raw["lifetime"]["summary"]
# leaving the block stops it as SIGTERM does: queued requests refused, the running one finished
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from marketplace.data.own_files import ReadLimits

if TYPE_CHECKING:
    from marketplace.runtime import Report
    from marketplace.scenario import Scenario
    from marketplace.service.client import Connection, OwnTarget
    from marketplace.service.options import AgentOptions, ServeOptions


class Marketplace:
    """A running marketplace (:func:`serve`): ``endpoint`` (its control endpoint), ``state`` (its
    folder), ``sessions`` (those finished so far), :meth:`stop` and :meth:`wait`."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._thread = threading.Thread(target=self._run, name="marketplace-serve", daemon=True)
        self.exit_status: int | None = None
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            self.exit_status = self._server.run()
        except BaseException as err:  # noqa: BLE001 - reported by wait()
            self.error, self.exit_status = err, 1
            self._server.ready.set()

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    @property
    def state(self) -> Path:
        return self._server.state

    @property
    def sessions(self) -> list[dict[str, Any]]:
        return list(self._server.finished)

    def stop(self, timeout: float | None = 120.0) -> int:
        """Stop as SIGTERM does and wait for it; returns the exit status."""
        self.stop_soon()
        return self.wait(timeout)

    def stop_soon(self) -> None:
        """Ask the marketplace to stop as SIGTERM does, without waiting: queued requests are refused, the
        running session finishes; :meth:`wait` for the end. Not from a signal handler (it takes a lock, which
        a second signal landing in the handler would take again): ``serve(..., stop_on_signals=True)`` stops
        on SIGTERM and SIGINT safely."""
        self._server.stop()

    def wait(self, timeout: float | None = None) -> int:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the marketplace at {self.endpoint} did not stop within {timeout} s")
        if self.error is not None:
            raise self.error
        return int(self.exit_status or 0)

    def __enter__(self) -> Marketplace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    scenario: Scenario | str | Path | Mapping[str, Any],
    state: str | Path,
    *,
    endpoint: str = "tcp://127.0.0.1:7700",
    consumers: list[str] | tuple[str, ...] = (),
    start_owners: bool = True,
    session_port: int | None = None,
    advertise: str | None = None,
    owners_per_process: int | None = None,
    owner_data: str | Path | None = None,
    max_sessions: int = 8,
    ramp: int = 2,
    rule: str | None = None,
    unlock_steps: int | None = None,
    stop_on_signals: bool = False,
    references: bool = False,
) -> Marketplace:
    """Start the marketplace ``scenario`` describes, in a background thread (its owner agents are
    processes of their own; sessions run in them and in this process, over live connections), and
    return once it listens. See ``marketplace serve --help``. ``owner_data``: a folder of
    ``<owner>.csv`` files, one per owner, for the agents it starts (a marketplace described by its
    public schema). At most ``max_sessions`` sessions run at once, admitted by ``rule`` (``fcfs`` or
    ``dpf``; default ``fcfs``) while the running ones keep up with their deadlines, and at most ``ramp``
    of them younger than a second (0: no ramp; :mod:`marketplace.service.market_policy`);
    ``session_port`` and ``advertise`` are accepted and unused. ``stop_on_signals``
    (from the main thread only; what ``marketplace serve`` does): SIGTERM and SIGINT stop the
    marketplace as :meth:`Marketplace.stop_soon` does, however many come and whenever they come
    (:mod:`marketplace.service.stop_signals`). ``references``: compute the central references of a
    simulated marketplace for every session (by default only for a request that asks)."""
    from marketplace.api import load
    from marketplace.service.options import ServeOptions

    market = load(scenario)
    options = ServeOptions(
        state=Path(state),
        endpoint=endpoint,
        session_port=session_port,
        advertise=advertise,
        consumers=tuple(consumers),
        start_owners=start_owners,
        owners_per_process=owners_per_process,
        owner_data=Path(owner_data) if owner_data is not None else None,
        max_sessions=max_sessions,
        ramp=ramp,
        rule=rule or "fcfs",
        unlock_steps=unlock_steps,
        references=references,
    )
    return open_market(market, options, stop_on_signals=stop_on_signals)


def open_market(
    scenario: Scenario | str | Path | Mapping[str, Any], options: ServeOptions, *, stop_on_signals: bool = False
) -> Marketplace:
    """:func:`serve` with its options already gathered (what ``marketplace serve`` builds from its
    flags): start the marketplace ``scenario`` describes in a background thread and return once it
    listens."""
    from marketplace.api import load
    from marketplace.service.server import MarketServer
    from marketplace.service.stop_signals import StopSignals

    market = load(scenario)
    signals = StopSignals().install() if stop_on_signals else None
    handle = Marketplace(MarketServer(market, options, signals=signals))
    handle._thread.start()
    handle._server.ready.wait(60.0)
    if handle.error is not None:
        raise handle.error
    return handle


def agent(
    market: str,
    keys: str | Path,
    owners: Sequence[str],
    *,
    work: str | Path | None = None,
    ledgers: str | Path | None = None,
    data: Mapping[str, str | Path] | None = None,
    exit_with: int | None = None,
    schema: str | Path | None = None,
    limits: ReadLimits | None = None,
    price: float | None = None,
    points: int | None = None,
    points_per_consumer: int | None = None,
    price_per_eps: float | None = None,
) -> int:
    """Host the data owners ``owners`` (their secret keys and the server's ``server.key`` in ``keys``)
    for the marketplace at ``market`` in this process, taking part in every session the server invites
    them to, until it stops, SIGTERM or SIGINT arrives, or the process ``exit_with`` is gone; returns
    the exit status. See ``marketplace agent --help``: ``data`` maps each owner to its own file, checked
    against ``schema`` (default: ``market.yaml`` in ``keys``) before anything connects; ``price``,
    ``points``, ``points_per_consumer`` and ``price_per_eps`` replace those fields of the marketplace's sale
    terms.
    Raises ValueError for options that cannot host these owners (nothing connected)."""
    from marketplace.service.options import AgentOptions

    options = AgentOptions(
        market=market,
        keys=Path(keys),
        owners=list(owners),
        work=Path(work) if work is not None else None,
        ledgers=Path(ledgers) if ledgers is not None else None,
        data={owner: Path(path) for owner, path in data.items()} if data is not None else None,
        exit_with=exit_with,
        schema=Path(schema) if schema is not None else None,
        limits=limits or ReadLimits(),
        price=price,
        points=points,
        points_per_consumer=points_per_consumer,
        price_per_eps=price_per_eps,
    )
    return run_agent(options)


def run_agent(options: AgentOptions) -> int:
    """:func:`agent` with its options already gathered (what ``marketplace agent`` builds from its flags)."""
    from marketplace.service.agent import serve_agent

    return serve_agent(options)


OwnRows = str | Path | tuple[Any, Any] | Mapping[str, Any]
"""A consumer's own rows: a file (CSV or .npz), ``(X, y)`` arrays, or a mapping with ``X``, ``y``
(and optionally ``group``)."""


def request(
    scenario: Scenario | str | Path | Mapping[str, Any],
    *,
    market: str,
    keys: str | Path,
    overrides: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    wait_s: float = 3600.0,
    check: bool = True,
    on_event: Callable[[str], None] | None = None,
    data: OwnRows | None = None,
    test: OwnRows | None = None,
    schema: str | Path | None = None,
    limits: ReadLimits | None = None,
    references: bool = False,
    plots: bool = True,
    max_price: float | None = None,
) -> Report:
    """Send one request to the marketplace at ``market`` with the consumer kit ``keys``, and return
    the session's :class:`~marketplace.runtime.results.Report` (its folder holds ``report.json``).
    Raises :class:`~marketplace.service.client.RequestRefused` when the marketplace refuses the
    request or the key, :class:`~marketplace.data.own_files.OwnDataError` when ``data`` or ``test``
    do not fit the marketplace's schema (nothing was sent), and :class:`~marketplace.api.RunFailed`
    for a session that failed (unless ``check=False``).

    ``data`` and ``test`` are the consumer's own target D_v and test set, for a marketplace described
    by its public schema: a file, or arrays (written to an ``.npz`` in the output folder, which stays
    with the consumer). ``schema`` is the marketplace's file to check them against before anything is
    sent (default: ``market.yaml`` in the kit, when there). ``references``: ask for the central
    references of a simulated marketplace in the report (the baselines and checks the server computes
    on everyone's rows; left out by default, each named in ``references_absent``). ``plots=False``
    leaves ``rounds.png`` out (:func:`~marketplace.reporting.history.write_round_plot` draws it
    afterwards). ``max_price``: the request is quoted first (:func:`quote`) and, when the quoted money is
    above it, refused with :class:`~marketplace.service.asking.MaxPriceExceeded` (a ``RequestRefused``)
    before anything is sent, reserved or charged."""
    from marketplace.service.client import Connection

    # the request, its folder and the consumer's own files are checked before the kit's key is read
    # or anything connects
    prepared = _prepare(scenario, overrides, out, Path(keys), data, test, schema, limits, on_event, max_price)
    with Connection(market, Path(keys)) as connection:
        return Client(connection).send(
            prepared, wait_s=wait_s, check=check, on_event=on_event, references=references, plots=plots
        )


def catalogue(market: str, keys: str | Path, *, wait_s: float = 60.0) -> dict[str, Any]:
    """What the marketplace at ``market`` sells, asked with the consumer kit ``keys`` before buying:
    its schema, the protocols it serves with their settings and bounds, the owners present with their
    posted terms and public budget standing, and what it does not show and why
    (:mod:`marketplace.service.catalogue`). Nothing is queued or charged. Raises
    :class:`~marketplace.service.client.RequestRefused` or :class:`~marketplace.service.client.RequestFailed`."""
    from marketplace.service.asking import ask
    from marketplace.service.client import Connection
    from marketplace.service.control import CatalogueAsk

    with Connection(market, Path(keys)) as connection:
        return ask(connection, CatalogueAsk(), wait_s)


def quote(
    scenario: Scenario | str | Path | Mapping[str, Any],
    *,
    market: str,
    keys: str | Path,
    overrides: Mapping[str, Any] | None = None,
    schema: str | Path | None = None,
    wait_s: float = 60.0,
) -> dict[str, Any]:
    """What the request ``scenario`` (as :func:`request` takes it) would cost at the marketplace at
    ``market``, asked with the consumer kit ``keys``, before anything is reserved or charged: each
    owner's declared privacy charge, the money at most, and the owners that would decline and why
    (:mod:`marketplace.service.quote`). Nothing is queued, reserved, charged or recorded. Raises
    :class:`~marketplace.scenario.ScenarioError` for a request that does not read (nothing is sent)
    and :class:`~marketplace.service.client.RequestRefused` for one the marketplace cannot run."""
    from marketplace.service.asking import quote_on
    from marketplace.service.client import Connection

    loaded = load_request(scenario, overrides, keys=keys, schema=schema)
    with Connection(market, Path(keys)) as connection:
        return quote_on(connection, loaded, wait_s)


def connect(market: str, keys: str | Path) -> Client:
    """A :class:`Client` of the marketplace at ``market`` with the consumer kit ``keys``: one
    connection (one CURVE handshake) for every request it sends, one after another. Use it as a
    context manager, or :meth:`Client.close` it::

        with marketplace.connect(market.endpoint, "market/consumers/alice") as client:
            reports = [client.request("request.yaml", overrides={"sketch.epsilon": e}) for e in (0.2, 0.4)]

    A marketplace that is not there is noticed by the first request (within 30 s), not here."""
    from marketplace.service.client import Connection

    return Client(Connection(market, Path(keys)))


class Client:
    """A consumer's open connection to a marketplace (:func:`connect`): :meth:`request` as
    :func:`marketplace.request` does, without connecting again; ``handshakes`` (the CURVE
    handshakes made so far: 1 unless the marketplace dropped the connection) and ``sent`` (the
    requests sent) say what it cost. Not for several threads at once: each thread its own client."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    @property
    def market(self) -> str:
        return self._connection.market

    @property
    def keys(self) -> Path:
        return self._connection.keys

    @property
    def handshakes(self) -> int:
        return self._connection.handshakes

    @property
    def sent(self) -> int:
        return self._connection.sent

    def request(
        self,
        scenario: Scenario | str | Path | Mapping[str, Any],
        *,
        overrides: Mapping[str, Any] | None = None,
        out: str | Path | None = None,
        wait_s: float = 3600.0,
        check: bool = True,
        on_event: Callable[[str], None] | None = None,
        data: OwnRows | None = None,
        test: OwnRows | None = None,
        schema: str | Path | None = None,
        limits: ReadLimits | None = None,
        references: bool = False,
        plots: bool = True,
        max_price: float | None = None,
    ) -> Report:
        """One request on this connection: the arguments, the report and the errors of
        :func:`request`. A request that fails leaves the connection open for the next."""
        prepared = _prepare(scenario, overrides, out, self.keys, data, test, schema, limits, on_event, max_price)
        return self.send(prepared, wait_s=wait_s, check=check, on_event=on_event, references=references, plots=plots)

    def send(
        self,
        prepared: Prepared,
        *,
        wait_s: float,
        check: bool,
        on_event: Callable[[str], None] | None,
        references: bool,
        plots: bool,
    ) -> Report:
        """:meth:`request` once it is ``prepared`` (:func:`_prepare`): quoted first when there is a
        ``max_price`` (refused before anything is sent or reserved), then sent and seen through."""
        from marketplace.api import RunFailed
        from marketplace.runtime import Report
        from marketplace.service.asking import quote_on, within_max_price

        if prepared.max_price is not None:  # quoted on this connection; refused before anything is sent
            within_max_price(quote_on(self._connection, prepared.request), prepared.max_price)
        result = self._connection.send(
            prepared.request.dump_yaml(),
            out=prepared.folder,
            wait_s=wait_s,
            on_event=on_event,
            own=prepared.own,
            own_checked=True,
            references=references,
            plots=plots,
        )
        report = Report.from_dict(result.report, prepared.folder)
        if check and not report.completed:
            raise RunFailed(report)
        return report

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._connection.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_request(
    scenario: Scenario | str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    *,
    sets: list[str] | tuple[str, ...] = (),
    keys: str | Path,
    schema: str | Path | None = None,
) -> Scenario:
    """The request ``scenario`` (a file, a mapping or a scenario, with ``sets``, the command line's
    ``--set`` texts, then ``overrides``) validated as the marketplace will take it. When the
    marketplace's file (``schema``, else ``market.yaml`` in the consumer's kit ``keys``, when there)
    describes it by its public schema, the protocol's public bounds the request leaves out (a
    sketch's box) come from that schema, as the marketplace fills them in, and bounds that disagree
    with it are refused here (:class:`~marketplace.scenario.ScenarioError` naming the field, what the
    schema has and what the request gives), before anything is sent. Otherwise as
    :func:`marketplace.load`."""
    import copy

    from marketplace.api import load
    from marketplace.scenario import Scenario
    from marketplace.scenario.load import load_scenario, parse_scenario

    public = _market_schema(Path(schema) if schema is not None else Path(keys) / "market.yaml", schema is not None)
    if public is None:
        return load(scenario, overrides, sets=sets)
    values = dict(overrides or {})
    if isinstance(scenario, (str, Path)):
        loaded = load_scenario(scenario, sets, public_schema=public)
        return loaded.with_overrides(values) if values else loaded
    if isinstance(scenario, Scenario):
        raw, source = copy.deepcopy(scenario.raw), scenario.source
    elif isinstance(scenario, Mapping):
        raw, source = copy.deepcopy(dict(scenario)), "<dict>"
    else:
        return load(scenario, overrides, sets=sets)  # load names what it expected
    return parse_scenario(
        raw, source=source, base_dir=Path.cwd(), overrides=tuple(sets), values=values, public_schema=public
    )


def _market_schema(market_file: Path, given: bool) -> Mapping[str, Any] | None:
    """The raw ``data.schema`` of the marketplace's file ``market_file``, or None when it describes a
    simulation (or, not ``given`` but looked for in the kit, when there is no such file)."""
    from marketplace.scenario.load import read_scenario_text

    if not given and not market_file.is_file():
        return None
    market = read_scenario_text(market_file.read_text(encoding="utf-8"), str(market_file))
    data = market.get("data") if isinstance(market, dict) else None
    found = data.get("schema") if isinstance(data, dict) else None
    return found if isinstance(found, Mapping) else None


def resume(
    session: str,
    *,
    market: str,
    keys: str | Path,
    out: str | Path | None = None,
    wait_s: float = 600.0,
    check: bool = True,
    on_event: Callable[[str], None] | None = None,
    data: OwnRows | None = None,
    test: OwnRows | None = None,
    limits: ReadLimits | None = None,
    plots: bool = True,
) -> Report:
    """Fetch again what session ``session`` of this consumer (the kit ``keys``) released to it, after
    a lost connection or a close that timed out, and return the session's
    :class:`~marketplace.runtime.results.Report`, assembled as the session would have let the consumer
    assemble it (:mod:`marketplace.service.kept`). The consumer runs its part again here, on the
    curator's frames the marketplace kept, with its own ``data`` and ``test`` when the marketplace
    is described by its public schema (the same as the request's). Nothing runs at the owners and
    nothing is charged. Raises :class:`~marketplace.service.client.RequestRefused` when the
    marketplace keeps no such session of this consumer, and :class:`~marketplace.api.RunFailed` for a
    session that failed (unless ``check=False``). ``plots`` as for :func:`request`."""
    from marketplace.api import RunFailed
    from marketplace.runtime import Report, check_run_folder, default_run_folder
    from marketplace.service.client import request as send

    if test is not None and data is None:
        raise ValueError("test: the consumer's own test set needs its own target too (data=...)")
    folder = check_run_folder(out) if out is not None else default_run_folder(session, "resume")
    own = _own_target(data, test, limits, folder)
    result = send(
        None,
        market=market,
        keys=Path(keys),
        out=folder,
        wait_s=wait_s,
        on_event=on_event,
        own=own,
        resume=session,
        plots=plots,
    )
    report = Report.from_dict(result.report, folder)
    if check and not report.completed:
        raise RunFailed(report)
    return report


class Prepared(NamedTuple):
    """A request ready to send: loaded and validated, its output folder chosen, the consumer's own
    files checked against the schema, its price limit checked."""

    request: Scenario
    folder: Path
    own: OwnTarget | None
    max_price: float | None


def _prepare(
    scenario: Scenario | str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | None,
    out: str | Path | None,
    keys: Path,
    data: OwnRows | None,
    test: OwnRows | None,
    schema: str | Path | None,
    limits: ReadLimits | None,
    on_event: Callable[[str], None] | None,
    max_price: float | None,
) -> Prepared:
    """Everything :func:`request` checks before a word reaches the marketplace (its arguments): the
    price limit, the request (:func:`load_request`), its folder (new or empty), and the consumer's own
    target and test set, checked against the marketplace's schema (``schema``, else ``market.yaml``
    in the kit, :func:`marketplace.service.client.checked_own`)."""
    from marketplace.api import output_folder
    from marketplace.service.asking import check_max_price
    from marketplace.service.client import checked_own

    if test is not None and data is None:
        raise ValueError("test: the consumer's own test set needs its own target too (data=...)")
    limit = None if max_price is None else check_max_price(max_price)
    loaded = load_request(scenario, overrides, keys=keys, schema=schema)
    folder = output_folder(loaded, out, "request")
    own = _own_target(data, test, limits, folder)
    market_file = Path(schema) if schema is not None else None
    own = checked_own(own, keys, market_file, on_event or (lambda text: None))
    return Prepared(loaded, folder, own, limit)


def _own_target(
    data: OwnRows | None, test: OwnRows | None, limits: ReadLimits | None, folder: Path
) -> OwnTarget | None:
    """The consumer's own target and test set as files its consumer reads (arrays written into
    ``folder``), or None when it brings none (a simulated marketplace builds its share)."""
    from marketplace.service.client import OwnTarget

    if data is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    own_test = None if test is None else _own_file(test, folder, "own-test")
    return OwnTarget(_own_file(data, folder, "own-target"), own_test, limits or ReadLimits())


def _own_file(rows: OwnRows, folder: Path, name: str) -> Path:
    """A file holding ``rows``: the path itself, or arrays saved as ``folder/<name>.npz`` (readable by
    the consumer's user only)."""
    import os

    import numpy as np

    if isinstance(rows, (str, Path)):
        return Path(rows)
    if isinstance(rows, Mapping):
        arrays = {k: np.asarray(v) for k, v in rows.items()}
    elif isinstance(rows, tuple) and len(rows) == 2:
        arrays = {"X": np.asarray(rows[0]), "y": np.asarray(rows[1])}
    else:
        raise TypeError(
            f"{name}: expected a file path, (X, y) arrays or a mapping with X and y, got {type(rows).__name__}"
        )
    path = folder / f"{name}.npz"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle's bool
    return path
