"""Who may read a console: anyone on the machine when it listens on loopback only, and otherwise
only a request that shows the console's token.

A console bound to a non-loopback address requires a token: the one given (``--console-token``, or
the environment variable :data:`TOKEN_ENV`), else a fresh random one that the command prints with the
console's address. A request shows it as ``Authorization: Bearer TOKEN``, as ``?token=TOKEN`` (the
printed link; the answer sets a cookie, so the page's links and plots work without it), or as that
cookie. Without a token the answer is 401; with a wrong one, 403. A token given for a loopback
console is required too.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
from dataclasses import dataclass

TOKEN_ENV = "MARKETPLACE_CONSOLE_TOKEN"
COOKIE = "marketplace_console_token"
DEFAULT_HOST = "127.0.0.1"


class ConsoleAddressError(ValueError):
    """A ``--console`` value that is not ``HOST:PORT`` (or ``PORT``)."""


@dataclass(frozen=True)
class Listen:
    """Where a console listens, and the token it requires (None: none required)."""

    host: str
    port: int
    token: str | None
    generated: bool = False
    """Whether the token was made here (the command prints it), not given."""

    def url(self, port: int | None = None) -> str:
        """The console's address to open, with the token when one is required."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "") else host
        query = f"?token={self.token}" if self.token else ""
        return f"http://{shown}:{self.port if port is None else port}/{query}"


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``PORT`` (on loopback) -> (host, port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, text.strip()
    host = host.strip("[]") or DEFAULT_HOST
    try:
        number = int(port)
    except ValueError:
        raise ConsoleAddressError(f"a console's address: expected HOST:PORT got {text!r}") from None
    if not 0 <= number <= 65535:
        raise ConsoleAddressError(f"a console's address: expected a port in [0, 65535], got {number}")
    return host, number


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is reached only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def listen(text: str, token: str | None = None) -> Listen:
    """Where to listen (``--console``) and the token required: ``token``, else :data:`TOKEN_ENV`, else,
    off loopback, a fresh random one."""
    host, port = parse_address(text)
    given = token or os.environ.get(TOKEN_ENV) or None
    if given is not None or is_loopback(host):
        return Listen(host, port, given)
    return Listen(host, port, secrets.token_urlsafe(24), generated=True)


def check(token: str | None, shown: str | None) -> int:
    """The HTTP status a request gets: 200 (let through), 401 (no token shown), 403 (a wrong one)."""
    if token is None:
        return 200
    if not shown:
        return 401
    return 200 if hmac.compare_digest(token.encode(), shown.encode()) else 403
