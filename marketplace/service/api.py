"""``marketplace.serve`` and ``marketplace.request``: the marketplace that stays open, from Python.

    import marketplace

    with marketplace.serve("scenarios/market-serve.yaml", state="market", consumers=["alice"]) as market:
        report = marketplace.request("scenarios/sketch-quickstart.yaml", market=market.endpoint,
                                     keys="market/consumers/alice", overrides={"sketch.epsilon": 0.4})
        report.raw["lifetime"]["summary"]
    # leaving the block stops it as SIGTERM does: queued requests refused, the running one finished
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from marketplace.runner.results import Report
    from marketplace.scenario import Scenario


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
        self._server.stop()
        return self.wait(timeout)

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


def serve(scenario: Scenario | str | Path | Mapping[str, Any], state: str | Path, *, endpoint: str = "tcp://127.0.0.1:7700",
          consumers: list[str] | tuple[str, ...] = (), start_owners: bool = True, session_port: int | None = None,
          advertise: str | None = None, owners_per_process: int | None = None) -> Marketplace:
    """Start the marketplace ``scenario`` describes, in a background thread (its curators and owner
    agents are processes of their own), and return once it listens. See ``marketplace serve --help``."""
    from marketplace.api import load
    from marketplace.service.keys import check_consumer_name
    from marketplace.service.server import MarketServer, ServeOptions

    market = load(scenario)
    options = ServeOptions(state=Path(state), endpoint=endpoint, session_port=session_port, advertise=advertise,
                           consumers=tuple(check_consumer_name(c) for c in consumers), start_owners=start_owners,
                           owners_per_process=owners_per_process)
    handle = Marketplace(MarketServer(market, options))
    handle._thread.start()
    handle._server.ready.wait(60.0)
    if handle.error is not None:
        raise handle.error
    return handle


def request(scenario: Scenario | str | Path | Mapping[str, Any], *, market: str, keys: str | Path,
            overrides: Mapping[str, Any] | None = None, out: str | Path | None = None, wait_s: float = 3600.0,
            check: bool = True, on_event: Callable[[str], None] | None = None) -> Report:
    """Send one request to the marketplace at ``market`` with the consumer kit ``keys``, and return
    the session's :class:`~marketplace.runner.results.Report` (its folder holds ``report.json``).
    Raises :class:`~marketplace.service.client.RequestRefused` when the marketplace refuses the
    request or the key, and :class:`~marketplace.api.RunFailed` for a session that failed (unless
    ``check=False``)."""
    from marketplace.api import RunFailed, load, output_folder
    from marketplace.runner.results import Report
    from marketplace.service.client import request as send

    loaded = load(scenario, overrides)
    folder = output_folder(loaded, out, "request")
    result = send(loaded.dump_yaml(), market=market, keys=Path(keys), out=folder, wait_s=wait_s, on_event=on_event)
    report = Report.from_dict(result.report, folder)
    if check and not report.completed:
        raise RunFailed(report)
    return report
