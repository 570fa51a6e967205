"""The `stc` protocol over the marketplace: one private release per owner, the consumer's own
choice of T_k, the report's true-source scoring, and what the curator refuses."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import run_cli

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, ProtocolError
from marketplace.parties import build_role, make_world, party_ids
from marketplace.privacy.gdp import gaussian_eps
from marketplace.protocols.stc import selection_cost
from marketplace.protocols.stc.messages import StcRelease, StcTarget
from marketplace.scenario import ScenarioError, parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node
from scenarios import run_raw, stc_raw, write_scenario


@pytest.fixture
def stc_scenario() -> dict:
    return stc_raw()


def scaled_world(raw, tmp_path):
    from marketplace.protocols.stc.exchange import scaling_of

    config = parse_scenario(raw, source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    scaling = scaling_of(config, world.dim)
    T = scaling.apply(world.validation.X, clip=True)
    S = scaling.apply(np.concatenate([o.X for o in world.owners]), clip=True)
    return config, world, T, S


def test_a_run_chooses_k_target_points_and_scores_them_with_the_true_sources(stc_scenario, tmp_path, run_cache):
    report = run_cache.run(stc_scenario).report
    assert report["status"] == "completed", report["failures"]
    choice = report["choice"]
    assert len(choice) == len(set(choice)) == 6
    _, _, T, S = scaled_world(stc_scenario, tmp_path)
    assert report["metrics"]["cost"] == pytest.approx(selection_cost(T, S, np.array(choice)), rel=1e-12)
    refs = report["metrics"]["baselines"]
    assert refs["nonprivate_stc"]["cost"] <= refs["cluster_t"]["cost"]  # knowing S can only help the exact objective


def test_each_owner_records_exactly_one_release_of_its_budget(stc_scenario, run_cache):
    report = run_cache.run(stc_scenario).report
    for owner in ("owner-1", "owner-2"):
        ledger = report["privacy"][owner]
        assert ledger["eps"] == pytest.approx(3.0)
        assert ledger["steps"] == [{"mechanism": "stc.nna", "eps": 3.0, "delta": 0.0, "count": 1}]
    assert report["messages"]["by_kind"]["stc_release"]["count"] == 2
    assert report["messages"]["by_kind"]["stc_request"]["count"] == 2


def test_zcdp_releases_are_recorded_as_rho(stc_scenario, tmp_path):
    stc_scenario["stc"]["privacy"] = {"notion": "zcdp", "rho": 0.5}
    stc_scenario["stc"]["release"] = "nas"
    stc_scenario["stc"]["t"] = 20
    report = run_raw(stc_scenario, tmp_path)
    assert report["status"] == "completed"
    ledger = report["privacy"]["owner-1"]
    assert ledger["steps"] == [{"mechanism": "stc.nas", "rho": 0.5, "mu": 1.0, "count": 1}]
    assert ledger["gaussian_accountant"] == "exact" and ledger["delta"] == 1e-6
    assert ledger["eps"] == pytest.approx(gaussian_eps(mu=1.0, delta=1e-6))  # a Gaussian: its exact (eps, delta)
    assert ledger["neighbouring"]["relation"] == "add/remove-one"


def test_no_source_row_travels_in_any_message(stc_scenario, tmp_path):
    config, world, _, S = scaled_world(stc_scenario, tmp_path)
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    nodes = [Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles]
    frames = []
    for node in nodes:
        original = node.receive

        def receive(frame, peer, decoded=None, original=original):
            frames.append(bytes(frame))
            return original(frame, peer, decoded)

        node.receive = receive
    run_inprocess(nodes)
    wire = b"".join(frames)
    raw_rows = np.concatenate([o.X for o in world.owners])
    assert all(np.ascontiguousarray(r, dtype="<f8").tobytes() not in wire for r in raw_rows)
    assert all(np.ascontiguousarray(r, dtype="<f8").tobytes() not in wire for r in S)


def test_with_a_huge_budget_the_private_choice_is_as_good_as_the_non_private_one(stc_scenario, tmp_path):
    stc_scenario["stc"]["privacy"] = {"epsilon": 1e7}
    stc_scenario["stc"]["release"] = "nna"
    report = run_raw(stc_scenario, tmp_path)
    nonprivate = report["metrics"]["baselines"]["nonprivate_stc"]["cost"]
    # NNA at huge eps keeps each cell's mean, not S itself: close to, not equal to, knowing S
    assert report["metrics"]["cost"] <= 1.25 * nonprivate
    assert report["metrics"]["cost"] < report["metrics"]["baselines"]["cluster_t"]["cost"]


@pytest.mark.slow
def test_processes_and_in_process_give_the_same_report(stc_scenario, tmp_path, run_cache):
    a = run_cache.run(stc_scenario).report
    b = run_raw(stc_scenario, tmp_path, "b", driver="processes")
    assert b["status"] == "completed", b["failures"]
    for key in ("choice", "metrics", "privacy", "parsimony"):
        assert a[key] == b[key], key
    assert a["messages"]["by_kind"] == b["messages"]["by_kind"]


# --- refusals ---------------------------------------------------------------------------------------


def test_a_scenario_without_a_public_box_is_refused(stc_scenario, tmp_path):
    del stc_scenario["stc"]["domain"]
    with pytest.raises(ScenarioError, match="stc.domain"):
        parse_scenario(stc_scenario, source="t", base_dir=tmp_path)


def test_nas_with_t_above_an_owners_rows_is_refused_before_start_naming_the_owner(stc_scenario, tmp_path):
    stc_scenario["stc"]["release"] = "nas"
    stc_scenario["stc"]["t"] = 100_000
    with pytest.raises(ScenarioError, match=r"stc.t: .*owner-1 \(\d+\)") as err:
        run_raw(stc_scenario, tmp_path)
    assert not (tmp_path / "run" / "report.json").exists(), err.value


def test_a_budget_below_one_release_is_refused_before_start_from_the_cli(stc_scenario, tmp_path):
    stc_scenario["stc"]["privacy"] = {"epsilon": 3.0, "budget": 1.0}
    path = write_scenario(tmp_path, stc_scenario, "s.yaml")
    result = run_cli("run", str(path), "--driver", "inprocess", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "stc.privacy.budget" in result.stderr and not (tmp_path / "out").exists()


def test_a_box_of_the_wrong_width_is_named(stc_scenario, tmp_path):
    stc_scenario["stc"]["domain"] = {"low": [0.0, 0.0, 0.0], "high": [1.0, 1.0, 1.0]}
    with pytest.raises(ScenarioError, match=r"stc.domain: low and high must have 1 or 2 values"):
        run_raw(stc_scenario, tmp_path)


def envelope(body, sender, receiver="curator", msg_id=1):
    return Envelope(PROTOCOL_VERSION, "t", msg_id, sender, receiver, type(body).KIND, None, body)


def started_curator(stc_scenario, tmp_path):
    config = parse_scenario(stc_scenario, source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    curator = build_role(config, "curator", world=world, exchange=plugins.exchange(config.protocol))
    for party in party_ids(config)[1:]:
        role = build_role(config, party, world=world, exchange=plugins.exchange(config.protocol))
        for send in role.start():
            curator.handle(envelope(send.body, party))
    return curator


def test_the_curator_refuses_a_release_that_is_not_the_scenarios(stc_scenario, tmp_path):
    curator = started_curator(stc_scenario, tmp_path)
    assert curator.phase == "collecting"
    with pytest.raises(ProtocolError, match="expected a nna release under dp costing 3"):
        curator.handle(envelope(StcRelease(centers=np.zeros((2, 2)), method="nas", notion="dp", cost=3.0), "owner-1"))
    with pytest.raises(ProtocolError, match="expected a nna release under dp costing 3"):
        curator.handle(envelope(StcRelease(centers=np.zeros((2, 2)), method="nna", notion="dp", cost=0.5), "owner-1"))
    with pytest.raises(ProtocolError, match=r"centers must be a \(c, 2\) array"):
        curator.handle(envelope(StcRelease(centers=np.zeros((2, 3)), method="nna", notion="dp", cost=3.0), "owner-1"))
    curator.handle(envelope(StcRelease(centers=np.zeros((2, 2)), method="nna", notion="dp", cost=3.0), "owner-1"))
    with pytest.raises(ProtocolError, match="no release is expected"):
        curator.handle(
            envelope(StcRelease(centers=np.zeros((2, 2)), method="nna", notion="dp", cost=3.0), "owner-1", msg_id=2)
        )
    with pytest.raises(ProtocolError, match="only the consumer sends T"):
        curator.handle(envelope(StcTarget(points=np.zeros((3, 2))), "owner-2"))


def test_an_owner_lost_before_releasing_is_a_dropout_and_the_consumer_gets_the_others(stc_scenario, tmp_path):
    curator = started_curator(stc_scenario, tmp_path)
    curator.handle(envelope(StcRelease(centers=np.full((3, 2), 0.1), method="nna", notion="dp", cost=3.0), "owner-1"))
    sends = curator.peer_lost("owner-2")
    forwarded = [s for s in sends if s.to == "consumer" and type(s.body).KIND == "stc_releases"]
    assert len(forwarded) == 1 and forwarded[0].body.owners == ("owner-1",) and forwarded[0].body.counts.tolist() == [3]
    assert curator.result()["dropouts"] == {"owner-2": {"round": 0, "phase": "collecting", "reason": "lost"}}
    assert curator.end_reason == "1 of 2 owners released"


def test_an_owner_releases_once(stc_scenario, tmp_path):
    from marketplace.protocols.stc.messages import StcRequest

    config = parse_scenario(stc_scenario, source="t", base_dir=tmp_path).config
    owner = build_role(
        config,
        "owner-1",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    request = StcRequest(points=np.full((4, 2), 0.5))
    first = owner.handle(envelope(request, "curator", "owner-1"))
    assert type(first[0].body).KIND == "stc_release"
    with pytest.raises(ProtocolError, match="already released"):
        owner.handle(envelope(request, "curator", "owner-1", msg_id=2))
    with pytest.raises(ProtocolError, match=r"expected a non-empty \(m, 2\) array"):
        build_role(
            config,
            "owner-2",
            world=make_world(config, plugins.exchange(config.protocol)),
            exchange=plugins.exchange(config.protocol),
        ).handle(envelope(StcRequest(points=np.zeros((4, 3))), "curator", "owner-2"))


def test_the_coreset_sends_fewer_points_and_still_chooses_from_all_of_t(stc_scenario, tmp_path):
    stc_scenario["stc"]["coreset"] = 0.05
    report = run_raw(stc_scenario, tmp_path)
    consumer = report["party_details"]["consumer"]["result"]
    assert consumer["sent_points"] < consumer["target_size"] == 280
    assert report["messages"]["by_kind"]["stc_target"]["bytes"] < 280 * 16
    assert max(report["choice"]) < 280 and len(report["choice"]) == 6


def test_the_shipped_synthetic_scenario_beats_ignoring_the_source(run_cache):
    from conftest import ROOT

    from marketplace.scenario import load_scenario

    report = run_cache.run_scenario(load_scenario(ROOT / "scenarios" / "stc-synthetic.yaml")).report
    assert report["status"] == "completed"
    assert report["metrics"]["cost"] < report["metrics"]["baselines"]["cluster_t"]["cost"]


def sweep_k(raw: dict, tmp_path) -> list[dict]:
    """Run a sweep of stc.k over 2 and 4 from the CLI; the rows of its runs.csv."""
    import csv

    raw = copy.deepcopy(raw)
    raw["sweep"] = {"vary": {"stc.k": [2, 4]}, "repeats": 1}
    path = write_scenario(tmp_path, raw, "s.yaml")
    result = run_cli("run", str(path), "--driver", "inprocess", "--quiet", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    return list(csv.DictReader(open(tmp_path / "out" / "runs.csv")))


def test_an_stc_sweep_writes_its_columns(stc_scenario, tmp_path):
    rows = sweep_k(stc_scenario, tmp_path)
    assert [r["stc.k"] for r in rows] == ["2", "4"] and all(float(r["cost"]) > 0 for r in rows)
    assert (tmp_path / "out" / "sweep.png").exists()


def test_an_owner_whose_release_cannot_be_read_is_excluded_not_waited_for(stc_scenario, tmp_path):
    curator = started_curator(stc_scenario, tmp_path)
    assert curator.frame_refused("owner-1", "stc_release") == []  # owner-2 is still awaited
    sends = curator.handle(
        envelope(StcRelease(centers=np.full((2, 2), 0.2), method="nna", notion="dp", cost=3.0), "owner-2")
    )
    forwarded = [s for s in sends if type(s.body).KIND == "stc_releases"]
    assert forwarded and forwarded[0].body.owners == ("owner-2",)
    assert curator.result()["dropouts"]["owner-1"]["reason"] == "sent a release that could not be read"
    assert curator.frame_refused("consumer", None) == []  # nothing awaited from the consumer now


# --- the PrivateKmeans baseline ---------------------------------------------------------------------


ALL_BASELINES = ["cluster_t", "nonprivate_stc", "private_kmeans"]


@pytest.mark.parametrize("privacy", [{"notion": "dp", "epsilon": 3.0}, {"notion": "zcdp", "rho": 0.5}])
def test_private_kmeans_is_reported_when_asked_and_scored_with_the_true_sources(stc_scenario, tmp_path, privacy):
    from marketplace import seeds
    from marketplace.protocols.stc import solve_stc
    from marketplace.protocols.stc.private_kmeans import private_kmeans

    stc_scenario["stc"]["baselines"] = ALL_BASELINES
    stc_scenario["stc"]["privacy"] = privacy
    stc_scenario["stc"]["kmeans_iterations"] = 3
    stc_scenario["stc"]["kmeans_clusters"] = None  # k clusters (the default is the paper's 100)
    report = run_raw(stc_scenario, tmp_path)
    assert report["status"] == "completed", report["failures"]
    refs = report["metrics"]["baselines"]
    assert set(refs) == {"source_only", "cluster_t", "nonprivate_stc", "private_kmeans"}
    cost = refs["private_kmeans"]["cost"]
    # adding k target centres to S can only lower Cost(T, S ∪ T_k) below Cost(T, S)
    assert np.isfinite(cost) and 0 < cost <= refs["source_only"]["cost"]
    assert 1 <= refs["private_kmeans"]["centers"] <= 6
    # the same computation by hand: k clusters on the pooled S at one owner's budget, seeded from the run
    _, _, T, S = scaled_world(stc_scenario, tmp_path)
    budget = {"eps": 3.0} if privacy["notion"] == "dp" else {"rho": 0.5}
    release = private_kmeans(S, 6, iterations=3, rng=seeds.rng(5, "stc.baseline.private_kmeans"), **budget)
    picked = solve_stc(T, release.centers, 6, rng=seeds.rng(5, "stc.baseline.private_kmeans.solver")).indices
    assert cost == pytest.approx(selection_cost(T, S, picked), rel=1e-12)


def test_private_kmeans_is_reproducible_from_the_seed_and_depends_on_it(stc_scenario, tmp_path):
    from marketplace.protocols.stc.exchange import report as stc_report

    stc_scenario["stc"]["baselines"] = ["private_kmeans"]
    costs = []
    for seed in (5, 5, 6):
        stc_scenario["seed"] = seed
        config = parse_scenario(stc_scenario, source="t", base_dir=tmp_path).config
        refs = stc_report(config, make_world(config, plugins.exchange(config.protocol)), {})["metrics"]["baselines"]
        assert set(refs) == {"source_only", "private_kmeans"}
        costs.append(refs["private_kmeans"]["cost"])
    assert costs[0] == costs[1] and costs[2] != costs[0]


def rendered(table) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=200).print(table)
    return out.getvalue()


def test_private_kmeans_is_absent_unless_asked_and_in_the_table_when_asked(stc_scenario, tmp_path, run_cache):
    from marketplace.protocols.stc.display import tables
    from marketplace.protocols.stc.sweeps import sweep_row

    report = run_cache.run(stc_scenario).report
    assert "private_kmeans" not in report["metrics"]["baselines"]
    assert "private_kmeans_cost" not in sweep_row(report)
    assert "PrivateKmeans" not in rendered(tables(report)[0])
    stc_scenario["stc"]["baselines"] = ALL_BASELINES
    report = run_raw(stc_scenario, tmp_path, "asked")
    assert sweep_row(report)["private_kmeans_cost"] == report["metrics"]["baselines"]["private_kmeans"]["cost"]
    assert "PrivateKmeans (DP k-means of S as S')" in rendered(tables(report)[0])


def test_private_kmeans_options_are_checked(stc_scenario, tmp_path):
    stc_scenario["stc"]["kmeans_iterations"] = 0
    with pytest.raises(ScenarioError, match="stc.kmeans_iterations"):
        parse_scenario(stc_scenario, source="t", base_dir=tmp_path)
    stc_scenario["stc"]["kmeans_iterations"] = 2
    stc_scenario["stc"]["baselines"] = ["private_kmean"]
    with pytest.raises(ScenarioError, match="stc.baselines"):
        parse_scenario(stc_scenario, source="t", base_dir=tmp_path)


def test_an_stc_sweep_with_private_kmeans_writes_its_column_table_and_plot(stc_scenario, tmp_path):
    import csv

    from marketplace.protocols.stc.sweeps import sweep_table

    raw = copy.deepcopy(stc_scenario)
    raw["stc"]["baselines"] = ALL_BASELINES
    rows = sweep_k(raw, tmp_path)
    assert all(0 < float(r["private_kmeans_cost"]) <= float(r["source_only_cost"]) for r in rows)
    summary = list(csv.DictReader(open(tmp_path / "out" / "summary.csv")))
    assert all(r["private_kmeans_cost_mean"] for r in summary)
    assert (tmp_path / "out" / "sweep.png").exists()
    table = sweep_table(
        [{"stc.k": 2, "runs": 1, "completed": 1, "cost_mean": 0.2, "private_kmeans_cost_mean": 0.25}], ["stc.k"], "t"
    )
    assert [c.header for c in table.columns][-2:] == ["PrivateKmeans", "S alone"]
    assert "PrivateKmeans" not in [
        c.header for c in sweep_table([{"stc.k": 2, "runs": 1, "completed": 1}], ["stc.k"], "t").columns
    ]


def test_the_non_private_references_are_computed_once_per_world_and_k_and_equal_a_fresh_computation(
    stc_scenario, tmp_path, monkeypatch
):
    import marketplace.protocols.stc as stc_core
    import marketplace.protocols.stc.exchange as exchange_stc

    calls = []
    real = stc_core.cluster_t
    monkeypatch.setattr(stc_core, "cluster_t", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    exchange_stc._REFERENCES.clear()
    dp = run_raw(stc_scenario, tmp_path, "dp")
    stc_scenario["stc"]["privacy"] = {"notion": "zcdp", "rho": 0.5}
    zcdp = run_raw(stc_scenario, tmp_path, "zcdp")
    assert len(calls) == 1  # the privacy setting does not change the world, k or the seed
    exchange_stc._REFERENCES.clear()
    fresh = run_raw(stc_scenario, tmp_path, "fresh")
    assert len(calls) == 2
    for name in ("cluster_t", "nonprivate_stc"):
        assert (
            dp["metrics"]["baselines"][name]
            == zcdp["metrics"]["baselines"][name]
            == fresh["metrics"]["baselines"][name]
        )
