"""The private releases of a mean embedding compared at one guarantee: the Gaussian mechanism in
zCDP against MWEM's variants, and how a run accounts for each."""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np
import pytest

from marketplace import plugins
from marketplace.privacy.accountant import PrivacyLedger, calibrate_zcdp, zcdp_to_dp
from marketplace.privacy.gdp import calibrate_mu, gaussian_eps
from marketplace.privacy.neighbouring import replace_one
from marketplace.privacy.rng import make_rng
from marketplace.protocols.summarize.features import RandomFourierFeatures
from marketplace.protocols.summarize.gaussian_release import SUM_L2_SENSITIVITY, gaussian_mean_release, james_stein
from marketplace.protocols.summarize.private_curator import GAUSSIAN_MECHANISM, PrivateSchedule
from marketplace.scenario import parse_scenario
from scenarios import private_tiny_raw, run_raw

ROW = replace_one("a row")


def test_the_sum_of_h1_rows_moves_by_at_most_its_stated_l2_sensitivity():
    h1 = RandomFourierFeatures.draw(dim=3, n_features=40, gamma=2.0, seed=1)
    rng = np.random.default_rng(2)
    a, b = h1.transform(rng.normal(scale=5, size=(20_000, 3))), h1.transform(rng.normal(scale=5, size=(20_000, 3)))
    gaps = np.linalg.norm(a - b, axis=1)
    assert gaps.max() <= SUM_L2_SENSITIVITY
    # random far-apart pairs sit near sqrt(2) (two rows of norm ~1, nearly orthogonal); 2 sqrt(2) is the
    # worst case over all inputs (every cosine +1 in one row and -1 in the other), which DP must cover
    assert 1.2 < np.median(gaps) < 1.6


def test_with_a_huge_rho_the_gaussian_release_is_the_exact_mean():
    h1 = RandomFourierFeatures.draw(dim=2, n_features=30, gamma=0.5, seed=0)
    phi = h1.transform(np.random.default_rng(0).normal(size=(300, 2)))
    release = gaussian_mean_release(phi, rho=1e12, rng=make_rng(seed=1, secure=False))
    assert np.abs(release - phi.mean(axis=0)).max() < 1e-6


def test_the_gaussian_release_has_the_calibrated_noise_before_post_processing():
    # d = 2: James-Stein leaves the vector alone; a small mean keeps the box clip inactive
    phi = np.zeros((50, 2))
    rho = 0.5
    sigma_of_mean = SUM_L2_SENSITIVITY / math.sqrt(2 * rho) / 50
    generator = make_rng(seed=4, secure=False)
    draws = np.array([gaussian_mean_release(phi, rho=rho, rng=generator) for _ in range(4000)])
    inside = np.abs(draws) < 1.0 - 1e-12  # bound sqrt(2/2) = 1: the clip never bites at 0.057
    assert inside.all()
    sd = draws.std(axis=0, ddof=1)
    # the sample sd of 4000 normals is within 5% of sigma with probability > 0.998
    assert np.all(np.abs(sd / sigma_of_mean - 1) < 0.05), (sd, sigma_of_mean)


def test_james_stein_shrinks_pure_noise_to_zero_and_keeps_a_strong_signal():
    assert np.array_equal(james_stein(np.full(100, 0.1), sigma=1.0), np.zeros(100))
    strong = np.full(100, 10.0)
    assert np.allclose(james_stein(strong, sigma=0.1), strong * (1 - 98 * 0.01 / 10_000))
    assert np.array_equal(james_stein(np.array([3.0, 4.0]), sigma=10.0), np.array([3.0, 4.0]))


def test_the_gaussian_release_stays_in_the_box_of_h1_means_and_refuses_what_is_not_h1():
    phi = np.full((3, 8), 0.5)  # at the bound sqrt(2/8)
    release = gaussian_mean_release(phi, rho=1e-6, rng=make_rng(seed=0, secure=False))
    assert np.abs(release).max() <= 0.5
    with pytest.raises(ValueError, match="must lie in"):
        gaussian_mean_release(np.full((3, 8), 0.6), rho=1.0, rng=None)
    with pytest.raises(ValueError, match="finite"):
        gaussian_mean_release(np.full((3, 8), np.nan), rho=1.0, rng=None)
    with pytest.raises(ValueError, match="non-empty"):
        gaussian_mean_release(np.zeros((0, 8)), rho=1.0, rng=None)


def test_the_gaussian_release_records_its_rho_on_the_ledger():
    ledger = PrivacyLedger("D", neighbouring=ROW, theorem="advanced", delta=1e-5)
    gaussian_mean_release(np.zeros((4, 8)), rho=0.02, rng=make_rng(seed=0, secure=False), ledger=ledger)
    assert ledger.to_dict()["steps"] == [
        {"mechanism": "gaussian mean embedding", "rho": 0.02, "mu": pytest.approx(0.2), "count": 1}
    ]
    assert ledger.to_dict()["gaussian_accountant"] == "exact"
    assert ledger.total().eps == pytest.approx(gaussian_eps(mu=0.2, delta=1e-5))  # the exact conversion
    assert ledger.total().eps < zcdp_to_dp(0.02, 1e-5, method="cks")  # tighter than the zCDP one
    assert ledger.total(gaussian="zcdp").eps == pytest.approx(zcdp_to_dp(0.02, 1e-5, method="cks"))


@pytest.mark.parametrize("eps, delta", [(1.40, 0.01), (0.043, 1e-4), (5.0, 1e-6)])
def test_calibrate_zcdp_finds_the_largest_rho_within_the_target(eps, delta):
    rho = calibrate_zcdp(eps, delta)
    assert zcdp_to_dp(rho, delta, method="cks") <= eps
    assert zcdp_to_dp(rho * 1.001, delta, method="cks") > eps


# --- whole runs -------------------------------------------------------------------------------------


@pytest.fixture
def private_scenario():
    return private_tiny_raw()


def with_release(raw, release):
    raw = copy.deepcopy(raw)
    raw["summarize"]["privacy"]["release"] = release
    return raw


def test_every_release_ends_a_run_at_the_same_guarantee_per_protected_dataset(private_scenario, run_cache):
    reports = {
        r: run_cache.run(with_release(private_scenario, r)).report
        for r in ("mwem_paper", "mwem_call_average", "mwem_last", "gaussian")
    }
    reference = reports["mwem_paper"]["privacy"]
    for release, report in reports.items():
        assert report["status"] == "completed", release
        for dataset in ("consumer:D_v", "D_s"):
            assert report["privacy"][dataset]["eps"] == pytest.approx(reference[dataset]["eps"], rel=1e-6), (
                release,
                dataset,
            )
            assert report["privacy"][dataset]["delta"] == pytest.approx(reference[dataset]["delta"], rel=1e-6)
    steps = reports["gaussian"]["privacy"]["D_s"]["steps"]
    assert [s["mechanism"] for s in steps] == [GAUSSIAN_MECHANISM] and steps[0]["count"] == 7  # rounds 2..8


def test_the_gaussian_schedule_is_calibrated_from_the_mwem_totals(private_scenario, tmp_path):
    config = parse_scenario(with_release(private_scenario, "gaussian"), source="g", base_dir=tmp_path).config
    schedule = PrivateSchedule.resolve(config.summarize.privacy, features=40, rounds=8)
    total_v, total_s = schedule.mwem_totals(8)
    assert schedule.rho_validation == pytest.approx(calibrate_mu(total_v.eps, total_v.delta) ** 2 / 2)
    assert schedule.rho_per_round * 7 == pytest.approx(calibrate_mu(total_s.eps, total_s.delta) ** 2 / 2)
    conservative = PrivateSchedule.resolve(
        dataclasses.replace(config.summarize.privacy, gaussian_accountant="zcdp"), features=40, rounds=8
    )
    assert conservative.rho_validation == pytest.approx(calibrate_zcdp(total_v.eps, total_v.delta))
    assert conservative.rho_validation < schedule.rho_validation  # more noise for the same stated guarantee


def test_with_huge_eps_the_gaussian_run_selects_what_the_non_private_one_does(private_scenario, tmp_path):
    huge = with_release(private_scenario, "gaussian")
    huge["summarize"]["privacy"].update(
        eps_validation=1e4, eps_first_round=1e4, eps_later_rounds=1e4, eps_auction=50.0, tau=1000
    )
    private = run_raw(huge, tmp_path, "private")
    plain = copy.deepcopy(huge)
    plain["summarize"]["privacy"] = {"enabled": False}
    public = run_raw(plain, tmp_path, "public")
    assert private["selection"] == public["selection"]


def test_a_round_reopened_after_a_lying_winner_spends_nothing_beyond_the_plan(private_scenario, tmp_path):
    from test_roles import CheatingOwner

    from marketplace.parties import build_role, make_world, party_ids
    from marketplace.transport.inprocess import run_inprocess
    from marketplace.transport.node import Node

    private_scenario["summarize"]["privacy"].update(eps_auction=50.0, tau=1000)  # only rank 1 is ever asked
    config = parse_scenario(private_scenario, source="private", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    for i in range(1, 4):  # every owner lies: each reopened round finds an empty pool
        identity = roles[i].identity
        roles[i] = CheatingOwner(
            party_id=roles[i].party_id, scenario_name=config.name, data=roles[i].data, features=roles[0].features
        )
        roles[i].join(identity)
    run_inprocess([Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles])
    curator = roles[0]
    assert len(curator.flagged) == 3 and not curator.selection
    spent = sum(s["count"] for s in curator.account_ledgers["D_s"].to_dict()["steps"])
    assert spent == 0  # D_s never held a private row: no release was charged, however often round 1 reopened
