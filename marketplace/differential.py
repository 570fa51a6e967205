"""The coupled differential test: run a protocol on an owner's data D and on a neighbour D', with every
release's output coupled, and name every field another party receives that differs and is not a
declared disclosure, or that the protocol does not declare at all.

1. Run a session on D, recording the output of every release (:mod:`marketplace.privacy.coupling`).
2. Run it again on D', owner ``owner-1``'s data changed under the protocol's relation (one row
   removed, or one row replaced by the midpoint of two of its others), each release returning the
   output it gave on D. Everything computed from releases and public settings is then identical.
3. Flatten what each other party received (every message body, by kind and field; in a deployment,
   the run report the consumer gets) into key paths, and compare. A path that differs must be a
   declared disclosure of that observer (:class:`marketplace.privacy.view.Seen`); every path an
   observer receives must be declared.

The sessions run every party in one process with the in-process driver (the coupling is held in a
context variable): a *run* session holds the simulator's world, each party given its share; a
*served* one is shaped as a deployment (each party its own rows, the consumer handed the run report
assembled from what each party publishes, as :mod:`marketplace.runtime.party_reports` hands it over).
Timings are left out of the report compared: the clock decides them (an owner's own timings never
leave it in a deployment).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from marketplace import plugins
from marketplace.data.dataset import Dataset, SparseParts, World
from marketplace.messages import Envelope
from marketplace.parties import build_role, owner_number, party_ids, share_of
from marketplace.privacy.coupling import Coupling, coupled
from marketplace.privacy.view import Seen, covering
from marketplace.roles import CONSUMER, CURATOR
from marketplace.runtime import json_default
from marketplace.scenario import Scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node

__all__ = ["CHANGED", "Received", "coupled_problems", "holding", "neighbour", "run_shares", "session"]

CHANGED = "owner-1"
"""The owner whose data differs between the two sessions."""


@dataclass
class Received:
    """What every party received in one session: ``messages`` (receiver -> (sender, kind, body as
    plain values), in order) and, in a deployment, the run ``report`` the consumer gets."""

    messages: dict[str, list[tuple[str, str, Any]]] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    status: str = ""
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each party's whole role result, what it keeps to itself included: the simulator's view, for a
    test to choose its neighbour (which rows an owner handed over); never compared."""


def run_shares(scenario: Scenario) -> dict[str, World]:
    """Each party's share of the simulator's world (:func:`marketplace.parties.share_of`)."""
    from marketplace.parties import make_world

    world = make_world(scenario.config, plugins.exchange(scenario.config.protocol))
    return {party: share_of(world, party) for party in party_ids(scenario.config)}


def neighbour(shares: dict[str, World], relation: str, owner: str = CHANGED, row: int = -1) -> dict[str, World]:
    """``shares`` with ``owner``'s rows changed under ``relation`` at ``row`` (default: its last):
    that row removed (add/remove-one), or replaced by the midpoint of two of its other rows with the
    first one's label (replace-one, and the replacements that keep the owner's number of distinct
    points: the midpoint of two distinct points lies inside the data's box and duplicates neither;
    on a categorical column it may fall between two categories, which the owner then refuses)."""
    share = shares[owner]
    index = _owner_index(share, owner)
    data = share.owners[index]
    if len(data) < 3:
        raise ValueError(f"{owner}: a neighbour needs at least 3 rows, it holds {len(data)}")
    row = range(len(data))[row]  # IndexError for a row the owner does not hold
    if relation == "add/remove-one":
        changed = data.take([i for i in range(len(data)) if i != row])
    else:
        a, b = [i for i in range(len(data)) if i != row][:2]
        X, y = np.array(data.X), np.array(data.y)
        X[row], y[row] = (X[a] + X[b]) / 2, y[a]
        changed = dataclasses.replace(data, X=X, y=y)
    held = {i: share.owners[i] for i in range(len(share.owners)) if i != index and len(share.owners[i])}
    owners = SparseParts(len(share.owners), {**held, index: changed}, data.take([]))
    return {**shares, owner: dataclasses.replace(share, owners=owners)}


def _owner_index(share: World, owner: str) -> int:
    """Where ``owner``'s rows sit among the share's owners."""
    number = owner_number(owner, len(share.owners))
    if number is None:
        raise ValueError(f"{owner!r} is not an owner of this share (owner-1 ... owner-{len(share.owners)})")
    return number - 1


def holding(share: World, owner: str, rows: Dataset) -> World:
    """``share`` (``owner``'s share of a world) holding ``rows`` as the owner's data: an owner that
    reads its own file, in a deployment."""
    index = _owner_index(share, owner)
    return dataclasses.replace(share, owners=SparseParts(len(share.owners), {index: rows}, rows.take([])))


def session(scenario: Scenario, shares: dict[str, World], coupling: Coupling, *, served: bool) -> Received:
    """Run ``scenario`` in one process, each party holding its share, every release coupled through
    ``coupling``; what each party received (and, ``served``, the run report the consumer gets)."""
    from marketplace.runtime import assemble_from_reports, party_report

    config = scenario.config
    exchange = plugins.exchange(config.protocol)
    parties = party_ids(config)
    received = Received(messages={party: [] for party in parties})
    nodes = []
    with coupled(coupling):
        for party in parties:
            role = build_role(config, party, world=shares[party], exchange=exchange)
            nodes.append(
                Node(
                    role,
                    run_id="coupled",
                    max_message_bytes=config.transport.max_message_bytes,
                    parties=frozenset(parties),
                    on_message=_recording(received.messages[party]),
                )
            )
        run_inprocess(nodes)
        received.results = {node.party_id: node.role.result() for node in nodes}
        if served:
            handed = {
                node.party_id: json.loads(
                    json.dumps(
                        party_report(node, role_name=node.role.role_name, wall_s=0.0, driver={}, scenario=scenario)
                    )
                )
                for node in nodes
            }
            report = assemble_from_reports(scenario, handed, {}, driver="coupled", exchange=exchange)
            received.report = json.loads(json.dumps(_without_clock(report)))
            received.status = str(report.get("status"))
    return received


def _recording(into: list[tuple[str, str, Any]]) -> Callable[[Envelope[Any]], None]:
    """A node's ``on_message`` hook that keeps, in ``into``, every message its role handles."""

    def recorded(message: Envelope[Any]) -> None:
        into.append((message.sender, message.kind, msgspec.to_builtins(message.body, enc_hook=json_default)))

    return recorded


def _without_clock(report: dict[str, Any]) -> dict[str, Any]:
    out = dict(report)
    out.pop("timing", None)
    out.pop("wall_s", None)
    details = out.get("party_details")
    if isinstance(details, dict):
        out["party_details"] = {
            party: {k: v for k, v in (d or {}).items() if k not in ("timing", "pid", "host")}
            for party, d in details.items()
        }
    return out


# --- comparing ---------------------------------------------------------------------------------------

_MARKS = re.compile(r"<[^>]*>|\[\d+\]")


def flatten(received: Received, party: str) -> dict[str, Any]:
    """Every (key path -> value) ``party`` received: ``kind<sender#n>.field[i]`` for the n-th message of
    that kind from that sender, ``report.key[i]`` for the consumer's run report."""
    out: dict[str, Any] = {}
    seen: dict[tuple[str, str], int] = {}
    for sender, kind, body in received.messages.get(party, []):
        n = seen.get((sender, kind), 0)
        seen[(sender, kind)] = n + 1
        _leaves(body, f"{kind}<{sender}#{n}>", out)
    if party == CONSUMER and received.report is not None:
        _leaves(received.report, "report", out)
    return out


def _leaves(tree: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            _leaves(value, f"{path}.{key}", out)
    elif isinstance(tree, (list, tuple)) and tree:
        for i, value in enumerate(tree):
            _leaves(value, f"{path}[{i}]", out)
    else:
        out[path] = tree


def field_of(path: str) -> str:
    """The field a key path is a value of: its senders and indices left out (``point.x``)."""
    return _MARKS.sub("", path)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def coupled_problems(
    scenario: Scenario,
    shares: dict[str, World],
    declared: list[Seen] | tuple[Seen, ...],
    *,
    served: bool,
    relation: str,
    owner: str = CHANGED,
    row: int = -1,
) -> list[str]:
    """Run the coupled pair of sessions (module docstring) and return every problem found, each
    naming the observer and the field: a field that differs and is not a declared disclosure, a
    field the protocol does not declare, a release made in one session only, a session that did not
    complete. Empty: the protocol keeps its declaration on this pair. ``row``: which of the owner's
    rows the neighbour changes (:func:`neighbour`)."""
    record = Coupling("record")
    one = session(scenario, shares, record, served=served)
    replay = record.replay()
    other = session(scenario, neighbour(shares, relation, owner, row), replay, served=served)
    problems = [*replay.missing, *replay.unused()]
    if served and not (one.status == other.status == "completed"):
        problems.append(f"the sessions ended {one.status!r} and {other.status!r}, not both 'completed'")
    for party in party_ids(scenario.config):
        if party == owner:
            continue
        observer = party if party in (CURATOR, CONSUMER) else "owners"
        a, b = flatten(one, party), flatten(other, party)
        undeclared: set[str] = set()
        for path in sorted(a.keys() | b.keys()):
            name = field_of(path)
            seen = covering(declared, observer, name)
            if seen is None:
                if name not in undeclared:
                    undeclared.add(name)
                    problems.append(f"{party} receives {name!r}, which the protocol's view does not declare")
                continue
            if path in a and path in b and _same(a[path], b[path]):
                continue
            if seen.kind != "disclosure":
                shown = [repr(side[path])[:80] if path in side else "(absent)" for side in (a, b)]
                problems.append(
                    f"{party} receives {path!r}, declared {seen.kind} ({seen.field!r}), and it differs "
                    f"between {owner}'s data and its neighbour: {shown[0]} and {shown[1]}"
                )
    return problems
