"""Numeric protocol settings outside the range where the protocol's arithmetic holds are refused when
the scenario is validated, naming the key, the range and the value, instead of every owner dying
mid-run with an OverflowError (``sketch.epsilon=1e-300`` once lost 4 of 4 owners). The same parse
serves ``marketplace run``/``validate``, the request client and the server's sessions."""

from __future__ import annotations

import math
import sys

import pytest
import yaml
from conftest import ROOT, run_cli

from marketplace.market.spec import MarketError, parse_market
from marketplace.scenario import ScenarioError, load_scenario
from marketplace.scenario.load import parse_scenario

BASE = {
    "summarize": ROOT / "scenarios" / "quickstart.yaml",
    "sketch": ROOT / "scenarios" / "sketch-quickstart.yaml",
    "stc": ROOT / "scenarios" / "stc-synthetic.yaml",
    "pfds": ROOT / "scenarios" / "pfds-synthetic.yaml",
}
"""A data-free scenario of each protocol."""

EPSILON_KEYS = [
    ("sketch", "sketch.epsilon", [], (1e-6, 1e6)),
    ("summarize", "summarize.privacy.eps_validation", ["summarize.privacy.enabled=true"], (1e-6, 1e6)),
    ("summarize", "summarize.privacy.eps_first_round", ["summarize.privacy.enabled=true"], (1e-6, 1e6)),
    ("summarize", "summarize.privacy.eps_later_rounds", ["summarize.privacy.enabled=true"], (1e-6, 1e6)),
    ("summarize", "summarize.privacy.total_epsilon", ["summarize.privacy.enabled=true"], (1e-6, 1e6)),
    ("summarize", "summarize.privacy.eps_auction", ["summarize.privacy.enabled=true"], (0, 100)),
    ("stc", "stc.privacy.epsilon", [], (1e-6, 1e9)),
    ("stc", "stc.privacy.rho", ["stc.privacy.notion=zcdp"], (1e-12, 1e18)),
    ("pfds", "pfds.epsilon", [], (0.01, 1000)),
    ("sketch", "lifetime.budget.epsilon", [], (1e-6, 1e6)),
]
"""Every privacy parameter (eps, rho, and the lifetime budget's eps) of every protocol, with what its
scenario needs for it to apply."""

ABSURD = ["1e-300", "1e308", "nan", ".nan", "inf", "-inf", ".inf", "0", "-1"]


def refusal(protocol: str, sets: list[str]) -> str:
    with pytest.raises(ScenarioError) as err:
        load_scenario(BASE[protocol], sets)
    return str(err.value)


def test_sketch_epsilon_1e_300_is_refused_by_marketplace_run_before_anything_starts(tmp_path):
    done = run_cli("run", str(BASE["sketch"]), "--set", "sketch.epsilon=1e-300", "--out", str(tmp_path / "run"))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "sketch.epsilon: expected a number in [1e-06, 1e+06]" in done.stderr
    assert "got 1e-300" in done.stderr
    assert not (tmp_path / "run" / "report.json").exists()


@pytest.mark.parametrize("value", ["1e-300", "1e308", "nan", "inf"])
def test_marketplace_validate_refuses_an_absurd_sketch_epsilon_with_exit_2(value):
    done = run_cli("validate", str(BASE["sketch"]), "--set", f"sketch.epsilon={value}")
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"--set sketch.epsilon={value}: sketch.epsilon: expected a" in done.stderr
    assert "[1e-06, 1e+06]" in done.stderr


@pytest.mark.parametrize("value", ABSURD)
@pytest.mark.parametrize("protocol, key, needs, edges", EPSILON_KEYS, ids=[k for _, k, _, _ in EPSILON_KEYS])
def test_an_absurd_privacy_parameter_is_refused_naming_the_key_and_the_range(protocol, key, needs, edges, value):
    if key.endswith("eps_auction") and value in ("0", "1e-300"):
        pytest.skip("eps_auction may be 0 (a uniform auction): e^eps_auc stays 1")
    message = refusal(protocol, [*needs, f"{key}={value}"])
    assert f"{key}: expected a" in message and f"number in [{edges[0]:g}, {edges[1]:g}]" in message, message
    assert repr(value) in message or repr(float(yaml.safe_load(value) if value[0] == "." else value)) in message


@pytest.mark.parametrize("protocol, key, needs, edges", EPSILON_KEYS, ids=[k for _, k, _, _ in EPSILON_KEYS])
def test_the_edges_of_a_range_are_accepted_and_just_beyond_them_refused(protocol, key, needs, edges):
    for value in edges:
        load_scenario(BASE[protocol], [*needs, f"{key}={value!r}"])
    for value in (edges[0] * 0.999 if edges[0] else -1e-9, edges[1] * 1.001):
        assert key in refusal(protocol, [*needs, f"{key}={value!r}"])


@pytest.mark.parametrize(
    "protocol, assignment, key",
    [
        ("sketch", "sketch.delta=0", "sketch.delta"),
        ("sketch", "sketch.delta=-0.1", "sketch.delta"),
        ("sketch", "sketch.delta=1e-300", "sketch.delta"),
        ("sketch", "sketch.numerator_share=1e-300", "sketch.numerator_share"),
        ("sketch", "sketch.map.sigma=1e-300", "sketch.map.sigma"),
        ("sketch", "sketch.map.bandwidth=1e308", "sketch.map.bandwidth"),
        ("sketch", "sketch.queries.logistic_l2=1e-300", "sketch.queries.logistic_l2"),
        ("summarize", "summarize.rounds=2000000000", "summarize.rounds"),
        ("summarize", "summarize.gamma=1e308", "summarize.gamma"),
        ("summarize", "summarize.features=1000000000", "summarize.features"),
        ("summarize", "summarize.svm_c=1e-300", "summarize.svm_c"),
        ("summarize", "summarize.privacy.t_init=5000000000", "summarize.privacy.t_init"),
        ("summarize", "summarize.privacy.delta_summary=0", "summarize.privacy.delta_summary"),
        ("summarize", "summarize.privacy.delta_validation=-1e-3", "summarize.privacy.delta_validation"),
        ("stc", "stc.coreset=1e-300", "stc.coreset"),
        ("stc", "stc.kmeans_iterations=3000000000", "stc.kmeans_iterations"),
        ("stc", "stc.domain.high=[1e300]", "stc.domain.high[0]"),
        ("pfds", "pfds.regularization=1e-300", "pfds.regularization"),
        ("pfds", "pfds.max_leaves=100000000000000000000", "pfds.max_leaves"),
        ("sketch", "transport.heartbeat_timeout_s=1e308", "transport.heartbeat_timeout_s"),
    ],
)
def test_other_settings_outside_their_arithmetic_are_refused(protocol, assignment, key):
    message = refusal(protocol, [assignment])
    assert f"{key}: expected a number in " in message, message


def test_a_sketch_box_too_wide_to_measure_is_refused():
    message = refusal("sketch", ["sketch.lower=[-1e308, 0, 0, 0, 0]", "sketch.upper=[1e308, 1, 1, 1, 1]"])
    assert "sketch.upper - sketch.lower must be a finite number" in message and "attribute(s) [0]" in message


def test_a_race_sketch_longer_than_its_cap_is_refused():
    message = refusal("sketch", ["sketch.map.kind=race", "sketch.map.repetitions=100000", "sketch.map.buckets=1000"])
    assert "sketch.map.repetitions x sketch.map.buckets" in message and "100,000,000" in message


def test_a_zero_or_absurd_lifetime_budget_is_refused():
    assert "lifetime.budget.epsilon: expected a number in [1e-06, 1e+06]" in refusal(
        "sketch", ["lifetime.budget.epsilon=1e-300"]
    )
    assert "lifetime.owner_budgets.owner-1.epsilon: expected a number" in refusal(
        "sketch", ["lifetime.owner_budgets={owner-1: {epsilon: 1e300}}"]
    )
    assert "lifetime.budget.delta: expected a number in [0, 1)" in refusal("sketch", ["lifetime.budget.delta=-1"])


def test_the_python_api_refuses_as_the_command_line_does():
    raw = yaml.safe_load(BASE["stc"].read_text())
    raw["stc"]["privacy"]["epsilon"] = math.inf
    refused = r"stc\.privacy\.epsilon: expected a finite number in \[1e-06, 1e\+09\], got inf"
    with pytest.raises(ScenarioError, match=refused):
        parse_scenario(raw, source="api", base_dir=ROOT)


def test_the_server_refuses_a_session_with_an_absurd_epsilon():
    from marketplace.service.sessions import session_scenario

    market = load_scenario(ROOT / "scenarios" / "market-serve.yaml")
    request = {"name": "ask", "protocol": "sketch", "sketch": {**market.raw["sketch"], "epsilon": 1e-300}}
    with pytest.raises(ScenarioError, match=r"sketch\.epsilon: expected a number in \[1e-06, 1e\+06\].*got 1e-300"):
        session_scenario(market, yaml.safe_dump(request), session="s0001-00000000", consumer="alice")
    request["sketch"]["epsilon"] = 0.5
    accepted = session_scenario(market, yaml.safe_dump(request), session="s0001-00000001", consumer="alice")
    assert accepted.config.sketch.epsilon == 0.5


def test_the_request_client_refuses_an_absurd_epsilon_before_sending(tmp_path):
    """No marketplace listens at the endpoint: the refusal can only come from the client's own parse."""
    request = tmp_path / "request.yaml"
    request.write_text(BASE["sketch"].read_text())
    done = run_cli(
        "request",
        str(request),
        "--market",
        "tcp://127.0.0.1:9",
        "--keys",
        str(tmp_path / "no-keys"),
        "--out",
        str(tmp_path / "out"),
        "--set",
        "sketch.epsilon=1e-300",
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "bad scenario" in done.stderr and "sketch.epsilon: expected a number in [1e-06, 1e+06]" in done.stderr
    assert not (tmp_path / "out").exists()


def _market_files():
    """tests/market/market_files.py: the small sketch marketplace the market tests use."""
    if str(ROOT / "tests" / "market") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests" / "market"))
    import market_files

    return market_files


@pytest.mark.parametrize("budget", [1e-300, 1e300])
def test_a_market_refuses_a_lifetime_budget_outside_the_ledgers_range(budget):
    files = _market_files()
    with pytest.raises(MarketError, match=r"m\.yaml: market\.budget\.epsilon: .*>= 1e-06 and <= 1e\+06"):
        parse_market(files.market([files.sketch_request("a", 0.1)], budget=budget), source="m.yaml")


def test_a_market_refuses_a_request_with_an_absurd_epsilon_naming_the_request():
    files = _market_files()
    with pytest.raises(MarketError, match=r"requests\[0\]\.sketch\.epsilon: expected a number in \[1e-06, 1e\+06\]"):
        parse_market(files.market([files.sketch_request("a", 1e-300)]), source="m.yaml")


def test_a_delta_that_covers_the_whole_mwem_schedule_is_refused_for_the_gaussian_release():
    """At eps 1e-6 per iteration the optimal composition of the schedule is (0, 0.01)-DP: the Gaussian
    release could match it only as (0, delta)-DP, which no zCDP budget is (it crashed the run)."""
    sets = ["summarize.privacy.enabled=true", "summarize.privacy.eps_validation=1e-6"]
    message = refusal("summarize", [*sets, "summarize.privacy.theorem=optimal"])
    assert "summarize.privacy.delta_validation: expected a delta at which" in message and "got 0.01" in message
    load_scenario(
        BASE["summarize"], [*sets, "summarize.privacy.theorem=optimal", "summarize.privacy.delta_validation=1e-9"]
    )


def test_a_private_one_round_summary_with_the_gaussian_release_runs(tmp_path):
    from marketplace.runner.run import run_scenario

    scenario = load_scenario(
        BASE["summarize"],
        [
            "summarize.privacy.enabled=true",
            "summarize.rounds=1",
            "summarize.features=8",
            "parties.owners=2",
            "data.source.covariate_shift.rows_per_component=100",
            "data.consumer.validation_size=20",
            "data.consumer.test_size=20",
            "data.seed_set.size=5",
            "summarize.baselines=[]",
        ],
    )
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")
    assert report["status"] == "completed", report["failures"]


def test_fewer_candidates_than_points_to_label_is_refused():
    message = refusal("stc", ["stc.k=5", "stc.max_candidates=2"])
    assert "stc.max_candidates must be at least stc.k" in message and "max_candidates = 2 < k = 5" in message
