"""Where a party's privacy noise comes from, and who else could recompute it.

Noise protects a party's data only if no other party can recompute it: whoever can regenerate a
Laplace or Gaussian draw can subtract it from the release and read the exact value. So every noise
stream of a party is derived from two things:

* the **run seed**, which every party of a run holds (it is in the scenario each party reads), and
* the party's **noise key**: 32 random bytes that only that party holds (``<party>.noise_key`` in its
  key folder or kit, readable by its owner only).

The three origins a party's noise can have (``noise.source`` in the scenario):

=========  ======================================================  ==============================
origin     the noise stream is derived from                        who else could recompute it
=========  ======================================================  ==============================
``seed``   the run seed alone                                      anyone who knows the run seed:
                                                                   every party of the run
``key``    the run seed and the party's noise key file             whoever can read that file
``fresh``  the run seed and a key drawn from OS entropy at start,  nobody
           never written anywhere
=========  ======================================================  ==============================

With ``secure: true`` in a protocol's privacy settings the noise comes from OpenDP's exact samplers
and OS entropy whatever the origin (:mod:`marketplace.privacy.rng`): nobody can recompute it.

``marketplace run`` (a simulation on one machine) uses ``seed`` unless told otherwise, so that one
seed reproduces a run exactly whichever driver moved the messages; its report says that every party
of the run could strip every other party's noise. ``noise.source: keys`` gives each party a key of
its own (fresh keys in the run's ``keys/`` folder, or the files of ``noise.keys``; naming a folder
in ``noise.keys`` alone means ``keys``, and ``seed`` with a folder is refused): the runner holds
every key, so it still reproduces the run, and the report names the files that could strip each
party's noise. A party started on its own (``marketplace owner|owners|curator|consumer``, a kit, a
container) reads its key file, or draws a fresh key when it has none: never the seed alone, unless
the scenario says ``noise.source: seed`` explicitly.

>>> a = derive(7, "sketch.noise.owner-1", NoiseOrigin.seed()).generate_state(2)
>>> b = derive(7, "sketch.noise.owner-1", NoiseOrigin.from_key(bytes(32), "k")).generate_state(2)
>>> bool((a == b).all())
False
"""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marketplace import seeds

__all__ = [
    "KEY_BYTES",
    "ORIGINS",
    "SUFFIX",
    "NoiseOrigin",
    "coins_note",
    "derive",
    "describe",
    "find_key_file",
    "origin_of",
    "read_key",
    "resolve",
    "write_key",
    "write_keys",
]

KEY_BYTES = 32
SUFFIX = ".noise_key"
SOURCES = ("auto", "seed", "keys")


@dataclass(frozen=True)
class NoiseOrigin:
    """The origin of one party's noise: ``kind`` is ``seed``, ``key`` or ``fresh`` (module docstring);
    ``key`` the party's noise key (None for ``seed``); ``where`` the key file's path (``key`` only)."""

    kind: str
    key: bytes | None = None
    where: str = ""
    request: str = ""
    """The lifetime request id this party's noise is drawn for (mixed into every stream): two
    requests charged to a lifetime ledger never draw the same noise from one seed and key, which
    the ledger's composition assumes. Empty: no request id (a run without lifetime ledgers)."""

    def __post_init__(self) -> None:
        if self.kind not in ("seed", "key", "fresh"):
            raise ValueError(
                f"The 'kind' of a NoiseOrigin must be 'seed', 'key' or 'fresh'. Got {self.kind!r} instead."
            )
        if (self.key is None) != (self.kind == "seed"):
            raise ValueError(
                f"A NoiseOrigin of kind {self.kind!r} {'takes no' if self.kind == 'seed' else 'needs a'} key"
            )
        if self.key is not None and len(self.key) != KEY_BYTES:
            raise ValueError(f"A noise key must be {KEY_BYTES} bytes. Got {len(self.key)} bytes instead.")

    @classmethod
    def seed(cls) -> NoiseOrigin:
        return cls("seed")

    @classmethod
    def from_key(cls, key: bytes, where: str) -> NoiseOrigin:
        return cls("key", key, str(where))

    @classmethod
    def fresh(cls) -> NoiseOrigin:
        """A key from OS entropy that is never written anywhere: nobody can recompute the noise."""
        return cls("fresh", secrets.token_bytes(KEY_BYTES))

    def __repr__(self) -> str:  # never print a key
        return f"NoiseOrigin({self.kind!r}{', ' + repr(self.where) if self.where else ''})"


def derive(seed: int, purpose: str, origin: NoiseOrigin | None) -> np.random.SeedSequence:
    """The seed sequence of one noise stream (``purpose``) of a party whose noise has ``origin``.

    ``seed`` origin (or None) gives exactly :func:`marketplace.seeds.derive`; a key adds its 256 bits
    to the entropy, so without the key the stream cannot be recomputed from the seed."""
    if origin is None or (origin.key is None and not origin.request):
        return seeds.derive(seed, purpose)
    words = [] if origin.key is None else _words(origin.key)
    if origin.request:  # after the key's words: without a request id the streams are exactly as before
        words += _words(hashlib.sha256(b"marketplace noise request " + origin.request.encode()).digest())
    return np.random.SeedSequence(entropy=[seed, *words], spawn_key=(seeds.purpose_key(purpose),))


def _words(key: bytes) -> list[int]:
    return [int.from_bytes(key[i : i + 4], "little") for i in range(0, len(key), 4)]


ORIGINS = ("seed", "key", "fresh", "secure")
"""What a report's ``origin`` of a party's noise can be: its :class:`NoiseOrigin` kind, or ``secure``
(OpenDP's exact samplers and OS entropy, whatever the kind)."""


def describe(origin: NoiseOrigin, party: str, *, secure: bool) -> dict[str, Any]:
    """What a report says about ``party``'s noise: its ``origin`` (one of :data:`ORIGINS`, for
    programs), its ``source`` (in words) and ``who_can_strip`` it (recompute and subtract it, which
    reveals the exact value the noise was meant to hide). A request id adds nothing secret: it is
    in the scenario every party reads, like the seed."""
    if secure:
        return {
            "origin": "secure",
            "source": "OS entropy (OpenDP's exact samplers, secure mode)",
            "reproducible": False,
            "who_can_strip": "nobody",
        }
    per_request = f" and the request id ({origin.request})" if origin.request else ""
    if origin.kind == "seed":
        return {
            "origin": "seed",
            "source": "the run seed" + per_request,
            "reproducible": True,
            "who_can_strip": "anyone who knows the run seed: every party of this run (it is in the scenario each "
            "party reads) and every reader of this report or the run's scenario file",
        }
    if origin.kind == "key":
        return {
            "origin": "key",
            "source": f"the run seed{per_request} and {party}'s noise key",
            "reproducible": True,
            "key_file": origin.where,
            "who_can_strip": f"only whoever can read {party}'s noise key file ({origin.where})",
        }
    return {
        "origin": "fresh",
        "source": f"the run seed{per_request} and a key {party} drew from OS entropy and never wrote down",
        "reproducible": False,
        "who_can_strip": "nobody",
    }


def origin_of(described: dict[str, Any]) -> str:
    """The ``origin`` of a :func:`describe` dict. One written before reports carried it (a party
    report of an older version) is read conservatively: noise that can be drawn again without a key
    file is taken for the seed's."""
    origin = described.get("origin")
    if origin in ORIGINS:
        return origin
    if described.get("key_file"):
        return "key"
    if described.get("reproducible") is False and described.get("who_can_strip") == "nobody":
        return "fresh"
    return "seed"


def coins_note(described: dict[str, Any], coins: str) -> str | None:
    """What a ledger whose mechanism draws ``coins`` (a sampled choice, such as whom an auction
    asks) from a party's noise stream must add to its ``noise``, given that stream's description
    (:func:`describe`): who else can reproduce the coins, against whom the ledger's eps therefore
    does not hold. None when nobody else can (a fresh key, secure mode)."""
    origin = origin_of(described)
    if origin == "seed":
        return (
            f"{coins} come from this party's seed-derived noise stream: any party that knows the run seed (every "
            "party of this run, and every reader of this report or the run's scenario file) can reproduce them, so "
            "this ledger's eps does not hold against such a party"
        )
    if origin == "key":
        where = described.get("key_file") or "the party's noise key file"
        return (
            f"{coins} come from this party's keyed noise stream: only whoever can read its noise key file ({where}) "
            "can reproduce them, and against them this ledger's eps does not hold"
        )
    return None


def key_file(folder: str | Path, party: str) -> Path:
    return Path(folder) / f"{party}{SUFFIX}"


def find_key_file(folder: str | Path, party: str) -> Path | None:
    """``party``'s key file in ``folder``: ``folder/<party>.noise_key``, or the kit layout
    ``folder/<party>/<party>.noise_key`` (a folder of kits made by ``marketplace provision``)."""
    for path in (key_file(folder, party), key_file(Path(folder) / party, party)):
        if path.is_file():
            return path
    return None


def write_key(folder: str | Path, party: str, key: bytes | None = None) -> Path:
    """Write ``party``'s noise key (fresh from OS entropy unless given) to ``folder``, readable by its
    owner only (mode 0600 from the start), and return the file's path."""
    key = secrets.token_bytes(KEY_BYTES) if key is None else key
    if len(key) != KEY_BYTES:
        raise ValueError(f"A noise key must be {KEY_BYTES} bytes. Got {len(key)} bytes instead.")
    path = key_file(folder, party)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"# {party}'s noise key: whoever reads this file can strip {party}'s privacy noise. Keep it private.\n")
        f.write(key.hex() + "\n")
    os.replace(tmp, path)
    return path


def write_keys(folder: str | Path, parties: list[str]) -> dict[str, Path]:
    """A fresh noise key for each of ``parties`` in ``folder`` (see :func:`write_key`)."""
    return {party: write_key(folder, party) for party in parties}


def read_key(path: str | Path, party: str) -> bytes:
    """The key in ``path`` (written by :func:`write_key`); a ValueError names the file and what is wrong."""
    try:
        lines = [ln.strip() for ln in Path(path).read_text(encoding="ascii").splitlines()]
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{party}: cannot read its noise key file {path}: {err}") from None
    body = [ln for ln in lines if ln and not ln.startswith("#")]
    try:
        key = bytes.fromhex(body[0]) if len(body) == 1 else b""
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise ValueError(
            f"{party}: noise key file {path}: expected one line of {2 * KEY_BYTES} hex digits "
            f"(a {KEY_BYTES}-byte key), got {len(body)} line(s) of other content"
        )
    return key


def resolve(source: str, party: str, folders: list[str | Path | None], *, started_alone: bool) -> NoiseOrigin:
    """The origin of ``party``'s noise under ``noise.source`` = ``source``.

    ``seed``: the run seed alone. ``keys``: the first of ``folders`` holding ``party``'s key file; a
    fresh key if none does. ``auto``: ``keys`` for a party started alone (``started_alone``), else
    ``seed`` (``marketplace run`` resolves ``auto`` before it starts any party)."""
    if source not in SOURCES:
        raise ValueError(f"noise.source: expected one of {list(SOURCES)}, got {source!r}")
    if source == "seed" or (source == "auto" and not started_alone):
        return NoiseOrigin.seed()
    for folder in folders:
        if folder is None:
            continue
        path = find_key_file(folder, party)
        if path is not None:
            return NoiseOrigin.from_key(read_key(path, party), str(path.resolve()))
    return NoiseOrigin.fresh()
