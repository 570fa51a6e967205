"""A broadcast's frames share their body's bytes: the body is decoded once, each head apart."""

from __future__ import annotations

import numpy as np

from marketplace.messages import PROTOCOL_VERSION, Envelope, decode, decode_sharing, encode_body, encode_framed
from marketplace.protocols.summarize.messages import Bid, RoundOpen


def _frame(body: object, receiver: str, msg_id: int, kind: str = "round_open") -> bytes:
    head = Envelope(PROTOCOL_VERSION, "run", msg_id, "curator", receiver, kind, None, None)
    return encode_framed(head, encode_body(body))


def test_every_frame_of_a_broadcast_decodes_as_alone_with_one_body() -> None:
    body = RoundOpen(round=2, q=3, summary_mean=np.linspace(-1.0, 1.0, 50))
    first = decode(_frame(body, "owner-1", 1), peer="curator")
    raw = encode_body(first.body)
    for i in range(2, 6):
        frame = _frame(body, f"owner-{i}", 10 + i)
        shared = decode_sharing(frame, first, raw, peer="curator")
        alone = decode(frame, peer="curator")
        assert shared is not None and shared.body is first.body
        assert shared.receiver == alone.receiver and shared.msg_id == alone.msg_id
        assert shared.kind == alone.kind and shared.run_id == alone.run_id and shared.sender == alone.sender
        assert np.array_equal(shared.body.summary_mean, alone.body.summary_mean)


def test_another_body_kind_or_sender_is_decoded_whole() -> None:
    body = RoundOpen(round=2, q=3, summary_mean=np.zeros(8))
    first = decode(_frame(body, "owner-1", 1), peer="curator")
    raw = encode_body(first.body)
    other = RoundOpen(round=3, q=3, summary_mean=np.zeros(8))
    assert decode_sharing(_frame(other, "owner-2", 2), first, raw) is None
    assert decode_sharing(_frame(Bid(round=2, value=0.5, available=True), "owner-2", 2, "bid"), first, raw) is None
    assert decode_sharing(_frame(body, "owner-2", 2), first, raw, peer="owner-9") is None
    broken = bytearray(_frame(body, "owner-2", 2))
    broken[0] ^= 0xFF  # not a map any more
    assert decode_sharing(bytes(broken), first, raw) is None
