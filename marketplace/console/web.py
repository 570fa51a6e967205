"""The consoles' web side: thin Starlette routes over the page functions of :mod:`.operator_view`,
:mod:`.owner_view` and :mod:`.consumer_view`, Jinja2 templates, the token rule of :mod:`.access`,
and :class:`ConsoleServer`, uvicorn in a daemon thread of the process that asked for a console.

Every route only reads (GET); the page functions read the files the server, the agents and
``marketplace request`` already write, so a console never touches their loops.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from marketplace.console import access
from marketplace.console.consumer_view import consumer_page, report_page, rounds_plot
from marketplace.console.metrics import CONTENT_TYPE, metrics_text
from marketplace.console.operator_view import operator_page, read_status
from marketplace.console.owner_view import owner_page, plot_svg

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
REFRESH_S = 5
"""How often the operator's and owners' pages reload themselves."""


class TokenGate:
    """ASGI middleware: lets a request through only when :func:`.access.check` says 200 (module
    :mod:`.access`: a bearer header, ``?token=``, or the cookie); a request that showed the token in
    its query gets the cookie, so the page's links and plots work without it."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.token is None:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        header = request.headers.get("authorization", "")
        query = request.query_params.get("token")
        shown = header[7:] if header.lower().startswith("bearer ") else query or request.cookies.get(access.COOKIE)
        status = access.check(self.token, shown)
        if status != 200:
            words = "this console needs its token" if status == 401 else "wrong token"
            answer = PlainTextResponse(f"{status}: {words} (Authorization: Bearer TOKEN, or ?token=TOKEN)\n", status)
            if status == 401:
                answer.headers["WWW-Authenticate"] = "Bearer"
            await answer(scope, receive, send)
            return
        if query is None:
            await self.app(scope, receive, send)
            return

        async def with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{access.COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict".encode()
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie)]
            await send(message)

        await self.app(scope, receive, with_cookie)


def _page(name: str, request: Request, data: dict[str, Any], title: str) -> Response:
    return TEMPLATES.TemplateResponse(
        request, name, {"data": data, "title": title, "refresh": REFRESH_S if name != "consumer.html" else None}
    )


def _json(data: Any) -> Response:
    return JSONResponse(json.loads(json.dumps(data, default=str)))


def operator_app(state: Path, token: str | None = None) -> ASGIApp:
    """The operator's console of the marketplace serving from ``state``: ``/`` (the page),
    ``/metrics`` (Prometheus) and ``/api/status`` (the page's data as JSON)."""

    async def page(request: Request) -> Response:
        return _page("operator.html", request, operator_page(state), "Marketplace: operator")

    async def metrics(request: Request) -> Response:
        return Response(metrics_text(read_status(state)), media_type=CONTENT_TYPE)

    async def api(request: Request) -> Response:
        return _json(operator_page(state))

    routes = [Route("/", page), Route("/metrics", metrics), Route("/api/status", api)]
    return TokenGate(Starlette(routes=routes), token)


def owner_app(ledgers: Path, owners: Sequence[str], token: str | None = None) -> ASGIApp:
    """An agent's console of the ledgers of ``owners`` in ``ledgers``: ``/`` (the page), each owner's
    plots ``/plot/<owner>/spent.svg`` and ``/plot/<owner>/earnings.svg``, and ``/api/ledgers`` (JSON)."""
    hosted = list(owners)

    async def page(request: Request) -> Response:
        return _page("owner.html", request, owner_page(ledgers, hosted), "Marketplace: owner")

    async def api(request: Request) -> Response:
        return _json(owner_page(ledgers, hosted))

    async def plot(request: Request) -> Response:
        owner, kind = request.path_params["owner"], request.path_params["kind"]
        if owner not in hosted or kind not in ("spent", "earnings"):
            return PlainTextResponse("404: no such plot\n", 404)
        shown = owner_page(ledgers, [owner])["owners"][0]
        if kind == "spent":
            svg = plot_svg(
                shown.get("spent_series") or [],
                ["spent"],
                f"{owner}: budget spent",
                shown.get("dimension", "eps"),
                shown.get("budget_line"),
            )
        else:
            svg = plot_svg(
                shown.get("earnings_series") or [], ["earnings", "privacy"], f"{owner}: earnings", "money", None
            )
        return Response(svg, media_type="image/svg+xml")

    routes = [Route("/", page), Route("/api/ledgers", api), Route("/plot/{owner}/{kind}.svg", plot)]
    return TokenGate(Starlette(routes=routes), token)


def consumer_app(reports: Path, token: str | None = None) -> ASGIApp:
    """A consumer's console of the output folders under ``reports``: ``/`` (its purchases),
    ``/report/<folder>`` (one report's figures and bill), its ``rounds.png``, and ``/api/purchases``."""

    async def page(request: Request) -> Response:
        return _page("consumer.html", request, consumer_page(reports), "Marketplace: consumer")

    async def api(request: Request) -> Response:
        return _json(consumer_page(reports))

    async def one(request: Request) -> Response:
        data = report_page(reports, request.path_params["folder"])
        if data is None:
            return PlainTextResponse("404: no such report\n", 404)
        return _page("report.html", request, data, f"Marketplace: {data['folder']}")

    async def plot(request: Request) -> Response:
        found = rounds_plot(reports, request.path_params["folder"])
        return PlainTextResponse("404: no rounds.png\n", 404) if found is None else FileResponse(found)

    routes = [
        Route("/", page),
        Route("/api/purchases", api),
        Route("/report/{folder:path}/rounds.png", plot),
        Route("/report/{folder:path}", one),
    ]
    return TokenGate(Starlette(routes=routes), token)


class ConsoleError(RuntimeError):
    """A console that could not start (its address cannot be bound)."""


class ConsoleServer:
    """uvicorn serving ``app`` on ``listen``'s address, in a daemon thread: :meth:`start` binds (an
    address in use is a :class:`ConsoleError` at once), :meth:`stop` ends it."""

    def __init__(self, app: ASGIApp, listen: access.Listen) -> None:
        self.listen = listen
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread: threading.Thread | None = None
        self.port = listen.port

    @property
    def url(self) -> str:
        """Where to open it (with the token, when one is required)."""
        return self.listen.url(self.port)

    def start(self, timeout: float = 10.0) -> ConsoleServer:
        """Bind and serve; returns once it serves."""
        family = socket.AF_INET6 if ":" in self.listen.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.listen.host, self.listen.port))
        except OSError as err:
            sock.close()
            raise ConsoleError(f"--console {self.listen.host}:{self.listen.port}: {err.strerror or err}") from None
        self.port = sock.getsockname()[1]
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True, name="console")
        self.thread.start()
        waited = threading.Event()
        while not self.server.started and self.thread.is_alive() and not waited.wait(0.02):
            timeout -= 0.02
            if timeout <= 0:
                break
        if not self.server.started:
            raise ConsoleError(f"--console {self.listen.host}:{self.port}: the console did not start")
        return self

    def stop(self) -> None:
        """Stop serving (what runs is answered first), at most a few seconds."""
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(5.0)


def start_console(app: ASGIApp, listen: access.Listen, say: Callable[[str], None]) -> ConsoleServer:
    """Start a console and say where it is (and its token, when it was made here)."""
    console = ConsoleServer(app, listen).start()
    say(f"console: {console.url}")
    if listen.generated:
        say(f"console: its token (also accepted as 'Authorization: Bearer TOKEN'): {listen.token}")
    return console
