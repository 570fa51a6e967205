"""The marketplace's keys: who may connect to the server, and as whom.

``marketplace serve`` keeps them in its state folder and makes any that are missing on start (never
replacing one: a restarted marketplace keeps every identity)::

    STATE/keys/server.key, server.key_secret   the server's certificate
    STATE/keys/owners/owner-1.key ...          the owners' public keys: the server's allowlist
    STATE/keys/consumers/alice.key ...         the allowed consumers' public keys
    STATE/owners/                              the owner agents' folder (what serve starts uses it):
                                               every owner's secret key, server.key, their ledgers
    STATE/consumers/alice/                     alice's kit: alice.key_secret and server.key

A consumer is allowed by adding its public key as ``STATE/keys/consumers/<name>.key`` (``serve
--consumers alice,bob`` makes a key pair and a kit for each name); a connection with any other key is
refused at the CURVE handshake. The file name is the identity: the server names a consumer, and
charges its requests, after the key its connection proved it holds.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import zmq.auth

from marketplace.transport.curve import CurveError

SERVER = "server"
CONSUMER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


def check_consumer_name(name: str) -> str:
    """A consumer's name: lower case letters, digits, ``-`` and ``_``, starting with a letter."""
    if not CONSUMER_NAME.match(name):
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
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copyfile(source, target)


def init_keys(
    state: Path, *, owners: int, consumers: list[str], kits: Path | None = None, market_text: str | None = None
) -> None:
    """Make the keys of a marketplace with ``owners`` owners and the named consumers, where missing.

    Without ``kits`` every owner's key pair goes into ``STATE/owners/`` (for the agents ``serve``
    starts itself) and each consumer's kit into ``STATE/consumers/<name>/``. With ``kits``, each
    owner gets a kit folder of its own, ``KITS/<owner>/`` (its key pair and ``server.key``: what
    ``marketplace agent --keys`` reads, and where its ledger goes), each consumer
    ``KITS/consumers/<name>/``, and the server's state keeps only their public keys.

    ``market_text`` (the marketplace's file, resolved: public) is written as ``market.yaml`` into the
    state folder and every kit, so that an agent or a consumer can check its own rows against the
    marketplace's schema before it sends anything (rewritten on every start: it follows the file)."""
    keys = state / "keys"
    _pair(keys, SERVER)
    for i in range(1, owners + 1):
        party = f"owner-{i}"
        folder = kits / party if kits is not None else state / "owners"
        _pair(folder, party)
        _copy(folder / f"{party}.key", keys / "owners" / f"{party}.key")
        _copy(keys / f"{SERVER}.key", folder / f"{SERVER}.key")
    for name in consumers:
        check_consumer_name(name)
        kit = (kits / "consumers" if kits is not None else state / "consumers") / name
        _pair(kit, name)
        _copy(keys / f"{SERVER}.key", kit / f"{SERVER}.key")
        _copy(kit / f"{name}.key", keys / "consumers" / f"{name}.key")
    if market_text is not None:
        folders = [
            state,
            *([kits / f"owner-{i}" for i in range(1, owners + 1)] if kits is not None else [state / "owners"]),
            *((kits / "consumers" if kits is not None else state / "consumers") / name for name in consumers),
        ]
        for folder in folders:
            tmp = folder / "market.yaml.tmp"
            tmp.write_text(market_text)
            tmp.replace(folder / "market.yaml")


def allowlist(state: Path) -> dict[bytes, str]:
    """z85 public key -> who holds it: ``owner-3``, or ``consumer:alice``."""
    found: dict[bytes, str] = {}
    for kind, prefix in (("owners", ""), ("consumers", "consumer:")):
        for path in sorted((state / "keys" / kind).glob("*.key")):
            if kind == "consumers":
                check_consumer_name(path.stem)
            public = load_public(path)
            if public in found:
                raise CurveError(f"{path}: the same public key as {found[public]}'s")
            found[public] = prefix + path.stem
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
