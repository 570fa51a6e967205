"""Frame fuzzing shared by tests/transport/test_fuzz.py and benchmarks/bench_fuzz.py.

* :func:`record` runs a scenario in-process and keeps every frame in delivery order: the honest
  traffic each party receives, which the mutators start from.
* :data:`MUTATORS` turn one valid frame into a hostile one, drawing every choice from a
  ``random.Random`` (hypothesis passes its own, so failures shrink and replay): byte-level damage
  (bit flips, truncation, splices, random bytes) and structural damage (keys removed, added or
  duplicated, values of the wrong type, extreme integers, NaN/inf in arrays, foreign dtypes, shapes
  that lie about the data, deep nesting, unknown and swapped kinds, envelope fields out of range).
* :func:`feed` hands one frame to a :class:`Node` and checks the contract every frame must meet:
  ``receive`` returns, and the frame is counted exactly once, either as received or as rejected
  under a known reason, with an error reply that is itself a valid frame naming what was wrong.
"""

from __future__ import annotations

import copy
import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from marketplace import plugins
from marketplace.messages import KINDS, decode
from marketplace.parties import build_role, make_world, party_ids
from marketplace.scenario import ScenarioConfig
from marketplace.transport.node import Node

REJECT_REASONS = {"bad_message", "duplicate", "protocol"}
"""The reasons a Node counts a refused frame under (``bad_framing`` is the socket loop's own)."""
DETAIL_RE = re.compile(
    r"^bad message from .+ \((kind '[a-z_]+'|unknown kind)\): field (?P<q>['\"])(?P<field>.*?)(?P=q) "
    r"expected .+, got .+",
    re.S,
)
RUN_ID = "fuzz"
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Delivery:
    sender: str
    receiver: str
    frame: bytes


def nodes_for(config: ScenarioConfig, world=None) -> list[Node]:
    world = world if world is not None else make_world(config, plugins.exchange(config.protocol))
    return [
        Node(
            build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)),
            run_id=RUN_ID,
            max_message_bytes=MAX_BYTES,
        )
        for p in party_ids(config)
    ]


def run_recorded(nodes: list[Node], before: Callable[[Node, Delivery], None] | None = None) -> list[Delivery]:
    """The in-process driver's loop (start in order, FIFO delivery), keeping every delivered frame.
    ``before(node, delivery)`` runs just before each delivery (the tests inject hostile frames there)."""
    by_id = {n.party_id: n for n in nodes}
    queue = [(n.party_id, out) for n in nodes for out in n.start()]
    delivered: list[Delivery] = []
    i = 0
    while i < len(queue):
        sender, out = queue[i]
        i += 1
        node = by_id.get(out.receiver)
        if node is None or node.done:
            continue
        delivery = Delivery(sender, out.receiver, out.frame)
        if before is not None:
            before(node, delivery)
        delivered.append(delivery)
        queue.extend((node.party_id, reply) for reply in node.receive(out.frame, peer=sender))
    return delivered


def record(config: ScenarioConfig) -> list[Delivery]:
    return run_recorded(nodes_for(config))


# --- the verdict on one frame --------------------------------------------------------------------


class ContractBroken(AssertionError):
    """A node broke the contract on one frame (the message says how)."""


def _total(table: dict[Any, list[int]]) -> int:
    return sum(count for count, _ in table.values())


def feed(node: Node, frame: bytes, peer: str) -> str:
    """Deliver ``frame`` from ``peer`` and check the contract; return what became of it:
    ``accepted``, ``heartbeat``, ``duplicate``, ``protocol`` or ``bad_message:<field>``.

    Raises :class:`ContractBroken` when the node raised, miscounted, or answered with a frame its
    peer could not read. Any other exception escaping ``Node.receive`` is re-raised as it is.
    """
    rejected_before = dict(node.counters.rejected)
    received_before = _total(node.counters.received)
    errors_before = len(node.errors)
    replies = node.receive(frame, peer=peer)
    grew = {
        r: n - rejected_before.get(r, 0) for r, n in node.counters.rejected.items() if n != rejected_before.get(r, 0)
    }
    received = _total(node.counters.received) - received_before
    for out in replies:  # every answer must be a frame its receiver accepts as well formed
        try:
            decode(out.frame, max_bytes=MAX_BYTES, peer=node.party_id)
        except Exception as err:  # noqa: BLE001 - any failure here is the finding
            raise ContractBroken(f"{node.party_id} answered with an unreadable {out.kind} frame: {err}") from err
    if not grew:
        if received != 1:
            raise ContractBroken(f"{node.party_id}: frame neither rejected nor received once (received {received})")
        if replies and any(
            o.kind == "error" and decode(o.frame, peer=node.party_id).body.code == "bad_message" for o in replies
        ):
            raise ContractBroken(f"{node.party_id}: accepted frame answered with bad_message")
        return "heartbeat" if node.counters.received and _is_heartbeat(frame) else "accepted"
    if len(grew) != 1 or sum(grew.values()) != 1:
        raise ContractBroken(f"{node.party_id}: one frame counted as {grew}")
    (reason,) = grew
    if reason not in REJECT_REASONS:
        raise ContractBroken(f"{node.party_id}: unknown rejection reason {reason!r}")
    if reason == "duplicate":
        if replies:
            raise ContractBroken(f"{node.party_id}: answered a duplicate")
        return reason
    if reason == "protocol":  # the frame reached the role (counted as received), which refused it
        _check_error_reply(node, replies, "protocol", peer)
        return reason
    if received:
        raise ContractBroken(f"{node.party_id}: a bad frame was also counted as received")
    detail = node.errors[-1] if len(node.errors) > errors_before else ""
    match = DETAIL_RE.match(detail)
    if not match:
        raise ContractBroken(f"{node.party_id}: vague rejection {detail!r}")
    if replies:  # the error first; a curator waiting for this peer's point may then ask the next owner
        _check_error_reply(node, replies[:1], "bad_message", peer)
    return f"bad_message:{_field_class(match['field'], detail)}"


def _is_heartbeat(frame: bytes) -> bool:
    try:
        return msgpack.unpackb(frame).get("kind") == "heartbeat"
    except Exception:  # noqa: BLE001
        return False


def _check_error_reply(node: Node, replies: list, code: str, peer: str) -> None:
    if len(replies) != 1 or replies[0].kind != "error" or replies[0].receiver != peer:
        raise ContractBroken(
            f"{node.party_id}: a refused frame must get one error reply to {peer}, got "
            f"{[(o.kind, o.receiver) for o in replies]}"
        )
    body = decode(replies[0].frame, peer=node.party_id).body
    if body.code != code:
        raise ContractBroken(f"{node.party_id}: error reply code {body.code!r}, expected {code!r}")


def _field_class(field: str, detail: str) -> str:
    """A short class for a table: the field (``body.sealed[3]`` -> ``body.sealed[]``), or unknown/missing key."""
    if "got unknown key" in detail:
        return "<unknown key>"
    if "(required), got nothing" in detail or "got nothing" in detail:
        return "<missing key>"
    return re.sub(r"\[\d+\]", "[]", field)[:40]


def role_state(node: Node) -> bytes:
    """A fingerprint of everything the role holds (to show a refused frame left no trace)."""
    import pickle

    state = {k: v for k, v in vars(node.role).items() if k not in ("errors_received", "_phi_cache")}
    return pickle.dumps(state, protocol=5)


def snapshot(node: Node) -> Node:
    return copy.deepcopy(node)


# --- mutators ------------------------------------------------------------------------------------

EXTREME_INTS = (0, -1, 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), 2**64 - 1)
EXTREME_FLOATS = (math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -0.0)
BAD_DTYPES = (
    ">f8",
    "<f2",
    "|O",
    "<c16",
    "float64",
    "<U8",
    "|V8",
    "<M8[s]",
    "",
    "<f8 ",
    "f" * 300,
    "<i2",
    "|u1",
    "|b1",
    "<f4",
)
plugins.load_all()  # the fuzzer picks among every protocol's kinds
WIRE_KINDS = tuple(sorted(KINDS))


def _random_scalar(rng: random.Random) -> Any:
    pick = rng.randrange(10)
    if pick == 0:
        return None
    if pick == 1:
        return rng.random() < 0.5
    if pick == 2:
        return rng.choice(EXTREME_INTS)
    if pick == 3:
        return rng.choice(EXTREME_FLOATS)
    if pick == 4:
        return rng.randbytes(rng.randrange(0, 40))
    if pick == 5:
        return "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(0, 20)))
    if pick == 6:
        return [rng.randrange(-5, 5) for _ in range(rng.randrange(0, 4))]
    if pick == 7:
        return {
            "dtype": rng.choice(BAD_DTYPES),
            "shape": [rng.randrange(0, 4)],
            "data": rng.randbytes(rng.randrange(0, 33)),
        }
    if pick == 8:
        return {str(rng.randrange(100)): rng.randrange(100)}
    return rng.uniform(-1e6, 1e6)


def random_bytes(rng: random.Random, frame: bytes, pool) -> bytes:
    return rng.randbytes(rng.choice((0, 1, 2, 8, 64, rng.randrange(0, 2000))))


def random_msgpack(rng: random.Random, frame: bytes, pool) -> bytes:
    value = _random_scalar(rng)
    if rng.random() < 0.5:
        value = {
            rng.choice(("version", "kind", "body", "x", "msg_id")): _random_scalar(rng)
            for _ in range(rng.randrange(0, 9))
        }
    return msgpack.packb(value, use_bin_type=True)


def bit_flip(rng: random.Random, frame: bytes, pool) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def truncate(rng: random.Random, frame: bytes, pool) -> bytes:
    return frame[: rng.randrange(len(frame))] if frame else frame


def append_junk(rng: random.Random, frame: bytes, pool) -> bytes:
    return frame + rng.randbytes(rng.randrange(1, 40))


def splice(rng: random.Random, frame: bytes, pool) -> bytes:
    if len(frame) < 2:
        return frame
    a = rng.randrange(len(frame))
    b = rng.randrange(a, min(len(frame), a + 64)) + 1
    at = rng.randrange(len(frame))
    return frame[:at] + frame[a:b] + frame[at:] if rng.random() < 0.5 else frame[:a] + frame[b:]


def huge_header(rng: random.Random, frame: bytes, pool) -> bytes:
    """A str/bin/array/map header that claims far more than the frame holds."""
    header = rng.choice(
        (
            b"\xdb\xff\xff\xff\xff",
            b"\xc6\xff\xff\xff\xff",
            b"\xdd\x7f\xff\xff\xff",
            b"\xdf\x7f\xff\xff\xff",
            b"\xc6\x00\x10\x00\x00",
        )
    )
    at = rng.randrange(len(frame) + 1)
    return frame[:at] + header + frame[at:]


def _leaves(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths to every map value and list item inside ``value`` (containers included)."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(path + (k,))
            out.extend(_leaves(v, path + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append(path + (i,))
            out.extend(_leaves(v, path + (i,)))
    return out


def _get(root: Any, path: tuple) -> Any:
    for p in path:
        root = root[p]
    return root


def _maps(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path] if isinstance(value, dict) else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_maps(v, path + (k,)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_maps(v, path + (i,)))
    return out


def _arrays(wire: dict) -> list[dict]:
    return [_get(wire, p) for p in _maps(wire) if set(_get(wire, p)) == {"dtype", "shape", "data"}]


def _structural(edit: Callable[[random.Random, dict, Any], None]) -> Callable[[random.Random, bytes, Any], bytes]:
    """A mutator that edits the decoded envelope map and packs it again (byte damage if unreadable)."""

    def mutate(rng: random.Random, frame: bytes, pool) -> bytes:
        try:
            wire = msgpack.unpackb(frame, raw=False, strict_map_key=False)
        except Exception:  # noqa: BLE001 - an earlier mutation broke it: damage bytes instead
            return bit_flip(rng, frame, pool)
        if not isinstance(wire, dict) or not wire:
            return frame
        try:
            out = edit(rng, wire, pool)
            return out if isinstance(out, bytes) else msgpack.packb(wire, use_bin_type=True)
        except Exception:  # noqa: BLE001 - an earlier mutation left a shape this edit cannot walk or pack
            return bit_flip(rng, frame, pool)

    mutate.__name__ = edit.__name__
    return mutate


@_structural
def drop_key(rng, wire, pool):
    holder = _get(wire, rng.choice(_maps(wire)))
    if holder:
        del holder[rng.choice(list(holder))]


@_structural
def add_key(rng, wire, pool):
    holder = _get(wire, rng.choice(_maps(wire)))
    holder[rng.choice(("extra", "__class__", "kind", "x", "", "0" * 100, 7))] = _random_scalar(rng)


@_structural
def duplicate_key(rng, wire, pool):
    """A map that holds one key twice (msgpack allows it; the later value wins in Python)."""
    target = _get(wire, rng.choice(_maps(wire)))
    if not target:
        return None
    key = rng.choice(list(target))
    extra = _random_scalar(rng) if rng.random() < 0.7 else target[key]
    first = rng.random() < 0.5
    return _pack_with_extra(wire, target, key, extra, first)


def _pack_with_extra(value: Any, target: dict, key: Any, extra: Any, first: bool) -> bytes:
    packer = msgpack.Packer(use_bin_type=True)
    if isinstance(value, dict):
        items = list(value.items())
        if value is target:
            items = [(key, extra)] + items if first else items + [(key, extra)]
        return packer.pack_map_header(len(items)) + b"".join(
            _pack_with_extra(k, target, key, extra, first) + _pack_with_extra(v, target, key, extra, first)
            for k, v in items
        )
    if isinstance(value, list):
        return packer.pack_array_header(len(value)) + b"".join(
            _pack_with_extra(v, target, key, extra, first) for v in value
        )
    return packer.pack(value)


def _replace(wire: dict, path: tuple, value: Any) -> None:
    _get(wire, path[:-1])[path[-1]] = value


@_structural
def wrong_type(rng, wire, pool):
    paths = _leaves(wire)
    _replace(wire, rng.choice(paths), _random_scalar(rng))


@_structural
def extreme_number(rng, wire, pool):
    paths = [
        p for p in _leaves(wire) if isinstance(_get(wire, p), (int, float)) and not isinstance(_get(wire, p), bool)
    ]
    paths = paths or _leaves(wire)
    value = rng.choice(EXTREME_INTS + EXTREME_FLOATS)
    _replace(wire, rng.choice(paths), value)


@_structural
def nonfinite_in_array(rng, wire, pool):
    arrays = [
        a for a in _arrays(wire) if a.get("dtype") in ("<f8", "<f4") and isinstance(a.get("data"), bytes) and a["data"]
    ]
    if not arrays:
        return None
    arr = rng.choice(arrays)
    size = 8 if arr["dtype"] == "<f8" else 4
    n = len(arr["data"]) // size
    if not n:
        return None
    i = rng.randrange(n)
    import struct

    bad = struct.pack("<d" if size == 8 else "<f", rng.choice((math.nan, math.inf, -math.inf)))
    arr["data"] = arr["data"][: i * size] + bad + arr["data"][(i + 1) * size :]


@_structural
def foreign_dtype(rng, wire, pool):
    arrays = _arrays(wire)
    if arrays:
        rng.choice(arrays)["dtype"] = rng.choice(BAD_DTYPES)


@_structural
def lying_shape(rng, wire, pool):
    arrays = _arrays(wire)
    if not arrays:
        return None
    arr = rng.choice(arrays)
    shape = list(arr["shape"]) if isinstance(arr["shape"], list) else [1]
    choice = rng.randrange(6)
    if choice == 0 and shape:
        shape[rng.randrange(len(shape))] += rng.choice((-1, 1, 1000))
    elif choice == 1:
        shape.append(rng.choice((0, 1, 2)))
    elif choice == 2 and shape:
        shape.pop()
    elif choice == 3:
        shape = [rng.choice((2**31, 2**62, 2**63 - 1)), 0]
    elif choice == 4:
        shape = [-1] + shape
    else:
        shape = shape[::-1] + [1] * rng.randrange(0, 5)
    arr["shape"] = shape


@_structural
def lying_data(rng, wire, pool):
    arrays = _arrays(wire)
    if not arrays:
        return None
    arr = rng.choice(arrays)
    data = arr["data"] if isinstance(arr["data"], bytes) else b""
    arr["data"] = (
        data[: rng.randrange(len(data) + 1)]
        if data and rng.random() < 0.5
        else data + rng.randbytes(rng.choice((1, 7, 8, 16)))
    )


SENTINEL = "\x00deep-nesting-goes-here\x00"


@_structural
def deep_nesting(rng, wire, pool):
    paths = _leaves(wire)
    _replace(wire, rng.choice(paths), SENTINEL)
    depth = rng.choice((10, 100, 600, 5000))
    opener = rng.choice((b"\x91", b"\x81\xa1k"))  # [ [ [ ... or {"k": {"k": ...
    nested = opener * depth + b"\xc0"
    return msgpack.packb(wire, use_bin_type=True).replace(msgpack.packb(SENTINEL), nested, 1)


@_structural
def unknown_kind(rng, wire, pool):
    wire["kind"] = rng.choice(("", "Point", "point ", "k" * 500, "\u202epoint", "__init__", "bid\x00", "hello" * 3))


@_structural
def swap_kind(rng, wire, pool):
    wire["kind"] = rng.choice(WIRE_KINDS)


@_structural
def swap_body(rng, wire, pool):
    """Another valid frame's kind and body under this frame's envelope (right shape, wrong moment)."""
    if not pool:
        return None
    other = msgpack.unpackb(rng.choice(pool), raw=False)
    wire["body"] = other["body"]
    if rng.random() < 0.8:
        wire["kind"] = other["kind"]


@_structural
def envelope_field(rng, wire, pool):
    key = rng.choice(("version", "run_id", "msg_id", "sender", "receiver", "reply_to"))
    values = {
        "version": (0, 2, -1, 2**64 - 1, "1", 1.0, True, None),
        "run_id": ("", "other-run", "fuzz ", None, b"fuzz", 1),
        "msg_id": (0, -1, 2**63, 2**64 - 1, "1", 1.0, True, None, -(2**63)),
        "sender": ("", "owner-9", "curator", "consumer", "owner-1", None, b"owner-1", "x" * 200),
        "receiver": ("", "owner-9", "curator", "consumer", "owner-1", None, "x" * 200),
        "reply_to": (None, 0, -1, 2**64 - 1, "1", 1.5, True),
    }[key]
    wire[key] = rng.choice(values)


def replay(rng: random.Random, frame: bytes, pool) -> bytes:
    """The frame as it is (delivered twice, it is a duplicate)."""
    return frame


MUTATORS: dict[str, Callable[[random.Random, bytes, Any], bytes]] = {
    f.__name__: f
    for f in (
        random_bytes,
        random_msgpack,
        bit_flip,
        truncate,
        append_junk,
        splice,
        huge_header,
        drop_key,
        add_key,
        duplicate_key,
        wrong_type,
        extreme_number,
        nonfinite_in_array,
        foreign_dtype,
        lying_shape,
        lying_data,
        deep_nesting,
        unknown_kind,
        swap_kind,
        swap_body,
        envelope_field,
        replay,
    )
}


def mutate(rng: random.Random, frame: bytes, pool: list[bytes], names: list[str]) -> bytes:
    for name in names:
        frame = MUTATORS[name](rng, frame, pool)
    return frame


# --- a whole run with hostile frames slipped in ---------------------------------------------------


@dataclass
class Crash:
    party: str
    mutators: tuple[str, ...]
    frame: bytes
    error: str


@dataclass
class FuzzTally:
    frames: int = 0
    feed_s: float = 0.0
    """Time spent in :func:`feed` (Node.receive plus the contract checks), without snapshots."""
    verdicts: dict[str, int] | None = None
    crashes: list[Crash] | None = None

    def __post_init__(self) -> None:
        self.verdicts = {} if self.verdicts is None else self.verdicts
        self.crashes = [] if self.crashes is None else self.crashes

    def add(self, verdict: str) -> None:
        self.frames += 1
        self.verdicts[verdict] = self.verdicts.get(verdict, 0) + 1


def _reaches_role(node: Node, frame: bytes, peer: str) -> bool:
    """Whether Node.receive would hand this frame to the role (the same checks, in the same order)."""
    try:
        message = decode(frame, max_bytes=node.max_message_bytes, peer=peer)
    except Exception:  # noqa: BLE001
        return False
    return (
        message.receiver == node.party_id
        and message.run_id == node.run_id
        and message.kind != "heartbeat"
        and message.msg_id > node.last_seen_id.get(peer, 0)
    )


def hostile_frame(
    rng: random.Random, node: Node, honest: dict[str, list[Delivery]], pool: list[bytes], parties: list[str]
) -> tuple[bytes, str, tuple[str, ...]]:
    """A mutated frame for ``node``: from one of the frames it receives in an honest run, sent by
    that frame's sender (now and then by another party)."""
    base = rng.choice(honest[node.party_id])
    peer = base.sender if rng.random() < 0.9 else rng.choice(parties)
    names = tuple(rng.choice(list(MUTATORS)) for _ in range(rng.choice((1, 1, 1, 2, 3))))
    return mutate(rng, base.frame, pool, list(names)), peer, names


def deliver_hostile(
    node: Node, frame: bytes, peer: str, names: tuple[str, ...], tally: FuzzTally, *, keep_going: bool
) -> None:
    """Feed one hostile frame, check the contract, and leave the node as it was before (a frame
    the role accepted is undone, so the honest run goes on; a refused one must leave no trace)."""
    reaches = _reaches_role(node, frame, peer)
    # a curator waiting for this peer's bid, point or release excludes it when its frame cannot be
    # read: undo that too
    awaited = node.role.awaits_from(peer) or peer in node.role.awaited()
    saved = snapshot(node) if reaches or awaited else None
    before = role_state(node) if reaches else None
    last_seen = dict(node.last_seen_id)
    try:
        t0 = time.perf_counter()
        try:
            verdict = feed(node, frame, peer)
        finally:
            tally.feed_s += time.perf_counter() - t0
        if verdict == "protocol" and role_state(node) != before:
            raise ContractBroken(f"{node.party_id}: a refused {names} frame changed the role's state")
        if verdict.startswith("bad_message") or verdict == "duplicate":
            if node.last_seen_id != last_seen:
                raise ContractBroken(f"{node.party_id}: a refused frame moved the replay window")
    except Exception as err:  # noqa: BLE001 - every escape is a crash to report
        if not keep_going:
            raise
        tally.crashes.append(Crash(node.party_id, names, frame, f"{type(err).__name__}: {err}"[:500]))
        verdict = "crash"
    tally.add(verdict)
    if saved is not None:
        node.__dict__.update(saved.__dict__)


def fuzz_run(
    config: ScenarioConfig,
    rng: random.Random,
    *,
    per_delivery: int,
    targets: set[str] | None = None,
    keep_going: bool = False,
    tally: FuzzTally | None = None,
    world=None,
    clean: list[Delivery] | None = None,
) -> tuple[list[Node], FuzzTally]:
    """Run ``config`` in-process; before every honest delivery to a target party, slip in
    ``per_delivery`` hostile frames. Returns the nodes (to check the run still completed) and the tally.
    ``clean`` is the honest run's traffic (recorded here when not given)."""
    world = world if world is not None else make_world(config, plugins.exchange(config.protocol))
    clean = clean if clean is not None else run_recorded(nodes_for(config, world))
    honest: dict[str, list[Delivery]] = {}
    for d in clean:
        honest.setdefault(d.receiver, []).append(d)
    pool = [d.frame for d in clean]
    parties = party_ids(config)
    tally = tally or FuzzTally()
    nodes = nodes_for(config, world)

    def before(node: Node, delivery: Delivery) -> None:
        if targets is not None and node.party_id not in targets:
            return
        for _ in range(per_delivery):
            frame, peer, names = hostile_frame(rng, node, honest, pool, parties)
            deliver_hostile(node, frame, peer, names, tally, keep_going=keep_going)

    run_recorded(nodes, before)
    return nodes, tally
