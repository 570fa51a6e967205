"""CURVE: authenticated, encrypted links, with each party's identity bound to its key.

``marketplace keys generate DIR --owners K`` writes one certificate pair per party
(``curator.key`` / ``curator.key_secret``, ``owner-1.key`` ..., ``consumer.key``) with pyzmq's
``zmq.auth.create_certificates``. The file name is the party id: the curator's allowlist maps
each client public key to the party it belongs to.

The curator runs a ZAP authenticator (:class:`PartyAuthenticator`) that admits only allowlisted
keys and stamps every message with the key's party id as its ZMQ ``User-Id``. The ROUTER loop then
refuses any message whose routing identity (which a DEALER chooses itself) differs from that
User-Id: an owner holding owner-2's key cannot speak as owner-1. Traffic is encrypted
(CurveZMQ: Curve25519 key exchange, XSalsa20-Poly1305 per message).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from marketplace.roles import CURATOR

__all__ = ["CurveKeys", "CurveError", "PartyAuthenticator", "generate_keys", "party_names"]

log = logging.getLogger("marketplace.transport.zmq_driver")
LOGGED_REFUSALS = 1000


class CurveError(ValueError):
    """Missing, unreadable or inconsistent key files (the message names the file)."""


def party_names(owners: int) -> list[str]:
    return [CURATOR, *(f"owner-{i + 1}" for i in range(owners)), "consumer"]


def generate_keys(directory: str | Path, *, owners: int, overwrite: bool = False) -> list[Path]:
    """One certificate pair per party of a run with ``owners`` owners; secret files are 0600."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for party in party_names(owners):
        public, secret = folder / f"{party}.key", folder / f"{party}.key_secret"
        if not overwrite and (public.exists() or secret.exists()):
            raise CurveError(f"{public} already exists: refusing to overwrite keys (marketplace keys generate --force replaces them)")
        public_path, secret_path = zmq.auth.create_certificates(str(folder), party)
        os.chmod(secret_path, 0o600)
        written += [Path(public_path), Path(secret_path)]
    return written


def _load(path: Path, *, secret: bool) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise CurveError(f"{path}: key file not found (create keys with: marketplace keys generate DIR --owners K)")
    try:
        public, secret_key = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as err:
        raise CurveError(f"{path}: not a valid certificate ({err})") from None
    if secret and secret_key is None:
        raise CurveError(f"{path}: holds no secret key")
    return public, secret_key


@dataclass(frozen=True)
class CurveKeys:
    """The key folder of a run, seen by one party."""

    directory: Path
    party: str

    def own(self) -> tuple[bytes, bytes]:
        """This party's (public, secret) key pair."""
        public, secret = _load(self.directory / f"{self.party}.key_secret", secret=True)
        return public, secret  # type: ignore[return-value]

    def curator_public(self) -> bytes:
        return _load(self.directory / f"{CURATOR}.key", secret=False)[0]

    def allowlist(self) -> dict[bytes, str]:
        """z85 public key -> party id, for every client key in the folder (the curator's excluded)."""
        keys = {}
        for path in sorted(self.directory.glob("*.key")):
            party = path.stem
            if party == CURATOR:
                continue
            public, _ = _load(path, secret=False)
            if public in keys:
                raise CurveError(f"{path}: the same public key as {keys[public]}'s")
            keys[public] = party
        if not keys:
            raise CurveError(f"{self.directory}: no client key (*.key) found")
        return keys

    def configure_server(self, sock: zmq.Socket) -> None:
        public, secret = self.own()
        sock.curve_secretkey = secret
        sock.curve_publickey = public
        sock.curve_server = True

    def configure_client(self, sock: zmq.Socket) -> None:
        public, secret = self.own()
        sock.curve_secretkey = secret
        sock.curve_publickey = public
        sock.curve_serverkey = self.curator_public()


class PartyAuthenticator(ThreadAuthenticator):
    """ZAP handler of the curator's context: admits allowlisted client keys and names each
    connection after the party that owns the key (its ZMQ User-Id).

    A refused key is logged at once with the address that offered it, once per (address, key):
    a party retries its connection every 100 ms or so, and one line says all there is to say. At
    most :data:`LOGGED_REFUSALS` distinct pairs are remembered, so a flood of keys cannot grow
    memory; later ones are only counted (``refused``)."""

    def __init__(self, context: zmq.Context, allowlist: dict[bytes, str], *, name: str = CURATOR) -> None:
        super().__init__(context)
        self.parties = dict(allowlist)
        self.refused = 0
        self.name = name
        self._address = "?"
        self._logged: set[tuple[str, str]] = set()

    def start(self) -> None:
        super().start()
        self.configure_curve_callback(domain="*", credentials_provider=self)

    def handle_zap_message(self, msg: list[bytes]):  # noqa: ANN201 (a coroutine in pyzmq >= 26, None before)
        """Note the peer address of the request (ZAP frame 3), then let pyzmq handle it."""
        if len(msg) >= 6:
            self._address = msg[3].decode("utf-8", errors="replace") or "?"
        return super().handle_zap_message(msg)

    def callback(self, domain: str, z85_key: bytes) -> bool:  # the credentials provider's hook
        allowed = z85_key in self.parties
        if not allowed:
            key = z85_key.decode("ascii", errors="replace")
            self.refused += 1
            if (self._address, key) not in self._logged and len(self._logged) < LOGGED_REFUSALS:
                self._logged.add((self._address, key))
                log.warning("%s: refused a CURVE handshake from %s: its public key %s is in no kit of this run "
                            "(keys from another `marketplace provision` or `keys generate`?)", self.name, self._address, key)
        return allowed

    def curve_user_id(self, client_public_key: bytes) -> str:
        return self.parties[zmq.utils.z85.encode(client_public_key)]
