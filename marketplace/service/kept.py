"""What a served session released to its consumer, kept so that the consumer can fetch it again.

Once an owner's release has left it, the owner is charged for it, whether or not the consumer's
client is still there to read what the curator made of it. So the server keeps, for every session,
what the consumer is owed: the frames the session's curator addressed to the consumer (the protocol's
outputs for it, already differentially private, and the runtime's frames between them, such as the
``shutdown`` that ends the run), the session's scenario, and the run report with the parties' reports
the consumer assembles its own copy from. They are written to the session's folder when the session
ends (``STATE/sessions/<id>/kept.msgpack``), so they outlast the consumer's connection and a restart
of the server. ``marketplace request --resume SESSION`` (:func:`marketplace.service.client.request`
with ``resume=``) asks for them: the server answers as it did in the session, and the consumer runs
its part again on them, in its own process, with its own rows.

Nothing here is new to the server: it ran the curator that made these frames. Only the consumer whose
key asked for the session gets them; a session id that is not one of the server's, or another
consumer's, is refused with one sentence that tells the two apart for nobody.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import msgspec

KEPT_FILE = "kept.msgpack"
SESSION_ID = re.compile(r"s[0-9]{4,12}-[0-9a-f]{8}")
"""A session id as the server makes them (:func:`marketplace.service.sessions.new_session_id`): the
only ids that name a folder, so a claimed id never reaches the file system as a path."""
MAX_KEPT_BYTES = 1 << 31
"""The largest kept file read back (a session's frames to its consumer, each at most the transport's
``max_message_bytes``)."""


class Kept(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One session's outputs for its consumer (module docstring)."""

    session: str
    consumer: str
    scenario: str
    """The session's scenario as YAML, as its parties got it."""
    frames: list[bytes]
    """The curator's frames to the consumer, in the order they were sent."""
    status: Literal["completed", "failed"]
    report: bytes
    """The run report (JSON) as the server assembled it."""
    parties: bytes
    """The parties' reports as the server received them (:func:`~marketplace.service.session_run.handed_back`)."""


def is_session_id(text: str) -> bool:
    """Whether ``text`` is a session id this server could have made (module docstring)."""
    return SESSION_ID.fullmatch(text) is not None


def keep(folder: Path, kept: Kept) -> None:
    """Write ``kept`` into the session's folder, atomically (a reader sees the whole file or none).
    Raises OSError when the disk refuses."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = folder / f"{KEPT_FILE}.tmp"
    with open(tmp, "wb") as out:
        out.write(msgspec.msgpack.encode(kept))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, folder / KEPT_FILE)


def kept_for(state: Path, session: str, consumer: str) -> Kept | None:
    """What session ``session`` of the server whose state folder is ``state`` released to ``consumer``,
    or None: not a session id, no such session kept, another consumer's, or a file that does not read
    (each is the same answer to the asker)."""
    if not is_session_id(session):
        return None
    path = state / "sessions" / session / KEPT_FILE
    try:
        if path.stat().st_size > MAX_KEPT_BYTES:
            return None
        kept = msgspec.msgpack.decode(path.read_bytes(), type=Kept)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return kept if kept.session == session and kept.consumer == consumer else None
