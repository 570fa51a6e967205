"""CURVE: authenticated, encrypted links, with each party's identity bound to its key.

``marketplace keys generate DIR --owners K`` writes one certificate pair per party
(``curator.key`` / ``curator.key_secret``, ``owner-1.key`` ..., ``consumer.key``) with pyzmq's
``zmq.auth.create_certificates``. The file name is the party id: the curator's allowlist maps
each client public key to the party it belongs to.

The curator runs a ZAP handler (:class:`PartyAuthenticator`) that admits only allowlisted keys
and stamps every message with the key's party id as its ZMQ ``User-Id``. The ROUTER loop takes each
message's sender from that User-Id (DEALERs set no routing id, so none can pick a name): an owner
holding owner-2's key can speak only as owner-2. Traffic is encrypted (CurveZMQ: Curve25519 key
exchange, XSalsa20-Poly1305 per message).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
import zmq.utils.z85

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
            raise CurveError(
                f"{public} already exists: refusing to overwrite keys (marketplace keys generate --force replaces them)"
            )
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
        path = self.directory / f"{self.party}.key_secret"
        public, secret = _load(path, secret=True)
        if secret is None:  # _load(secret=True) already refused it: narrows the type
            raise CurveError(f"{path}: holds no secret key")
        return public, secret

    def curator_public(self) -> bytes:
        return _load(self.directory / f"{CURATOR}.key", secret=False)[0]

    def allowlist(self) -> dict[bytes, str]:
        """z85 public key -> party id, for every client key in the folder (the curator's excluded)."""
        keys: dict[bytes, str] = {}
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


ZAP_ENDPOINT = "inproc://zeromq.zap.01"
"""Where libzmq sends a context's authentication requests (ZeroMQ RFC 27, ZAP)."""
ZAP_VERSION = b"1.0"
ZAP_POLL_MS = 1000
"""The handler's longest wait between checks of its stop flag (stop() wakes it at once anyway)."""
RELOAD_INTERVAL_S = 1.0
"""The handler asks for its allowlist again at most this often (when it was given a ``reload``)."""
MAX_WAITING = 1000
"""Unknown keys held for the next allowlist check at most; more are refused at once."""

Reload = Callable[[], Mapping[bytes, str] | None]
"""A fresh allowlist (z85 public key -> party id), or None when it has not changed."""


class PartyAuthenticator:
    """ZAP handler of the curator's context: admits allowlisted client keys and names each
    connection after the party that owns the key (its ZMQ User-Id).

    It admits the CURVE mechanism only, with a key of the allowlist; any other request (another
    mechanism, malformed credentials, another ZAP version) is refused. It is a plain thread with one
    loop over the ZAP socket: a request costs a dictionary lookup and a reply, 55 µs a request where
    pyzmq's asyncio-based authenticator took 167 µs on the same machine (a thousand owners connect at
    once, and the handler shares the curator's interpreter lock).

    A refused key is logged at once with the address that offered it, once per (address, key):
    a party retries its connection every 100 ms or so, and one line says all there is to say. At
    most :data:`LOGGED_REFUSALS` distinct pairs are remembered, so a flood of keys cannot grow
    memory; later ones are only counted (``refused``).

    With ``reload`` (a callable returning a fresh allowlist, or None when it has not changed) the
    allowlist can change while the handler serves: before answering a request it calls ``reload``,
    at most once every :data:`RELOAD_INTERVAL_S` (``clock`` seconds), and a new allowlist replaces
    the old one: keys added since are admitted, keys removed are refused from then on (connections
    already admitted stay). An unknown key that comes less than that interval after the last call
    waits for the next one before it is answered (a key added a moment ago is not refused for being
    early); at most :data:`MAX_WAITING` wait, further ones are refused at once. So a flood of
    unknown keys costs one ``reload`` a second, whatever its size."""

    def __init__(
        self,
        context: zmq.Context,
        allowlist: Mapping[bytes, str],
        *,
        name: str = CURATOR,
        reload: Reload | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.context = context
        self.parties = self._decoded(allowlist)
        """Raw 32-byte public key -> party id."""
        self.refused = 0
        self.name = name
        self._reload = reload
        self._clock = clock
        self._reload_due = clock()
        self._waiting: deque[tuple[bytes, list[bytes]]] = deque()
        """(ZAP envelope, request) of unknown keys held until the next reload is due."""
        self._logged: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._serve, name="zap", daemon=True)

    def start(self, timeout_s: float = 10.0) -> None:
        """Bind the ZAP endpoint and serve it on a thread; returns once requests can be answered
        (a context with no ZAP handler would admit every key)."""
        self._thread.start()
        if not self._ready.wait(timeout_s) or self._error is not None:
            raise RuntimeError(f"{self.name}: the ZAP handler did not start: {self._error or 'timed out'}")

    def stop(self) -> None:
        """Stop serving, at once (the thread is woken, not left to notice at its next poll)."""
        self._stop.set()
        if self._thread.is_alive():
            wake = self.context.socket(zmq.PAIR)
            wake.setsockopt(zmq.LINGER, 0)
            wake.connect(self._wake_endpoint)
            try:
                wake.send(b"", zmq.NOBLOCK)
            except zmq.Again:  # not attached yet: the stop flag is seen at the next poll instead
                pass
            self._thread.join(timeout=5.0)
            wake.close(linger=0)

    @property
    def _wake_endpoint(self) -> str:
        return f"inproc://marketplace-zap-stop-{id(self)}"

    def _serve(self) -> None:
        try:
            sock = self.context.socket(zmq.ROUTER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.bind(ZAP_ENDPOINT)
            wake = self.context.socket(zmq.PAIR)
            wake.setsockopt(zmq.LINGER, 0)
            wake.bind(self._wake_endpoint)
        except zmq.ZMQError as err:
            self._error = err
            self._ready.set()
            return
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(wake, zmq.POLLIN)
        self._ready.set()
        try:
            while not self._stop.is_set():
                wait_ms = ZAP_POLL_MS
                if self._waiting:
                    wait_ms = max(0, min(wait_ms, int((self._reload_due - self._clock()) * 1000) + 1))
                ready = dict(poller.poll(wait_ms))
                for envelope, request in self.answer_waiting():
                    sock.send_multipart([envelope, b"", *request])
                if wake in ready or sock not in ready:
                    continue
                frames = sock.recv_multipart()
                if len(frames) <= 2 or frames[1] != b"" or self.hold(frames[0], frames[2:]):
                    continue
                reply = self.answer(frames[2:])
                if reply is not None:
                    sock.send_multipart([frames[0], b"", *reply])
        finally:
            sock.close(linger=0)
            wake.close(linger=0)

    def answer(self, request: list[bytes]) -> list[bytes] | None:
        """The reply frames to one ZAP request (version, request id, domain, address, identity,
        mechanism, credentials...), or None when it is too short to name the request to answer."""
        if len(request) < 6:
            log.error("%s: a ZAP request of %d frames (at least 6 expected): not answered", self.name, len(request))
            return None if len(request) < 2 else self._reply(request[1], b"400", b"Not enough frames")
        version, request_id, _domain, address, _identity, mechanism, *credentials = request
        if version != ZAP_VERSION:
            return self._reply(request_id, b"400", b"Invalid version")
        if mechanism != b"CURVE" or len(credentials) != 1 or len(credentials[0]) != 32:
            return self._reply(request_id, b"400", b"Only CURVE with a 32-byte key is admitted")
        self._refresh()
        party = self.parties.get(credentials[0])
        if party is None:
            self._refuse(address.decode("utf-8", errors="replace") or "?", credentials[0])
            return self._reply(request_id, b"400", b"Unknown key")
        return self._reply(request_id, b"200", b"OK", party.encode())

    def hold(self, envelope: bytes, request: list[bytes]) -> bool:
        """Whether ``request`` waits for the next reload (kept with its ``envelope`` until
        :meth:`answer_waiting` answers it): a CURVE request with an unknown key, while a reload is
        not due yet and fewer than :data:`MAX_WAITING` wait."""
        if self._reload is None or self._clock() >= self._reload_due or len(self._waiting) >= MAX_WAITING:
            return False
        if len(request) != 7 or request[0] != ZAP_VERSION or request[5] != b"CURVE" or len(request[6]) != 32:
            return False
        if request[6] in self.parties:
            return False
        self._waiting.append((envelope, request))
        return True

    def answer_waiting(self) -> list[tuple[bytes, list[bytes]]]:
        """(envelope, reply) for every held request, once a reload is due (none before)."""
        if not self._waiting or self._clock() < self._reload_due:
            return []
        answered = []
        while self._waiting:
            envelope, request = self._waiting.popleft()
            reply = self.answer(request)
            if reply is not None:
                answered.append((envelope, reply))
        return answered

    def _refresh(self) -> None:
        """Ask ``reload`` for the allowlist, when one is due; a new one replaces the old."""
        if self._reload is None or self._clock() < self._reload_due:
            return
        self._reload_due = self._clock() + RELOAD_INTERVAL_S
        try:
            fresh = self._reload()
        except Exception:  # noqa: BLE001 - the handler serves on with the allowlist it has
            log.exception("%s: the allowlist could not be read again; the previous one stays", self.name)
            return
        if fresh is not None:
            parties = self._decoded(fresh)
            if parties != self.parties:
                log.info(
                    "%s: the allowlist changed: %d keys admitted (was %d)", self.name, len(parties), len(self.parties)
                )
            self.parties = parties

    @staticmethod
    def _decoded(allowlist: Mapping[bytes, str]) -> dict[bytes, str]:
        return {zmq.utils.z85.decode(key): party for key, party in allowlist.items()}

    @staticmethod
    def _reply(request_id: bytes, status: bytes, text: bytes, user_id: bytes = b"") -> list[bytes]:
        return [ZAP_VERSION, request_id, status, text, user_id, b""]

    def _refuse(self, address: str, key: bytes) -> None:
        z85 = zmq.utils.z85.encode(key).decode("ascii")
        self.refused += 1
        if (address, z85) not in self._logged and len(self._logged) < LOGGED_REFUSALS:
            self._logged.add((address, z85))
            log.warning(
                "%s: refused a CURVE handshake from %s: its public key %s is in no kit of this run "
                "(keys from another `marketplace provision` or `keys generate`?)",
                self.name,
                address,
                z85,
            )
