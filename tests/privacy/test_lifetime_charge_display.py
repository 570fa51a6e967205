"""What the summary table and the report say an owner's lifetime ledger was charged, beside the eps the
run's ledgers state: the report's ``lifetime.owners.<owner>.charged`` is the ledger's own charge, exactly,
and every protocol's summary lines (``charged``) state it next to the mechanism's eps, with the ledger's
relation and the reason, when the two differ (a relation restated by group privacy, a declared cost the
run did not spend in full), and one figure when they are equal."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT

import marketplace
from marketplace import plugins
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.reporting.charge import RESTATED, lifetime_charge
from marketplace.reporting.format import fmt

DISTINCT = "replace-one keeping the owner's number of distinct points"
BIG = {"lifetime.budget.epsilon": 100.0, "lifetime.budget.delta": 0.1}


def run(tmp_path, scenario, relation, **settings):
    """Run ``scenario`` in one process with lifetime ledgers under ``relation``; the report."""
    ledgers = tmp_path / "ledgers"
    loaded = marketplace.load(
        ROOT / "scenarios" / scenario, {"lifetime.ledgers": str(ledgers), "lifetime.relation": relation, **settings}
    )
    marketplace.run(loaded, tmp_path / "run", driver="inprocess")
    return json.loads((tmp_path / "run" / "report.json").read_text()), ledgers


def ledger_charges(report, ledgers):
    """Each owner's charge for this run as its ledger recorded it (``marketplace ledger show``)."""
    out = {}
    for owner, record in report["lifetime"]["owners"].items():
        with LifetimeLedger.read(ledger_file(ledgers, owner)) as ledger:
            (row,) = [r for r in ledger.history() if r.request_id == record["request_id"]]
        out[owner] = {k: v for k, v in row.charged._asdict().items() if v is not None}
    return out


def charged_lines(report):
    return [text for name, text in plugins.exchange(report["protocol"]).head_rows(report) if name == "charged"]


def assert_charges_are_the_ledgers(report, ledgers):
    charges = ledger_charges(report, ledgers)
    assert charges and {o: r["charged"] for o, r in report["lifetime"]["owners"].items()} == charges
    return charges


def assert_one_figure(line, charged_eps=None):
    assert ", not " not in line and "the ledger's relation" in line
    if charged_eps is not None:
        assert line.count(fmt(charged_eps, 6)) == 1


# --- sketch: add/remove-one, restated under replace-one-distinct


def test_sketch_on_a_distinct_points_ledger_states_the_doubled_charge_beside_its_eps(tmp_path):
    report, ledgers = run(
        tmp_path, "sketch-quickstart.yaml", "replace-one-distinct", **{"parties.owners": 3, "sketch.epsilon": 0.4}
    )
    charges = assert_charges_are_the_ledgers(report, ledgers)
    assert {c["eps"] for c in charges.values()} == {0.8}
    assert all(report["privacy"][o]["eps"] == pytest.approx(0.4) for o in charges)
    (line,) = charged_lines(report)
    assert line.startswith("owner-1, owner-2, owner-3: charged eps = 0.8")
    assert "not eps = 0.4" in line and f"under {DISTINCT} (the ledger's relation)" in line
    assert RESTATED.format(more="") in line


def test_sketch_on_an_add_remove_ledger_shows_one_figure(tmp_path):
    report, ledgers = run(tmp_path, "sketch-quickstart.yaml", "add/remove-one", **{"parties.owners": 2})
    charges = assert_charges_are_the_ledgers(report, ledgers)
    assert all(c["eps"] == report["privacy"][o]["eps"] for o, c in charges.items())
    (line,) = charged_lines(report)
    assert line == "owner-1, owner-2: charged the same to its lifetime ledger (add/remove-one, the ledger's relation)"


# --- stc: add/remove-one, restated under replace-one


def test_stc_on_a_replace_one_ledger_states_the_doubled_charge(tmp_path):
    report, ledgers = run(tmp_path, "stc-synthetic.yaml", "replace-one", **{"parties.owners": 2, **BIG})
    charges = assert_charges_are_the_ledgers(report, ledgers)
    (line,) = charged_lines(report)
    stated = report["privacy"]["owner-1"]["eps"]
    assert charges["owner-1"]["eps"] == 2 * stated
    assert f"charged eps = {fmt(2 * stated, 6)}" in line and f"not eps = {fmt(stated, 6)}" in line
    assert "under replace-one (the ledger's relation)" in line and "eps doubles" in line


def test_stc_on_an_add_remove_ledger_shows_one_figure(tmp_path):
    report, ledgers = run(tmp_path, "stc-synthetic.yaml", "add/remove-one", **{"parties.owners": 2, **BIG})
    assert_charges_are_the_ledgers(report, ledgers)
    (line,) = charged_lines(report)
    assert_one_figure(line)
    assert "charged the same" in line


# --- pfds: add/remove-one, restated under replace-one; a tree that spends its whole budget

PFDS = {
    "parties.owners": 3,
    "data.source.table.synthetic.rows": 2000,
    "data.source.table.synthetic.categorical": 0,
    "pfds.h_max": 3,
    "pfds.p": 2,
    **BIG,
}


def test_pfds_on_a_replace_one_ledger_states_the_doubled_charge(tmp_path):
    report, ledgers = run(tmp_path, "pfds-synthetic.yaml", "replace-one", **PFDS)
    charges = assert_charges_are_the_ledgers(report, ledgers)
    assert {c["eps"] for c in charges.values()} == {2.0}
    (line,) = charged_lines(report)
    assert line.startswith("owner-1, owner-2, owner-3: charged eps = 2, delta = 0")
    assert "not eps = 1 (what it spent)" in line and "under replace-one (the ledger's relation)" in line
    assert "eps doubles" in line


def test_pfds_on_an_add_remove_ledger_shows_one_figure(tmp_path):
    report, ledgers = run(tmp_path, "pfds-synthetic.yaml", "add/remove-one", **PFDS)
    charges = assert_charges_are_the_ledgers(report, ledgers)
    assert {c["eps"] for c in charges.values()} == {1.0}
    (line,) = charged_lines(report)
    assert line == (
        "owner-1, owner-2, owner-3: charged what it spent (eps = 1, delta = 0) to its lifetime ledger "
        "(add/remove-one, the ledger's relation)"
    )


# --- summarize: the auction and D_s, declared for every round; a run that stops early

SUMMARIZE = {
    "lifetime.budget.epsilon": 50.0,
    "lifetime.budget.delta": 0.01,
    "summarize.privacy.budget_validation": None,
    "summarize.privacy.budget_summary": None,
}


def test_summarize_that_stops_early_states_the_declared_charge_beside_what_it_spent(tmp_path):
    """The reporter's case: the consumer's spending budget ends the run before its last round, so the
    auction ledger states fewer rounds than every owner's lifetime ledger was charged for."""
    report, ledgers = run(
        tmp_path,
        "summarize-buy.yaml",
        "replace-one-distinct",
        **{"summarize.rounds": 8, "summarize.features": 30, "lifetime.terms.price": 2.0},
        **{"summarize.spending_budget": 6, **SUMMARIZE},
    )
    charges = assert_charges_are_the_ledgers(report, ledgers)
    declared = report["auction"]["declared"]
    assert declared["rounds"] == 8 and declared["auction"]["eps"] == pytest.approx(0.8)
    charged = charges["owner-1"]["eps"]
    assert charged == pytest.approx(declared["auction"]["eps"] + declared["D_s"]["eps"])
    spent = report["privacy"]["auction"]["eps"] + report["privacy"]["D_s"]["eps"]
    assert report["privacy"]["auction"]["eps"] < declared["auction"]["eps"] - 0.05  # the run stopped early
    (line,) = charged_lines(report)
    assert f"charged eps = {fmt(charged, 6)}" in line and f"not eps = {fmt(spent, 6)}" in line
    assert f"under {DISTINCT} (the ledger's relation)" in line
    assert "the auction over 8 rounds, eps 0.8" in line and "declared before the run" in line


def test_summarize_that_runs_every_round_shows_one_figure(tmp_path):
    report, ledgers = run(
        tmp_path,
        "quickstart-private.yaml",
        "replace-one-distinct",
        **{"summarize.rounds": 3, "summarize.features": 30, "summarize.privacy.t_init": 100, **SUMMARIZE},
    )
    charges = assert_charges_are_the_ledgers(report, ledgers)
    charged = charges["owner-1"]["eps"]
    assert charged == pytest.approx(report["privacy"]["auction"]["eps"] + report["privacy"]["D_s"]["eps"])
    (line,) = charged_lines(report)
    assert_one_figure(line, charged)
    assert re.match(r"owner-1, owner-2, owner-3, owner-4: charged the auction and D_s rows added up \(eps = ", line)


# --- the wording itself


def test_a_zcdp_ledger_states_rho_and_says_why():
    record = {
        "state": "committed",
        "cost": {"eps": 0.4, "delta": 0.0, "rho": None},
        "relation": "add/remove-one",
        "charged": {"rho": 0.08},
        "ledger_relation": "add/remove-one (a row of owner-1's data)",
    }
    charge = lifetime_charge(record, 0.4)
    assert charge is not None and not charge.same
    assert charge.text.startswith("charged rho = 0.08 to its lifetime ledger under add/remove-one")
    assert charge.text.endswith("the ledger's zcdp filter charges rho (a pure eps release eps^2/2)")
    same = lifetime_charge(record, 0.4, stated_rho=0.08)
    assert same is not None and same.same and same.text.startswith("charged the same")


def test_nothing_is_said_of_a_charge_that_does_not_count():
    for state in ("declined", "aborted", "nothing"):
        assert lifetime_charge({"state": state, "charged": {"eps": 1.0}}, 1.0) is None
    assert lifetime_charge(None, 1.0) is None
