"""The marketplace's keys: who may connect to the server, and as whom.

``marketplace serve`` keeps them in its state folder and makes any that are missing on start (never
replacing one: a restarted marketplace keeps every identity)::

    STATE/keys/server.key, server.key_secret   the server's certificate
    STATE/keys/owners/owner-1.key ...          the owners' public keys: the server's allowlist
    STATE/keys/consumers/alice.key ...         the allowed consumers' public keys
    STATE/owners/                              the owner agents' folder (what serve starts uses it):
                                               every owner's secret key, server.key, their ledgers
    STATE/consumers/alice/                     alice's kit: alice.key_secret, server.key, market.yaml

A consumer is allowed by adding its public key as ``STATE/keys/consumers/<name>.key``
(:func:`add_consumer`, ``marketplace keys consumer NAME --market STATE``, makes a key pair and a kit,
as ``serve --consumers alice,bob`` does for each name); a connection with any other key is refused at
the CURVE handshake. The file name is the identity: the server names a consumer, and charges its
requests, after the key its connection proved it holds.

A running server sees keys added to or removed from ``STATE/keys/`` without a restart
(:class:`AllowlistReloader`): its handshake re-reads the folders when their modification times
change, at most once a second.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import zmq.auth

from marketplace.transport.curve import CurveError

log = logging.getLogger("marketplace.service.keys")

SERVER = "server"
CONSUMER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
RESERVED_NAMES = (SERVER, "curator", "consumer", "owner")
"""Names the marketplace's own parties and files use (and ``owner-<n>``, :data:`OWNER_NAME`): never a
consumer's. A consumer named ``server`` would get a kit whose ``server.key`` is its own key, not the
server's; one named ``owner-1`` would read as that owner in the state folder and the logs."""
OWNER_NAME = re.compile(r"owner-[0-9]+")


class StateFolderError(ValueError):
    """A folder that is not a marketplace's state, or a consumer that cannot be added to it (the
    message names the folder or the file, and what was expected)."""


def check_consumer_name(name: str) -> str:
    """A new consumer's name: lower case letters, digits, ``-`` and ``_``, starting with a letter, and
    none the marketplace's own parties use (:data:`RESERVED_NAMES`, ``owner-<n>``)."""
    _check_name_syntax(name)
    if name in RESERVED_NAMES or OWNER_NAME.fullmatch(name):
        raise ValueError(
            f"consumer name {name!r}: expected a name of the consumer's own, got one the marketplace uses "
            f"for its own parties and files ({', '.join(RESERVED_NAMES)}, owner-<n>): choose another"
        )
    return name


def _check_name_syntax(name: str) -> str:
    """Lower case letters, digits, ``-`` and ``_``, starting with a letter: what a key file may be
    named after (an existing consumer's key is read whatever name it has of these)."""
    if not CONSUMER_NAME.fullmatch(name):
        raise ValueError(
            f"consumer name {name!r}: expected lower case letters, digits, '-' or '_', starting with a "
            "letter, at most 32 characters"
        )
    return name


def _pair(folder: Path, name: str) -> None:
    """A certificate pair ``name.key`` / ``name.key_secret`` in ``folder``, unless it exists."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not (folder / f"{name}.key_secret").exists():
        zmq.auth.create_certificates(str(folder), name)
        (folder / f"{name}.key_secret").chmod(0o600)


def _copy(source: Path, target: Path) -> None:
    """``source`` copied to ``target``, unless it exists; the copy appears whole (written beside it,
    then renamed), so a server re-reading the folder never reads half a key."""
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = target.with_name(f".{target.name}.tmp")
        shutil.copyfile(source, tmp)
        tmp.replace(target)


def _consumer_kit(keys: Path, kit: Path, name: str, market_text: str | None) -> None:
    """Consumer ``name``'s kit in ``kit`` (its key pair and the server's public key, and the
    marketplace's file when given), then its public key in the allowlist, ``keys/consumers/``:
    published last, so that the key is admitted only once its kit is complete."""
    _pair(kit, name)
    _copy(keys / f"{SERVER}.key", kit / f"{SERVER}.key")
    if market_text is not None:
        _write_market(kit, market_text)
    _copy(kit / f"{name}.key", keys / "consumers" / f"{name}.key")


def _write_market(folder: Path, market_text: str) -> None:
    tmp = folder / "market.yaml.tmp"
    tmp.write_text(market_text)
    tmp.replace(folder / "market.yaml")


def init_keys(
    state: Path, *, owners: int, consumers: list[str], kits: Path | None = None, market_text: str | None = None
) -> None:
    """Make the keys of a marketplace with ``owners`` owners and the named consumers, where missing.

    Without ``kits`` every owner's key pair goes into ``STATE/owners/`` (for the agents ``serve``
    starts itself) and each consumer's kit into ``STATE/consumers/<name>/``. With ``kits``, each
    owner gets a kit folder of its own, ``KITS/<owner>/`` (its key pair and ``server.key``: what
    ``marketplace agent --keys`` reads, and where its ledger goes), each consumer
    ``KITS/consumers/<name>/``, and the server's state keeps only their public keys.

    An owner whose public key the state already holds (``STATE/keys/owners/<owner>.key``) without
    its secret key in ``STATE/owners/`` keeps that key: its secret key is elsewhere, in the owner's
    kit, and no key pair is made for it in ``STATE/owners/`` (the allowlist would never admit it).
    So ``serve``, which calls this on every start, writes no unused owner secret keys into a state
    made with ``--init --kits``; ``STATE/owners/`` is made only for owners whose keys live there.

    ``market_text`` (the marketplace's file, resolved: public) is written as ``market.yaml`` into the
    state folder and every kit, so that an agent or a consumer can check its own rows against the
    marketplace's schema before it sends anything (rewritten on every start: it follows the file)."""
    keys = state / "keys"
    _pair(keys, SERVER)
    owner_folders: list[Path] = []
    for i in range(1, owners + 1):
        party = f"owner-{i}"
        folder = kits / party if kits is not None else state / "owners"
        if kits is None and _key_elsewhere(keys, folder, party):
            continue
        _pair(folder, party)
        _copy(folder / f"{party}.key", keys / "owners" / f"{party}.key")
        _copy(keys / f"{SERVER}.key", folder / f"{SERVER}.key")
        if folder not in owner_folders:
            owner_folders.append(folder)
    for name in consumers:
        check_consumer_name(name)
        kit = (kits / "consumers" if kits is not None else state / "consumers") / name
        _consumer_kit(keys, kit, name, market_text)
    if market_text is not None:
        for folder in [state, *owner_folders]:
            _write_market(folder, market_text)


def owners_with_kits(state: Path, owners: int) -> list[str]:
    """The owners of ``state`` whose keys are in kits of their own (``serve --init --kits``): their
    public key is in ``STATE/keys/owners/`` and their secret key is not in ``STATE/owners/``. Only
    their own ``marketplace agent`` can connect as them: the agents ``serve`` starts cannot."""
    keys = Path(state) / "keys"
    return [f"owner-{i}" for i in range(1, owners + 1) if _key_elsewhere(keys, Path(state) / "owners", f"owner-{i}")]


def _key_elsewhere(keys: Path, folder: Path, party: str) -> bool:
    """Whether ``party``'s public key is already in the allowlist (``keys/owners/``) with its secret
    key not in ``folder``: the owner holds it in a kit of its own (``serve --init --kits``)."""
    return (keys / "owners" / f"{party}.key").exists() and not (folder / f"{party}.key_secret").exists()


def add_consumer(state: str | os.PathLike[str], name: str) -> Path:
    """Allow consumer ``name`` at the marketplace whose state folder is ``state``: make its key pair
    and kit, ``STATE/consumers/<name>/`` (its secret key, 0600, the server's public key and the
    marketplace's ``market.yaml``), exactly as ``serve --consumers NAME`` does, and publish its
    public key as ``STATE/keys/consumers/<name>.key``. Returns the kit's folder, what
    ``marketplace request --keys`` takes.

    A marketplace that is serving admits the new key without a restart. Raises ``ValueError`` for a
    name that is not a consumer's name (:func:`check_consumer_name`), and :class:`StateFolderError`
    for a ``state`` that is not a marketplace's state folder (no ``keys/server.key``) or a consumer
    that already exists (its kit or its public key is there): an existing key is never replaced."""
    folder = Path(state)
    check_consumer_name(name)
    keys = folder / "keys"
    for needed in (keys / f"{SERVER}.key", keys / f"{SERVER}.key_secret"):
        if not needed.is_file():
            raise StateFolderError(
                f"{folder}: not a marketplace's state folder: expected {needed.relative_to(folder)} (made by "
                "`marketplace serve SCENARIO --state DIR`, or `serve --init`)"
            )
    kit, public = folder / "consumers" / name, keys / "consumers" / f"{name}.key"
    if public.exists():
        raise StateFolderError(
            f"consumer {name!r} already exists at {folder}: its public key is {public}"
            + (f" and its kit {kit}" if kit.exists() else "")
            + "; choose another name (an existing key is never replaced)"
        )
    kit.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        kit.mkdir(mode=0o700)  # claims the name: a second `keys consumer NAME` at the same moment fails here
    except FileExistsError:
        raise StateFolderError(
            f"consumer {name!r} already exists at {folder}: its kit is {kit}; choose another name "
            "(an existing key is never replaced)"
        ) from None
    market = folder / "market.yaml"
    _consumer_kit(keys, kit, name, market.read_text() if market.is_file() else None)
    return kit


def allowlist(state: Path) -> dict[bytes, str]:
    """z85 public key -> who holds it: ``owner-3``, or ``consumer:alice``. Raises on the first key
    file that cannot be read, or that names no consumer (what ``serve`` refuses to start with)."""
    found, errors = _read_allowlist(state)
    if errors:
        raise errors[0]
    return found


def _read_allowlist(state: Path) -> tuple[dict[bytes, str], list[ValueError]]:
    """The allowlist of every key file that can be read, and an error for each that cannot."""
    found: dict[bytes, str] = {}
    errors: list[ValueError] = []
    for kind, prefix in (("owners", ""), ("consumers", "consumer:")):
        for path in sorted((state / "keys" / kind).glob("*.key")):
            try:
                if kind == "consumers":
                    try:
                        _check_name_syntax(path.stem)
                    except ValueError as err:
                        raise ValueError(f"{path}: {err}") from None
                public = load_public(path)
                if public in found:
                    raise CurveError(f"{path}: the same public key as {found[public]}'s")
            except ValueError as err:
                errors.append(err)
                continue
            found[public] = prefix + path.stem
    return found, errors


RACY_S = 2.0
"""A folder modified less than this long before it was read may change again within the same tick
of its modification time (file systems keep it to a few milliseconds, some to a second or two):
it is read again at the next check rather than trusted."""


class AllowlistReloader:
    """The allowlist of a serving marketplace, read again when ``STATE/keys/owners/`` or
    ``STATE/keys/consumers/`` changed: what :class:`~marketplace.transport.curve.PartyAuthenticator`
    calls (at most once a second) to admit keys added while it serves and refuse removed ones.

    A call costs two ``stat`` calls when nothing changed, and returns None; when a folder's
    modification time changed it reads the key files and returns the new allowlist. A key file that
    cannot be read (being written, or broken) is left out and logged, and the folders are read again
    at the next call; so is a folder modified within :data:`RACY_S` of the read."""

    def __init__(self, state: Path, *, wall_clock: Callable[[], float] = time.time) -> None:
        self.state = Path(state)
        self._wall_clock = wall_clock
        self._seen: tuple[int | None, ...] | None = None
        """The folders' modification times (ns) when last read, or None: read at the next call."""
        self._logged: set[str] = set()

    def _stamp(self) -> tuple[int | None, ...]:
        stamps: list[int | None] = []
        for kind in ("owners", "consumers"):
            try:
                stamps.append((self.state / "keys" / kind).stat().st_mtime_ns)
            except FileNotFoundError:
                stamps.append(None)
        return tuple(stamps)

    def __call__(self) -> dict[bytes, str] | None:
        stamp = self._stamp()
        if stamp == self._seen:
            return None
        found, errors = _read_allowlist(self.state)
        for err in errors:
            if str(err) not in self._logged and len(self._logged) < 1000:
                self._logged.add(str(err))
                log.warning("a key in %s/keys is left out of the allowlist: %s", self.state, err)
        newest = max((t for t in stamp if t is not None), default=0)
        racy = self._wall_clock() * 1e9 - newest < RACY_S * 1e9
        self._seen = None if errors or racy else stamp
        return found


def load_public(path: Path) -> bytes:
    """The z85 public key of a certificate file."""
    try:
        public, _ = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as err:
        raise CurveError(f"{path}: not a valid certificate ({err})") from None
    return public


def load_pair(path: Path) -> tuple[bytes, bytes]:
    """The (public, secret) z85 keys of a secret certificate file."""
    try:
        public, secret = zmq.auth.load_certificate(str(path))
    except (ValueError, OSError) as err:
        raise CurveError(f"{path}: not a valid certificate ({err})") from None
    if secret is None:
        raise CurveError(f"{path}: holds no secret key")
    return public, secret


def write_public(path: Path, public_z85: str) -> None:
    """A public certificate file holding ``public_z85`` (what ``zmq.auth.load_certificate`` reads)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(f'curve\n    public-key = "{public_z85}"\n')


def find_own_key(folder: Path, name: str | None = None) -> tuple[str, Path]:
    """(name, path) of the one ``*.key_secret`` in ``folder`` (or ``name``'s): a consumer's kit."""
    if name is not None:
        path = folder / f"{name}.key_secret"
        if not path.is_file():
            raise CurveError(f"{folder}: no {name}.key_secret")
        return name, path
    found = sorted(folder.glob("*.key_secret"))
    if len(found) != 1:
        raise CurveError(
            f"{folder}: expected exactly one *.key_secret (a consumer's kit), found {[p.name for p in found] or 'none'}"
        )
    return found[0].name[: -len(".key_secret")], found[0]
