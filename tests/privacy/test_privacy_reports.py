"""What the reports state about privacy: each ledger's (eps, delta) is what the mechanisms really
give, with its neighbouring relation, and the Gaussian ledgers are exact.

* The auction ledger of the private quickstart equals the per-round guarantee of the composed rule,
  added over the rounds, which the exact multi-round audit (``test_auction_rounds_audit.py``)
  checks; the older rules' ledgers say their total does not bound an owner's view, the paper's
  carries its delta, and the run's table warns for both.
* The Gaussian ledgers agree with an independent exact accountant (dp-accounting's privacy-loss
  distributions) to 1e-3 and are never below the exact value (computed with mpmath at 50 digits).
* Every ledger of every protocol names its neighbouring relation, in report.json and in the table.
"""

from __future__ import annotations

import math
import re

import mpmath
import pytest
from conftest import ROOT, run_cli
from dp_accounting import dp_event, pld

from marketplace.privacy.gdp import calibrate_mu, gaussian_delta, gaussian_eps
from marketplace.protocols.summarize.request_schedule import composed_schedule
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario


@pytest.fixture(scope="module")
def quickstart_private(tmp_path_factory):
    loaded = load_scenario(ROOT / "scenarios" / "quickstart-private.yaml", [])
    return run_scenario(loaded, tmp_path_factory.mktemp("qsp") / "run", driver="inprocess")


def test_the_auction_ledger_is_the_audited_per_round_guarantee_composed(quickstart_private):
    report = quickstart_private
    ledger = report["privacy"]["auction"]
    rounds = len(report["selection"])
    privacy = report["config"]["summarize"]["privacy"]
    assert privacy["auction"] == "composed"
    eps = privacy["eps_auction"]
    # the rule the audit checks: the whole selection of a round is pure eps-DP given the earlier ones
    schedule = composed_schedule(report["config"]["parties"]["owners"], eps, privacy["requests_per_round"])
    assert (schedule.rule, schedule.eps, schedule.delta) == ("composed", eps, 0.0)
    assert report["auction"]["per_round"] == {"eps": eps, "delta": 0.0}
    assert ledger["eps"] == pytest.approx(rounds * eps, rel=1e-12) and ledger["delta"] == 0.0
    assert ledger["steps"] == [
        {"mechanism": "auction: composed selection (per round)", "eps": eps, "delta": 0.0, "count": rounds}
    ]
    assert ledger["neighbouring"]["relation"] == "replace-one keeping the owner's number of distinct points"
    assert "whole selection of every round" in ledger["neighbouring"]["scope"]
    assert "warning" not in report["auction"]


def test_the_two_sided_auction_ledger_says_its_rounds_do_not_compose(tmp_path):
    loaded = load_scenario(
        ROOT / "scenarios" / "quickstart-private.yaml", ["summarize.privacy.auction=two_sided", "summarize.rounds=5"]
    )
    report = run_scenario(loaded, tmp_path / "run", driver="inprocess")
    ledger = report["privacy"]["auction"]
    assert report["auction"]["per_round"] == {"eps": 0.1, "delta": 0.0}  # the per-round figure is kept
    assert "do NOT compose" in ledger["neighbouring"]["scope"]
    assert ledger["steps"][0]["mechanism"] == "auction: two-sided requests (per round, given the state)"
    assert "do not compose" in report["auction"]["warning"]


def test_the_papers_auction_ledger_carries_its_delta(tmp_path):
    loaded = load_scenario(ROOT / "scenarios" / "quickstart-private.yaml", ["summarize.privacy.auction=paper"])
    report = run_scenario(loaded, tmp_path / "run", driver="inprocess")
    ledger = report["privacy"]["auction"]
    eps, rounds = 0.1, len(report["selection"])
    delta0 = 1 - math.exp(-eps)
    assert report["auction"]["per_round"]["delta"] == pytest.approx(delta0, rel=1e-12)
    assert ledger["steps"][0]["delta"] == pytest.approx(delta0, rel=1e-12)
    assert ledger["eps"] == pytest.approx(rounds * eps)
    assert ledger["delta"] == pytest.approx(1 - (1 - delta0) ** rounds, rel=1e-9)  # about 0.98: nearly vacuous
    assert "not eps_auc-DP" in report["auction"]["warning"] and "do not compose" in report["auction"]["warning"]
    assert "do NOT compose" in ledger["neighbouring"]["scope"]


@pytest.mark.parametrize("rule, phrase", [("paper", "not eps_auc-DP"), ("two_sided", "do not compose")])
def test_the_run_table_warns_when_an_older_auction_is_used(tmp_path, rule, phrase):
    out = run_cli(
        "run",
        str(ROOT / "scenarios" / "quickstart-private.yaml"),
        "--driver",
        "inprocess",
        "--set",
        f"summarize.privacy.auction={rule}",
        "--set",
        "summarize.rounds=5",
        "--out",
        str(tmp_path / "p"),
    )
    assert out.returncode == 0, out.stderr
    assert "warning" in out.stdout and phrase in " ".join(out.stdout.split())


# --- exact Gaussian accounting ---------------------------------------------------------------------


def exact_eps(mu: float, delta: float) -> float:
    """The exact eps of mu-GDP at delta, with 50-digit arithmetic (an independent computation)."""
    mpmath.mp.dps = 50
    mu, delta = mpmath.mpf(mu), mpmath.mpf(delta)

    def excess(eps):
        return mpmath.ncdf(mu / 2 - eps / mu) - mpmath.exp(eps) * mpmath.ncdf(-mu / 2 - eps / mu) - delta

    return float(mpmath.findroot(excess, (mpmath.mpf(0), mu * mu + 50), solver="bisect", tol=mpmath.mpf(10) ** -30))


def pld_eps(noise_multiplier: float, count: int, delta: float) -> float:
    accountant = pld.PLDAccountant(value_discretization_interval=1e-5)
    accountant.compose(dp_event.GaussianDpEvent(noise_multiplier), count)
    return accountant.get_epsilon(delta)


def test_the_gaussian_ledgers_of_a_run_are_exact(quickstart_private):
    for name in ("consumer:D_v", "D_s"):
        ledger = quickstart_private["privacy"][name]
        assert ledger["gaussian_accountant"] == "exact"
        [step] = ledger["steps"]
        mu = math.sqrt(step["count"]) * step["mu"]
        exact = exact_eps(mu, ledger["delta"])
        independent = pld_eps(1 / step["mu"], step["count"], ledger["delta"])
        assert ledger["eps"] >= exact, name  # never below the exact value
        assert ledger["eps"] - exact < 1e-6, name
        assert abs(ledger["eps"] - independent) < 1e-3, (name, ledger["eps"], independent)


@pytest.mark.parametrize("mu, delta", [(0.05, 1e-4), (0.44, 0.01), (1.0, 1e-5), (3.0, 1e-6), (10.0, 1e-3)])
def test_gaussian_eps_is_never_below_the_exact_value_and_within_1e_9(mu, delta):
    exact = exact_eps(mu, delta)
    assert exact <= gaussian_eps(mu=mu, delta=delta) <= exact * (1 + 2e-9) + 1e-12
    assert gaussian_delta(mu=mu, eps=gaussian_eps(mu=mu, delta=delta)) <= delta


def test_calibration_spends_the_target_exactly_and_never_more():
    for target, delta in ((0.9563, 0.01), (0.03, 1e-4), (1.0, 1e-5)):
        mu = calibrate_mu(target, delta)
        assert gaussian_eps(mu=mu, delta=delta) <= target
        assert gaussian_eps(mu=mu * (1 + 1e-9), delta=delta) > target * (1 - 1e-6)


def test_the_conservative_zcdp_accounting_stays_available(tmp_path):
    loaded = load_scenario(
        ROOT / "scenarios" / "quickstart-private.yaml",
        ["summarize.privacy.gaussian_accountant=zcdp", "summarize.rounds=5"],
    )
    report = run_scenario(loaded, tmp_path / "run", driver="inprocess")
    exact = load_scenario(ROOT / "scenarios" / "quickstart-private.yaml", ["summarize.rounds=5"])
    tight = run_scenario(exact, tmp_path / "tight", driver="inprocess")
    for name in ("consumer:D_v", "D_s"):
        # the same stated guarantee (each is calibrated to the schedule's total)...
        assert report["privacy"][name]["eps"] == pytest.approx(tight["privacy"][name]["eps"], rel=1e-6)
        # ...bought with more noise under zCDP
        assert report["privacy"][name]["steps"][0]["rho"] < tight["privacy"][name]["steps"][0]["rho"]


# --- every ledger states its neighbouring relation ------------------------------------------------


def ledgers(report):
    return {
        name: entry
        for name, entry in (report.get("privacy") or {}).items()
        if isinstance(entry, dict) and "eps" in entry
    }


@pytest.mark.parametrize(
    "scenario, relations",
    [
        (
            "quickstart-private.yaml",
            {
                "consumer:D_v": "replace-one",
                "D_s": "replace-one",
                "auction": "replace-one keeping the owner's number of distinct points",
            },
        ),
        ("sketch-quickstart.yaml", {"owner-1": "add/remove-one"}),
        ("stc-synthetic.yaml", {"owner-1": "add/remove-one"}),
    ],
)
def test_every_ledger_names_its_neighbouring_relation(scenario, relations, tmp_path):
    overrides = ["summarize.rounds=5"] if scenario.startswith("quickstart") else []
    report = run_scenario(load_scenario(ROOT / "scenarios" / scenario, overrides), tmp_path / "run", driver="inprocess")
    found = ledgers(report)
    assert found, scenario
    for name, entry in found.items():
        assert entry["neighbouring"]["relation"] in (
            "replace-one",
            "add/remove-one",
            "replace-one keeping the owner's number of distinct points",
        ), name
        assert entry["neighbouring"]["record"], name
    for name, relation in relations.items():
        assert found[name]["neighbouring"]["relation"] == relation


@pytest.mark.parametrize("rule", ["composed", "two_sided", "paper"])
def test_summarize_names_the_auctions_relation_exactly_and_never_plain_replace_one(rule, tmp_path):
    """The auction's theorem excludes a replacement that creates or removes a duplicate among the
    owner's points (an owner offers identical records once, so it runs out of points at another
    round: tests/protocols/summarize/test_auction_rounds_audit.py finds an unbounded loss). So the
    auction ledger names the narrower relation, everywhere the report states it; D_v's and D_s's
    releases hold for any replacement (their sensitivity bounds every one), so theirs is replace-one."""
    exact = "replace-one keeping the owner's number of distinct points"
    loaded = load_scenario(
        ROOT / "scenarios" / "quickstart-private.yaml",
        [f"summarize.privacy.auction={rule}", "summarize.rounds=3", "summarize.features=30"],
    )
    report = run_scenario(loaded, tmp_path / "run", driver="inprocess")
    relations = {name: entry["neighbouring"]["relation"] for name, entry in report["privacy"].items()}
    assert relations == {"consumer:D_v": "replace-one", "D_s": "replace-one", "auction": exact}
    assert report["party_details"]["curator"]["result"]["privacy"]["auction"]["neighbouring"]["relation"] == exact
    per_owner = [
        entry
        for group in report["privacy_per_owner"]["groups"]
        for obs in group["observers"]
        for entry in obs["ledgers"]
        if entry["ledger"] == "auction"
    ]
    assert per_owner and all(entry["neighbouring"]["relation"] == exact for entry in per_owner)


def test_the_table_shows_each_ledgers_relation(tmp_path):
    out = run_cli(
        "run",
        str(ROOT / "scenarios" / "quickstart-private.yaml"),
        "--driver",
        "inprocess",
        "--set",
        "summarize.rounds=5",
        "--out",
        str(tmp_path / "t"),
    )
    text = " ".join(re.sub("[│┃]", " ", out.stdout).split())  # the table wraps long cells
    assert out.returncode == 0, out.stderr
    for fragment in ("replace-one: a row of D_v", "replace-one: a point of D_s", "exact Gaussian"):
        assert fragment in text, fragment


def test_the_private_shift_scenario_beats_uniform_sampling_at_its_stated_budget(tmp_path):
    report = run_scenario(
        load_scenario(ROOT / "scenarios" / "private-shift.yaml", []), tmp_path / "run", driver="inprocess"
    )
    privacy = report["privacy"]
    assert privacy["consumer:D_v"]["eps"] <= 1.5 and privacy["D_s"]["eps"] <= 1.0 and privacy["auction"]["eps"] <= 2.0
    assert (
        privacy["consumer:D_v"]["delta"] <= 1e-5
        and privacy["D_s"]["delta"] <= 1e-5
        and privacy["auction"]["delta"] == 0
    )
    assert report["metrics"]["mmd2"] < 0.6 * report["metrics"]["baselines"]["uniform"]["mmd2"]
