"""What a served session's parties keep to themselves, and what reaches the server and the consumer.

One session of a marketplace described by its public schema: the server runs in this process, one
agent hosts the three owners (in a thread of this process, its folder outside the server's state), and
the consumer brings its own target. Two owners are test doubles whose code raises an error that
carries a value of theirs: owner-2 in its local work after the run, owner-3 on the curator's request.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import marketplace
from marketplace.service import agent as agent_module
from marketplace.service.options import AgentOptions

pytestmark = pytest.mark.slow

DIM = 3
SECRET = {"owner-2": "41.7316529", "owner-3": "-7.2948163"}
"""The value each failing owner's error carries (a value of a row of its own, say)."""
MARKET = {
    "name": "keep-market",
    "protocol": "sketch",
    "seed": 11,
    "parties": {"owners": 3},
    "data": {
        "schema": {
            "features": [{"name": f"x{i}", "lower": -12, "upper": 12} for i in range(DIM)],
            "label": {"name": "label", "classes": [0, 1]},
        }
    },
    "transport": {"start_timeout_s": 20, "progress_timeout_s": 8, "heartbeat_interval_s": 0.25},
    "lifetime": {"ledgers": "ledgers", "budget": {"epsilon": 2.0}},
}
REQUEST = {
    "name": "keep-request",
    "protocol": "sketch",
    "sketch": {
        "lower": [-12] * DIM,
        "upper": [12] * DIM,
        "epsilon": 0.5,
        "samples": 500,
        "map": {"features": 30},
        "queries": {"moments": 1, "random_counts": 2},
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rows_file(path: Path, rng: np.random.Generator, n: int, centre: float) -> Path:
    X = np.clip(rng.normal(centre, 2.0, (n, DIM)), -12, 12)
    y = rng.integers(0, 2, n)
    lines = [",".join([*(f"x{i}" for i in range(DIM)), "label"])]
    lines += [",".join([*(f"{v:.6f}" for v in x), str(int(label))]) for x, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


def failing(role: Any) -> Any:
    """``role`` (a sketch owner) as a test double whose code raises an error carrying its secret."""
    secret = SECRET[role.party_id]
    if role.party_id == "owner-2":

        def finish() -> None:
            raise ValueError(f"row 17 of {role.party_id}'s file holds {secret}")

        role.finish = finish
    else:

        def handle(message):
            raise ValueError(f"row 4 of {role.party_id}'s file holds {secret}")

        role.handle = handle
    return role


class Served:
    """The session (module docstring): the consumer's output folder, the server's state folder, the
    agent's folder."""

    def __init__(self, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        rng = np.random.default_rng(3)
        own = tmp / "own"
        own.mkdir()
        sizes = {"owner-1": 140, "owner-2": 90, "owner-3": 110}
        files = {
            owner: rows_file(own / f"{owner}.csv", rng, n, -3.0 + 2.0 * i) for i, (owner, n) in enumerate(sizes.items())
        }
        target = rows_file(own / "target.csv", rng, 61, 1.0)
        self.rows = sizes
        self.state, self.agent_folder, self.out = tmp / "state", tmp / "agent", tmp / "out"
        (tmp / "market.yaml").write_text(yaml.safe_dump(MARKET))
        built = agent_module.host_nodes

        def host_nodes(scenario, parties, **kwargs):
            nodes = built(scenario, parties, **kwargs)
            for node in nodes:
                if node.party_id in SECRET:
                    failing(node.role)  # in place: the node runs the same role object
            return nodes

        monkeypatch.setattr(agent_module, "host_nodes", host_nodes)
        with marketplace.serve(
            tmp / "market.yaml",
            state=self.state,
            consumers=["alice"],
            start_owners=False,
            endpoint=f"tcp://127.0.0.1:{free_port()}",
        ) as market:
            agent = agent_module.OwnerAgent(
                AgentOptions(
                    market.endpoint,
                    self.state / "owners",
                    list(sizes),
                    work=self.agent_folder / "sessions",
                    ledgers=self.agent_folder / "ledgers",
                    data=files,
                    schema=tmp / "market.yaml",
                )
            )
            thread = threading.Thread(target=agent.run, name="owner-agent", daemon=True)
            thread.start()
            try:
                self.report = marketplace.request(
                    REQUEST,
                    market=market.endpoint,
                    keys=self.state / "consumers" / "alice",
                    data=target,
                    out=self.out,
                    wait_s=300,
                    check=False,
                ).raw
            finally:
                agent.stop()
                thread.join(60)
        assert not thread.is_alive(), "the agent did not stop"
        (self.session,) = (p.name for p in (self.state / "sessions").iterdir())

    def texts(self, folder: Path) -> dict[str, str]:
        """Every file under ``folder``, as text."""
        return {str(p.relative_to(folder)): p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()}

    def handed(self, party: str) -> dict[str, Any]:
        """What ``party`` handed the server (the server's copy)."""
        return json.loads((self.state / "sessions" / self.session / "parties" / f"{party}.json").read_text())

    def own_report_file(self, owner: str) -> Path:
        """Where the agent keeps ``owner``'s own report of the session."""
        return self.agent_folder / "sessions" / self.session / f"{owner}.json"

    def own_report(self, owner: str) -> dict[str, Any]:
        return json.loads(self.own_report_file(owner).read_text())


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    with pytest.MonkeyPatch.context() as monkeypatch:
        return Served(tmp_path_factory.mktemp("served"), monkeypatch)


def test_an_owners_failure_reaches_the_server_and_the_consumer_as_its_kind_and_phase_only(served):
    assert served.report["driver"] == "market" and served.report["deployment"]["data"] == "own"
    assert served.handed("owner-2")["failure"] == "internal error (ValueError) in its agent while finishing"
    assert served.handed("owner-3")["failure"] == "internal error (ValueError) in its agent while handling a message"
    assert "owner-2: internal error (ValueError) in its agent while finishing" in served.report["failures"]
    for owner, secret in SECRET.items():
        for where, texts in (("server", served.texts(served.state)), ("consumer", served.texts(served.out))):
            assert [name for name, text in texts.items() if secret in text] == [], (owner, where)
        own = served.own_report(owner)
        assert secret in own["own"]["failure"] and own["own"]["failure"].startswith("internal error in its agent")


def test_an_agent_keeps_each_owners_own_report_in_its_own_folder(served):
    for owner, rows in served.rows.items():
        path = served.own_report_file(owner)
        assert path.stat().st_mode & 0o777 == 0o600, owner
        own = served.own_report(owner)
        assert own["id"] == owner and own["run_id"] == served.session
        assert own["own"]["result"]["rows"] == rows  # what it kept to itself: its row count
        handed = served.handed(owner)
        assert "rows" not in handed["result"] and "own" not in handed
        assert {k: v for k, v in own.items() if k != "own"} == handed  # the rest is what it published
    assert served.own_report("owner-1")["status"] == "completed"
    for name, text in served.texts(served.state).items():  # the server's state holds no owner's own report
        if name.endswith(".json"):
            assert not has_key(json.loads(text), "own"), name


def has_key(tree: Any, key: str) -> bool:
    """Whether a mapping anywhere in the JSON-like ``tree`` has ``key``."""
    if isinstance(tree, dict):
        return key in tree or any(has_key(v, key) for v in tree.values())
    return isinstance(tree, list) and any(has_key(v, key) for v in tree)


def figures(tree: Any, path: str = "") -> dict[str, float]:
    """Every number of a JSON-like tree that is not a whole number (a figure computed from data, not a
    count or a setting), by its key path."""
    if isinstance(tree, dict):
        return {p: v for key, value in tree.items() for p, v in figures(value, f"{path}.{key}").items()}
    if isinstance(tree, list):
        return {p: v for i, value in enumerate(tree) for p, v in figures(value, f"{path}[{i}]").items()}
    return {path: tree} if isinstance(tree, float) and not tree.is_integer() else {}


def test_the_server_keeps_nothing_the_consumer_computed_from_its_own_rows(served):
    report = served.report  # the consumer's own copy, also its out/report.json
    assert json.loads((served.out / "report.json").read_text()) == report
    whole = json.loads((served.out / "parties" / "consumer.json").read_text())
    mine = {
        "metrics.merged_mmd2": report["metrics"]["merged_mmd2"],
        **{f"metrics.target_gap{p}": v for p, v in figures(report["metrics"]["target_gap"]).items()},
        **{f"ranking{p}": v for p, v in figures({k: v for k, v in report["ranking"].items() if k != "check"}).items()},
        **{f"consumer.timing{p}": v for p, v in figures(whole["timing"]).items()},
    }
    assert report["metrics"]["merged_mmd2"] is not None and len(mine) > 5, mine
    handed = served.handed("consumer")
    assert handed["result"] == {"end_status": whole["result"]["end_status"]} and handed["timing"] is None
    archived = {
        name: figures(json.loads(text)) for name, text in served.texts(served.state).items() if name.endswith(".json")
    }
    for what, value in mine.items():
        assert [name for name, found in archived.items() if value in found.values()] == [], what
    server_copy = json.loads((served.state / "sessions" / served.session / "report.json").read_text())
    assert server_copy["metrics"]["merged_mmd2"] is None and report["run_id"] == server_copy["run_id"]
