"""Sale terms on the lifetime ledger: the points a request reserves, sells and earns, next to its DP charge.

Against the definition (marketplace/privacy/lifetime/sales.py): a request asking for ``points`` reserves
min(points, terms.points - counted, terms.points_per_consumer - counted for its consumer), where a sale
counts its reserved points while reserved or kept, what it sold once committed, and nothing once aborted
or declined; a cap of 0 declines the request (a declined row, :class:`TermsDeclined`, nothing charged).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

import marketplace
from marketplace import plugins
from marketplace.cli import main
from marketplace.privacy.lifetime import (
    AlreadyCharged,
    BudgetDeclined,
    Cost,
    LedgerInputError,
    LifetimeLedger,
    SaleTerms,
    TermsDeclined,
    ledger_file,
    relation_kind,
)
from marketplace.privacy.neighbouring import REPLACE_ONE_DISTINCT, budget_relation_name, budget_relation_text

RELATION = "replace-one (a row of owner-3's data)"
SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def new_ledger(folder: Path, budget: tuple[float, float] = (10.0, 0.0)) -> LifetimeLedger:
    return LifetimeLedger.open(ledger_file(folder, "owner-3"), owner="owner-3", budget=budget, relation=RELATION)


def sell(ledger: LifetimeLedger, request_id: str, consumer: str, points: int, terms: SaleTerms, eps: float = 0.1):
    """Reserve ``request_id`` for ``consumer`` asking for ``points`` under ``terms``; its sale."""
    ledger.reserve(request_id, Cost.pure(eps), consumer=consumer, what="summarize", points=points, terms=terms)
    return ledger.sale(request_id)


# --- SaleTerms


def test_sale_terms_describe_and_round_trip():
    terms = SaleTerms(price=2, points=100, points_per_consumer=20)
    assert terms.describe() == "price 2 per point, 100 points in its lifetime, 20 per consumer"
    assert SaleTerms.from_dict(terms.to_dict()) == terms
    assert json.loads(json.dumps(terms.to_dict())) == {
        "price": 2.0,
        "points": 100,
        "points_per_consumer": 20,
        "price_per_eps": 0.0,
    }
    assert SaleTerms.from_dict(None) == SaleTerms() == SaleTerms.from_dict({})
    assert SaleTerms().describe() == "price 0 per point, no lifetime limit on points, no limit per consumer"


@pytest.mark.parametrize(
    ("values", "key", "expected"),
    [
        ({"price": -1}, "price", "a finite number >= 0"),
        ({"price": math.nan}, "price", "a finite number >= 0"),
        ({"price": math.inf}, "price", "a finite number >= 0"),
        ({"price": True}, "price", "a finite number >= 0"),
        ({"price": "2"}, "price", "a finite number >= 0"),
        ({"points": -1}, "points", "an integer >= 0, or None for no limit"),
        ({"points": True}, "points", "an integer >= 0, or None for no limit"),
        ({"points": 1.5}, "points", "an integer >= 0, or None for no limit"),
        ({"points_per_consumer": -3}, "points_per_consumer", "an integer >= 0, or None for no limit"),
    ],
)
def test_bad_sale_terms_are_refused_naming_the_key(values, key, expected):
    with pytest.raises(LedgerInputError, match=f"The '{key}' parameter of SaleTerms must be {expected}. Got"):
        SaleTerms(**values)
    with pytest.raises(LedgerInputError, match=f"The '{key}' parameter of SaleTerms.from_dict must be {expected}"):
        SaleTerms.from_dict(values)


def test_unknown_or_non_mapping_terms_are_refused():
    with pytest.raises(LedgerInputError, match="The 'pries' parameter of SaleTerms.from_dict must be one of the keys"):
        SaleTerms.from_dict({"pries": 2})
    with pytest.raises(LedgerInputError, match="The 'terms' parameter of SaleTerms.from_dict must be a mapping"):
        SaleTerms.from_dict([2])  # type: ignore[arg-type]


# --- caps


def test_the_lifetime_cap_bounds_every_consumer_together_and_a_sold_out_request_is_declined(tmp_path):
    terms = SaleTerms(price=2, points=10)
    with new_ledger(tmp_path) as ledger:
        assert sell(ledger, "r1", "alice", 6, terms).reserved == 6
        assert sell(ledger, "r2", "bob", 6, terms).reserved == 4  # 10 - 6
        spent = ledger.spent()
        with pytest.raises(TermsDeclined) as declined:
            sell(ledger, "r3", "carol", 6, terms)
        reason = declined.value.reason
        assert reason.startswith("owner-3: declined request 'r3' (summarize, for carol): consumer carol may buy 0 ")
        assert "10 in its lifetime, 10 counted" in reason and "asks for 6" in reason
        assert "price 2 per point, 10 points in its lifetime" in reason
        assert isinstance(declined.value, BudgetDeclined)
        assert (declined.value.owner, declined.value.request_id, declined.value.consumer) == ("owner-3", "r3", "carol")
        assert declined.value.points == 6 and declined.value.terms == terms
        assert ledger.spent() == spent  # nothing charged
        assert ledger.history()[-1].state == "declined"
        sale = ledger.sale("r3")
        assert (sale.state, sale.reserved, sale.sold, sale.earnings) == ("declined", 0, None, None)


def test_the_per_consumer_cap_bounds_each_consumer_alone(tmp_path):
    terms = SaleTerms(price=1, points_per_consumer=5)
    with new_ledger(tmp_path) as ledger:
        assert sell(ledger, "a1", "alice", 3, terms).reserved == 3
        assert sell(ledger, "a2", "alice", 3, terms).reserved == 2
        with pytest.raises(TermsDeclined, match="consumer alice may buy 0 more of owner-3's points .5 per consumer, "):
            sell(ledger, "a3", "alice", 1, terms)
        assert sell(ledger, "b1", "bob", 3, terms).reserved == 3  # alice's sales take nothing of bob's
        standing = ledger.sales_standing()
        assert standing["per_consumer_left"] == {"alice": 0, "bob": 2}
        assert ledger.sales_standing("carol")["per_consumer_left"] == {"carol": 5}


def test_both_caps_take_the_smaller(tmp_path):
    terms = SaleTerms(price=1, points=8, points_per_consumer=5)
    with new_ledger(tmp_path) as ledger:
        assert sell(ledger, "a", "alice", 9, terms).reserved == 5  # per consumer
        assert sell(ledger, "b", "bob", 9, terms).reserved == 3  # lifetime: 8 - 5
        with pytest.raises(TermsDeclined, match="8 in its lifetime, 8 counted"):
            sell(ledger, "c", "carol", 1, terms)
        assert sell(ledger, "z", "dave", 0, terms).reserved == 0  # asking for nothing is no decline
        assert ledger.sale("z").state == "reserved"


def test_a_dp_decline_counts_no_points(tmp_path):
    terms = SaleTerms(price=1, points=5)
    with new_ledger(tmp_path, budget=(0.15, 0.0)) as ledger:
        assert sell(ledger, "a", "alice", 3, terms).reserved == 3
        with pytest.raises(BudgetDeclined, match="left of the budget") as declined:
            sell(ledger, "b", "alice", 3, terms)
        assert not isinstance(declined.value, TermsDeclined)
        assert (ledger.sale("b").state, ledger.sale("b").reserved) == ("declined", 0)
        assert ledger.sales_standing()["points_left"] == 2  # only a's 3 points count


def test_reserving_an_id_again_returns_its_rows_and_counts_once(tmp_path):
    terms = SaleTerms(price=1, points=10)
    with new_ledger(tmp_path) as ledger:
        first = sell(ledger, "r", "alice", 4, terms)
        again = ledger.reserve("r", Cost.pure(0.1), consumer="alice", what="summarize", points=4, terms=terms)
        assert again.state == "reserved" and ledger.sale("r") == first
        assert ledger.sales_standing()["counted"] == 4 and len(ledger.sales()) == 1
        assert ledger.spent().eps == 0.1
        with pytest.raises(AlreadyCharged):
            ledger.reserve("r", Cost.pure(0.1), consumer="alice", what="summarize", points=4, terms=terms, fresh=True)


def test_points_and_terms_come_together(tmp_path):
    with new_ledger(tmp_path) as ledger:
        with pytest.raises(LedgerInputError, match="'terms' parameter of LifetimeLedger.reserve must be given with"):
            ledger.reserve("r", Cost.pure(0.1), consumer="c", what="w", points=3)
        for bad in (-1, True, 2.5):
            with pytest.raises(LedgerInputError, match="'points' parameter of LifetimeLedger.reserve must be an int"):
                ledger.reserve("r", Cost.pure(0.1), consumer="c", what="w", points=bad, terms=SaleTerms())
        with pytest.raises(LedgerInputError, match="'terms' parameter of LifetimeLedger.reserve must be a SaleTerms"):
            ledger.reserve("r", Cost.pure(0.1), consumer="c", what="w", points=1, terms={"price": 1})
        assert ledger.history() == [] and ledger.sales() == []
        # terms alone price a request that sells no points: its privacy only
        ledger.reserve("r", Cost.pure(0.1), consumer="c", what="w", terms=SaleTerms())
        assert [(s.reserved, s.privacy_price) for s in ledger.sales()] == [(0, 0.0)]


# --- settling


def test_commit_records_what_sold_and_its_earnings_and_counts_what_sold(tmp_path):
    terms = SaleTerms(price=2.5, points=10)
    with new_ledger(tmp_path) as ledger:
        sell(ledger, "r1", "alice", 6, terms)
        with pytest.raises(
            LedgerInputError,
            match=r"'sold' parameter of LifetimeLedger.commit must be an integer from 0 to reserved=6.*Got 7",
        ):
            ledger.commit("r1", sold=7)
        with pytest.raises(LedgerInputError, match="'sold' parameter .* reserved=6.*Got None"):
            ledger.commit("r1")
        with pytest.raises(LedgerInputError, match="'sold'.*Got -1"):
            ledger.commit("r1", sold=-1)
        assert ledger.history()[0].state == "reserved" and ledger.sale("r1").state == "reserved"  # nothing written
        assert ledger.commit("r1", sold=2).state == "committed"
        sale = ledger.sale("r1")
        assert (sale.state, sale.sold, sale.earnings) == ("committed", 2, 5.0)
        assert sale.settled_at is not None
        assert sell(ledger, "r2", "bob", 10, terms).reserved == 8  # r1 counts the 2 it sold, not the 6 it reserved
        standing = ledger.sales_standing()
        assert (standing["sold"], standing["earnings"], standing["reserved"], standing["points_left"]) == (2, 5.0, 8, 0)
        ledger.reserve("dp-only", Cost.pure(0.1), consumer="c", what="sketch")
        with pytest.raises(LedgerInputError, match="'sold' parameter of LifetimeLedger.commit must be None"):
            ledger.commit("dp-only", sold=1)
        assert ledger.commit("dp-only").state == "committed"


def test_abort_gives_the_points_back(tmp_path):
    terms = SaleTerms(price=1, points=5)
    with new_ledger(tmp_path) as ledger:
        sell(ledger, "r1", "alice", 5, terms)
        with pytest.raises(TermsDeclined):
            sell(ledger, "r2", "alice", 1, terms)
        ledger.abort("r1")
        sale = ledger.sale("r1")
        assert (sale.state, sale.sold, sale.earnings) == ("aborted", 0, 0.0)
        assert sell(ledger, "r2", "alice", 5, terms).reserved == 5  # a declined id is checked again
        assert ledger.sale("r2").state == "reserved"


def in_another_process(db: Path, body: str) -> None:
    """Run ``body`` (``ledger`` is ``db`` opened) in a fresh interpreter that ends with ``os._exit``:
    whatever it reserved stays unsettled, as after a crash."""
    code = textwrap.dedent(
        """
        import os, sys
        from marketplace.privacy.lifetime import Cost, LifetimeLedger, SaleTerms
        ledger = LifetimeLedger.read(sys.argv[1])
        terms = SaleTerms(price=3, points=10)
        """
    ) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code, str(db)], env=ENV, cwd=ROOT, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()


def test_reconcile_aborts_the_sale_it_rolls_back_and_keeps_counting_the_one_it_keeps(tmp_path):
    new_ledger(tmp_path).close()
    db = ledger_file(tmp_path, "owner-3")
    in_another_process(
        db,
        """
        ledger.reserve("gone", Cost.pure(0.1), consumer="alice", what="summarize", points=4, terms=terms)
        ledger.reserve("left", Cost.pure(0.1), consumer="alice", what="summarize", points=3, terms=terms)
        ledger.mark_left("left")
        os._exit(0)  # killed before settling either
        """,
    )
    with LifetimeLedger.read(db) as ledger:
        assert ledger.sales_standing()["counted"] == 7
        assert ledger.reconcile() == {"rolled_back": ["gone"], "kept": ["left"], "untouched": []}
        gone, left = ledger.sale("gone"), ledger.sale("left")
        assert (gone.state, gone.sold, gone.earnings) == ("aborted", 0, 0.0)
        assert (left.state, left.sold, left.earnings, left.reserved) == ("kept", None, None, 3)
        standing = ledger.sales_standing()
        assert (standing["sold"], standing["reserved"], standing["points_left"]) == (0, 3, 7)
        assert sell(ledger, "next", "bob", 10, SaleTerms(price=3, points=10)).reserved == 7


def test_a_sale_kept_after_its_owner_was_killed_shows_it_sold_at_most_its_reserved_points(tmp_path, capsys):
    """What a killed owner sold is unknown to its ledger; ledger show says so, and bounds it by what it
    reserved, instead of showing nothing earned; ledger check passes on such a ledger."""
    new_ledger(tmp_path).close()
    db = ledger_file(tmp_path, "owner-3")
    in_another_process(
        db,
        """
        ledger.reserve("done", Cost.pure(0.1), consumer="alice", what="summarize", points=2, terms=terms)
        ledger.commit("done", sold=2)
        ledger.reserve("left", Cost.pure(0.1), consumer="bob", what="summarize", points=3, terms=terms)
        ledger.mark_left("left")
        os._exit(0)  # killed mid-purchase: its release left, what it sold never recorded
        """,
    )
    with LifetimeLedger.read(db) as ledger:
        assert ledger.reconcile()["kept"] == ["left"]
        left = ledger.sale("left")
        assert (left.state, left.sold, left.earnings) == ("kept", None, None)  # unknown, not 0
        assert (left.sold_at_most, left.earnings_at_most) == (3, 9.0)
        done = ledger.sale("done")
        assert (done.sold_at_most, done.earnings_at_most) == (2, 6.0)  # known: the figures themselves
    assert main(["ledger", "show", str(db)]) == 0
    out = capsys.readouterr().out
    sales = out[out.index("\nsales:\n") + 1 :].splitlines()[1:]
    assert [line.split() for line in sales[1:3]] == [
        ["done", "alice", "3", "2", "2", "6", "committed"],
        ["left", "bob", "3", "3", "<=3", "<=9", "kept"],
    ]
    assert sales[3].startswith("sold:      2 points, earning 6; 3 reserved and not settled")
    assert sales[4] == (
        "kept:      1 sale kept by a reconcile (the owner's process ended before settling it): sold unknown, "
        "at most 3 points earning at most 9"
    )
    assert main(["ledger", "show", str(db), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    kept = next(s for s in info["sales"] if s["request_id"] == "left")
    assert (kept["state"], kept["sold"], kept["earnings"], kept["sold_at_most"], kept["earnings_at_most"]) == (
        "kept",
        None,
        None,
        3,
        9.0,
    )
    standing = info["sales_standing"]
    assert (standing["sold"], standing["earnings"], standing["counted"]) == (2, 6.0, 5)
    assert standing["kept"] == {"sales": 1, "sold_at_most": 3, "earnings_at_most": 9.0}
    assert standing["per_consumer"]["bob"]["kept"] == {"sales": 1, "sold_at_most": 3, "earnings_at_most": 9.0}
    assert standing["per_consumer"]["alice"]["kept"] == {"sales": 0, "sold_at_most": 0, "earnings_at_most": 0.0}
    assert main(["ledger", "check", str(db)]) == 0, capsys.readouterr()


# --- old ledgers and marketplace ledger show


def test_a_ledger_without_sales_opens_shows_and_gains_the_table_on_its_first_sale(tmp_path, capsys):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("old", Cost.pure(0.1), consumer="c", what="sketch")
    db = ledger_file(tmp_path, "owner-3")
    tables = {n for (n,) in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "sales" not in tables
    with LifetimeLedger.read(db) as ledger:
        assert ledger.sales() == [] and ledger.sale("old") is None
        standing = ledger.sales_standing()
        assert (standing["sold"], standing["earnings"], standing["reserved"], standing["points_left"]) == (
            0,
            0.0,
            0,
            None,
        )
    assert main(["ledger", "show", str(db)]) == 0
    assert "sales:" not in capsys.readouterr().out
    assert main(["ledger", "show", str(db), "--json"]) == 0
    assert "sales" not in json.loads(capsys.readouterr().out)
    with new_ledger(tmp_path) as ledger:
        assert sell(ledger, "new", "alice", 2, SaleTerms(price=1)).reserved == 2
    with LifetimeLedger.read(db) as ledger:  # a ledger with its sales table is still a ledger
        assert [s.request_id for s in ledger.sales()] == ["new"]


def test_ledger_show_prints_the_sales_and_their_totals(tmp_path, capsys):
    terms = SaleTerms(price=2, points=20, points_per_consumer=10)
    with new_ledger(tmp_path) as ledger:
        sell(ledger, "r1", "alice", 6, terms)
        ledger.commit("r1", sold=4)
        sell(ledger, "r2", "bob", 5, terms)
        sell(ledger, "r3", "alice", 3, terms)
        ledger.abort("r3")
    db = ledger_file(tmp_path, "owner-3")
    assert main(["ledger", "show", str(db)]) == 0
    out = capsys.readouterr().out
    sales = out[out.index("\nsales:\n") + 1 :].splitlines()[1:]
    assert sales[0].split() == ["request", "consumer", "price", "reserved", "sold", "earnings", "state"]
    assert [line.split() for line in sales[1:4]] == [
        ["r1", "alice", "2", "6", "4", "8", "committed"],
        ["r2", "bob", "2", "5", "-", "-", "reserved"],
        ["r3", "alice", "2", "3", "0", "0", "aborted"],
    ]
    assert sales[4] == (
        "sold:      4 points, earning 8; 5 reserved and not settled (counted against the terms); 11 left to sell"
    )
    assert main(["ledger", "show", str(db), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [(s["request_id"], s["sold"], s["earnings"], s["state"]) for s in info["sales"]] == [
        ("r1", 4, 8.0, "committed"),
        ("r2", None, None, "reserved"),
        ("r3", 0, 0.0, "aborted"),
    ]
    assert info["sales"][0]["terms"] == terms.to_dict()
    standing = info["sales_standing"]
    assert (standing["sold"], standing["earnings"], standing["reserved"], standing["points_left"]) == (4, 8.0, 5, 11)
    assert standing["per_consumer_left"] == {"alice": 6, "bob": 5}
    assert standing["requests"] == {"reserved": 1, "committed": 1, "aborted": 1, "declined": 0, "kept": 0}


# --- the scenario's terms and the distinct-points relation


def test_scenario_terms_are_read_per_owner():
    life = marketplace.load(SKETCH).config.lifetime
    assert life.terms is None and life.owner_terms == {} and life.terms_of("owner-1") is None
    scenario = marketplace.load(
        SKETCH,
        {
            "lifetime.terms": {"price": 2, "points": 100, "points_per_consumer": 20},
            "lifetime.owner_terms": {"owner-2": {"price": 0.5}},
        },
    )
    life = scenario.config.lifetime
    assert life.terms_of("owner-1") == SaleTerms(price=2, points=100, points_per_consumer=20)
    assert life.terms_of("owner-2") == SaleTerms(price=0.5)
    assert scenario.raw["lifetime"]["owner_terms"] == {
        "owner-2": {"price": 0.5, "points": None, "points_per_consumer": None, "price_per_eps": 0.0}
    }
    assert (
        "terms" not in marketplace.load(SKETCH).raw["lifetime"]
    )  # unset terms leave the report's settings as they were


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("lifetime.terms", {"price": -1}, "lifetime.terms.price: expected a number in [0, 1e+12]"),
        ("lifetime.terms", {"price": math.nan}, "lifetime.terms.price: expected a finite number"),
        ("lifetime.terms", {"points": True}, "lifetime.terms.points: expected an integer"),
        ("lifetime.terms", {"points": -2}, "lifetime.terms.points: expected a number in [0, 1e+12]"),
        ("lifetime.owner_terms", {"owner-1": {"pries": 1}}, "no scenario key 'lifetime.owner_terms.owner-1.pries'"),
        ("lifetime.relation", "replace-two", "lifetime.relation: expected one of"),
    ],
)
def test_bad_scenario_terms_are_refused_naming_the_key(key, value, expected):
    with pytest.raises(marketplace.ScenarioError) as refused:
        marketplace.load(SKETCH, {key: value})
    assert expected in str(refused.value)


def test_a_ledger_created_under_replace_one_distinct_states_that_relation(tmp_path):
    from marketplace.roles.lifetime import admit

    assert budget_relation_text("replace-one-distinct") == REPLACE_ONE_DISTINCT
    assert budget_relation_name(REPLACE_ONE_DISTINCT) == "replace-one-distinct"
    assert budget_relation_text("replace-one") == "replace-one"
    settings = {"lifetime.ledgers": str(tmp_path), "parties.owners": 3, "sketch.epsilon": 0.4}
    config = marketplace.load(SKETCH, {**settings, "lifetime.relation": "replace-one-distinct"}).config
    admission = admit(config, "owner-1", plugins.exchange("sketch"))
    assert admission.state == "reserved", admission.reason
    with LifetimeLedger.read(ledger_file(tmp_path, "owner-1")) as ledger:
        assert ledger.relation == f"{REPLACE_ONE_DISTINCT} (a row of owner-1's data)"
        assert relation_kind(ledger.relation) == REPLACE_ONE_DISTINCT
        assert ledger.spent().eps == pytest.approx(0.8)  # an add/remove-one cost, restated as a replacement
