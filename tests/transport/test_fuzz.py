"""Bad and malicious input: random and mutated frames against the decoder and against every role.

The mutators live in ``tests/fuzzing.py`` (shared with ``benchmarks/bench_fuzz.py``, which runs
100,000 frames). Here hypothesis drives them: it picks the base frame, the mutations and every
random choice inside them, so a failure shrinks to a small reproducible case.

What must hold for every frame (``fuzzing.feed``): ``Node.receive`` returns; the frame is counted
once, as received or as rejected under a known reason; a bad frame's error names the field; every
reply is itself a valid frame. And for the run: hostile frames slipped in before every honest
delivery leave no trace, so the honest run completes with exactly the clean run's result.
"""

from __future__ import annotations

import functools
import logging
import random
import re

import fuzzing
import msgpack
import numpy as np
import pytest
from conftest import tiny_raw
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, MessageError, decode, encode
from marketplace.messages.kinds import Error, Hello
from marketplace.parties import make_world
from marketplace.protocols.summarize.messages import Point
from marketplace.scenario import parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node

FUZZ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@pytest.fixture(autouse=True)
def quiet_nodes():
    """Every refused frame logs a warning; thousands of them would only slow the tests down."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


STC = {
    "name": "stc-tiny",
    "protocol": "stc",
    "seed": 5,
    "parties": {"owners": 2},
    "data": {
        "source": {"kind": "stc_synthetic", "stc_synthetic": {"which": 2, "n_source": 200, "n_target": 150}},
        "partition": {"scheme": "even", "groups": [0]},
        "consumer": {"target_groups": [1], "target_share": 0.99, "validation_size": 120, "test_size": 5},
        "seed_set": {"size": 0},
    },
    "stc": {"release": "nna", "k": 4, "domain": {"low": [0.0], "high": [1.0]}},
}
SCENARIOS = {"summarize": tiny_raw(), "summarize-less-trusted": tiny_raw(curator="less_trusted"), "stc": STC}


@functools.cache
def prepared(name: str):
    """(config, world, clean traffic, clean nodes) of a scenario, built once per test session."""
    config = parse_scenario(SCENARIOS[name], source=name, base_dir=".").config
    world = make_world(config, plugins.exchange(config.protocol))
    nodes = fuzzing.nodes_for(config, world)
    clean = fuzzing.run_recorded(nodes)
    assert all(n.done and not n.role.failure for n in nodes)
    return config, world, clean, nodes


def all_frames() -> list[bytes]:
    return [d.frame for name in SCENARIOS for d in prepared(name)[2]]


def outcome(nodes: list[Node]) -> dict:
    """What a run produced, per party (to compare a fuzzed run with the clean one)."""
    return {n.party_id: (n.done, n.role.failure, repr(n.role.result())) for n in nodes}


# --- (a) the decoder ---------------------------------------------------------------------------


def decode_or_message_error(frame: bytes) -> Envelope | MessageError:
    try:
        return decode(frame, max_bytes=fuzzing.MAX_BYTES)
    except MessageError as err:
        assert fuzzing.DETAIL_RE.match(str(err)), str(err)
        return err


@FUZZ
@given(frame=st.binary(max_size=600))
def test_random_bytes_decode_or_raise_message_error_only(frame: bytes) -> None:
    decode_or_message_error(frame)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    names=st.lists(st.sampled_from(sorted(fuzzing.MUTATORS)), min_size=1, max_size=3),
    rng=st.randoms(use_true_random=False),
)
def test_mutated_frames_decode_or_raise_message_error_only(data, names: list[str], rng: random.Random) -> None:
    pool = all_frames()
    base = data.draw(st.sampled_from(pool))
    decode_or_message_error(fuzzing.mutate(rng, base, pool, names))


@pytest.mark.parametrize("mutator", sorted(fuzzing.MUTATORS))
def test_every_mutator_yields_frames_the_decoder_refuses_or_accepts(mutator: str) -> None:
    """Each mutator, 60 times over every kind of frame of every protocol: no other exception."""
    pool = all_frames()
    rng = random.Random(mutator)
    refused = 0
    for _ in range(60):
        got = decode_or_message_error(fuzzing.mutate(rng, rng.choice(pool), pool, [mutator]))
        refused += isinstance(got, MessageError)
    if mutator not in ("replay", "swap_body", "swap_kind", "duplicate_key", "lying_shape", "extreme_number"):
        assert refused > 0  # the mutator really damages frames


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    names=st.lists(st.sampled_from(sorted(fuzzing.MUTATORS)), min_size=1, max_size=3),
    rng=st.randoms(use_true_random=False),
)
def test_the_fast_decoder_accepts_no_mutated_frame_the_precise_checks_refuse(
    data, names: list[str], rng: random.Random
) -> None:
    """decode's fast path (msgspec) must never let through what the field-by-field checks refuse."""
    from marketplace.messages.codec import decode_fast, decode_precise

    pool = all_frames()
    frame = fuzzing.mutate(rng, data.draw(st.sampled_from(pool)), pool, names)
    if len(frame) > fuzzing.MAX_BYTES:
        return
    fast = decode_fast(frame)
    try:
        precise = decode_precise(frame, max_bytes=fuzzing.MAX_BYTES)
    except MessageError:
        assert fast is None, names
        return
    if fast is not None:
        assert (fast.kind, fast.msg_id, fast.sender, fast.reply_to) == (
            precise.kind,
            precise.msg_id,
            precise.sender,
            precise.reply_to,
        )
        assert repr(fast.body) == repr(precise.body)


# --- (b) every role, in every state of a run ----------------------------------------------------

ROLES = [
    (name, party)
    for name in ("summarize", "summarize-less-trusted")
    for party in ("curator", "owner-1", "owner-3", "consumer")
]
ROLES += [("stc", party) for party in ("curator", "owner-1", "consumer")]


@pytest.mark.parametrize(("scenario", "party"), ROLES)
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(rng=st.randoms(use_true_random=False))
def test_a_role_under_hostile_frames_never_raises_counts_each_and_still_completes_the_run(scenario, party, rng) -> None:
    config, world, clean, clean_nodes = prepared(scenario)
    honest_to_party = sum(d.receiver == party for d in clean)
    per_delivery = -(-60 // honest_to_party)  # at least 60 hostile frames per run, whatever the role

    nodes, tally = fuzzing.fuzz_run(config, rng, per_delivery=per_delivery, targets={party}, world=world, clean=clean)

    assert tally.crashes == [] and tally.frames >= 60
    assert set(tally.verdicts) <= {"accepted", "heartbeat", "duplicate", "protocol"} | {
        v for v in tally.verdicts if v.startswith("bad_message:")
    }
    assert outcome(nodes) == outcome(clean_nodes)  # every party done, nothing failed, identical results


def test_rejections_are_counted_by_reason_and_name_the_field() -> None:
    config, world, clean, _ = prepared("summarize")
    nodes, tally = fuzzing.fuzz_run(config, random.Random(7), per_delivery=4, world=world, clean=clean)
    rejected = {}
    for node in nodes:
        for reason, count in node.counters.rejected.items():
            rejected[reason] = rejected.get(reason, 0) + count
    assert tally.crashes == []
    # the nodes were rolled back after frames their roles accepted, so count what the tally saw
    assert tally.verdicts.get("duplicate", 0) > 0 and tally.verdicts.get("protocol", 0) > 0
    fields = {v.split(":", 1)[1] for v in tally.verdicts if v.startswith("bad_message:")}
    assert {"<frame>", "kind", "sender", "msg_id", "version", "<unknown key>", "<missing key>"} <= fields
    assert any(f.startswith("body.") and f.endswith(".dtype") for f in fields)
    assert any(f.startswith("body.") and f.endswith(".data") for f in fields)
    assert set(rejected) <= fuzzing.REJECT_REASONS and sum(rejected.values()) > 0


# --- size and replay -----------------------------------------------------------------------------


def owner_frame(body, msg_id: int, sender: str = "owner-1") -> bytes:
    return encode(Envelope(PROTOCOL_VERSION, fuzzing.RUN_ID, msg_id, sender, "curator", type(body).KIND, None, body))


def FINGERPRINT() -> dict[str, str]:  # noqa: N802 - reads like the constant it is
    """The summarize scenario's configuration fingerprint, as every honest party sends it in hello."""
    from marketplace.scenario.fingerprint import fingerprint

    return fingerprint(prepared("summarize")[0])


def gathering_curator() -> Node:
    config, world, _, _ = prepared("summarize")
    node = Node(fuzzing.nodes_for(config, world)[0].role, run_id=fuzzing.RUN_ID, max_message_bytes=4096)
    node.start()
    return node


def test_a_frame_over_max_message_bytes_is_refused_before_parsing_and_counted() -> None:
    node = gathering_curator()
    hello = owner_frame(Hello(role="owner", protocol="summarize", scenario="tiny", config=FINGERPRINT()), 1)
    wire = msgpack.unpackb(hello)
    wire["body"]["scenario"] = "t" * 5000  # a well-formed frame, only too big
    big = msgpack.packb(wire)

    verdict = fuzzing.feed(node, big, "owner-1")

    assert verdict == "bad_message:<frame>"
    assert re.search(r"expected at most 4096 bytes, got \d+ bytes", node.errors[-1])
    assert node.role.present == set() and node.last_seen_id == {}


def test_a_frame_whose_header_claims_more_than_max_message_bytes_is_refused() -> None:
    node = gathering_curator()
    lying = b"\x88\xa4body\xc6\x7f\xff\xff\xff" + b"\x00" * 64  # a bin of 2 GiB, 64 bytes present

    assert fuzzing.feed(node, lying, "owner-1") == "bad_message:<frame>"


def test_replayed_and_duplicate_message_ids_are_ignored_and_counted() -> None:
    node = gathering_curator()
    hello = owner_frame(Hello(role="owner", protocol="summarize", scenario="tiny", config=FINGERPRINT()), 5)

    assert fuzzing.feed(node, hello, "owner-1") == "accepted"
    assert fuzzing.feed(node, hello, "owner-1") == "duplicate"  # the same frame again
    assert (
        fuzzing.feed(
            node,
            owner_frame(Hello(role="owner", protocol="summarize", scenario="tiny", config=FINGERPRINT()), 3),
            "owner-1",
        )
        == "duplicate"
    )
    assert (
        fuzzing.feed(
            node,
            owner_frame(Hello(role="owner", protocol="summarize", scenario="tiny", config=FINGERPRINT()), 5, "owner-2"),
            "owner-2",
        )
        == "accepted"
    )

    assert node.counters.rejected["duplicate"] == 2
    assert node.role.present == {"owner-1", "owner-2"}  # each hello handled once


# --- what the fuzzing found ---------------------------------------------------------------------


def test_a_point_label_outside_int64_is_refused_at_the_wire() -> None:
    """A label of 2**63 used to pass ``int``, be accepted with its point, and crash the curator with
    an OverflowError when it packed the summary's labels into int64 (fixed in the codec)."""
    frame = owner_frame(Point(round=1, x=np.zeros(3), y=0, row=0), 1)
    wire = msgpack.unpackb(frame)
    wire["body"]["y"] = 2**63

    with pytest.raises(
        MessageError, match=r"field 'body.y' expected an integer that fits in 64 signed bits, got 9223372036854775808"
    ):
        decode(msgpack.packb(wire))


def test_an_owner_cannot_end_the_run_by_sending_the_curator_an_error_about_hello() -> None:
    node = gathering_curator()
    error = owner_frame(Error(code="refused", detail="go away", about_kind="hello"), 1)

    node.receive(error, "owner-1")

    assert not node.role.done and node.role.failure is None


def test_an_owner_that_answers_a_request_with_a_malformed_point_is_excluded() -> None:
    config, world, _, clean_nodes = prepared("summarize")
    nodes = fuzzing.nodes_for(config, world)
    first_winner = clean_nodes[0].role.selection[0][0]
    owner = next(n for n in nodes if n.party_id == first_winner)
    honest_encode = owner._encode

    def corrupt(send, msg_id=None, **kwargs):  # every point this owner sends leaves with NaN coordinates
        out = honest_encode(send, msg_id, **kwargs)
        if out.kind != "point":
            return out
        wire = msgpack.unpackb(out.frame)
        wire["body"]["x"]["data"] = np.full(3, np.nan).tobytes()
        return type(out)(out.receiver, out.kind, msgpack.packb(wire))

    owner._encode = corrupt
    run_inprocess(nodes)

    curator = nodes[0].role
    assert owner.party_id in curator.flagged or owner.party_id in curator.dropouts
    assert len(curator.selection) == config.summarize.rounds
