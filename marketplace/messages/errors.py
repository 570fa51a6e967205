"""The one error type for anything wrong with a received message."""

from __future__ import annotations

ECHO_LIMIT = 200
"""The most characters of a received value an error message repeats (a run_id of 8 MiB is not echoed)."""


def cut(text: str, limit: int = ECHO_LIMIT, *, whole: str = "") -> str:
    """``text`` cut to at most ``limit`` characters, saying how long it was when it is cut (and, with
    ``whole``, where the whole text is)."""
    text = str(text)
    if len(text) <= limit:
        return text
    where = f"; the full text is in {whole}" if whole else ""
    return f"{text[:limit]}... ({len(text)} characters{where})"


class MessageError(ValueError):
    """A frame that cannot be accepted: it says which party, which kind, which field, what was expected.

    ``party`` is the sending party as far as it is known (the transport identity, or the envelope's
    claimed sender); ``kind`` is the message kind if it could be read. The receiving role answers the
    sender with an ``error`` message built from these fields and keeps serving.
    """

    def __init__(
        self, *, party: str, kind: str | None, field: str, expected: str, got: str, msg_id: int | None = None
    ) -> None:
        party, got, expected = cut(party, 64), cut(got), cut(expected, 400)
        self.party = party
        self.msg_id = msg_id
        """The refused message's id, when it could be read (error replies point at it)."""
        self.kind = kind
        self.field = field
        self.expected = expected
        self.got = got
        kind_text = f"kind {kind!r}" if kind else "unknown kind"
        super().__init__(f"bad message from {party} ({kind_text}): field {field!r} expected {expected}, got {got}")


class ProtocolError(RuntimeError):
    """A well-formed message that the receiving role cannot accept in its current state."""

    def __init__(self, *, party: str, kind: str, reason: str) -> None:
        self.party = party
        self.kind = kind
        self.reason = reason
        super().__init__(f"unexpected {kind!r} from {party}: {reason}")
