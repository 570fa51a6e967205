"""The `pfds` protocol over the marketplace: trees and labelled synthetic records routed to every
agent, the baselines of the same run, privacy per sharer, and what the curator and agents refuse."""

from __future__ import annotations

import copy

import msgspec
import numpy as np
import pytest
from conftest import run_cli

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, ProtocolError, decode, encode
from marketplace.messages.kinds import Hello
from marketplace.parties import build_role, make_world, party_ids
from marketplace.protocols.pfds.messages import PfdsData, PfdsPhase, PfdsSharedTree
from marketplace.protocols.pfds.wire import tree_fields
from marketplace.runner.run import run_scenario
from marketplace.scenario import ScenarioError, parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node
from scenarios import config_of, pfds_raw, run_raw, write_scenario

TIMING_KEYS = {"timing", "parties", "driver", "run_id", "party_details", "pid_of_runner", "launch"}


@pytest.fixture
def pfds_scenario() -> dict:
    return pfds_raw()


def envelope(sender, receiver, body, msg_id=1):
    return Envelope(PROTOCOL_VERSION, "r", msg_id, sender, receiver, body.KIND, None, body)


def roles_of(config):
    world = make_world(config, plugins.exchange(config.protocol))
    return {
        p: build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)
    }, world


def started_curator(config):
    """A curator that has heard every hello, and the sharers' first messages (hello, tree)."""
    roles, world = roles_of(config)
    curator = roles["curator"]
    firsts = {p: roles[p].start() for p in party_ids(config)[1:]}
    for p, sends in firsts.items():
        curator.handle(envelope(p, "curator", sends[0].body))
    return curator, roles, firsts, world


# --- end to end ------------------------------------------------------------------------------


def test_a_run_trains_every_agent_and_reports_every_method(pfds_scenario, run_cache):
    report = run_cache.run(pfds_scenario).report
    assert report["status"] == "completed", report["failures"]
    metrics = report["metrics"]
    assert set(metrics) == {"pfds", "np_agt", "dp_pred", "pfds_s", "pfds_minus", "np_pred"}
    assert set(metrics["pfds"]["agents"]) == {"consumer", "owner-1", "owner-2", "owner-3"}
    assert all(0.0 <= e <= 1.0 for e in metrics["pfds"]["agents"].values())
    assert report["checks"]["consumer_error_matches_report"] is True
    kinds = report["messages"]["by_kind"]
    assert kinds["pfds_tree"]["count"] == 3 and kinds["pfds_data"]["count"] == 3
    assert kinds["pfds_shared_tree"]["count"] == 3 * 3  # each tree to the 2 other sharers and the consumer
    assert kinds["pfds_shared_data"]["count"] == 3 * 3
    assert report["parsimony"]["points_seen"] == 0


def test_privacy_is_recorded_per_sharer_and_never_exceeds_its_epsilon(pfds_scenario, run_cache):
    report = run_cache.run(pfds_scenario).report
    for sharer in ("owner-1", "owner-2", "owner-3"):
        ledger = report["privacy"][sharer]
        assert 0 < ledger["eps"] <= 1.0 + 1e-12
        mechanisms = [s["mechanism"] for s in ledger["steps"]]
        assert any(m.startswith("pfds.tree.leaves") for m in mechanisms)
        assert sum(m.startswith("pfds.synth.counts") for m in mechanisms) == 3  # levels 1..p-1, p = 4
    assert report["privacy"]["consumer"]["guarantee"] == "none"


def test_the_same_seed_gives_the_same_report_in_process_twice(pfds_scenario, tmp_path, run_cache):
    a, b = run_cache.run(pfds_scenario).report, run_raw(pfds_scenario, tmp_path, "b")  # two runs all the same
    assert {k: v for k, v in a.items() if k not in TIMING_KEYS} == {k: v for k, v in b.items() if k not in TIMING_KEYS}


@pytest.mark.slow
def test_processes_and_in_process_give_the_same_report(pfds_scenario, tmp_path, run_cache):
    a, b = run_cache.run(pfds_scenario).report, run_raw(pfds_scenario, tmp_path, "procs", driver="processes")
    assert b["status"] == "completed", b["failures"]
    strip = lambda r: {k: v for k, v in r.items() if k not in TIMING_KEYS}  # noqa: E731
    a_msgs, b_msgs = a["messages"], b["messages"]
    a, b = strip(a), strip(b)
    for key in ("messages", "config", "transport_security"):  # heartbeats, the bound port, the transport
        a.pop(key, None), b.pop(key, None)
    assert a == b
    assert a_msgs["by_kind"] == b_msgs["by_kind"] and a_msgs["total"] == b_msgs["total"]


def test_a_regression_table_runs_with_linear_regression(pfds_scenario, tmp_path):
    pfds_scenario["data"]["source"]["table"]["synthetic"]["task"] = "regression"
    pfds_scenario["pfds"]["model"] = "linear"
    report = run_raw(pfds_scenario, tmp_path)
    assert report["status"] == "completed", report["failures"]
    assert report["task"] == "regression"
    assert report["metrics"]["np_pred"]["mean"] <= report["metrics"]["np_agt"]["mean"] + 0.05


def test_a_sweep_over_folds_writes_the_pfds_columns(pfds_scenario, tmp_path):
    from marketplace.protocols.pfds import exchange

    pfds_scenario["pfds"]["baselines"] = ["pfds_minus"]
    scenario = parse_scenario(pfds_scenario, source="t", base_dir=tmp_path)

    report = run_scenario(scenario, tmp_path / "one", driver="inprocess")
    row = exchange.sweep_row(report)
    assert row["pfds_error"] is not None and row["pfds_minus_size_error"] is not None and row["np_agt_error"] is None
    summary = [
        {
            **{f"{k}_mean": v for k, v in row.items() if isinstance(v, (int, float))},
            "pfds.fold": 0,
            "completed": 1,
            "runs": 1,
        }
    ]
    exchange.plot_sweep(summary, ["pfds.fold"], tmp_path / "sweep.png", title="t")
    assert (tmp_path / "sweep.png").stat().st_size > 0


# --- what an agent receives ------------------------------------------------------------------


def test_no_agent_ever_receives_another_agents_raw_record(pfds_scenario, tmp_path, monkeypatch):
    config = config_of(pfds_scenario, tmp_path)
    world = make_world(config, plugins.exchange(config.protocol))
    received: dict[str, list] = {}
    original = Node.receive

    def spy(self, frame, peer):
        received.setdefault(self.party_id, []).append(decode(frame))
        return original(self, frame, peer)

    monkeypatch.setattr(Node, "receive", spy)
    nodes = [
        Node(
            build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)),
            run_id="r",
            max_message_bytes=1 << 26,
        )
        for p in party_ids(config)
    ]
    run_inprocess(nodes)
    rows = {"consumer": world.validation.X, **{f"owner-{i + 1}": o.X for i, o in enumerate(world.owners)}}
    for agent, messages in received.items():
        others = np.vstack([X for who, X in rows.items() if who != agent])
        others_values = set(others[:, :4].ravel().tolist())  # the numeric attributes: continuous values
        for message in messages:
            for f in msgspec.structs.fields(message.body):
                value = getattr(message.body, f.name)
                if isinstance(value, np.ndarray) and value.ndim == 2 and f.name == "X":
                    assert not set(value[:, :4].ravel().tolist()) & others_values, (agent, message.kind)
    assert {m.kind for m in received["consumer"]} == {"pfds_shared_tree", "pfds_shared_data", "pfds_phase", "shutdown"}


# --- bad input -------------------------------------------------------------------------------


def test_a_malformed_tree_gets_its_sharer_flagged_and_the_run_goes_on(pfds_scenario, tmp_path):
    curator, roles, firsts, _ = started_curator(config_of(pfds_scenario, tmp_path))
    good = firsts["owner-1"][1].body
    broken = msgspec.structs.replace(good, n_children=np.full_like(good.n_children, 5))
    sends = curator.handle(envelope("owner-1", "curator", broken))
    assert "owner-1" in curator.flagged and "malformed tree" in curator.flagged["owner-1"]
    assert sends[0].to == "owner-1" and sends[0].body.code == "refused"
    for p in ("owner-2", "owner-3"):
        sends = curator.handle(envelope(p, "curator", firsts[p][1].body))
    phases = [s for s in sends if isinstance(s.body, PfdsPhase)]
    assert {s.to for s in phases} == {"owner-2", "owner-3", "consumer"}
    assert phases[0].body.sharers == ("owner-2", "owner-3")


def test_a_tree_with_the_wrong_number_of_counts_is_refused_with_the_field_named(pfds_scenario, tmp_path):
    curator, _, firsts, _ = started_curator(config_of(pfds_scenario, tmp_path))
    good = firsts["owner-2"][1].body
    wrong = msgspec.structs.replace(good, counts=np.zeros((good.counts.shape[0] + 1, 2)))
    curator.handle(envelope("owner-2", "curator", wrong))
    assert "$.counts" in curator.flagged["owner-2"]


def test_a_tree_sent_twice_is_refused_and_the_first_kept(pfds_scenario, tmp_path):
    curator, _, firsts, _ = started_curator(config_of(pfds_scenario, tmp_path))
    body = firsts["owner-1"][1].body
    curator.handle(envelope("owner-1", "curator", body))
    first = curator.trees["owner-1"]
    with pytest.raises(ProtocolError, match="already arrived"):
        curator.handle(envelope("owner-1", "curator", body, msg_id=2))
    assert curator.trees["owner-1"] is first


def test_a_nan_in_a_count_never_reaches_the_curator(pfds_scenario, tmp_path):
    from marketplace.messages import MessageError

    _, _, firsts, _ = started_curator(config_of(pfds_scenario, tmp_path))
    body = firsts["owner-1"][1].body
    counts = body.counts.copy()
    counts[0, 0] = np.nan
    with pytest.raises(MessageError, match="body.counts"):
        decode(encode(envelope("owner-1", "curator", msgspec.structs.replace(body, counts=counts))))


def test_a_nan_threshold_at_a_non_numeric_node_travels_and_rebuilds(pfds_scenario, tmp_path):
    _, roles, firsts, _ = started_curator(config_of(pfds_scenario, tmp_path))
    body = firsts["owner-1"][1].body
    assert np.isnan(body.threshold).any()
    back = decode(encode(envelope("owner-1", "curator", body))).body
    assert np.array_equal(back.threshold, body.threshold, equal_nan=True)


def test_records_of_the_wrong_width_or_outside_the_schema_get_the_sharer_flagged(pfds_scenario, tmp_path):
    curator, roles, firsts, _ = started_curator(config_of(pfds_scenario, tmp_path))
    for p in ("owner-1", "owner-2", "owner-3"):
        curator.handle(envelope(p, "curator", firsts[p][1].body))
    assert curator.phase == "data"
    curator.handle(envelope("owner-1", "curator", PfdsData(X=np.zeros((2, 3)), y=np.zeros(2), epsilon=1.0)))
    assert "shape (rows, 6)" in curator.flagged["owner-1"]
    curator.handle(envelope("owner-2", "curator", PfdsData(X=np.full((1, 6), 7.0), y=np.zeros(1), epsilon=1.0)))
    assert "public domain" in curator.flagged["owner-2"]


def test_owners_beyond_pfds_sharers_receive_and_train_but_release_nothing(pfds_scenario, tmp_path):
    raw = copy.deepcopy(pfds_scenario)
    raw["parties"]["owners"] = 4
    raw["pfds"]["sharers"] = 2
    report = run_raw(raw, tmp_path)
    assert report["status"] == "completed", report["failures"]
    assert report["trees"]["voters"] == ["owner-3", "owner-4"]  # the last two owners share
    assert report["agents"]["sharers"] == 2 and report["agents"]["receivers"] == 2
    kinds = report["messages"]["by_kind"]
    assert kinds["pfds_tree"]["count"] == 2 and kinds["pfds_data"]["count"] == 2
    # each tree (and dataset) to the other sharer, the two receivers and the consumer
    assert kinds["pfds_shared_tree"]["count"] == 2 * 4 and kinds["pfds_shared_data"]["count"] == 2 * 4
    for receiver in ("owner-1", "owner-2"):
        assert report["privacy"][receiver]["guarantee"] == "none"
        assert report["party_details"][receiver]["result"]["datasets_received"] == ["owner-3", "owner-4"]
    assert all(0.0 <= e <= 1.0 for e in report["metrics"]["pfds"]["agents"].values())
    assert 0 < report["privacy"]["owner-3"]["eps"] <= 1.0 + 1e-12


def test_more_sharers_than_owners_is_refused_naming_the_key(pfds_scenario, tmp_path):
    raw = copy.deepcopy(pfds_scenario)
    raw["pfds"]["sharers"] = 4
    with pytest.raises(ScenarioError, match="pfds.sharers"):
        config_of(raw, tmp_path)


def test_an_agent_trains_after_its_bye_not_before(pfds_scenario, tmp_path):
    """A long fit must not delay the bye (the curator would take the agent for hung)."""
    roles, _ = roles_of(config_of(pfds_scenario, tmp_path))
    consumer = roles["consumer"]
    consumer.handle(envelope("curator", "consumer", PfdsPhase(phase="label", sharers=())))
    consumer.handle(envelope("curator", "consumer", PfdsPhase(phase="train", sharers=()), 2))
    assert consumer.fitted is None
    from marketplace.messages.kinds import Shutdown

    replies = consumer.handle(envelope("curator", "consumer", Shutdown(reason="done", status="completed"), 3))
    assert [r.body.KIND for r in replies] == ["bye"] and consumer.fitted is None
    consumer.finish()
    assert consumer.fitted is not None and consumer.error is not None


def test_a_sharer_that_never_answers_is_a_dropout_and_the_run_completes(pfds_scenario, tmp_path):
    curator, roles, firsts, _ = started_curator(config_of(pfds_scenario, tmp_path))
    for p in ("owner-1", "owner-3"):
        curator.handle(envelope(p, "curator", firsts[p][1].body))
    sends = curator.peer_lost("owner-2")
    assert curator.dropouts == {"owner-2": {"round": 1, "phase": "trees", "reason": "lost"}}
    assert [s.body.sharers for s in sends if isinstance(s.body, PfdsPhase)][0] == ("owner-1", "owner-3")
    assert all(s.to != "owner-2" for s in sends)


def test_an_agent_refuses_a_tree_from_an_unknown_sharer_or_a_second_one(pfds_scenario, tmp_path):
    roles, _ = roles_of(config_of(pfds_scenario, tmp_path))
    consumer, tree = roles["consumer"], roles["owner-1"]
    tree.start()
    body = PfdsSharedTree(sharer="owner-1", **tree_fields(tree.tree))
    consumer.handle(envelope("curator", "consumer", body))
    with pytest.raises(ProtocolError, match="already arrived"):
        consumer.handle(envelope("curator", "consumer", body, 2))
    with pytest.raises(ProtocolError, match="field 'sharer'"):
        consumer.handle(envelope("curator", "consumer", msgspec.structs.replace(body, sharer="owner-9"), 3))
    with pytest.raises(ProtocolError, match="curator only"):
        consumer.handle(envelope("owner-2", "consumer", body, 4))


def test_the_curator_refuses_a_hello_for_another_protocol(pfds_scenario, tmp_path):
    roles, _ = roles_of(config_of(pfds_scenario, tmp_path))
    (refusal, *_) = roles["curator"].handle(
        envelope("owner-1", "curator", Hello(role="owner", protocol="summarize", scenario="pfds-tiny"))
    )
    assert refusal.body.code == "refused" and "protocol 'pfds'" in refusal.body.detail
    assert "refused at hello" in roles["curator"].dropouts["owner-1"]["reason"]


# --- refused before start --------------------------------------------------------------------


def test_a_budget_below_the_planned_spend_is_refused_before_start_from_the_cli(pfds_scenario, tmp_path):

    pfds_scenario["pfds"]["budget"] = 0.5
    path = write_scenario(tmp_path, pfds_scenario, "s.yaml")
    result = run_cli("run", str(path), "--driver", "inprocess", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "pfds.budget" in result.stderr + result.stdout
    assert not (tmp_path / "out" / "report.json").exists()


def test_a_classifier_on_a_regression_table_is_refused_naming_the_key(pfds_scenario, tmp_path):
    pfds_scenario["data"]["source"]["table"]["synthetic"]["task"] = "regression"
    with pytest.raises(ScenarioError, match="pfds.model"):
        config_of(pfds_scenario, tmp_path)


def test_a_non_table_source_is_refused_naming_the_key(pfds_scenario, tmp_path):
    raw = copy.deepcopy(pfds_scenario)
    raw["data"]["source"] = {"kind": "digits"}
    with pytest.raises(ScenarioError, match="data.source.kind"):
        config_of(raw, tmp_path)


def test_the_world_holds_a_stratified_test_fold_and_disjoint_shares(pfds_scenario, tmp_path):
    config = config_of(pfds_scenario, tmp_path)
    world = make_world(config, plugins.exchange(config.protocol))
    sizes = [len(o) for o in world.owners] + [len(world.validation), len(world.test)]
    assert sum(sizes) == 900 and len(world.test) == 180
    assert abs(world.test.y.mean() - 0.5) < 0.01


@pytest.mark.data
@pytest.mark.parametrize(
    "dataset,folder,rows",
    [
        ("adult", "adult", 45222),
        ("bank", "bank_marketing", 45211),
        ("diabetes", "diabetic_retinopathy_debrecen", 1151),
        ("bike", "bike_sharing", 17379),
    ],
)
def test_the_public_tables_load_inside_their_public_schema(dataset, folder, rows):
    from marketplace.datasets.cache import fetch_command, missing_files
    from marketplace.datasets.registry import dataset as registered
    from marketplace.protocols.pfds.tables import TableSource, load_table, public_schema

    if missing_files(registered(folder)):
        pytest.skip(f"needs the {folder} dataset: {fetch_command([folder])}")
    source = TableSource(dataset=dataset)
    table = load_table(source, np.random.default_rng(0))
    schema = public_schema(source)
    assert len(table) == rows and table.X.shape[1] == schema.d
    schema.check_rows(table.X, "X", "test")
    schema.encode_labels(table.y if dataset != "bike" else table.y.astype(float))


def test_pfds_ledgers_follow_the_configured_relation(pfds_scenario, tmp_path):
    for neighbours, relation in (("add_remove", "add/remove-one"), ("replace", "replace-one")):
        raw = copy.deepcopy(pfds_scenario)
        raw["pfds"]["neighbours"] = neighbours
        report = run_raw(raw, tmp_path, neighbours)
        found = {n: e for n, e in report["privacy"].items() if isinstance(e, dict) and e.get("eps") is not None}
        assert found
        for name, entry in found.items():
            assert entry["neighbouring"]["relation"] == relation, name
