"""A consumer asks a served marketplace what it sells (`marketplace catalogue`) and what a request would
cost (`marketplace quote`), and limits what it pays (`request --max-price`), then buys a summarize
purchase and a sketch within their quotes: one served summarize marketplace for the module, two of its
three owners hosted by an agent that posts its own prices (per point and per unit eps)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from test_serve import REQUEST as SKETCH_REQUEST
from test_serve import free_port
from test_serve_summarize import REQUEST, SUMMARIZE_MARKET

import marketplace
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

pytestmark = pytest.mark.slow


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "marketplace", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


class Served:
    def __init__(self, root: Path, served: marketplace.Marketplace) -> None:
        self.root, self.served = root, served
        self.endpoint = served.endpoint
        self.alice = root / "state" / "consumers" / "alice"
        self.ledgers = root / "state" / "owners"
        self.request = root / "request.yaml"

    def ask(self, command: str, *args: str) -> subprocess.CompletedProcess:
        return run_cli(command, *args, "--market", self.endpoint, "--keys", str(self.alice))

    def ledger_files(self) -> dict[str, str]:
        """Every ledger file's digest: what a quote must leave as it was."""
        return {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(self.ledgers.glob("*.ledger.sqlite*"))
        }


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    root = tmp_path_factory.mktemp("catalogue")
    # owner-3 never connects: the first request waits out the server's start grace (start_timeout_s from
    # its start) for it, so the grace is short here; the fixture itself waits for owners 1 and 2
    market = {**SUMMARIZE_MARKET, "transport": {**SUMMARIZE_MARKET["transport"], "start_timeout_s": 4}}
    (root / "market.yaml").write_text(yaml.safe_dump(market))
    (root / "request.yaml").write_text(yaml.safe_dump(REQUEST))
    with marketplace.serve(
        root / "market.yaml",
        root / "state",
        endpoint=f"tcp://127.0.0.1:{free_port()}",
        consumers=["alice"],
        start_owners=False,
        session_port=free_port(),
    ) as served:
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "marketplace",
                "agent",
                "--market",
                served.endpoint,
                "--keys",
                str(root / "state" / "owners"),
                "--ids",
                "owner-1..owner-2",
                "--price",
                "7.5",
                "--price-per-eps",
                "2",
                "--work",
                str(root / "agent"),
            ],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while json.loads((root / "state" / "server.json").read_text())["owners_present"] < 2:
                assert time.monotonic() < deadline and agent.poll() is None, "the agent's owners never came"
                time.sleep(0.05)
            yield Served(root, served)
        finally:
            served.stop()
            try:
                agent.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.communicate()


def test_the_catalogue_lists_the_schema_protocols_and_the_present_owners_terms(market):
    cat = marketplace.catalogue(market.endpoint, market.alice)
    assert cat["market"]["name"] == "summarize-market" and cat["market"]["owners"] == 3
    assert cat["schema"]["data"]["source"]["kind"] == "covariate_shift"
    assert "summarize" in cat["protocols"] and "rounds" in cat["protocols"]["summarize"]["bounds"]
    owners = {o["owner"]: o for o in cat["owners"]}
    assert set(owners) == {"owner-1", "owner-2"}  # owner-3 has no agent
    for owner in owners.values():  # the agent's --price and --price-per-eps, the marketplace's limits on points
        assert owner["terms"] == {
            **owner["terms"],
            "price": 7.5,
            "price_per_eps": 2.0,
            "points": 5,
            "points_per_consumer": 3,
        }
        assert owner["terms_from"] == "agent" and owner["budget"] == {"epsilon": 20.0, "delta": 0.01}
    assert "not shown" in cat["notes"]["not_public"]
    shown = market.ask("catalogue")
    assert shown.returncode == 0, shown.stderr
    assert "owner-1: price 7.5 per point" in shown.stdout and "owner-3" not in shown.stdout
    as_json = market.ask("catalogue", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["owners"] == cat["owners"]


def test_a_quote_charges_nothing_and_says_what_the_request_would_cost(market):
    first = marketplace.request(market.request, market=market.endpoint, keys=market.alice, out=market.root / "first")
    assert first.status == "completed"  # the owners' ledgers exist and hold a session now
    before = market.ledger_files()
    assert len(before) >= 2
    sessions = len(market.served.sessions)
    quoted = marketplace.quote(market.request, market=market.endpoint, keys=market.alice)
    owners = quoted["owners"]
    assert owners["owner-3"]["declines"].startswith("not connected")
    for owner in ("owner-1", "owner-2"):
        assert owners[owner]["declines"] is None and owners[owner]["privacy"]["charge"]["eps"] > 0
    # 4 rounds, at most 3 points to one consumer, at 7.5 each, from each of the two owners present, and
    # the privacy each ledger is charged at 2 per unit eps
    privacy = {o: 2.0 * owners[o]["privacy"]["charge"]["eps"] for o in ("owner-1", "owner-2")}
    assert quoted["money"]["privacy"] == pytest.approx(privacy)
    assert quoted["money"]["per_owner"] == pytest.approx({o: 22.5 + p for o, p in privacy.items()})
    at_most = quoted["money"]["at_most"]
    assert at_most == pytest.approx(45.0 + sum(privacy.values())) and quoted["reserved"] is False
    shown = market.ask("quote", str(market.request))
    assert shown.returncode == 0, shown.stderr
    assert f"money: at most {at_most:g}" in shown.stdout and "nothing was reserved, charged or recorded" in shown.stdout
    assert market.ledger_files() == before  # nothing reserved, charged or recorded
    assert len(market.served.sessions) == sessions
    with LifetimeLedger.read(ledger_file(market.ledgers, "owner-1")) as ledger:
        assert [r.request_id for r in ledger.history()] == [first.raw["run_id"]]
        (sale,) = ledger.sales()  # the first purchase earned the owner its privacy price, as quoted
        assert sale.state == "committed" and sale.privacy_price == pytest.approx(privacy["owner-1"])
    # the catalogue now shows what this server admitted for each owner
    admitted = {o["owner"]: o["admitted"] for o in marketplace.catalogue(market.endpoint, market.alice)["owners"]}
    assert admitted["owner-1"]["eps"] == pytest.approx(owners["owner-1"]["privacy"]["charge"]["eps"])


def test_bad_quotes_are_refused_clearly(market):
    bad = market.root / "bad-protocol.yaml"
    bad.write_text(yaml.safe_dump({**REQUEST, "protocol": "no-such-protocol"}))
    refused = market.ask("quote", str(bad))
    assert refused.returncode == 2 and "bad request" in refused.stderr and "no-such-protocol" in refused.stderr
    broken = market.root / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    refused = market.ask("quote", str(broken))
    assert refused.returncode == 2 and "bad request" in refused.stderr, refused.stderr
    missing = market.ask("quote", str(market.root / "nowhere.yaml"))
    assert missing.returncode == 2 and "nowhere.yaml" in missing.stderr, missing.stderr


def test_max_price_refuses_a_request_quoted_above_it_before_anything_is_reserved(market):
    before, finished = market.ledger_files(), len(market.served.sessions)
    request = ("request", str(market.request), "--market", market.endpoint, "--keys", str(market.alice), "--quiet")
    quoted = marketplace.quote(market.request, market=market.endpoint, keys=market.alice)["money"]["at_most"]
    refused = run_cli(*request, "--out", str(market.root / "too-dear"), "--max-price", "10")
    assert refused.returncode == 2, refused.stderr
    assert f"--max-price: expected a request quoted at most 10, got a quote of {quoted:g}" in refused.stderr
    assert "nothing was sent, reserved or charged" in refused.stderr
    assert market.ledger_files() == before and len(market.served.sessions) == finished
    for bad in ("-1", "nan", "inf", "cheap"):
        usage = run_cli(*request, "--out", str(market.root / "bad"), "--max-price", bad)
        assert usage.returncode == 2 and "--max-price" in usage.stderr and "finite number >= 0" in usage.stderr
    with pytest.raises(marketplace.MaxPriceExceeded, match="max_price: expected a request quoted at most 45"):
        marketplace.request(  # the points alone (45) do not cover the privacy prices
            market.request, market=market.endpoint, keys=market.alice, out=market.root / "api", max_price=45.0
        )
    assert market.ledger_files() == before
    paid = run_cli(*request, "--out", str(market.root / "affordable"), "--max-price", repr(quoted))
    assert paid.returncode == 0, paid.stderr


def test_a_sketch_bought_within_its_quote_pays_each_owner_its_quoted_privacy_price(market):
    """A release that sells no points is priced too: the consumer quotes a sketch, buys it with the
    quote as its --max-price, and each owner's ledger records, for that session, the privacy price
    the quote named (its agent's 2 per unit eps on the charge under the ledger's relation)."""
    sketch = market.root / "sketch.yaml"
    sketch.write_text(yaml.safe_dump(SKETCH_REQUEST))
    quoted = marketplace.quote(sketch, market=market.endpoint, keys=market.alice)
    money = quoted["money"]
    assert money["priced"] == "per unit eps of privacy loss" and set(money["privacy"]) == {"owner-1", "owner-2"}
    bought = marketplace.request(
        sketch, market=market.endpoint, keys=market.alice, out=market.root / "sketch", max_price=money["at_most"]
    )
    assert bought.status == "completed" and set(bought.raw["released"]) == {"owner-1", "owner-2"}
    for owner in ("owner-1", "owner-2"):
        with LifetimeLedger.read(ledger_file(market.ledgers, owner)) as ledger:
            (sale,) = [s for s in ledger.sales() if s.request_id == bought.raw["run_id"]]
        charge = quoted["owners"][owner]["privacy"]["charge"]["eps"]
        assert sale.state == "committed" and sale.privacy_price == pytest.approx(money["privacy"][owner])
        assert sale.privacy_price == pytest.approx(2.0 * charge) and sale.earnings == pytest.approx(sale.privacy_price)
