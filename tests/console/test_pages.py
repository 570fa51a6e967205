"""The consoles' pages: their data built from real files (a status file as the server writes it, real
ledgers, real reports), their routes over HTTP (starlette's TestClient), the token rule, and /metrics
in Prometheus's text format."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from marketplace.console import access
from marketplace.console.consumer_view import consumer_page, report_page
from marketplace.console.metrics import metrics_text
from marketplace.console.operator_view import latency, operator_page, quantile
from marketplace.console.owner_view import owner_page
from marketplace.privacy.lifetime import Cost, LifetimeLedger, SaleTerms, ledger_file
from marketplace.service.status import write_status

testclient = pytest.importorskip("starlette.testclient", reason="starlette's TestClient needs httpx")
from marketplace.console.web import consumer_app, operator_app, owner_app  # noqa: E402


def _session(name: str, status: str, wall: float, wait: float) -> dict:
    return {
        "session": name,
        "consumer": "alice",
        "protocol": "sketch",
        "status": status,
        "wall_s": wall,
        "wait_s": wait,
        "owners_invited": 2,
    }


@pytest.fixture
def outside():
    """A folder outside pytest's, for hand-made report.json files (every report.json in pytest's folders
    must be a whole report: tests/conftest.py)."""
    with tempfile.TemporaryDirectory(prefix="console-") as folder:
        yield Path(folder)


@pytest.fixture
def state(outside: Path) -> Path:
    """A served marketplace's state: server.json as the server writes it, market.yaml, and one
    session's report in which owner-2 declined."""
    state = outside / "state"
    state.mkdir()
    (state / "market.yaml").write_text(
        "lifetime:\n  budget: {epsilon: 1.0}\n  owner_budgets: {owner-2: {epsilon: 0.3}}\n  terms: {price: 2.0}\n"
    )
    sessions = [_session("s0001-a", "completed", 1.0, 0.5), _session("s0002-b", "completed", 3.0, 0.1)]
    sessions.append({**_session("s0003-c", "refused", 0.0, 0.0), "problem": "bad key"})
    report = {"lifetime": {"owners": {"owner-1": {"state": "committed"}, "owner-2": {"state": "declined"}}}}
    (state / "sessions" / "s0002-b").mkdir(parents=True)
    (state / "sessions" / "s0002-b" / "report.json").write_text(json.dumps(report))
    status = {
        "endpoint": "tcp://127.0.0.1:7700",
        "pid": 1234,
        "owners": 2,
        "max_sessions": 8,
        "rule": "fcfs",
        "owners_present": 1,
        "running": ["s0004-d"],
        "queued": ["s0005-e", "s0006-f"],
        "held": "",
        "max_running": 2,
        "agent_restarts": 1,
        "sessions": sessions,
        "present": ["owner-1"],
        "posted": {"owner-1": {"price": 3.0}},
        "admitted": {"owner-1": {"eps": 0.5}, "owner-2": {"eps": 0.25}},
        "ended": {"completed": 2, "refused": 1},
    }
    assert write_status(state, status) is None
    return state


@pytest.fixture
def ledgers(tmp_path: Path) -> Path:
    """Two real ledgers: owner-1 sold under a privacy price and committed twice, then declined; owner-2
    has one request aborted."""
    folder = tmp_path / "ledgers"
    folder.mkdir()
    terms = SaleTerms(price=2.0, points=100, price_per_eps=10.0)
    with LifetimeLedger.open(
        ledger_file(folder, "owner-1"), owner="owner-1", budget=(1.0, 0.0), relation="add/remove-one"
    ) as one:
        one.reserve("r1", Cost.pure(0.25), consumer="alice", what="summarize", points=5, terms=terms)
        one.commit("r1", sold=3)
        one.reserve("r2", Cost.pure(0.5), consumer="bob", what="sketch")
        one.commit("r2")
        with pytest.raises(Exception, match="declined"):
            one.reserve("r3", Cost.pure(0.5), consumer="carol", what="sketch")
    with LifetimeLedger.open(
        ledger_file(folder, "owner-2"), owner="owner-2", budget=(0.3, 0.0), relation="add/remove-one"
    ) as two:
        two.reserve("r1", Cost.pure(0.25), consumer="alice", what="sketch")
        two.abort("r1")
    return folder


@pytest.fixture
def reports(outside: Path) -> Path:
    """A consumer's output folders: one report with a bill (out/1), one without (out/2), a party's report
    that is not a purchase (out/1/parties/consumer.json), and a file that is not a report."""
    root = outside / "runs"
    owners = {
        "owner-1": {
            "state": "committed",
            "cost": {"eps": 0.25, "delta": 0.0, "rho": None},
            "charged": {"eps": 0.25, "delta": 0.0},
            "sale": {"sold": 3, "earnings": 8.5, "privacy_earnings": 2.5},
        },
        "owner-2": {"state": "declined", "reason": "over its budget", "cost": {"eps": 0.25, "delta": 0.0, "rho": None}},
    }
    first = {
        "protocol": "summarize",
        "scenario": "buy",
        "status": "completed",
        "run_id": "s0001-a",
        "lifetime": {"request_id": "s0001-a", "owners": owners},
        "sale": {"paid": 6.0, "points_bought": 3, "bought": {"owner-1": 3}, "paid_to": {"owner-1": 6.0}},
        "timing": {"wall_s": 1.5},
    }
    second = {"protocol": "sketch", "scenario": "ask", "status": "failed", "run_id": "s0002-b", "failures": ["lost"]}
    for folder, report in (("out/1", first), ("out/2", second)):
        (root / folder / "parties").mkdir(parents=True)
        (root / folder / "report.json").write_text(json.dumps(report))
        (root / folder / "parties" / "report.json").write_text(json.dumps(report))
    (root / "out" / "1" / "rounds.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "notes").mkdir()
    (root / "notes" / "report.json").write_text("[1, 2]")
    return root


# --- page data


def test_quantiles_interpolate_between_ranks_and_latency_counts_completed_sessions_only():
    assert quantile([], 0.5) is None
    assert quantile([3.0], 0.99) == 3.0
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    figures = latency([_session("a", "completed", 1.0, 0.5), _session("b", "failed", 9.0, 9.0)])
    assert figures["wall_s"]["count"] == 1 and figures["wall_s"]["quantiles"][0.5] == 1.0


def test_the_operator_page_shows_what_server_json_says_and_each_owners_public_standing(state):
    page = operator_page(state)
    assert page["running"] == ["s0004-d"] and page["queued"] == ["s0005-e", "s0006-f"]
    assert page["ended_counts"] == {"completed": 2, "failed": 0, "refused": 1, "dropped": 0}
    assert [e["session"] for e in page["ended"]] == ["s0003-c", "s0002-b", "s0001-a"]
    assert page["latency"]["wall_s"]["quantiles"][0.5] == pytest.approx(2.0)
    one, two = page["owners"]
    assert one == {
        "owner": "owner-1",
        "present": True,
        "terms": {"price": 3.0},
        "terms_from": "agent",
        "budget": {"epsilon": 1.0},
        "admitted": {"eps": 0.5},
    }
    assert two["present"] is False and two["terms_from"] == "market" and two["budget"] == {"epsilon": 0.3}
    assert page["declines"] == [{"session": "s0002-b", "consumer": "alice", "owner": "owner-2"}]
    shown = json.dumps(page)
    for private in ("spent", "remaining", "rows", "sold"):  # no ledger standing, no row count
        assert f'"{private}"' not in shown


def test_the_operator_page_before_the_server_wrote_its_status(tmp_path):
    assert operator_page(tmp_path)["status"] is None
    assert (
        metrics_text(None) == "# HELP marketplace_up 1 when the server's status file reads\n"
        "# TYPE marketplace_up gauge\nmarketplace_up 0\n"
    )


def test_the_owner_page_reads_the_ledgers_over_time(ledgers):
    page = owner_page(ledgers, ["owner-1", "owner-2", "owner-3"])
    one, two, three = page["owners"]
    assert one["spent"]["eps"] == pytest.approx(0.75) and one["remaining"]["eps"] == pytest.approx(0.25)
    assert [p["spent"] for p in one["spent_series"]] == pytest.approx([0.25, 0.75])
    assert one["counts"] == {"committed": 2, "reserved": 0, "aborted": 0, "declined": 1}
    assert [d["request_id"] for d in one["declines"]] == ["r3"]
    assert one["standing"]["sold"] == 3
    assert one["privacy_earnings"] == pytest.approx(2.5)  # 10 per eps, 0.25 charged
    assert one["standing"]["earnings"] == pytest.approx(3 * 2.0 + 2.5)
    assert one["earnings_series"][-1]["earnings"] == pytest.approx(8.5)
    assert two["spent_series"] == [] and two["counts"]["aborted"] == 1
    assert "no ledger yet" in three["problem"]
    with LifetimeLedger.read(ledger_file(ledgers, "owner-1")) as again:  # read-only: nothing changed
        assert [r.state for r in again.history()] == ["committed", "committed", "declined"]


def test_the_consumer_page_lists_every_purchase_with_its_bill(reports):
    page = consumer_page(reports)
    assert sorted(p["folder"] for p in page["purchases"]) == ["out/1", "out/2"]
    bought = next(p for p in page["purchases"] if p["folder"] == "out/1")
    assert bought["bill"]["paid"] == pytest.approx(6.0 + 2.5) and bought["bill"]["privacy_paid"] == pytest.approx(2.5)
    assert bought["owners"] == {"charged": ["owner-1"], "declined": ["owner-2"], "other": []}
    assert page["totals"]["purchases"] == 2 and page["totals"]["completed"] == 1
    one = report_page(reports, "out/1")
    assert one is not None and one["rounds_plot"] and one["figures"]
    assert {c["owner"]: c["reason"] for c in one["charges"]}["owner-2"] == "over its budget"
    assert report_page(reports, "../etc") is None and report_page(reports, "notes") is None


# --- the token rule


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8080", ("127.0.0.1", 8080)), ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9000", ("::1", 9000))],
)
def test_console_addresses(text, expected):
    assert access.parse_address(text) == expected


@pytest.mark.parametrize("bad", ["host:port", "1.2.3.4:70000"])
def test_a_bad_console_address_is_refused(bad):
    with pytest.raises(access.ConsoleAddressError, match="console.s address"):
        access.parse_address(bad)


def test_a_token_is_made_off_loopback_only(monkeypatch):
    monkeypatch.delenv(access.TOKEN_ENV, raising=False)
    assert access.listen("127.0.0.1:0").token is None and access.listen("localhost:0").token is None
    made = access.listen("0.0.0.0:0")
    assert made.generated and made.token and len(made.token) >= 24 and f"?token={made.token}" in made.url()
    assert access.listen("0.0.0.0:0", "given").token == "given"
    monkeypatch.setenv(access.TOKEN_ENV, "from-env")
    assert access.listen("0.0.0.0:0").token == "from-env" and not access.listen("0.0.0.0:0").generated


# --- over HTTP


def test_the_operator_console_over_http_with_its_token(state):
    client = testclient.TestClient(operator_app(state, token="s3cret"))
    assert client.get("/").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 403
    page = client.get("/", headers={"Authorization": "Bearer s3cret"})
    assert page.status_code == 200 and "s0004-d" in page.text and "owner-2" in page.text
    linked = client.get("/?token=s3cret")  # the printed link: sets the cookie the page's links use
    assert linked.status_code == 200 and client.get("/api/status").json()["queued"] == ["s0005-e", "s0006-f"]


def test_metrics_are_prometheus_text(state):
    client = testclient.TestClient(operator_app(state))
    answer = client.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = check_exposition(answer.text)
    assert samples['marketplace_sessions{state="running"}'] == 1
    assert samples['marketplace_sessions{state="queued"}'] == 2
    assert samples['marketplace_sessions_ended_total{status="refused"}'] == 1
    assert samples["marketplace_requests_refused_total"] == 1
    assert samples["marketplace_owners_present"] == 1 and samples["marketplace_owners"] == 2
    assert samples['marketplace_session_wall_seconds{quantile="0.5"}'] == pytest.approx(2.0)
    assert samples["marketplace_session_wall_seconds_count"] == 2


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def check_exposition(text: str) -> dict[str, float]:
    """Every line of ``text`` as Prometheus's text format (0.0.4) allows it: a HELP and a TYPE before
    each family's samples, each sample a name of its family, labels and a number; the samples by line."""
    assert text.endswith("\n")
    samples: dict[str, float] = {}
    family, kind = None, None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            family, kind = line.split()[2], None
        elif line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert name == family and kind in ("counter", "gauge", "summary", "histogram", "untyped"), line
        else:
            match = SAMPLE.match(line)
            assert match and family and kind, line
            name = match.group(1)
            allowed = {"counter": ("_total",), "summary": ("", "_sum", "_count")}.get(kind, ("",))
            assert any(name == family + suffix for suffix in allowed), line
            samples[line.rsplit(" ", 1)[0]] = float(match.group(4))
    return samples


def test_the_owner_console_over_http(ledgers):
    client = testclient.TestClient(owner_app(ledgers, ["owner-1", "owner-2"]))
    page = client.get("/")
    assert page.status_code == 200 and "r3" in page.text and "owner-2" in page.text
    plot = client.get("/plot/owner-1/spent.svg")
    assert plot.status_code == 200 and plot.headers["content-type"] == "image/svg+xml" and b"<svg" in plot.content
    assert client.get("/plot/owner-1/earnings.svg").status_code == 200
    assert client.get("/plot/owner-9/spent.svg").status_code == 404  # only the owners it hosts
    assert client.get("/api/ledgers").json()["owners"][0]["standing"]["sold"] == 3


def test_the_consumer_console_over_http(reports):
    client = testclient.TestClient(consumer_app(reports))
    page = client.get("/")
    assert page.status_code == 200 and 'href="report/out/1"' in page.text
    one = client.get("/report/out/1")
    assert one.status_code == 200 and "over its budget" in one.text and 'src="1/rounds.png"' in one.text
    assert client.get("/report/out/1/rounds.png").content.startswith(b"\x89PNG")
    assert client.get("/report/out/2/rounds.png").status_code == 404
    assert client.get("/report/..%2F..%2Fetc").status_code == 404
