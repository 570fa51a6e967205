"""Privacy prices: the price function is arbitrage-free under the ledger's own composition (Li, Li,
Miklau, Suciu, "A Theory of Pricing Private Data", ICDT 2013), and the ledger records, in the
transaction that charges a release, the price of what it charged, earned once committed."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from marketplace.privacy.lifetime import Charge, Cost, LedgerInputError, LifetimeLedger, SaleTerms, ledger_file
from marketplace.privacy.lifetime.pricing import compose, eps_of, price

EPS = st.floats(min_value=0.0, max_value=50.0, allow_nan=False)
DELTA = st.floats(min_value=0.0, max_value=0.5, allow_nan=False)
PER_EPS = st.floats(min_value=0.0, max_value=1e6, allow_nan=False)


def basic(eps: float, delta: float = 0.0) -> Charge:
    return Charge(eps, delta, None)


def zcdp(rho: float) -> Charge:
    return Charge(None, None, rho)


def charges(filter: str):
    """A strategy of charges as the ``filter`` ledger composes them."""
    if filter == "basic":
        return st.builds(basic, EPS, DELTA)
    return st.builds(zcdp, st.floats(min_value=0.0, max_value=100.0, allow_nan=False))


TOL = 1e-9


@pytest.mark.parametrize("filter", ["basic", "zcdp"])
@given(data=st.data(), per_eps=PER_EPS)
def test_the_price_is_subadditive_under_the_ledgers_composition(filter, data, per_eps):
    first, second = data.draw(charges(filter)), data.draw(charges(filter))
    together = price(compose(first, second), per_eps)
    assert together <= (price(first, per_eps) + price(second, per_eps)) * (1 + TOL) + TOL


@pytest.mark.parametrize("filter", ["basic", "zcdp"])
@given(data=st.data(), per_eps=PER_EPS)
def test_the_price_is_monotone_non_negative_and_zero_for_no_loss(filter, data, per_eps):
    first, more = data.draw(charges(filter)), data.draw(charges(filter))
    bigger = compose(first, more)  # at least as large in every figure the filter composes
    assert 0.0 <= price(first, per_eps) <= price(bigger, per_eps) * (1 + TOL) + TOL
    nothing = basic(0.0) if filter == "basic" else zcdp(0.0)
    assert price(nothing, per_eps) == 0.0
    assert price(first, 0.0) == 0.0


@given(eps=EPS, per_eps=PER_EPS)
def test_a_pure_release_costs_the_same_under_either_filter(eps, per_eps):
    pure = Cost.pure(eps) if eps > 0 else None
    if pure is None:
        return
    assert price(pure.charge("zcdp"), per_eps) == pytest.approx(price(pure.charge("basic"), per_eps), rel=1e-9)
    assert price(pure.charge("basic"), per_eps) == pytest.approx(per_eps * eps)


def test_arbitrage_free_on_random_sequences_of_charges():
    """Li et al.'s condition on longer bundles: no split of a composed charge into pieces is cheaper."""
    rng = random.Random(7)
    for filter in ("basic", "zcdp"):
        for _ in range(500):
            pieces = [
                basic(rng.uniform(0, 3), rng.uniform(0, 1e-3)) if filter == "basic" else zcdp(rng.uniform(0, 3))
                for _ in range(rng.randint(1, 6))
            ]
            whole = pieces[0]
            for piece in pieces[1:]:
                whole = compose(whole, piece)
            per_eps = rng.uniform(0, 100)
            assert price(whole, per_eps) <= math.fsum(price(p, per_eps) for p in pieces) * (1 + TOL) + TOL


@pytest.mark.parametrize(
    "bad, name",
    [(-1.0, "price_per_eps"), (math.inf, "price_per_eps"), (math.nan, "price_per_eps"), (True, "price_per_eps")],
)
def test_a_bad_price_names_the_field_what_it_expects_and_what_came(bad, name):
    with pytest.raises(LedgerInputError, match=rf"'{name}' parameter of SaleTerms must be a finite number >= 0\. Got"):
        SaleTerms(price_per_eps=bad)
    with pytest.raises(LedgerInputError, match=rf"'{name}' parameter of SaleTerms.from_dict must be a finite number"):
        SaleTerms.from_dict({"price_per_eps": bad})
    with pytest.raises(LedgerInputError, match=rf"'{name}' parameter of price must be a finite number >= 0"):
        price(basic(1.0), bad)


def test_eps_of_a_zcdp_charge_is_that_of_the_pure_release_of_its_rho():
    assert eps_of(zcdp(0.125)) == pytest.approx(0.5)
    with pytest.raises(LedgerInputError, match="'charge' parameter of eps_of"):
        eps_of(Charge(None, None, None))
    with pytest.raises(LedgerInputError, match="'second' parameter of compose"):
        compose(basic(1.0), zcdp(1.0))


def open_ledger(folder, filter="basic"):
    return LifetimeLedger.open(
        ledger_file(folder, "owner-1"),
        owner="owner-1",
        budget=(3.0, 0.01),
        relation="add/remove-one (a row of owner-1's data)",
        filter=filter,
    )


@pytest.mark.parametrize("filter", ["basic", "zcdp"])
def test_the_ledger_records_the_price_of_what_it_charged_and_earns_it_once_committed(tmp_path, filter):
    terms = SaleTerms(price_per_eps=4.0)
    with open_ledger(tmp_path, filter) as ledger:
        ledger.reserve("a", Cost.pure(0.5), consumer="alice", what="sketch", terms=terms)
        sale = ledger.sale("a")
        assert sale is not None and sale.state == "reserved" and sale.reserved == 0
        assert sale.price_per_eps == 4.0 and sale.privacy_price == pytest.approx(2.0)
        assert sale.earnings is None and sale.earnings_at_most == pytest.approx(2.0)
        ledger.commit("a")
        sale = ledger.sale("a")
        assert sale is not None and sale.state == "committed" and sale.earnings == pytest.approx(2.0)
        ledger.reserve("b", Cost.pure(0.25), consumer="bob", what="sketch", terms=terms)
        ledger.abort("b")  # nothing left: nothing earned
        assert ledger.sale("b").earnings == 0.0
        standing = ledger.sales_standing()
        assert standing["earnings"] == pytest.approx(2.0) and standing["privacy_earnings"] == pytest.approx(2.0)


def test_a_declined_request_earns_nothing(tmp_path):
    with open_ledger(tmp_path) as ledger:
        with pytest.raises(Exception, match="declined"):
            ledger.reserve("big", Cost.pure(5.0), consumer="alice", what="sketch", terms=SaleTerms(price_per_eps=9.0))
        sale = ledger.sale("big")
        assert sale is not None and sale.state == "declined" and sale.privacy_price == 0.0
        assert ledger.sales_standing()["earnings"] == 0.0


def test_points_and_privacy_are_paid_together(tmp_path):
    terms = SaleTerms(price=2.0, price_per_eps=10.0)
    with open_ledger(tmp_path) as ledger:
        ledger.reserve("s", Cost.pure(0.1), consumer="alice", what="summarize", points=5, terms=terms)
        ledger.commit("s", sold=3)
        sale = ledger.sale("s")
        assert sale is not None and sale.earnings == pytest.approx(3 * 2.0 + 10.0 * 0.1)
        assert sale.to_dict()["privacy_price"] == pytest.approx(1.0)


def test_a_sales_table_from_before_privacy_prices_is_read_and_upgraded(tmp_path):
    with open_ledger(tmp_path) as ledger:
        ledger.reserve("old", Cost.pure(0.1), consumer="alice", what="summarize", points=2, terms=SaleTerms(price=1))
        ledger.commit("old", sold=2)
    import sqlite3

    path = ledger_file(tmp_path, "owner-1")
    db = sqlite3.connect(path)
    with db:  # the table as a ledger written before privacy prices has it
        db.execute("ALTER TABLE sales DROP COLUMN privacy_price")
        db.execute("ALTER TABLE sales DROP COLUMN price_per_eps")
    db.close()
    with LifetimeLedger.read(path) as ledger:
        assert [(s.earnings, s.privacy_price) for s in ledger.sales()] == [(2.0, 0.0)]
    with open_ledger(tmp_path) as ledger:
        ledger.reserve("new", Cost.pure(0.2), consumer="alice", what="sketch", terms=SaleTerms(price_per_eps=5))
        ledger.commit("new")
        assert ledger.sale("new").earnings == pytest.approx(1.0)


def test_a_run_priced_over_its_spending_budget_is_refused_before_any_owner_reserves(tmp_path):
    from conftest import ROOT

    import marketplace
    from marketplace.scenario import ScenarioError

    overrides = {
        "lifetime.ledgers": str(tmp_path / "ledgers"),
        "lifetime.terms": {"price_per_eps": 1000.0},
        "lifetime.spending_budget": 1.0,
    }
    scenario = marketplace.load(ROOT / "scenarios" / "sketch-quickstart.yaml", overrides)
    with pytest.raises(ScenarioError, match=r"lifetime\.spending_budget: refused before anything was reserved"):
        marketplace.run(scenario, tmp_path / "run", driver="inprocess")
    assert not (tmp_path / "ledgers").exists() or not any((tmp_path / "ledgers").iterdir())


def test_ledger_show_and_check_cover_privacy_prices(tmp_path, capsys):
    from marketplace.cli import main

    with open_ledger(tmp_path) as ledger:
        ledger.reserve("a", Cost.pure(0.5), consumer="alice", what="sketch", terms=SaleTerms(price_per_eps=4.0))
        ledger.commit("a")
    path = ledger_file(tmp_path, "owner-1")
    assert main(["ledger", "show", str(path)]) == 0
    assert "privacy:   2 of those earnings paid for privacy loss" in capsys.readouterr().out
    assert main(["ledger", "check", str(path)]) == 0
    import sqlite3

    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE sales SET privacy_price = -1")
    db.close()
    assert main(["ledger", "check", str(path)]) != 0
    assert "sale 'a': negative or not a number: privacy_price" in capsys.readouterr().out
