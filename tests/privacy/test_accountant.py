"""The privacy accountant: composition theorems, the per-dataset ledger and `privacy compose`."""

from __future__ import annotations

import argparse
import doctest
import itertools
import math

import numpy as np
import pytest

from marketplace.cli import privacy as privacy_cli
from marketplace.privacy import accountant
from marketplace.privacy.accountant import (
    BudgetExceeded,
    Guarantee,
    PrivacyLedger,
    Step,
    advanced,
    basic,
    calibrate,
    compose,
    optimal,
    zcdp_of_gaussian,
    zcdp_of_pure,
    zcdp_to_dp,
)
from marketplace.privacy.gdp import gaussian_eps
from marketplace.privacy.neighbouring import replace_one

ROW = replace_one("a row")


def summary_step_epsilon(p: int) -> float:
    """The paper's eps_{l>1} = 0.01 / sqrt(p T_sub) with T_sub = 5."""
    return 0.01 / math.sqrt(5 * p)


# --- the paper's figures


def test_advanced_composition_gives_the_papers_figure_for_the_validation_set():
    total = advanced(0.01, 1656, 0.01)

    assert f"{total.eps:.2f}" == "1.40"
    assert total.eps == pytest.approx(1.401434, abs=1e-6)
    assert total.delta == 0.01


@pytest.mark.parametrize("p", [1, 10, 200, 10_000])
def test_advanced_composition_gives_the_papers_figure_for_the_summary_for_any_p(p):
    # eps0 sqrt(2k ln(1/delta)) = 0.01 sqrt(2 ln 1e4) whatever p; the second term is ~1e-4 (1 + eps0/2).
    total = advanced(summary_step_epsilon(p), 5 * p, 1e-4)

    assert f"{total.eps:.3f}" == "0.043"
    assert total.eps == pytest.approx(0.01 * math.sqrt(2 * math.log(1e4)) + 1e-4, abs=3e-7)


def test_cli_prints_the_papers_figure_for_the_validation_set(capsys):
    code = privacy_cli.main(["privacy", "compose", "--epsilon", "0.01", "--count", "1656", "--delta", "0.01"])

    assert code == 0
    assert capsys.readouterr().out.strip() == (
        "epsilon = 1.40 (advanced composition of 1656 steps of 0.01, delta = 0.01)"
    )


def test_cli_prints_the_papers_figure_for_the_summary_from_an_expression(capsys):
    code = privacy_cli.main(
        [
            "privacy",
            "compose",
            "--epsilon",
            "0.01/sqrt(5*200)",
            "--count",
            "5*200",
            "--delta",
            "1e-4",
            "--theorem",
            "advanced",
        ]
    )

    assert code == 0
    assert capsys.readouterr().out.startswith("epsilon = 0.043")


def test_cli_run_takes_a_namespace_as_wired_into_the_main_parser(capsys):
    args = argparse.Namespace(
        privacy_command="compose",
        epsilon=summary_step_epsilon(200),
        count=1000,
        delta="1e-4",
        theorem="advanced",
        step_delta="0",
        json=True,
    )

    assert privacy_cli.run(args) == 0
    out = capsys.readouterr().out
    assert '"theorem": "advanced"' in out and '"epsilon": 0.0430' in out


def test_add_parser_adds_a_privacy_command_with_compose_and_calibrate():
    parser = argparse.ArgumentParser()
    privacy_cli.add_parser(parser.add_subparsers(dest="command"))

    args = parser.parse_args(
        ["privacy", "calibrate", "--total-epsilon", "1.4", "--count", "1656", "--delta", "0.01", "--theorem", "optimal"]
    )

    assert args.func is privacy_cli.run and args.privacy_command == "calibrate"


def test_cli_calibrate_prints_the_step_epsilon(capsys):
    code = privacy_cli.main(
        [
            "privacy",
            "calibrate",
            "--total-epsilon",
            "1.40",
            "--count",
            "1656",
            "--delta",
            "0.01",
            "--theorem",
            "optimal",
        ]
    )

    assert code == 0
    assert capsys.readouterr().out.startswith("step epsilon = 0.01685")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--epsilon", "-1", "--count", "3", "--delta", "0.1"], "--epsilon: expected a number > 0"),
        (["--epsilon", "0.1", "--count", "3.5", "--delta", "0.1"], "--count: expected a whole number >= 0"),
        (["--epsilon", "0.1", "--count", "-2", "--delta", "0.1"], "--count: expected a whole number >= 0"),
        (["--epsilon", "0.1", "--count", "3"], "--delta is required by the advanced theorem"),
        (["--epsilon", "0.1", "--count", "3", "--delta", "1.5"], "--delta: expected a number in (0, 1)"),
        (["--epsilon", "__import__('os')", "--count", "3", "--delta", "0.1"], "is not allowed"),
        (["--epsilon", "(0.1).real", "--count", "3", "--delta", "0.1"], "is not allowed"),
        (["--epsilon", "10**10**10", "--count", "3", "--delta", "0.1"], "overflows a float"),
        (["--epsilon", "1/0", "--count", "3", "--delta", "0.1"], "cannot read '1/0'"),
        (
            ["--epsilon", "0.1", "--count", "3", "--delta", "0.1", "--step-delta", "0.01", "--theorem", "zcdp"],
            "zCDP of pure steps only",
        ),
    ],
)
def test_cli_refuses_bad_input_with_exit_2_and_a_clear_message(capsys, argv, message):
    code = privacy_cli.main(["privacy", "compose", *argv])

    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err


def test_cli_without_a_privacy_command_exits_2(capsys):
    assert privacy_cli.main(["privacy"]) == 2
    assert "choose a command" in capsys.readouterr().err


# --- composition theorems


@pytest.mark.parametrize("theorem", accountant.THEOREMS)
def test_composition_of_zero_steps_is_zero(theorem):
    assert compose(0.5, 0, theorem=theorem, delta=1e-5) == Guarantee(0.0, 0.0)
    assert PrivacyLedger("owner-1", neighbouring=ROW, theorem=theorem, delta=1e-5).total() == (0.0, 0.0)


def test_basic_composition_adds_epsilons_and_composes_deltas_as_a_product():
    assert basic(0.25, 4, 1e-6) == pytest.approx((1.0, 1 - (1 - 1e-6) ** 4), rel=1e-12)
    assert basic(0.25, 4, 1e-6).delta <= 4e-6  # never looser than the union bound
    assert basic(0.1, 10, 0.5).delta == pytest.approx(1 - 0.5**10)  # where the union bound says 5


def test_optimal_matches_the_issue_example_and_beats_advanced():
    assert optimal(0.1, 100, 1e-6).eps == pytest.approx(4.775, abs=5e-4)
    assert advanced(0.1, 100, 1e-6).eps == pytest.approx(6.308, abs=5e-4)


@pytest.mark.parametrize("eps0", [1e-3, 0.01, 0.1, 1.0, 3.0])
@pytest.mark.parametrize("k", [1, 2, 10, 100, 1000])
@pytest.mark.parametrize("delta", [1e-2, 1e-6, 1e-10])
def test_optimal_is_never_looser_than_advanced_nor_basic(eps0, k, delta):
    eps = optimal(eps0, k, delta).eps

    assert eps <= advanced(eps0, k, delta).eps
    assert eps <= basic(eps0, k).eps


def test_optimal_with_zero_delta_is_basic():
    assert optimal(0.1, 50, 0.0).eps == pytest.approx(5.0)


def _brute_force_delta(eps: float, eps0: float, k: int) -> float:
    """max over events of P(E) - e^eps Q(E) for k-fold randomized response, over all 2^k outputs."""
    p = math.exp(eps0) / (1 + math.exp(eps0))
    total = 0.0
    for bits in itertools.product((0, 1), repeat=k):
        ones = sum(bits)
        prob_p = p**ones * (1 - p) ** (k - ones)
        prob_q = (1 - p) ** ones * p ** (k - ones)
        total += max(0.0, prob_p - math.exp(eps) * prob_q)
    return total


@pytest.mark.parametrize("eps0, k, delta", [(0.5, 6, 0.05), (0.2, 10, 1e-3), (1.0, 8, 1e-4), (0.05, 9, 0.03)])
def test_optimal_is_the_smallest_eps_by_brute_force(eps0, k, delta):
    eps = optimal(eps0, k, delta).eps

    assert _brute_force_delta(eps, eps0, k) <= delta * (1 + 1e-9)
    assert _brute_force_delta(eps * (1 - 1e-6), eps0, k) > delta


def test_optimal_is_zero_when_delta_covers_the_total_variation():
    assert _brute_force_delta(0.0, 0.05, 9) < 0.2
    assert optimal(0.05, 9, 0.2).eps == 0.0


@pytest.mark.parametrize("eps0, k", [(0.3, 7), (0.1, 20)])
def test_optimal_hits_the_kov_grid_points_exactly(eps0, k):
    # KOV Thm 3.3: (k - 2i) eps0 is reached with
    # delta_i = sum_{j<i} C(k,j)(e^{(k-j)eps0} - e^{(k-2i+j)eps0}) / (1+e^eps0)^k
    for i in range(1, k // 2):
        delta_i = (
            sum(math.comb(k, j) * (math.exp((k - j) * eps0) - math.exp((k - 2 * i + j) * eps0)) for j in range(i))
            / (1 + math.exp(eps0)) ** k
        )
        assert optimal(eps0, k, delta_i).eps == pytest.approx((k - 2 * i) * eps0, rel=1e-9)


@pytest.mark.parametrize(
    "eps0, k, delta",
    [
        (0.1, 100, 1e-6),
        (0.01, 1656, 0.01),
        (2**-10, 1000, 1e-4),
        (0.5, 20, 1e-5),
        (0.25, 300, 1e-8),
    ],
)
def test_optimal_agrees_with_dp_accounting(eps0, k, delta):
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    common = pytest.importorskip("dp_accounting.pld.common")
    # The grid must divide eps0 exactly: dp-accounting rounds losses up (pessimistically), and a
    # -eps0 that lands one bin high (ceil(-0.01 / 1e-5) == -999) adds ~k/2 bins to the answer.
    interval = eps0 / 1024
    assert math.ceil(eps0 / interval) == 1024 and math.ceil(-eps0 / interval) == -1024
    step = pld.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps0, 0), value_discretization_interval=interval
    )

    expected = step.self_compose(k).get_epsilon_for_delta(delta)

    assert optimal(eps0, k, delta).eps == pytest.approx(expected, abs=1e-3)


def test_optimal_is_stable_and_fast_for_a_hundred_thousand_steps():
    eps = optimal(0.001, 100_000, 1e-6).eps

    assert 0 < eps < advanced(0.001, 100_000, 1e-6).eps
    assert eps == pytest.approx(1.36755, abs=1e-4)


def test_optimal_with_approximate_steps_follows_kov():
    eps0, k, delta0, delta = 0.1, 50, 1e-6, 1e-4
    pure_target = 1 - (1 - delta) / (1 - delta0) ** k

    assert optimal(eps0, k, delta, delta0=delta0).eps == pytest.approx(optimal(eps0, k, pure_target).eps)
    assert optimal(eps0, k, k * delta0 + delta, delta0=delta0).eps <= advanced(eps0, k, delta, delta0=delta0).eps


def test_optimal_refuses_a_delta_below_what_the_steps_already_cost():
    with pytest.raises(ValueError, match="not more than 1 - \\(1 - delta0\\)\\^k"):
        optimal(0.1, 10, 5e-6, delta0=1e-6)


@pytest.mark.parametrize("theorem", accountant.THEOREMS)
@pytest.mark.parametrize("total, k, delta", [(1.40, 1656, 0.01), (0.043, 1000, 1e-4), (2.0, 3, 1e-5)])
def test_calibrate_inverts_the_composition(theorem, total, k, delta):
    eps0 = calibrate(total, k, delta, theorem)

    reached = compose(eps0, k, theorem=theorem, delta=delta).eps
    assert reached <= total
    assert reached == pytest.approx(total, rel=1e-9)


def test_calibrate_recovers_the_papers_step_epsilon():
    assert calibrate(advanced(0.01, 1656, 0.01).eps, 1656, 0.01, "advanced") == pytest.approx(0.01, rel=1e-9)


def test_optimal_allows_a_larger_step_epsilon_at_the_papers_budgets():
    assert calibrate(1.40, 1656, 0.01, "optimal") / calibrate(1.40, 1656, 0.01, "advanced") > 1.6
    assert calibrate(0.043, 1000, 1e-4, "optimal") / calibrate(0.043, 1000, 1e-4, "advanced") > 1.9


# --- zCDP


def test_zcdp_of_pure_and_gaussian():
    assert zcdp_of_pure(0.2) == pytest.approx(0.02)
    assert zcdp_of_gaussian(2.0, 4.0) == pytest.approx(0.125)


def test_zcdp_to_dp_bun_steinke_formula():
    assert zcdp_to_dp(0.5, 1e-5) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e5)))
    assert zcdp_to_dp(0.0, 1e-5) == 0.0


@pytest.mark.parametrize("rho, delta", [(0.5, 1e-5), (0.01, 1e-6), (1e-5, 1e-4), (5.0, 1e-8), (0.083, 0.01)])
def test_cks_conversion_is_tighter_and_agrees_with_dp_accounting(rho, delta):
    tight = zcdp_to_dp(rho, delta, method="cks")
    assert tight < zcdp_to_dp(rho, delta)
    rdp = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")
    orders = 1 + np.logspace(-3, 5, 4000)

    expected, _ = rdp.compute_epsilon(orders, orders * rho, delta)  # same bound, on a grid of orders

    assert expected - 1e-4 <= tight <= expected + 1e-12


def test_zcdp_composition_adds_rho():
    ledger = PrivacyLedger("owner-1", neighbouring=ROW, theorem="zcdp", delta=1e-6)
    ledger.spend(0.1, mechanism="laplace", count=10)
    ledger.spend_zcdp(zcdp_of_gaussian(1.0, 5.0), mechanism="gaussian", count=4)

    rho = 10 * 0.1**2 / 2 + 4 * 1 / 50
    assert ledger.total() == pytest.approx((zcdp_to_dp(rho, 1e-6, method="cks"), 1e-6))


# --- the ledger


def test_ledger_total_of_one_homogeneous_group_is_the_theorem():
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, theorem="advanced", delta=0.01)
    ledger.spend(0.01, mechanism="mwem", count=1000)
    ledger.spend(0.01, mechanism="mwem", count=656)

    assert ledger.total() == advanced(0.01, 1656, 0.01)
    assert ledger.total(theorem="optimal") == optimal(0.01, 1656, 0.01)
    assert ledger.total(theorem="basic") == pytest.approx((16.56, 0.0))


def test_ledger_adds_heterogeneous_groups_by_basic_composition_with_a_shared_slack():
    ledger = PrivacyLedger("owner-1", neighbouring=ROW, theorem="advanced", delta=1e-4)
    ledger.spend(0.05, mechanism="mwem round 1", count=1656)
    ledger.spend(summary_step_epsilon(200), mechanism="mwem", count=1000)
    ledger.spend(0.1, mechanism="auction", count=1)  # basic is smaller for a single step

    expected = advanced(0.05, 1656, 1e-4 / 3).eps + advanced(summary_step_epsilon(200), 1000, 1e-4 / 3).eps + 0.1
    assert ledger.total() == pytest.approx((expected, 2e-4 / 3))


def test_ledger_refuses_an_overspend_naming_dataset_budget_and_plan():
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, budget=(1.41, 0.01), theorem="advanced")
    ledger.spend(0.01, mechanism="mwem", count=1656)

    with pytest.raises(BudgetExceeded) as refused:
        ledger.spend(0.01, mechanism="mwem", count=100)

    message = str(refused.value)
    assert "consumer:D_v" in message
    assert "budget (eps=1.41, delta=0.01)" in message
    assert f"planned total (eps={advanced(0.01, 1756, 0.01).eps:.6g}, delta=0.01)" in message
    assert "100 x mwem (eps=0.01)" in message
    assert ledger.total() == advanced(0.01, 1656, 0.01)  # nothing recorded


def test_check_plan_refuses_a_run_before_it_starts_and_records_nothing():
    ledger = PrivacyLedger("owner-2", neighbouring=ROW, budget=(0.043, 1e-4), theorem="advanced")
    plan = [Step(mechanism="mwem", eps=0.01 / math.sqrt(1000), count=1000)]

    with pytest.raises(BudgetExceeded, match="owner-2: refused"):
        ledger.check_plan(plan)  # 0.04302 > 0.043: the paper's figure is rounded

    assert ledger.steps == ()
    assert ledger.check_plan([Step(mechanism="mwem", eps=calibrate(0.043, 1000, 1e-4), count=1000)]).eps <= 0.043


def test_ledger_slack_defaults_to_the_budget_delta_left_by_approximate_steps():
    ledger = PrivacyLedger("owner-3", neighbouring=ROW, budget=(10.0, 1e-5), theorem="advanced")
    ledger.spend(0.1, 1e-7, mechanism="gaussian", count=50)

    assert ledger.total() == pytest.approx(advanced(0.1, 50, 1e-5 - 50e-7, delta0=1e-7))
    assert ledger.total().delta == pytest.approx(1e-5)


def test_ledger_refuses_a_spend_over_the_delta_budget():
    ledger = PrivacyLedger("owner-4", neighbouring=ROW, budget=(10.0, 1e-6), theorem="basic")

    with pytest.raises(BudgetExceeded, match="delta=1e-06"):
        ledger.spend(0.1, 1e-7, mechanism="gaussian", count=11)


def test_ledger_to_dict_is_a_plain_report():
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, theorem="advanced", delta=0.01)
    ledger.spend(0.01, mechanism="mwem", count=1000)
    for _ in range(656):
        ledger.spend(0.01, mechanism="mwem")

    assert ledger.to_dict() == {
        "dataset": "consumer:D_v",
        "eps": pytest.approx(1.401434, abs=1e-6),
        "delta": 0.01,
        "accountant": accountant.ADVANCED,
        "configured_theorem": "advanced",
        "slack_delta": 0.01,
        "budget": None,
        "neighbouring": {"relation": "replace-one", "record": "a row"},
        "steps": [{"mechanism": "mwem", "eps": 0.01, "delta": 0.0, "count": 1656}],
    }


# --- the accountant a ledger names


def test_a_ledger_of_gaussian_steps_names_the_exact_gaussian_accountant_and_no_theorem():
    ledger = PrivacyLedger("D_s", neighbouring=ROW, theorem="advanced", delta=1e-4)
    ledger.spend_gaussian(0.01, mechanism="gaussian mean embedding", count=39)

    entry = ledger.to_dict()
    assert entry["accountant"] == accountant.EXACT_GAUSSIAN
    assert entry["configured_theorem"] is None  # 'advanced' composed nothing here
    assert entry["eps"] == pytest.approx(gaussian_eps(mu=math.sqrt(2 * 0.39), delta=1e-4))


def test_a_gaussian_ledger_accounted_as_zcdp_names_the_conversion():
    ledger = PrivacyLedger("D_s", neighbouring=ROW, theorem="advanced", delta=1e-4, gaussian="zcdp")
    ledger.spend_gaussian(0.01, mechanism="gaussian mean embedding", count=39)

    assert ledger.accountant() == accountant.ZCDP
    assert ledger.total() == pytest.approx((zcdp_to_dp(0.39, 1e-4, method="cks"), 1e-4))


@pytest.mark.parametrize(
    "theorem, label",
    [
        ("advanced", accountant.ADVANCED),
        ("optimal", accountant.OPTIMAL),
        ("zcdp", accountant.ZCDP),
        ("basic", accountant.BASIC),
    ],
)
def test_many_small_pure_steps_name_the_configured_theorem(theorem, label):
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, theorem=theorem, delta=0.01)
    ledger.spend(0.01, mechanism="h2.select", count=1656)
    ledger.spend(0.01, mechanism="h2.measure", count=1656)

    assert ledger.accountant() == label
    assert ledger.to_dict()["configured_theorem"] == theorem


@pytest.mark.parametrize("theorem", ["advanced", "zcdp"])
def test_a_single_step_is_basic_under_the_bounds_that_cost_more_for_one_step(theorem):
    ledger = PrivacyLedger("owner-1", neighbouring=ROW, theorem=theorem, delta=1e-6)
    ledger.spend(0.5, mechanism="laplace")

    assert ledger.accountant() == accountant.BASIC  # the theorem's bound is larger for one step
    assert ledger.total() == (0.5, 0.0)


def test_optimal_composition_of_a_single_step_trades_delta_for_eps_and_says_so():
    ledger = PrivacyLedger("owner-1", neighbouring=ROW, theorem="optimal", delta=1e-6)
    ledger.spend(0.5, mechanism="laplace")

    assert ledger.accountant() == accountant.OPTIMAL
    assert ledger.total() == optimal(0.5, 1, 1e-6) and ledger.total().eps < 0.5


def test_a_mixed_ledger_names_each_part_with_its_steps():
    ledger = PrivacyLedger("owner-1", neighbouring=ROW, theorem="advanced", delta=1e-4)
    ledger.spend(summary_step_epsilon(200), mechanism="mwem", count=1000)
    ledger.spend(0.1, mechanism="auction", count=1)
    ledger.spend_zcdp(0.05, mechanism="zcdp release")

    text = ledger.accountant()
    assert text == (
        f"{accountant.ADVANCED} for 1000 x mwem; {accountant.BASIC} for 1 x auction; "
        f"{accountant.ZCDP} for 1 x zcdp release; the parts added by basic composition"
    )
    share = 1e-4 / 3
    expected = advanced(summary_step_epsilon(200), 1000, share).eps + 0.1 + zcdp_to_dp(0.05, share, method="cks")
    assert ledger.total() == pytest.approx((expected, 2 * share))  # what the words say is what was computed


def test_a_gaussian_next_to_pure_steps_names_the_route_that_won():
    ledger = PrivacyLedger("D", neighbouring=ROW, theorem="basic", delta=1e-5)
    ledger.spend_gaussian(2.0, mechanism="gaussian")
    ledger.spend(0.1, mechanism="laplace")

    # exact: the Gaussian at half the slack plus the Laplace step; or both as zCDP at half the slack
    exact = 0.1 + gaussian_eps(mu=2.0, delta=5e-6)
    assert exact < 0.1 + zcdp_to_dp(2.0, 5e-6, method="cks")
    assert ledger.total() == pytest.approx((exact, 5e-6))
    assert ledger.accountant() == (
        f"{accountant.BASIC} for 1 x laplace; {accountant.EXACT_GAUSSIAN} for 1 x gaussian; "
        "the parts added by basic composition"
    )

    mixed = PrivacyLedger("D", neighbouring=ROW, theorem="advanced", delta=0.01)
    mixed.spend_gaussian(0.1, mechanism="gaussian")
    mixed.spend(0.01, mechanism="mwem", count=200)
    mixed.spend(0.1, mechanism="auction")
    # the exact route would state a larger delta (3/4 of the slack against 2/3), so the Gaussian is
    # treated as zCDP with a third of the slack, as are the other parts
    zcdp_route = advanced(0.01, 200, 0.01 / 3).eps + 0.1 + zcdp_to_dp(0.1, 0.01 / 3, method="cks")
    assert mixed.total() == pytest.approx((zcdp_route, 0.02 / 3))
    assert mixed.accountant() == (
        f"{accountant.ADVANCED} for 200 x mwem; {accountant.BASIC} for 1 x auction; "
        f"{accountant.ZCDP} for 1 x gaussian; the parts added by basic composition"
    )


def test_an_empty_ledger_says_nothing_was_spent():
    assert PrivacyLedger("auction", neighbouring=ROW, theorem="basic").accountant() == accountant.NOTHING_SPENT


def test_a_refusal_names_the_accountant():
    ledger = PrivacyLedger("D_s", neighbouring=ROW, budget=(0.5, 1e-5), theorem="advanced")
    with pytest.raises(BudgetExceeded) as refused:
        ledger.spend_gaussian(1.0, mechanism="gaussian mean embedding")
    assert f"by {accountant.EXACT_GAUSSIAN} after adding" in str(refused.value)
    assert refused.value.accountant == accountant.EXACT_GAUSSIAN


# --- parameter checks


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: advanced(0.0, 10, 1e-5),
            ValueError,
            "The 'eps0' parameter of advanced must be a finite number > 0. Got 0.0 instead.",
        ),
        (lambda: advanced(math.inf, 10, 1e-5), ValueError, "'eps0' parameter of advanced must be a finite number > 0"),
        (
            lambda: advanced("0.1", 10, 1e-5),
            TypeError,
            "'eps0' parameter of advanced must be a real number. Got '0.1' (str)",
        ),
        (lambda: advanced(0.1, 10, 0.0), ValueError, "'delta' parameter of advanced must be in (0, 1). Got 0.0"),
        (lambda: basic(0.1, 10, 1.0), ValueError, "'delta0' parameter of basic must be in [0, 1). Got 1.0"),
        (lambda: basic(0.1, -1), ValueError, "'k' parameter of basic must be an integer >= 0. Got -1"),
        (lambda: basic(0.1, 2.0), TypeError, "'k' parameter of basic must be an integer. Got 2.0 (float)"),
        (lambda: basic(0.1, True), TypeError, "'k' parameter of basic must be an integer"),
        (lambda: optimal(0.1, 10, -1e-3), ValueError, "'delta' parameter of optimal must be in [0, 1)"),
        (lambda: optimal(0.1, 10**8, 1e-3), ValueError, "'k' parameter of optimal must be at most 10000000"),
        (
            lambda: compose(0.1, 10, theorem="rdp", delta=1e-3),
            ValueError,
            "'theorem' parameter of compose must be one of ['basic', 'advanced', 'optimal', 'zcdp']. Got 'rdp'",
        ),
        (
            lambda: compose(0.1, 10, theorem="advanced"),
            ValueError,
            "'delta' parameter of compose (theorem 'advanced') must be given",
        ),
        (lambda: calibrate(1.0, 0, 1e-3), ValueError, "'k' parameter of calibrate must be an integer >= 1"),
        (
            lambda: calibrate(-1.0, 5, 1e-3),
            ValueError,
            "'total_eps' parameter of calibrate must be a finite number > 0",
        ),
        (lambda: zcdp_to_dp(-0.1, 1e-5), ValueError, "'rho' parameter of zcdp_to_dp must be a finite number >= 0"),
        (lambda: zcdp_to_dp(0.1, 1e-5, method="rdp"), ValueError, "'method' parameter of zcdp_to_dp must be one of"),
        (
            lambda: zcdp_of_gaussian(1.0, 0.0),
            ValueError,
            "'sigma' parameter of zcdp_of_gaussian must be a finite number > 0",
        ),
        (
            lambda: PrivacyLedger("", neighbouring=ROW, delta=1e-5),
            ValueError,
            "'dataset' parameter of PrivacyLedger must be a non-empty string",
        ),
        (
            lambda: PrivacyLedger("owner-1", neighbouring=ROW),
            ValueError,
            "theorem 'advanced' needs the composition slack 'delta' or a budget",
        ),
        (
            lambda: PrivacyLedger("owner-1", neighbouring=ROW, budget=1.0),
            TypeError,
            "'budget' parameter of PrivacyLedger must be a pair (eps, delta)",
        ),
        (
            lambda: PrivacyLedger("owner-1", neighbouring=ROW, budget=(1.0, 2.0)),
            ValueError,
            "'budget[1] (delta)' parameter of PrivacyLedger must be in [0, 1)",
        ),
        (
            lambda: PrivacyLedger("o", neighbouring=ROW, delta=1e-5).spend(0.1, mechanism=""),
            ValueError,
            "'mechanism' parameter of Step must be a non-empty string",
        ),
        (
            lambda: PrivacyLedger("o", neighbouring=ROW, delta=1e-5).spend(0.1, mechanism="m", count=-1),
            ValueError,
            "'count' parameter of Step must be an integer >= 0",
        ),
        (
            lambda: PrivacyLedger("o", neighbouring=ROW, delta=1e-5).spend(-0.1, mechanism="m"),
            ValueError,
            "'eps' parameter of Step must be a finite number > 0",
        ),
        (
            lambda: PrivacyLedger("o", neighbouring=ROW, delta=1e-5).check_plan([(0.1, 0)]),
            TypeError,
            "'steps' parameter of check_plan must be an iterable of Step",
        ),
        (
            lambda: Step(mechanism="m", eps=0.1, rho=0.1),
            ValueError,
            "give exactly one of eps (pure or approximate DP) and rho (zCDP)",
        ),
    ],
)
def test_bad_parameters_raise_precise_errors(call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)


def test_spend_is_keyword_only_after_delta():
    with pytest.raises(TypeError):
        PrivacyLedger("o", neighbouring=ROW, delta=1e-5).spend(0.1, 0.0, "mwem")


def test_docstring_examples_hold():
    from marketplace.privacy import composition, ledger

    attempted = 0
    for module in (accountant, composition, ledger):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, module.__name__
        attempted += result.attempted
    assert attempted > 10


def test_advanced_composition_of_huge_steps_is_infinite_not_an_error():
    from marketplace.privacy.accountant import advanced

    assert advanced(1e6, 3, 1e-5).eps == float("inf")
