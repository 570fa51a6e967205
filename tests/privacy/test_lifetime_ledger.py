"""The owner's lifetime ledger: charges before release, idempotent ids, filters, crash safety."""

from __future__ import annotations

import doctest
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from marketplace.cli import main
from marketplace.privacy import lifetime
from marketplace.privacy.accountant import calibrate_zcdp, zcdp_of_gaussian, zcdp_to_dp
from marketplace.privacy.lifetime import (
    BudgetDeclined,
    Cost,
    LedgerInputError,
    LedgerMismatch,
    LifetimeLedger,
    bun_steinke_eps,
    ledger_file,
    zcdp_budget,
)
from marketplace.privacy.lifetime import cost as cost_module
from marketplace.privacy.lifetime import filters as filters_module
from marketplace.privacy.mechanisms import Gaussian, GaussianZCDP, Laplace
from marketplace.privacy.neighbouring import add_remove_one

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "ledger_worker.py"
RELATION = "add/remove-one (a row of owner-1's data)"


def new_ledger(tmp_path: Path, budget=(1.0, 0.0), filter: str = "basic", owner: str = "owner-1") -> LifetimeLedger:
    return LifetimeLedger.open(
        ledger_file(tmp_path, owner), owner=owner, budget=budget, relation=RELATION, filter=filter
    )


def worker(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_docstring_examples_hold():
    for module in (lifetime, cost_module, filters_module):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# --- creating and reopening


def test_the_file_is_in_wal_mode_with_one_budget(tmp_path):
    new_ledger(tmp_path).close()
    assert ledger_file(tmp_path, "owner-1").stat().st_mode & 0o777 == 0o600
    db = sqlite3.connect(ledger_file(tmp_path, "owner-1"))
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT owner, filter, budget_eps, budget_delta, relation FROM ledger").fetchall() == [
        ("owner-1", "basic", 1.0, 0.0, RELATION)
    ]


def test_a_reopened_ledger_carries_on_from_its_charges(tmp_path):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("r1", Cost.pure(0.25), consumer="c", what="w")
        ledger.commit("r1")
        ledger.reserve("r2", Cost.pure(0.25), consumer="c", what="w")
    with LifetimeLedger.open(ledger_file(tmp_path, "owner-1"), owner="owner-1") as again:
        assert again.spent().eps == 0.5
        assert [(r.request_id, r.state) for r in again.history()] == [("r1", "committed"), ("r2", "reserved")]
        assert again.budget == (1.0, 0.0) and again.relation == RELATION and again.filter == "basic"


@pytest.mark.parametrize(
    "change, named",
    [
        ({"budget": (2.0, 0.0)}, "budget (eps=2.0, delta=0.0) (the ledger's is (eps=1.0, delta=0.0))"),
        ({"budget": (1.0, 1e-6)}, "delta=1e-06"),
        (
            {"relation": "replace-one (a row)"},
            "relation 'replace-one (a row)' (the ledger's is \"add/remove-one (a row of owner-1's data)\")",
        ),
        ({"filter": "zcdp"}, "filter 'zcdp' (the ledger's is 'basic')"),
        ({"owner": "owner-2"}, "owner 'owner-2' (the ledger's is 'owner-1')"),
    ],
)
def test_reopening_with_another_budget_relation_filter_or_owner_is_refused(tmp_path, change, named):
    new_ledger(tmp_path).close()
    args = {"owner": "owner-1", **change}
    with pytest.raises(LedgerMismatch) as err:
        LifetimeLedger.open(ledger_file(tmp_path, "owner-1"), **args)
    assert named in str(err.value)


def test_reopening_with_the_same_budget_and_relation_is_accepted(tmp_path):
    new_ledger(tmp_path).close()
    with LifetimeLedger.open(
        ledger_file(tmp_path, "owner-1"), owner="owner-1", budget=(1.0, 0.0), relation=RELATION, filter="basic"
    ) as again:
        assert again.remaining().eps == 1.0


def test_a_neighbouring_relation_is_stored_as_its_text(tmp_path):
    relation = add_remove_one("a row of owner-1's data")
    with LifetimeLedger.open(tmp_path / "l.sqlite", owner="owner-1", budget=(1.0, 0.0), relation=relation) as ledger:
        assert ledger.relation == RELATION


def test_creating_needs_a_budget_and_a_relation(tmp_path):
    with pytest.raises(LedgerInputError, match="needs its budget and relation"):
        LifetimeLedger.open(tmp_path / "l.sqlite", owner="owner-1")
    with pytest.raises(LedgerInputError, match="needs its relation"):
        LifetimeLedger.open(tmp_path / "l.sqlite", owner="owner-1", budget=(1.0, 0.0))
    assert not (tmp_path / "l.sqlite").exists()


# --- charging


def test_a_retried_request_id_returns_its_reservation_and_is_charged_once(tmp_path):
    with new_ledger(tmp_path) as ledger:
        first = ledger.reserve("r1", Cost.pure(0.4), consumer="c", what="w")
        again = ledger.reserve("r1", Cost.pure(0.4), consumer="c", what="w")
        assert again == first and ledger.spent().eps == 0.4
        ledger.commit("r1")
        after_commit = ledger.reserve("r1", Cost.pure(0.4), consumer="c", what="w")
        assert after_commit.state == "committed" and ledger.spent().eps == 0.4
        assert ledger.commit("r1").state == "committed"  # committing twice changes nothing
        assert len(ledger.history()) == 1


def test_a_retry_declaring_another_cost_is_refused(tmp_path):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("r1", Cost.pure(0.4), consumer="c", what="w")
        with pytest.raises(LedgerInputError, match="a retry must declare the same"):
            ledger.reserve("r1", Cost.pure(0.1), consumer="c", what="w")
        assert ledger.spent().eps == 0.4


def test_an_aborted_reservation_no_longer_counts(tmp_path):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("r1", Cost.pure(0.75), consumer="c", what="w")
        assert ledger.abort("r1").state == "aborted"
        assert ledger.spent().eps == 0.0 and ledger.remaining().eps == 1.0
        ledger.reserve("r2", Cost.pure(1.0), consumer="c", what="w")  # the whole budget is back
        ledger.commit("r2")
        with pytest.raises(LedgerInputError, match="is committed, not reserved"):
            ledger.abort("r2")  # a release that left cannot be rolled back


def test_an_unsettled_reservation_counts_as_spent(tmp_path):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("r1", Cost.pure(0.75), consumer="c", what="w")
    with LifetimeLedger.open(ledger_file(tmp_path, "owner-1"), owner="owner-1") as again:
        assert again.spent().eps == 0.75
        with pytest.raises(BudgetDeclined):
            again.reserve("r2", Cost.pure(0.5), consumer="c", what="w")


def test_settling_an_unknown_request_names_it(tmp_path):
    with new_ledger(tmp_path) as ledger, pytest.raises(LedgerInputError, match="no request 'nope'"):
        ledger.commit("nope")


def test_the_budget_boundary_is_reached_exactly_and_never_passed(tmp_path):
    with new_ledger(tmp_path, budget=(1.0, 1e-6)) as ledger:
        for i in range(4):
            ledger.reserve(f"r{i}", Cost.pure(0.25), consumer="c", what="w")
        assert ledger.spent().eps == 1.0 and ledger.remaining().eps == 0.0
        with pytest.raises(BudgetDeclined) as err:
            ledger.reserve("r-tiny", Cost.pure(1e-12), consumer="c", what="w")
        assert ledger.spent().eps == 1.0
    reason = str(err.value)
    for words in ("owner-1", "'r-tiny'", "eps=1e-12", "eps=0, delta=1e-06 is left", "basic composition"):
        assert words in reason, (words, reason)
    assert err.value.owner == "owner-1" and err.value.filter == "basic"


def test_delta_is_a_budget_of_its_own_under_basic_composition(tmp_path):
    with new_ledger(tmp_path, budget=(10.0, 1e-6)) as ledger:
        ledger.reserve("r1", Cost.approximate(0.1, 6e-7), consumer="c", what="w")
        with pytest.raises(BudgetDeclined, match="delta"):
            ledger.reserve("r2", Cost.approximate(0.1, 6e-7), consumer="c", what="w")
        ledger.reserve("r3", Cost.approximate(0.1, 4e-7), consumer="c", what="w")
        assert ledger.spent().delta == 1e-6


def test_a_declined_request_is_recorded_and_may_fit_after_an_abort(tmp_path):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("big", Cost.pure(0.75), consumer="c", what="w")
        with pytest.raises(BudgetDeclined):
            ledger.reserve("r2", Cost.pure(0.5), consumer="d", what="w")
        assert ledger.history()[-1].state == "declined" and ledger.spent().eps == 0.75
        ledger.abort("big")
        assert ledger.reserve("r2", Cost.pure(0.5), consumer="d", what="w").state == "reserved"
        assert ledger.spent().eps == 0.5


def test_declines_depend_on_declared_costs_only_never_on_the_data(tmp_path):
    """The same stream of declared costs, released on very different datasets, gets the same
    decisions, and they are the prefix-sum rule of the filter."""
    costs = [0.05 * (1 + i % 5) for i in range(40)]  # 3.0 in all, over a budget of 1
    decisions = []
    for trial, data in enumerate(
        [np.zeros(100), np.full(100, 1e6), np.random.default_rng(7).standard_cauchy(1000), np.arange(5.0)]
    ):
        rng = np.random.default_rng(trial)
        made = []
        with new_ledger(tmp_path, owner=f"owner-{trial}") as ledger:
            for i, eps in enumerate(costs):
                try:
                    ledger.reserve(f"r{i}", Cost.pure(eps), consumer="c", what="mean")
                except BudgetDeclined:
                    made.append(False)
                    continue
                Laplace(epsilon=eps, sensitivity=1.0, rng=rng).randomise(float(np.clip(data, 0, 1).mean()))
                ledger.commit(f"r{i}")
                made.append(True)
        decisions.append(made)
    assert all(d == decisions[0] for d in decisions)
    expected, total = [], 0.0
    for eps in costs:
        fits = math.fsum([total, eps]) <= 1.0
        expected.append(fits)
        total = math.fsum([total, eps]) if fits else total
    assert decisions[0] == expected and True in expected and False in expected


# --- the zCDP filter


def test_the_zcdp_budget_is_bun_steinke_inverted_as_the_accountant_converts():
    for eps, delta in [(1.0, 1e-6), (0.1, 1e-5), (8.0, 1e-9), (1e-4, 0.1)]:
        rho = zcdp_budget(eps, delta)
        assert zcdp_to_dp(rho, delta, method="bun-steinke") <= eps
        assert bun_steinke_eps(rho, delta) == pytest.approx(zcdp_to_dp(rho, delta, method="bun-steinke"), rel=1e-15)
        assert zcdp_to_dp(rho * (1 + 1e-9), delta, method="bun-steinke") > eps  # the largest such rho
        assert rho <= calibrate_zcdp(eps, delta)  # Canonne-Kamath-Steinke would allow more: we stay conservative


def test_the_zcdp_filter_charges_rho_and_converts_pure_costs(tmp_path):
    with new_ledger(tmp_path, budget=(1.0, 1e-6), filter="zcdp") as ledger:
        rho_budget = ledger.limits.rho
        ledger.reserve("laplace", Cost.pure(0.1), consumer="c", what="w")
        assert ledger.spent().rho == pytest.approx(0.005)
        gauss = Cost.gaussian(sensitivity=1.0, sigma=10.0)
        assert gauss.rho == zcdp_of_gaussian(1.0, 10.0)
        ledger.reserve("gauss", gauss, consumer="c", what="w")
        eps, delta = ledger.guarantee()
        assert eps == pytest.approx(zcdp_to_dp(0.01, 1e-6, method="bun-steinke")) and delta == 1e-6
        with pytest.raises(BudgetDeclined, match="zCDP") as err:
            ledger.reserve("big", Cost.zcdp(rho_budget), consumer="c", what="w")
        assert err.value.remaining.rho == pytest.approx(rho_budget - 0.01)
        ledger.reserve("rest", Cost.zcdp(rho_budget - ledger.spent().rho), consumer="c", what="w")
        assert ledger.spent().rho <= rho_budget
        assert ledger.guarantee()[0] <= 1.0


def test_mechanism_costs_come_from_their_own_statement(tmp_path):
    rng = np.random.default_rng(0)
    assert Cost.of(Laplace(epsilon=0.5, sensitivity=1.0, rng=rng)) == Cost(eps=0.5, delta=0.0, rho=0.125)
    assert Cost.of(GaussianZCDP(rho=0.02, sensitivity=1.0, rng=rng), count=3).rho == pytest.approx(0.06)
    g = Gaussian(epsilon=1.0, delta=1e-6, sensitivity=1.0, rng=rng)
    assert Cost.of(g) == Cost(eps=1.0, delta=1e-6, rho=g.rho)
    with new_ledger(tmp_path, budget=(2.0, 1e-6), filter="zcdp") as ledger:
        assert ledger.reserve("g", Cost.of(g), consumer="c", what="w").charged.rho == g.rho


def test_each_filter_declines_a_cost_it_cannot_compose(tmp_path):
    """A cost the filter cannot compose is declined (recorded, nothing charged), not an error that
    would stop the owner: the decision reads the declared cost only."""
    with new_ledger(tmp_path, owner="a") as basic:
        with pytest.raises(BudgetDeclined, match="declare the release's"):
            basic.reserve("r", Cost.zcdp(0.1), consumer="c", what="w")
        assert [r.state for r in basic.history()] == ["declined"] and basic.spent().eps == 0
    with new_ledger(tmp_path, budget=(1.0, 1e-6), filter="zcdp", owner="b") as zcdp:
        with pytest.raises(BudgetDeclined, match="no zCDP statement"):
            zcdp.reserve("r", Cost.approximate(0.1, 1e-7), consumer="c", what="w")
        assert [r.state for r in zcdp.history()] == ["declined"] and zcdp.spent().rho == 0


def test_a_cost_under_another_relation_is_restated_or_declined(tmp_path):
    """Group privacy for two records: an add/remove-one cost on a replace-one ledger is charged as
    (2 eps, 2 e^eps delta) and 4 rho; a replace-one cost on an add/remove-one ledger is declined."""
    import math

    with LifetimeLedger.open(
        ledger_file(tmp_path, "r"), owner="r", budget=(1.0, 1e-5), relation="replace-one (a row of r's data)"
    ) as ledger:
        row = ledger.reserve("a", Cost(eps=0.1, delta=1e-7), consumer="c", what="w", relation="add/remove-one")
        assert row.charged.eps == pytest.approx(0.2) and row.charged.delta == pytest.approx(2 * math.exp(0.1) * 1e-7)
        assert ledger.reserve("b", Cost.pure(0.3), consumer="c", what="w", relation="replace-one").charged.eps == 0.3
        with pytest.raises(BudgetDeclined, match="0.6"):  # restated to 0.6, and 0.5 is left
            ledger.reserve("c", Cost.pure(0.3), consumer="c", what="w", relation="add/remove-one")
    with new_ledger(tmp_path, owner="x") as ledger:
        with pytest.raises(BudgetDeclined, match="cannot be restated"):
            ledger.reserve("a", Cost.pure(0.1), consumer="c", what="w", relation="replace-one")
        with pytest.raises(LedgerInputError, match="'relation'"):
            ledger.reserve("b", Cost.pure(0.1), consumer="c", what="w", relation="swap-one")
        assert ledger.spent().eps == 0


DISTINCT = "replace-one keeping the owner's number of distinct points"


def test_the_distinct_points_relation_is_never_charged_as_plain_replace_one(tmp_path):
    """The summarize auction's relation (a replacement that keeps the owner's number of distinct
    points) holds for fewer pairs than replace-one: a replace-one (or add/remove-one, restated) cost
    holds under it, but a cost stated under it says nothing about replace-one or add/remove-one, so a
    ledger under either declines it. Its text starts with "replace-one", and must not be read as it."""
    from marketplace.privacy.lifetime import relation_kind, restate

    assert relation_kind(DISTINCT) == DISTINCT
    assert relation_kind(f"{DISTINCT} (a point of another owner)") == DISTINCT
    assert relation_kind("replace-one (a row of r's data)") == "replace-one"
    cost = Cost(eps=0.1, delta=1e-7)
    assert restate(cost, DISTINCT, DISTINCT) is cost
    assert restate(cost, "replace-one", DISTINCT) is cost
    assert restate(cost, "add/remove-one", DISTINCT) == cost.as_replace_one()
    for weaker_to_stronger in ("replace-one", "add/remove-one"):
        with pytest.raises(LedgerInputError, match="cannot be restated"):
            restate(cost, DISTINCT, weaker_to_stronger)
    with LifetimeLedger.open(
        ledger_file(tmp_path, "r"), owner="r", budget=(1.0, 1e-5), relation="replace-one (a row of r's data)"
    ) as ledger:
        with pytest.raises(BudgetDeclined, match="cannot be restated"):
            ledger.reserve("a", Cost.pure(0.1), consumer="c", what="w", relation=DISTINCT)
        assert ledger.spent().eps == 0
    with LifetimeLedger.open(
        ledger_file(tmp_path, "d"), owner="d", budget=(1.0, 1e-5), relation=f"{DISTINCT} (a point of d's data)"
    ) as ledger:
        assert ledger.reserve("a", Cost.pure(0.1), consumer="c", what="w", relation=DISTINCT).charged.eps == 0.1
        assert ledger.reserve("b", Cost.pure(0.1), consumer="c", what="w", relation="replace-one").charged.eps == 0.1
        assert ledger.reserve("c", Cost.pure(0.1), consumer="c", what="w", relation="add/remove-one").charged.eps == 0.2


def test_a_fresh_reservation_of_a_charged_request_is_refused(tmp_path):
    """With fresh=True a request id already counted raises AlreadyCharged (its first attempt may
    have released: a second draw must not leave), and nothing more is charged."""
    from marketplace.privacy.lifetime import AlreadyCharged

    with new_ledger(tmp_path) as ledger:
        ledger.reserve("r", Cost.pure(0.2), consumer="c", what="w", fresh=True)
        with pytest.raises(AlreadyCharged, match="already charged"):
            ledger.reserve("r", Cost.pure(0.2), consumer="c", what="w", fresh=True)
        ledger.abort("r")
        assert ledger.reserve("r", Cost.pure(0.2), consumer="c", what="w", fresh=True).state == "reserved"
        assert ledger.spent().eps == 0.2


def test_a_release_without_a_finite_cost_is_recorded_as_declined(tmp_path):
    with new_ledger(tmp_path) as ledger:
        with pytest.raises(BudgetDeclined, match="in the clear"):
            ledger.decline("r", consumer="c", what="summarize", reason="it hands points over in the clear")
        (row,) = ledger.history()
        assert row.state == "declined" and row.cost is None and row.to_dict()["cost"] is None


def test_a_zcdp_ledger_needs_a_budget_delta(tmp_path):
    with pytest.raises(LedgerInputError, match="delta in \\(0, 1\\)"):
        new_ledger(tmp_path, budget=(1.0, 0.0), filter="zcdp")
    assert not ledger_file(tmp_path, "owner-1").exists()


# --- bad input names the field


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Cost.pure(-0.1), "'eps'"),
        (lambda: Cost.pure(float("nan")), "'eps'"),
        (lambda: Cost.pure(math.inf), "'eps'"),
        (lambda: Cost.pure(True), "'eps'"),
        (lambda: Cost.approximate(0.1, 1.0), "'delta'"),
        (lambda: Cost.approximate(0.1, -1e-9), "'delta'"),
        (lambda: Cost.zcdp(float("nan")), "'rho'"),
        (lambda: Cost.zcdp(0.0), "'rho'"),
        (lambda: Cost.gaussian(sensitivity=1.0, sigma=-2.0), "'sigma'"),
        (lambda: Cost(), "'cost'"),
        (lambda: Cost.of("laplace"), "'mechanism'"),
    ],
)
def test_bad_costs_are_refused_naming_the_field(make, field):
    with pytest.raises(LedgerInputError) as err:
        make()
    assert field in str(err.value)


@pytest.mark.parametrize(
    "args, field",
    [
        ({"budget": (1.0, 0.0), "relation": RELATION, "filter": "rdp"}, "'filter'"),
        ({"budget": (float("nan"), 0.0), "relation": RELATION}, "'budget[0] (eps)'"),
        ({"budget": (-1.0, 0.0), "relation": RELATION}, "'budget[0] (eps)'"),
        ({"budget": (1.0, 2.0), "relation": RELATION}, "'budget[1] (delta)'"),
        ({"budget": 1.0, "relation": RELATION}, "'budget'"),
        ({"budget": (1.0, 0.0), "relation": ""}, "'relation'"),
        ({"owner": "", "budget": (1.0, 0.0), "relation": RELATION}, "'owner'"),
    ],
)
def test_bad_ledger_settings_are_refused_naming_the_field(tmp_path, args, field):
    with pytest.raises(LedgerInputError) as err:
        LifetimeLedger.open(tmp_path / "l.sqlite", **{"owner": "owner-1", **args})
    assert field in str(err.value) and "Got" in str(err.value)
    assert not (tmp_path / "l.sqlite").exists()


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda led: led.reserve("", Cost.pure(0.1), consumer="c", what="w"), "'request_id'"),
        (lambda led: led.reserve("r", 0.1, consumer="c", what="w"), "'cost'"),
        (lambda led: led.reserve("r", Cost.pure(0.1), consumer=None, what="w"), "'consumer'"),
        (lambda led: led.reserve("r", Cost.pure(0.1), consumer="c", what=""), "'what'"),
    ],
)
def test_bad_requests_are_refused_naming_the_field_and_charge_nothing(tmp_path, call, field):
    with new_ledger(tmp_path) as ledger:
        with pytest.raises(LedgerInputError, match=field):
            call(ledger)
        assert ledger.history() == []


# --- marketplace ledger show


def test_show_prints_spent_remaining_filter_relation_and_history(tmp_path, capsys):
    folder = tmp_path / "owner-1"
    folder.mkdir()
    (folder / "kit.json").write_text(json.dumps({"party": "owner-1"}))
    with new_ledger(folder) as ledger:
        ledger.reserve("req-a", Cost.pure(0.25), consumer="consumer-a", what="sketch")
        ledger.commit("req-a")
        ledger.reserve("req-b", Cost.pure(0.5), consumer="consumer-b", what="stc")
        with pytest.raises(BudgetDeclined):
            ledger.reserve("req-c", Cost.pure(0.5), consumer="consumer-c", what="pfds")
    assert main(["ledger", "show", str(folder)]) == 0
    text = capsys.readouterr().out
    for words in (
        "owner-1",
        RELATION,
        "basic composition",
        "spent:     eps=0.75",
        "remaining: eps=0.25",
        "1 committed, 1 reserved",
        "1 declined",
    ):
        assert words in text, (words, text)
    history = text.split("history:")[1].splitlines()[2:]
    assert [line.split()[1:3] + [line.split()[-1]] for line in history] == [
        ["req-a", "consumer-a", "committed"],
        ["req-b", "consumer-b", "reserved"],
        ["req-c", "consumer-c", "declined"],
    ]
    assert main(["ledger", "show", str(ledger_file(folder, "owner-1")), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["spent"] == {"eps": 0.75, "delta": 0.0} and info["remaining"] == {"eps": 0.25, "delta": 0.0}
    assert info["filter"] == "basic" and info["relation"] == RELATION
    assert [r["state"] for r in info["history"]] == ["committed", "reserved", "declined"]


def test_show_of_a_zcdp_ledger_states_its_rho_budget(tmp_path, capsys):
    with new_ledger(tmp_path, budget=(1.0, 1e-6), filter="zcdp") as ledger:
        ledger.reserve("g", Cost.zcdp(0.01), consumer="c", what="w")
    assert main(["ledger", "show", str(tmp_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["budget"]["rho"] == zcdp_budget(1.0, 1e-6) and info["spent"] == {"rho": 0.01}
    assert info["guarantee"]["eps"] == pytest.approx(zcdp_to_dp(0.01, 1e-6, method="bun-steinke"))


def test_show_of_a_missing_or_foreign_file_fails_clearly_and_creates_nothing(tmp_path, capsys):
    assert main(["ledger", "show", str(tmp_path / "none.sqlite")]) == 2
    assert "no such ledger file" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()
    (tmp_path / "junk.ledger.sqlite").write_text("not a database")
    assert main(["ledger", "show", str(tmp_path)]) == 2
    assert "not a lifetime ledger" in capsys.readouterr().err


# --- processes: concurrent owners, and SIGKILL at random points


RACE_ROUNDS = 5


@pytest.mark.slow
def test_processes_sharing_one_ledger_never_pass_the_budget(tmp_path):
    """Three processes reserve 1/64 each on one ledger of eps = 1, 120 requests in all: exactly 64
    fit. Five rounds, each on a fresh ledger, so that the race at the boundary happens many times;
    in the first round the three processes also create the ledger together."""
    for round_ in range(RACE_ROUNDS):
        db = ledger_file(tmp_path / str(round_), "owner-1")
        db.parent.mkdir()
        if round_ > 0:
            LifetimeLedger.open(db, owner="owner-1", budget=(1.0, 0.0), relation=RELATION).close()
        start = db.parent / "go"
        racers = [worker("race", str(db), prefix, "40", str(start)) for prefix in ("a", "b", "c")]
        time.sleep(0.5)  # let every racer open the file; the start file releases them together
        start.touch()
        outputs = [p.communicate(timeout=120) for p in racers]
        assert all(p.returncode == 0 for p in racers), outputs
        reserved = [int(out.strip()) for out, _ in outputs]
        with LifetimeLedger.read(db) as ledger:
            assert sum(reserved) == 64 and ledger.spent().eps == 1.0, reserved
            assert sum(r.state == "reserved" for r in ledger.history()) == 64
            assert len({r.request_id for r in ledger.history()}) == 120
            order = "".join(r.consumer for r in ledger.history())
        switches = sum(a != b for a, b in zip(order, order[1:]))
        assert switches >= 2, f"the processes did not interleave: {order}"


KILLS = 60


def released_so_far(log: Path) -> dict[str, float]:
    """The releases in the log (request id -> eps); a retried release appears more than once."""
    if not log.exists():
        return {}
    lines = log.read_text().split("\n")
    assert lines[-1] == "", "a release line was cut short"  # each line is one write(2)
    released: dict[str, float] = {}
    for line in lines[:-1]:
        request_id, eps = line.split()
        assert released.setdefault(request_id, float(eps)) == float(eps)
    return released


def check_never_below_what_left(db: Path, log: Path) -> None:
    """Right after a kill: every release that left is charged, at its cost, and counted as spent."""
    released = released_so_far(log)
    try:
        ledger = LifetimeLedger.read(db)
    except LedgerInputError:  # killed while creating the ledger: then nothing can have left
        assert not released
        return
    with ledger:
        history, spent = ledger.history(), ledger.spent().eps
    by_id = {r.request_id: r for r in history}
    assert len(by_id) == len(history), "a request id was charged twice"
    for request_id, eps in released.items():
        assert by_id[request_id].state in ("reserved", "committed") and by_id[request_id].cost.eps == eps
    assert spent == math.fsum(r.charged.eps for r in history if r.state in ("reserved", "committed"))
    assert spent >= math.fsum(released.values())


@pytest.mark.slow
def test_sigkill_at_random_points_never_undercounts_nor_charges_twice(tmp_path):
    """A stand-in owner loops reserve -> release (a fsynced log line) -> commit, and is SIGKILLed
    at random points (during start-up and open too), then restarted to carry on from its ledger."""
    db, log = ledger_file(tmp_path, "owner-1"), tmp_path / "released.log"
    rng = random.Random(20261126)
    pending_seen = 0
    for kill in range(KILLS):
        child = worker("crash", str(db), str(log))
        if kill % 4 != 0:  # most kills land in the loop, a few during start-up and open
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
        time.sleep(rng.uniform(0.0, 0.25))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL, (child.returncode, out)
        pending_seen += sum(int(line.split()[1]) for line in out.splitlines() if line.startswith("pending"))
        if db.exists():
            check_never_below_what_left(db, log)
    final = worker("crash", str(db), str(log), "--iterations", "5")
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err

    check_never_below_what_left(db, log)
    released = released_so_far(log)
    with LifetimeLedger.open(db, owner="owner-1", budget=(1000.0, 0.0), relation=RELATION) as ledger:  # reopens cleanly
        history = ledger.history()
    assert all(r.request_id in released for r in history if r.state == "committed")  # commit comes after release
    assert [r.state for r in history] == ["committed"] * len(history)  # the final run settled everything
    db_check = sqlite3.connect(db)
    assert db_check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert len(released) >= KILLS and pending_seen >= 1, (len(released), pending_seen)


def test_a_consumer_quota_caps_one_consumer_and_the_budget_still_caps_them_all(tmp_path):
    with new_ledger(tmp_path, budget=(1.0, 0.0)) as ledger:
        ledger.reserve("a1", Cost.pure(0.3), consumer="alice", what="w", quota=(0.5, 0.0))
        with pytest.raises(BudgetDeclined, match="of alice's quota"):
            ledger.reserve("a2", Cost.pure(0.3), consumer="alice", what="w", quota=(0.5, 0.0))
        ledger.reserve("b1", Cost.pure(0.4), consumer="bob", what="w", quota=(0.5, 0.0))
        with pytest.raises(BudgetDeclined, match="of the budget"):  # bob is within his quota; the owner is not
            ledger.reserve("c1", Cost.pure(0.4), consumer="carol", what="w", quota=(0.5, 0.0))
        assert [r.state for r in ledger.history()] == ["reserved", "declined", "reserved", "declined"]
        assert ledger.spent().eps == pytest.approx(0.7)


def test_a_market_takes_a_cost_declared_under_the_distinct_points_relation_only_under_its_name(monkeypatch):
    from types import SimpleNamespace

    from marketplace.privacy.lifetime import Declared
    from marketplace.scheduling import costs

    declared = Declared("w", Cost.pure(0.1), DISTINCT)
    monkeypatch.setattr(costs, "declared_release", lambda config, party, exchange: declared)
    for relation in ("replace-one", "add/remove-one"):  # the market may state its budgets under that relation
        with pytest.raises(costs.NoOwnerCost, match="set market.relation to 'replace-one-distinct'"):
            costs.owner_cost(SimpleNamespace(protocol="x"), "owner-1", relation, None)
    assert costs.owner_cost(SimpleNamespace(protocol="x"), "owner-1", "replace-one-distinct", None) == Cost.pure(0.1)
