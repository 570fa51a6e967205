"""What leaves an owner in a deployment: public values and its declared releases, never its row count,
its timings or which of its rows it handed over.

Each session here runs the way a session of ``marketplace serve`` runs, or parties that run on their
own for ``marketplace assemble``: every owner builds its role from its own file, the in-process driver
moves the messages, each party hands over the report an agent sends its server
(:func:`marketplace.runtime.party_reports.party_report`), and the run report the consumer gets is
assembled from those. Two checks per protocol:

* nothing another party receives (the owners' reports as handed over, the run report, the messages
  the curator and the consumer receive from owners) holds an owner's row count, its compute time or
  the rows it handed over;
* add/remove-one: two sessions whose owner-1 files differ by one row, with the noise drawn from the
  seed (so the releases differ by the row alone), give the same owner reports and the same run report
  but for the figures the declared releases carry to the consumer.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from marketplace import plugins
from marketplace.parties import build_role, make_world, own_rows, party_ids, share_of, with_own_rows
from marketplace.runner.report_schema import report_problems
from marketplace.runtime.assemble import assemble_from_reports
from marketplace.runtime.nodes import noise_origin
from marketplace.runtime.party_reports import party_report
from marketplace.scenario import Scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node

DIM = 3
ROWS = 173
"""owner-1's file: a row count no other figure of these sessions happens to equal."""

SECTIONS = {
    "sketch": {
        "epsilon": 1.0,
        "lower": [-12] * DIM,
        "upper": [12] * DIM,
        "samples": 500,
        "map": {"features": 40},
        "queries": {"moments": 2, "random_counts": 3},
    },
    "stc": {"k": 3, "release": "nna", "domain": {"low": [-12], "high": [12]}},
    "summarize": {"rounds": 4, "features": 30, "gamma": 0.1},
}


def market(protocol: str, section: dict) -> Scenario:
    """A marketplace of three owners described by its public schema, its noise drawn from the seed."""
    return Scenario.from_dict(
        {
            "name": f"leaves-{protocol}",
            "protocol": protocol,
            "seed": 7,
            "parties": {"owners": 3},
            "data": {
                "schema": {
                    "features": [{"name": f"x{i}", "lower": -12, "upper": 12} for i in range(DIM)],
                    "label": {"name": "label", "classes": [0, 1]},
                }
            },
            "noise": {"source": "seed"},
            protocol: section,
        }
    )


def rows_file(path: Path, X: np.ndarray, y: np.ndarray) -> Path:
    lines = [",".join([*(f"x{i}" for i in range(DIM)), "label"])]
    lines += [",".join([*(f"{v:.6f}" for v in x), str(int(label))]) for x, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


TOP_ROW = (np.full(DIM, 12.0), 1)
"""A row at the corner of the box, far from every party's rows: an owner never bids it."""


def party_files(folder: Path, *, owner_1_rows: int = ROWS, top_row: bool = False) -> dict[str, dict[str, Path]]:
    """Each party's own files. owner-1's are the first ``owner_1_rows`` of one fixed draw, so two
    folders made with ROWS and ROWS + 1 differ by owner-1's last row only; ``top_row`` puts
    :data:`TOP_ROW` above them, so that every other row of owner-1 moves one down."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    sizes = {"owner-1": ROWS + 1, "owner-2": 90, "owner-3": 110, "consumer": 60}
    files: dict[str, dict[str, Path]] = {}
    for i, (party, n) in enumerate(sizes.items()):
        X = np.clip(rng.normal(-3.0 + 2.0 * i, 2.0, (n, DIM)), -12, 12)
        y = rng.integers(0, 2, n)
        if party == "owner-1":
            X, y = X[:owner_1_rows], y[:owner_1_rows]
            if top_row:
                X, y = np.vstack([TOP_ROW[0], X]), np.concatenate([[TOP_ROW[1]], y])
        files[party] = {"data": rows_file(folder / f"{party}.csv", X, y)}
    return files


class Session:
    """One deployment-shaped session (module docstring): what each party handed over, what each kept
    to itself, the messages the curator and the consumer received from owners, and the run report."""

    def __init__(self, scenario: Scenario, files: dict[str, dict[str, Path]], *, altered=None) -> None:
        """``altered``: party -> a function that changes its role once built (a cheating owner)."""
        config = scenario.config
        world = make_world(config, plugins.exchange(config.protocol))
        parties = frozenset(party_ids(config))
        self.scenario = scenario
        self.received: list[tuple[str, str, Any]] = []
        nodes = []
        for party in party_ids(config):
            own = own_rows(config, party, **files.get(party, {}))
            role = build_role(
                config,
                party,
                world=with_own_rows(share_of(world, party), own),
                owner_data=own.get("owner"),
                noise=noise_origin(config, party),
                exchange=plugins.exchange(config.protocol),
            )
            role = (altered or {}).get(party, lambda role: role)(role)
            if not party.startswith("owner-"):
                role.handle = self._recording(party, role.handle)
            nodes.append(
                Node(role, run_id="s-1", max_message_bytes=config.transport.max_message_bytes, parties=parties)
            )
        run_inprocess(nodes)
        self.nodes = {node.party_id: node for node in nodes}
        self.secret = {  # what each owner knows of itself: its role's whole result and its node's timings
            node.party_id: node.role.result() | node.timing() for node in nodes if node.party_id.startswith("owner-")
        }
        handed = [
            party_report(node, role_name=node.role.role_name, wall_s=1.0, driver={}, scenario=scenario)
            for node in nodes
        ]
        self.handed = {rep["id"]: json.loads(json.dumps(rep)) for rep in handed}
        self.report = json.loads(
            json.dumps(
                assemble_from_reports(
                    scenario, self.handed, {}, driver="market", exchange=plugins.exchange(scenario.config.protocol)
                )
            )
        )
        assert self.report["status"] == "completed", self.report["failures"]
        assert report_problems(self.report) == []

    def _recording(self, party: str, handle):
        def recorded(message):
            if message.sender.startswith("owner-"):
                self.received.append((message.sender, party, msgspec.to_builtins(message.body, enc_hook=_plain)))
            return handle(message)

        return recorded


def _plain(value: Any) -> Any:
    """A message field msgspec does not turn into builtins by itself: numpy arrays and scalars."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value


def values(tree: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every (key path, leaf value) of a JSON-like tree."""
    if isinstance(tree, dict):
        return [pv for key, value in tree.items() for pv in values(value, f"{path}.{key}")]
    if isinstance(tree, list):
        return [pv for i, value in enumerate(tree) for pv in values(value, f"{path}[{i}]")]
    return [(path, tree)]


def places_of(tree: Any, secret: float) -> list[str]:
    """Where ``tree`` holds the number ``secret`` (booleans are not numbers here)."""
    return [
        path
        for path, value in values(tree)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isclose(value, secret, abs_tol=0)
    ]


@pytest.fixture(scope="module", params=sorted(SECTIONS))
def session(request, tmp_path_factory) -> tuple[str, Session]:
    protocol = request.param
    return protocol, Session(market(protocol, SECTIONS[protocol]), party_files(tmp_path_factory.mktemp(protocol)))


def test_no_other_party_receives_an_owners_row_count_or_timings(session):
    protocol, s = session
    own = s.secret["owner-1"]
    assert own["rows"] == ROWS and own["compute_s"] > 0
    for owner in ("owner-1", "owner-2", "owner-3"):
        handed = s.handed[owner]
        assert "own" not in handed and handed["timing"] is None and handed["driver"] == {}
        assert not {"rows", "sent_rows"} & set(handed["result"]), handed["result"]
        details = s.report["party_details"][owner]
        assert details["timing"] is None and "simulator_view" not in details
        assert details["result"] == handed["result"]
        assert owner not in s.report["timing"]["by_party"]
    for secret in (ROWS, own["compute_s"], own["codec_s"]):
        assert places_of(s.handed, secret) == [], (protocol, secret)
        assert places_of(s.report, secret) == [], (protocol, secret)
        assert places_of([body for *_, body in s.received], secret) == [], (protocol, secret)


def test_a_summarize_owner_keeps_the_rows_it_handed_over_to_itself(tmp_path):
    private = {"enabled": True, "eps_auction": 0.05, "tau": 2}  # many requests: the curator's pool keeps some
    scenario = market("summarize", {**SECTIONS["summarize"], "rounds": 8, "privacy": private})
    s = Session(scenario, party_files(tmp_path))
    sent = {owner: s.secret[owner]["sent_rows"] for owner in ("owner-1", "owner-2", "owner-3")}
    assert sum(map(len, sent.values())) > len(s.report["selection"])  # the curator's pool kept points too
    for owner, rows in sent.items():
        assert "sent_rows" not in s.handed[owner]["result"]
        assert s.handed[owner]["result"]["points_sent"] == len(rows)  # how many: the curator counted them
        assert "sent_rows" not in json.dumps(s.report)


@pytest.mark.parametrize("private", [False, True], ids=["non-private", "private"])
def test_a_row_inserted_above_the_others_changes_nothing_that_leaves_the_owner(private, tmp_path):
    """The points of D_s are named by their owner's serial (the k-th point it handed over), never by
    their row: a row inserted at the top of owner-1's file moves every other row one down, and changes
    neither the run report nor anything the curator and the consumer receive."""
    private_section = {"privacy": {"enabled": True, "eps_auction": 0.05, "tau": 2}} if private else {}
    section = SECTIONS["summarize"] | {"rounds": 8} | private_section  # 8 rounds: owner-1 hands points over
    scenario = market("summarize", section)
    one = Session(scenario, party_files(tmp_path / "a"))
    other = Session(scenario, party_files(tmp_path / "b", top_row=True))
    sent = one.secret["owner-1"]["sent_rows"]
    assert sent and other.secret["owner-1"]["sent_rows"] == [r + 1 for r in sent]  # the same points, moved down
    assert other.received == one.received  # the messages the curator and the consumer received from owners
    for party in ("owner-1", "owner-2", "owner-3", "curator", "consumer"):
        assert other.handed[party]["result"] == one.handed[party]["result"], party
    assert changed(without_timings(one.report), without_timings(other.report)) == set()
    for s in (one, other):
        handed_over = {o: s.handed[o]["result"]["points_sent"] for o in ("owner-1", "owner-2", "owner-3")}
        assert all(0 <= k < handed_over[o] for o, k, _ in s.report["selection"]), s.report["selection"]


def without_timings(report: dict) -> dict:
    """``report`` without what the clock decides: the run's timings and the curator's and consumer's."""
    out = json.loads(json.dumps(report))
    out.pop("timing")
    for details in out["party_details"].values():
        details.pop("timing", None)
    return out


RELEASED = {
    "sketch": {
        "estimates",
        "metrics",
        "ranking",
        "history",
        "party_details.consumer.result",
        "party_details.curator.result",
    },
    "stc": {"choice", "metrics", "history", "party_details.consumer.result", "party_details.curator.result"},
    "summarize": set(),
}
"""Per protocol, what the consumer may see change when an owner's rows change: the figures the owners'
declared releases carry (the sketches, their noisy counts in the history and what the consumer
estimates from them; the stc centers and the choice made with them), and nothing else. A summarize
owner's row that is never handed over changes nothing."""


def changed(a: Any, b: Any, path: str = "") -> set[str]:
    """The key paths (as deep as the first list) where ``a`` and ``b`` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {p for key in a.keys() | b.keys() for p in changed(a.get(key), b.get(key), f"{path}.{key}".lstrip("."))}
    return set() if a == b else {path}


@pytest.mark.parametrize("protocol", sorted(SECTIONS))
def test_one_row_more_changes_only_what_the_declared_releases_carry(protocol, tmp_path):
    scenario = market(protocol, SECTIONS[protocol])
    one = Session(scenario, party_files(tmp_path / "a", owner_1_rows=ROWS))
    other = Session(scenario, party_files(tmp_path / "b", owner_1_rows=ROWS + 1))
    assert one.secret["owner-1"]["rows"] + 1 == other.secret["owner-1"]["rows"]
    for owner in ("owner-1", "owner-2", "owner-3"):
        assert one.handed[owner]["result"] == other.handed[owner]["result"]
    allowed = RELEASED[protocol]
    moved = changed(without_timings(one.report), without_timings(other.report))
    assert {path for path in moved if not any(path == a or path.startswith(a + ".") for a in allowed)} == set()


def test_an_owners_own_report_keeps_what_it_withheld(session):
    protocol, s = session
    node = s.nodes["owner-1"]
    own = party_report(node, role_name="owner", wall_s=1.0, driver={"io_s": 0.5}, scenario=s.scenario, own=True)["own"]
    assert own["result"]["rows"] == ROWS and own["timing"]["compute_s"] == s.secret["owner-1"]["compute_s"]
    assert own["driver"] == {"io_s": 0.5}
    assert not set(own["result"]) & set(s.handed["owner-1"]["result"])  # what it published is not repeated


def test_an_owner_of_a_protocol_it_cannot_name_publishes_nothing_of_its_result(session):
    protocol, s = session
    handed = party_report(s.nodes["owner-1"], role_name="owner", wall_s=1.0, driver={})  # no scenario
    assert handed["result"] == {} and handed["timing"] is None


def handing_over_another_row(owner):
    """``owner`` (of summarize) bids honestly, then hands over the row after the one it bid for."""
    from marketplace.protocols.summarize.messages import Point
    from marketplace.roles import Send

    send_point = owner._send_point

    def swapped(message):
        (send,) = send_point(message)
        other = (owner.sent_rows[-1] + 1) % len(owner.data)
        body = Point(round=send.body.round, x=owner.data.X[other], y=int(owner.data.y[other]), row=send.body.row)
        return [Send(send.to, body, reply_to=send.reply_to)]

    owner._send_point = swapped
    return owner


def reselling_its_first_point(owner):
    """``owner`` (of summarize) bids honestly, then hands over its first point again as its second."""
    from marketplace.protocols.summarize.messages import Point
    from marketplace.roles import Send

    send_point = owner._send_point

    def resold(message):
        (send,) = send_point(message)
        if send.body.row != 1:  # its serial: the second point it hands over
            return [send]
        first = owner.sent_rows[0]
        body = Point(round=send.body.round, x=owner.data.X[first], y=int(owner.data.y[first]), row=send.body.row)
        return [Send(send.to, body, reply_to=send.reply_to)]

    owner._send_point = resold
    return owner


def test_why_the_curator_excluded_an_owner_reaches_the_consumer_without_its_bid_values(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="marketplace.protocols.summarize.curator")
    scenario = market("summarize", SECTIONS["summarize"])
    s = Session(scenario, party_files(tmp_path), altered={"owner-3": handing_over_another_row})
    curator = s.nodes["curator"].role
    public = f"round {curator.flagged_rounds['owner-3']}: the point's bid value does not match the claimed bid"
    assert curator.flagged["owner-3"] == public  # public at the source
    assert s.handed["curator"]["result"]["flagged"] == {"owner-3": public}
    assert s.report["flagged"] == {"owner-3": public}
    assert s.report["owners_lost"]["lost"]["owner-3"].endswith(public)
    for error in s.report["party_details"]["owner-3"]["errors_received"]:  # the curator told owner-3 why
        assert set(error) <= {"from", "code"}
    own = party_report(s.nodes["curator"], role_name="curator", wall_s=1.0, driver={}, scenario=scenario, own=True)
    assert "flagged" not in (own.get("own") or {}).get("result", {})  # nothing to keep: the reason is public
    logged = [r.getMessage() for r in caplog.records if "owner-3" in r.getMessage() and "claimed bid" in r.getMessage()]
    assert logged and "allowed" in logged[0]  # the figures it compared: in the curator's own log only


@pytest.mark.parametrize(
    ("cheat", "logged"), [(handing_over_another_row, "claimed bid"), (reselling_its_first_point, "first as serial")]
)
def test_a_refused_owner_is_told_why_with_no_figure_but_the_round(cheat, logged, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="marketplace.protocols.summarize.curator")
    s = Session(market("summarize", SECTIONS["summarize"]), party_files(tmp_path), altered={"owner-3": cheat})
    curator, owner = s.nodes["curator"].role, s.nodes["owner-3"].role
    round_no, flagged = curator.flagged_rounds["owner-3"], curator.flagged["owner-3"]
    told = [error["detail"] for error in owner.errors_received if error["from"] == "curator"]
    assert told and all(flagged in text for text in told)  # the error about its point says why, as flagged does
    for text in (flagged, *told):
        assert re.search(r"\d", text.replace(f"round {round_no}", "")) is None, text
    assert flagged in owner.failure  # the curator's shutdown repeats it
    figures = [r.getMessage() for r in caplog.records if "owner-3" in r.getMessage() and logged in r.getMessage()]
    assert figures and re.search(r"\d", figures[0].replace(f"round {round_no}", ""))  # kept in the curator's log


@pytest.mark.parametrize(
    ("reason", "public"),
    [
        (
            "round 3: point's bid value 0.301508478931 does not match the claimed bid 0.506205206627 (allowed: 1e-09)",
            "round 3: the point's bid value does not match the claimed bid",
        ),
        (
            "round 3: point's bid value -1.5e-07 does not match the claimed bid 0.5",
            "round 3: the point's bid value does not match the claimed bid",
        ),
        (
            "sent the same point again (first as row 17, now as row 40); a point is sold once",
            "sent the same point again; a point is sold once",
        ),
        (
            "sent the same point again (first as serial 0, now as serial 3); a point is sold once",
            "sent the same point again; a point is sold once",
        ),
        ("round 2: sent a point that could not be read", "round 2: sent a point that could not be read"),
        ("sealed point has 12 bytes, expected 96", "sealed point has 12 bytes, expected 96"),
        ("a reason nobody listed: 0.3141", "its point could not be accepted (the curator's own log says why)"),
    ],
)
def test_a_curators_reason_leaves_it_in_its_public_form_and_stays_so(reason, public):
    from marketplace.protocols.summarize.publication import curator_published, public_reason

    assert public_reason(reason) == public and public_reason(public) == public
    result = {"flagged": {"owner-2": reason}, "selection": [["owner-1", 4, "k"]]}
    assert curator_published(result) == {"flagged": {"owner-2": public}, "selection": [["owner-1", 4, "k"]]}


def test_a_pfds_owner_keeps_its_row_count_its_model_and_timings_to_itself():
    """pfds reads a simulated table (it is not served from a schema): each owner is built from its own
    share of the world, and the report is assembled from what the parties hand over, as ``marketplace
    assemble`` does. An owner's model, fitted on its own rows with no privacy, stays with it too."""
    from marketplace.runtime.party_process import host_nodes

    table = {"dataset": "synthetic", "synthetic": {"rows": 900, "numeric": 3, "categorical": 1, "values": 3}}
    scenario = Scenario.from_dict(
        {
            "name": "leaves-pfds",
            "protocol": "pfds",
            "seed": 7,
            "parties": {"owners": 3},
            "data": {"source": {"kind": "table", "table": table}},
            "noise": {"source": "seed"},
            "pfds": {"epsilon": 1.0, "h_max": 4, "t": 5, "p": 2, "model": "logistic", "baselines": []},
        }
    )
    nodes = host_nodes(
        scenario, party_ids(scenario.config), run_id="s-1", exchange=plugins.exchange(scenario.config.protocol)
    )
    run_inprocess(nodes)
    owners = {n.party_id: n for n in nodes if n.party_id.startswith("owner-")}
    secret = {o: n.role.result() | n.timing() for o, n in owners.items()}
    handed = {
        n.party_id: json.loads(
            json.dumps(party_report(n, role_name=n.role.role_name, wall_s=1.0, driver={}, scenario=scenario))
        )
        for n in nodes
    }
    report = json.loads(
        json.dumps(
            assemble_from_reports(
                scenario, handed, {}, driver="compose", exchange=plugins.exchange(scenario.config.protocol)
            )
        )
    )
    assert report["status"] == "completed", report["failures"]
    for owner in owners:
        assert secret[owner]["rows"] > 0 and secret[owner]["model"] is not None
        assert not {"rows", "model"} & set(handed[owner]["result"]) and handed[owner]["timing"] is None
        assert handed[owner]["result"]["privacy"]["eps"] > 0  # its declared releases' account leaves it
        details = report["party_details"][owner]
        assert details["result"] == handed[owner]["result"] and "simulator_view" not in details
        assert report["metrics"]["pfds"]["agents"][owner] is None  # its model's error: nobody else can score it
        assert places_of(report["party_details"], secret[owner]["compute_s"]) == []
    assert report["metrics"]["pfds"]["consumer"] is not None  # the consumer's own model, scored
