"""Owners charge their lifetime ledgers in real runs: before anything leaves, once per request, and
declining when the declared cost does not fit; the run goes on without them."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

import marketplace
from marketplace import plugins
from marketplace.privacy.lifetime import Cost, LifetimeLedger, ledger_file
from marketplace.roles.lifetime import admit
from marketplace.runner.report_schema import report_problems

SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"


def sketch(ledgers, **overrides):
    settings = {"lifetime.ledgers": str(ledgers), "parties.owners": 3, "sketch.epsilon": 0.4}
    settings.update(overrides)
    return marketplace.load(SKETCH, settings)


def run(scenario, tmp_path, name, driver="inprocess", expect_failure=False):
    try:
        marketplace.run(scenario, tmp_path / name, driver=driver)
    except marketplace.RunFailed:
        if not expect_failure:
            raise
    data = json.loads((tmp_path / name / "report.json").read_text())
    assert report_problems(data) == []
    return data


def states(report):
    return {o: r["state"] for o, r in report["lifetime"]["owners"].items()}


def test_owners_charge_each_run_and_decline_once_their_budget_is_spent(tmp_path):
    ledgers = tmp_path / "ledgers"
    scenario = sketch(
        ledgers, **{"lifetime.budget": {"epsilon": 1.0}, "lifetime.owner_budgets": {"owner-2": {"epsilon": 0.5}}}
    )
    first = run(scenario, tmp_path, "r1")
    assert first["status"] == "completed" and states(first) == dict.fromkeys(
        ("owner-1", "owner-2", "owner-3"), "committed"
    )
    second = run(scenario, tmp_path, "r2")
    assert states(second) == {"owner-1": "committed", "owner-2": "declined", "owner-3": "committed"}
    assert second["status"] == "completed" and second["lifetime"]["declined"] == ["owner-2"]
    assert "owner-2" not in second["owners_lost"]["lost"] and second["owners_lost"]["count"] == 0
    reason = second["lifetime"]["owners"]["owner-2"]["reason"]
    assert "declined request" in reason and "eps=0.4" in reason and "eps=0.1" in reason  # cost, and what is left
    assert first["lifetime"]["request_id"] != second["lifetime"]["request_id"]  # a fresh id per run
    # the declining owner released nothing: hello, its decline and bye; only the two others' sketches travelled
    assert second["messages"]["by_party"]["owner-2"]["sent"] == 3
    assert second["messages"]["by_kind"]["sketch_release"]["count"] == 2
    assert second["party_details"]["owner-2"]["result"] == {"declined": reason, "released": False}
    with LifetimeLedger.read(ledger_file(ledgers, "owner-2")) as ledger:
        assert [r.state for r in ledger.history()] == ["committed", "declined"] and ledger.spent().eps == 0.4
    with LifetimeLedger.read(ledger_file(ledgers, "owner-1")) as ledger:
        assert ledger.spent().eps == pytest.approx(0.8) and ledger.remaining().eps == pytest.approx(0.2)
    third = run(scenario, tmp_path, "r3", expect_failure=True)  # 0.2 left everywhere: every owner declines
    assert third["status"] == "failed" and any("every owner declined" in f for f in third["failures"])
    assert states(third) == dict.fromkeys(("owner-1", "owner-2", "owner-3"), "declined")


def test_a_request_over_budget_never_makes_the_owner_release_over_sockets(tmp_path):
    """Under the processes driver (each owner its own process and ledger connection): the owner whose
    budget cannot take the request sends nothing of the protocol, and the others' sketches arrive."""
    scenario = sketch(tmp_path / "ledgers", **{"lifetime.owner_budgets": {"owner-3": {"epsilon": 0.3}}})
    report = run(scenario, tmp_path, "p", driver="processes")
    assert report["status"] == "completed" and states(report)["owner-3"] == "declined"
    curator = report["party_details"]["curator"]["result"]
    assert curator["dropouts"]["owner-3"]["declined"] is True
    assert report["messages"]["by_party"]["owner-3"]["sent"] == 3  # hello, its decline, bye
    assert report["messages"]["by_kind"]["sketch_release"]["count"] == 2
    assert [p["exit_code"] for p in report["parties"] if p["id"] == "owner-3"] == [0]
    # over sockets the report says how long connecting took: every owner (the declining one too) and the consumer
    assert report["timing"]["connected"] == 4 and 0 < report["timing"]["connect_s"] <= report["timing"]["wall_s"]


def test_a_retried_request_id_is_charged_once_and_never_released_twice(tmp_path):
    scenario = sketch(tmp_path / "ledgers", **{"lifetime.request_id": "req-fixed"})
    assert set(states(run(scenario, tmp_path, "a")).values()) == {"committed"}
    retry = run(scenario, tmp_path, "b", expect_failure=True)
    assert set(states(retry).values()) == {"declined"}
    assert all("already charged" in r["reason"] for r in retry["lifetime"]["owners"].values())
    with LifetimeLedger.read(ledger_file(tmp_path / "ledgers", "owner-1")) as ledger:
        assert [r.state for r in ledger.history()] == ["committed"] and ledger.spent().eps == 0.4


def test_an_owner_that_released_nothing_is_rolled_back(tmp_path):
    """stc with a consumer ledger: the consumer's target points go in the clear, so its own ledger
    declines the run before anything is sent; the owners, charged first, were never asked, and
    their reservations are rolled back."""
    stc = marketplace.load(
        ROOT / "scenarios" / "stc-synthetic.yaml",
        {
            "lifetime.ledgers": str(tmp_path / "ledgers"),
            "lifetime.consumer_budget": {"epsilon": 5.0},
            "lifetime.budget": {"epsilon": 10.0},
            "parties.owners": 3,
        },
    )
    report = run(stc, tmp_path, "stc", expect_failure=True)
    assert report["lifetime"]["consumer_ledger"]["state"] == "declined"
    assert "in the clear" in report["lifetime"]["consumer_ledger"]["reason"]
    assert set(states(report).values()) == {"aborted"}
    with LifetimeLedger.read(ledger_file(tmp_path / "ledgers", "owner-1")) as ledger:
        assert ledger.spent().eps == 0 and [r.state for r in ledger.history()] == ["aborted"]


def test_summarize_owners_decline_the_non_private_form(tmp_path):
    scenario = marketplace.load(
        ROOT / "scenarios" / "quickstart.yaml", {"lifetime.ledgers": str(tmp_path / "ledgers"), "summarize.rounds": 3}
    )
    report = run(scenario, tmp_path, "s", expect_failure=True)
    assert set(states(report).values()) == {"declined"}
    assert all("exact mean embedding" in r["reason"] for r in report["lifetime"]["owners"].values())


PRIVATE = {"summarize.rounds": 3, "summarize.features": 30, "summarize.privacy.t_init": 100}


def test_private_summarize_is_declined_by_a_ledger_under_a_relation_that_cannot_take_its_auction(tmp_path):
    scenario = marketplace.load(
        ROOT / "scenarios" / "quickstart-private.yaml",
        {"lifetime.ledgers": str(tmp_path / "ledgers"), "lifetime.budget.delta": 0.01, **PRIVATE},
    )
    report = run(scenario, tmp_path, "s", expect_failure=True)
    assert set(states(report).values()) == {"declined"}
    assert all("replace-one-distinct" in r["reason"] for r in report["lifetime"]["owners"].values())


def test_private_summarize_charges_each_owner_its_auction_and_summary_releases_and_records_its_sales(tmp_path):
    """The charge is the planned auction ledger (R eps_auc for all K owners ranked) plus the planned D_s
    ledger, composed; each owner's ledger records the points it handed over and its earnings."""
    from marketplace.protocols.summarize.private_curator import AUCTION, SUMMARY, PrivateSchedule

    scenario = marketplace.load(
        ROOT / "scenarios" / "quickstart-private.yaml",
        {
            "lifetime.ledgers": str(tmp_path / "ledgers"),
            "lifetime.relation": "replace-one-distinct",
            "lifetime.budget.epsilon": 50.0,
            "lifetime.budget.delta": 0.01,
            "lifetime.terms.price": 2.0,
            "summarize.privacy.budget_validation": None,
            "summarize.privacy.budget_summary": None,
            **PRIVATE,
        },
    )
    config = scenario.config
    schedule = PrivateSchedule.resolve(
        config.summarize.privacy, features=30, rounds=3, seed_set_size=config.data.seed_set.size
    )
    ledgers = schedule.ledgers()
    schedule.plan(ledgers, 3, seed_set_size=config.data.seed_set.size, owners=config.parties.owners)
    planned = ledgers[AUCTION].total().eps + ledgers[SUMMARY].total().eps
    assert ledgers[AUCTION].total().eps == pytest.approx(3 * config.summarize.privacy.eps_auction)
    report = run(scenario, tmp_path, "s")
    sold = 0
    for owner, record in report["lifetime"]["owners"].items():
        assert record["state"] == "committed" and record["cost"]["eps"] == pytest.approx(planned)
        with LifetimeLedger.read(ledger_file(tmp_path / "ledgers", owner)) as ledger:
            (sale,) = ledger.sales()
        assert sale.reserved == 3 and sale.sold == record["sale"]["sold"] and sale.earnings == 2.0 * sale.sold
        sold += sale.sold
    assert sold == report["sale"]["points_bought"] >= len(report["selection"])


def test_the_summarize_charge_names_what_it_does_not_cover():
    """The charge bounds the auction's selections and the g_l releases given D_s, not all that others
    learn beyond the points sold: a sold point is the owner's best remaining one by the bid, so its
    choice tells something of the points it keeps."""
    config = marketplace.load(ROOT / "scenarios" / "quickstart-private.yaml", PRIVATE).config
    what = plugins.exchange("summarize").owner_cost(config, "owner-1").what
    assert "beyond the points" not in what
    covered, not_covered = what.split("not covered:")
    assert "given their directions" in covered and "given D_s" in covered
    assert "the points sold" in not_covered
    assert "the choice of a sold point" in not_covered and "unsold points" in not_covered


def test_a_run_without_ledgers_has_no_lifetime_section(tmp_path):
    report = run(marketplace.load(SKETCH, {"parties.owners": 2}), tmp_path, "plain")
    assert report["lifetime"] is None and report["config"]["lifetime"]["ledgers"] is None


# --- the decision reads public information only


def test_admission_never_reads_the_data(tmp_path, monkeypatch):
    """The same declared costs against the same ledger states give the same decisions on very
    different data; admission never builds the world (building it here fails the test)."""
    import marketplace.parties as parties

    def no_world(*args, **kwargs):
        raise AssertionError("admission read the data")

    monkeypatch.setattr(parties, "make_world", no_world)
    exchange = plugins.exchange("sketch")
    decisions = []
    for source, seed in (({"kind": "uniform"}, 1), ({"kind": "covariate_shift"}, 99)):
        folder = tmp_path / f"l{seed}"
        config = sketch(
            folder,
            seed=seed,
            **{"data.source.kind": source["kind"], "lifetime.owner_budgets": {"owner-2": {"epsilon": 0.5}}},
        ).config
        run_decisions = []
        for n in range(3):
            for owner in ("owner-1", "owner-2", "owner-3"):
                a = admit(config, owner, exchange, request_id=f"r{n}")
                run_decisions.append((owner, a.state))
                if a.admitted:
                    a.settle(True)
        decisions.append(run_decisions)
    assert decisions[0] == decisions[1]
    assert decisions[0][:3] == [("owner-1", "reserved"), ("owner-2", "reserved"), ("owner-3", "reserved")]
    assert ("owner-2", "declined") in decisions[0][3:6]


def test_declared_costs_of_the_shipped_protocols():
    def owner(path, **o):
        config = marketplace.load(ROOT / "scenarios" / path, o).config
        return plugins.exchange(config.protocol).owner_cost(config, "owner-1")

    assert owner("sketch-quickstart.yaml", **{"sketch.epsilon": 0.7}).cost == Cost.pure(0.7)
    gaussian = owner(
        "sketch-quickstart.yaml", **{"sketch.epsilon": 0.7, "sketch.mechanism": "gaussian", "sketch.delta": 1e-6}
    )
    assert gaussian.cost == Cost.approximate(0.7, 1e-6)
    assert owner("sketch-quickstart.yaml", **{"sketch.epsilon": None}).cost is None
    assert owner("stc-synthetic.yaml", **{"stc.privacy.epsilon": 2.0}).cost == Cost.pure(2.0)
    z = owner("stc-synthetic.yaml", **{"stc.privacy.notion": "zcdp", "stc.privacy.rho": 0.5}).cost
    assert z.rho == 0.5 and z.delta == 1e-6 and 0 < z.eps < 0.5 + 2 * (0.5 * 13.82) ** 0.5
    pfds = owner("pfds-synthetic.yaml", **{"pfds.epsilon": 2.0, "pfds.neighbours": "replace"})
    assert pfds.cost == Cost.pure(2.0) and pfds.relation == "replace-one"
    assert owner("quickstart.yaml").cost is None


def test_bad_lifetime_settings_are_refused_naming_the_key():
    with pytest.raises(marketplace.ScenarioError, match="lifetime.budget.epsilon"):
        marketplace.load(SKETCH, {"lifetime.budget.epsilon": -1})
    with pytest.raises(marketplace.ScenarioError, match="lifetime.filter"):
        marketplace.load(SKETCH, {"lifetime.filter": "renyi"})
    with pytest.raises(marketplace.ScenarioError, match="delta must be > 0 under the zcdp filter"):
        marketplace.load(SKETCH, {"lifetime.filter": "zcdp"})


def test_a_consumer_quota_declines_that_consumer_only(tmp_path):
    base = {"lifetime.budget": {"epsilon": 2.0}, "lifetime.consumer_quota": {"epsilon": 0.5}}
    alice = run(sketch(tmp_path / "ledgers", **base, **{"lifetime.consumer": "alice"}), tmp_path, "a1")
    again = run(
        sketch(tmp_path / "ledgers", **base, **{"lifetime.consumer": "alice"}), tmp_path, "a2", expect_failure=True
    )
    bob = run(sketch(tmp_path / "ledgers", **base, **{"lifetime.consumer": "bob"}), tmp_path, "b1")
    assert set(states(alice).values()) == {"committed"} and set(states(bob).values()) == {"committed"}
    assert set(states(again).values()) == {"declined"}
    assert all("alice's quota" in r["reason"] for r in again["lifetime"]["owners"].values())


def test_two_charged_requests_of_one_seed_draw_different_noise(tmp_path):
    """The lifetime ledger composes requests as independent releases: the request id is mixed into
    every noise stream, so running one scenario and seed twice does not release the same noise twice
    (which a ledger would charge twice for a single release's information, and two different costs
    of one draw could be combined to strip it). Without ledgers the seed alone still reproduces a run."""
    import numpy as np

    from marketplace.parties import build_role, make_world
    from marketplace.privacy.noise import NoiseOrigin, derive

    first = sketch(tmp_path / "l", **{"lifetime.request_id": "req-a"}).config
    second = sketch(tmp_path / "l", **{"lifetime.request_id": "req-b"}).config
    draws = [
        np.random.default_rng(
            derive(c.seed, "sketch.noise.owner-1", NoiseOrigin.seed().__class__("seed", request=c.lifetime.request_id))
        ).standard_normal(4)
        for c in (first, second)
    ]
    assert not np.allclose(*draws)
    world = make_world(first, plugins.exchange(first.protocol))
    roles = [build_role(c, "owner-1", world=world, exchange=plugins.exchange(c.protocol)) for c in (first, second)]
    assert [r.identity.noise["source"] for r in roles] == [
        "the run seed and the request id (req-a)",
        "the run seed and the request id (req-b)",
    ]
    plain = sketch(tmp_path / "l", **{"lifetime.ledgers": None}).config
    assert (
        build_role(plain, "owner-2", world=world, exchange=plugins.exchange(plain.protocol)).identity.noise["source"]
        == "the run seed"
    )
    a = run(sketch(tmp_path / "r", **{"lifetime.request_id": "req-1"}), tmp_path, "a")
    b = run(sketch(tmp_path / "r2", **{"lifetime.request_id": "req-2"}), tmp_path, "b")
    assert a["metrics"] != b["metrics"]  # same seed and data, other requests: other noise


def test_the_lifetime_section_names_where_the_owners_ledgers_are_not_the_scenarios_folder():
    """A served marketplace's agents keep their owners' ledgers in folders of their own: the report
    says so from the owners' records, not from the scenario's ``lifetime.ledgers``."""
    from types import SimpleNamespace

    from marketplace.runtime.lifetime import lifetime_section

    life = SimpleNamespace(ledgers="/market/ledgers", request_id="r1", consumer="alice")
    config = SimpleNamespace(lifetime=life, parties=SimpleNamespace(owners=2))

    def parties(*folders):
        return [
            {"id": f"owner-{i}", "lifetime": {"state": "committed", "ledger": f"{folder}/owner-{i}.ledger.sqlite"}}
            for i, folder in enumerate(folders, 1)
        ]

    assert lifetime_section(config, parties("/agent-a", "/agent-a"), {})["ledgers"] == "/agent-a"
    assert lifetime_section(config, parties("/agent-a", "/agent-b"), {})["ledgers"].startswith("each owner's own")
    assert lifetime_section(config, [], {})["ledgers"] == "/market/ledgers"
