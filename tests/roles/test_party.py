"""A role is a pure protocol state machine; its party holds the rest (marketplace.roles.party).

No code outside ``marketplace/roles/`` writes an attribute of a role: the transport counts on the
party, the builder hands the role its identity through a method, and a recorder hooks the node.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from marketplace.messages import decode
from marketplace.messages.kinds import Bye, Error, Heartbeat, Hello
from marketplace.roles import CURATOR, Role, Send
from marketplace.roles.identity import NO_TRAFFIC, Identity, Traffic
from marketplace.roles.party import Party
from marketplace.transport.node import Node

PACKAGE = Path(__file__).resolve().parents[2] / "marketplace"
ROLES = PACKAGE / "roles"


def _names_a_role(node: ast.expr) -> bool:
    """Whether ``node`` names a role: ``role``, ``self.role`` or ``<anything>.role``."""
    return (isinstance(node, ast.Name) and node.id == "role") or (
        isinstance(node, ast.Attribute) and node.attr == "role"
    )


def _targets(tree: ast.AST) -> list[tuple[int, ast.expr]]:
    found: list[tuple[int, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            found += [(node.lineno, target) for target in node.targets]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            found.append((node.lineno, node.target))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            if node.args and _names_a_role(node.args[0]):
                found.append((node.lineno, ast.Attribute(value=node.args[0], attr="?", ctx=ast.Store())))
    flat: list[tuple[int, ast.expr]] = []
    while found:
        line, target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found += [(line, t) for t in target.elts]
        else:
            flat.append((line, target))
    return flat


def role_attribute_writes(path: Path) -> list[str]:
    """``file:line`` of every assignment (plain, augmented, annotated, setattr) to an attribute of a role."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for line, target in _targets(tree)
        if isinstance(target, ast.Attribute) and _names_a_role(target.value)
    ]


def test_no_code_outside_roles_writes_an_attribute_of_a_role():
    writes = [
        where
        for path in sorted(PACKAGE.rglob("*.py"))
        if ROLES not in path.parents
        for where in role_attribute_writes(path)
    ]
    assert writes == [], "a role's attributes are written outside marketplace/roles/: " + ", ".join(writes)


@pytest.mark.parametrize(
    "source",
    [
        "role.noise = 1",
        "self.role.messages_sent += 1",
        "node.role.lifetime: int = 2",
        "setattr(role, 'handle', f)",
        "a, node.role.x = 1, 2",
    ],
)
def test_the_scan_finds_a_write(source):
    found = [
        line
        for line, target in _targets(ast.parse(source))
        if isinstance(target, ast.Attribute) and _names_a_role(target.value)
    ]
    assert found == [1], source


def test_the_scan_leaves_reads_and_method_calls_alone():
    tree = ast.parse("x = role.noise\nrole.join(identity)\nrole = other\nself.roles.x = 1")
    assert [t for _, t in _targets(tree) if isinstance(t, ast.Attribute) and _names_a_role(t.value)] == []


# --- the party ---------------------------------------------------------------------------------


class Talker(Role):
    party_id, role_name, scenario_name = "owner-1", "owner", "tiny"

    def start(self):
        return [self.hello("sketch"), Send(CURATOR, Bye())]

    def handle(self, message):
        return [Send(CURATOR, Heartbeat()), Send(CURATOR, Error(code="x", detail="y"))]


class Admission:
    """Records when the party marks its release as left, and what had been counted by then."""

    def __init__(self, party_traffic: list[Traffic]) -> None:
        self.marks: list[tuple[int, int]] = []
        self.of = party_traffic

    def mark_left(self) -> None:
        traffic = self.of[0]
        self.marks.append((traffic.messages_sent, traffic.protocol_messages_sent))


def test_a_party_counts_what_its_node_sends_and_its_role_reads_it():
    role = Talker()
    role.join(Identity("owner-1", "owner", "tiny", {"data": "abc"}, {"source": "the run seed"}))
    party = Party(role)
    node = Node(party, run_id="r", max_message_bytes=1 << 20)
    frames = node.start()
    assert [decode(f.frame).body for f in frames][0] == Hello(
        role="owner", protocol="sketch", scenario="tiny", config={"data": "abc"}
    )
    assert role.traffic is party.traffic and party.traffic.messages_sent == 2
    assert party.traffic.bytes_sent == sum(len(f.frame) for f in frames)
    assert party.traffic.protocol_messages_sent == 0  # hello and bye are the runtime's
    assert party.noise == {"source": "the run seed"} and party.config_fingerprint == {"data": "abc"}
    node.heartbeat(CURATOR)
    assert party.traffic.messages_sent == 2  # heartbeats follow the clock: not counted
    with pytest.raises(AttributeError):
        party.traffic.messages_sent = 5  # type: ignore[misc]


def test_the_release_is_marked_as_left_once_before_the_first_protocol_frame():
    party = Party(Talker())
    admission = Admission([party.traffic])
    party.admission = admission  # type: ignore[assignment]
    party.sent("hello", 10)
    party.sent("sketch_release", 20)
    party.sent("sketch_release", 20)
    assert admission.marks == [(2, 0)]  # counted as a message, not yet as the protocol's
    assert (party.traffic.messages_sent, party.traffic.bytes_sent, party.traffic.protocol_messages_sent) == (3, 50, 2)


def test_a_role_no_party_runs_has_sent_nothing_and_knows_only_its_id():
    role = Talker()
    assert role.traffic is NO_TRAFFIC and role.traffic.messages_sent == 0
    assert role.identity == Identity("owner-1", "owner", "tiny") and role.config_fingerprint == {}
    assert role.ledgers() == () and role.progress() == 0


def test_a_node_hands_each_message_to_its_recorder_before_the_role():
    from marketplace.messages import PROTOCOL_VERSION, Envelope, encode

    seen = []
    node = Node(Talker(), run_id="r", max_message_bytes=1 << 20, on_message=lambda m: seen.append(m.kind))
    frame = encode(Envelope(PROTOCOL_VERSION, "r", 1, CURATOR, "owner-1", "bye", None, Bye()))
    node.receive(frame, CURATOR)
    assert seen == ["bye"]
