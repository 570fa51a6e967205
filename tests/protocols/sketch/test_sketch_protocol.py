"""The `sketch` protocol over the marketplace: one DP sketch per owner, merged by the curator, queried
by the consumer at no further cost; what the report measures; what the curator refuses."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_cli

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, ProtocolError, encode
from marketplace.parties import build_role, make_world, party_ids
from marketplace.protocols.sketch import SketchRelease, exact_sketch
from marketplace.protocols.sketch.messages import SketchPublication, SketchReleaseBody, SketchRequest
from marketplace.roles.lifetime import DeclinedParty
from marketplace.scenario import ScenarioError, parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node
from scenarios import run_raw, sketch_raw, write_scenario


@pytest.fixture
def sketch_scenario() -> dict:
    return sketch_raw()


def without_timing(report: dict) -> dict:
    drop = {
        "timing",
        "parties",
        "party_details",
        "pid_of_runner",
        "driver",
        "launch",
        "files",
        "config",
        "run_id",
        "transport_security",
    }
    return {k: v for k, v in report.items() if k not in drop}


# --- end to end -------------------------------------------------------------------------------------


def test_a_run_publishes_every_sketch_and_the_consumer_answers_every_query(sketch_scenario, run_cache):
    report = run_cache.run(sketch_scenario).report
    assert report["status"] == "completed", report["failures"]
    assert report["released"] == ["owner-1", "owner-2", "owner-3"]
    est, true = report["estimates"], report["truth"]
    assert set(est) >= {"moments", "cdf", "covariance", "counts"} and len(est["counts"]["fractions"]) == 4
    assert len(est["moments"]["1"]) == 3 and np.array(est["cdf"]["values"]).shape == (3, 10)
    assert true["n"] == sum(o["rows"] for o in report["data"]["owners"])
    assert report["metrics"]["errors"]["moment1_mre"] < 0.5
    by_kind = report["messages"]["by_kind"]
    assert by_kind["sketch_request"]["count"] == by_kind["sketch_release"]["count"] == 3
    assert by_kind["sketch_publication"]["count"] == 1
    assert report["parsimony"]["points_seen"] == 0


def test_without_noise_the_estimates_match_the_truth_closely(sketch_scenario, tmp_path):
    sketch_scenario["sketch"].update(epsilon=None, map={"kind": "rff", "features": 100, "sigma": 1.0})
    report = run_raw(sketch_scenario, tmp_path)
    assert report["metrics"]["errors"]["moment1_mre"] < 1e-2
    assert report["metrics"]["errors"]["count_total_rel"] == 0.0
    assert report["privacy"]["owner-1"]["guarantee"] == "none"


def test_a_release_the_noise_swamps_is_flagged_on_the_report_the_terminal_and_has_no_market_quality(
    sketch_scenario, tmp_path, run_cache
):
    """At eps = 0.001 the merged count's noise is larger than the rows: the report says the release
    collapsed (and why), the terminal shows it, and a market request has no quality from it (its
    error figures measure the prior, so it can never rank as the best); at eps = 2 none of that."""
    from marketplace.market.report import collapsed, quality_of
    from marketplace.protocols.sketch.display import head_rows

    report = run_cache.run(sketch_scenario).report
    assert report["metrics"]["signal"]["collapsed"] is False and report["metrics"]["signal"]["count_snr"] > 3
    assert quality_of("sketch", report)[1] == report["metrics"]["errors"]["moment1_mre"]
    assert not collapsed("sketch", report) and "COLLAPSED" not in dict(head_rows(report))
    sketch_scenario["sketch"]["epsilon"] = 0.001
    swamped = run_raw(sketch_scenario, tmp_path, name="swamped")
    assert swamped["status"] == "completed" and swamped["metrics"]["errors"]["moment1_mre"] is not None
    assert swamped["metrics"]["signal"]["collapsed"] is True and "noise" in swamped["metrics"]["signal"]["why"]
    assert "noise swamps" in dict(head_rows(swamped))["COLLAPSED"]
    assert quality_of("sketch", swamped) == ("moment1_mre", None) and collapsed("sketch", swamped)


def test_each_owner_records_its_one_release_on_its_own_ledger(sketch_scenario, tmp_path):
    sketch_scenario["sketch"].update(mechanism="gaussian", delta=1e-6, numerator_share=0.9)
    report = run_raw(sketch_scenario, tmp_path)
    for owner in ("owner-1", "owner-2", "owner-3"):
        entry = report["privacy"][owner]
        assert entry["eps"] == pytest.approx(2.0) and entry["delta"] == pytest.approx(1e-6)
        assert entry["mechanism"] == "gaussian"
        assert {s["mechanism"] for s in entry["steps"]} == {"gaussian sum of features", "laplace count"}
        assert sum(s["eps"] * s["count"] for s in entry["steps"]) == pytest.approx(2.0)


def test_more_queries_send_no_more_messages(sketch_scenario, tmp_path, run_cache):
    few = run_cache.run(sketch_scenario).report
    sketch_scenario["sketch"]["queries"] = {"moments": 4, "random_counts": 50, "cdf_points": [0.1, 0.2, 0.3, 0.9]}
    many = run_raw(sketch_scenario, tmp_path, "many")
    assert many["queries"] > few["queries"]
    assert many["messages"]["by_kind"] == few["messages"]["by_kind"]
    # and asking the consumer role directly afterwards sends nothing either
    config = parse_scenario(sketch_scenario, source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    nodes = [
        Node(
            build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)),
            run_id="t",
            max_message_bytes=1 << 24,
        )
        for p in party_ids(config)
    ]
    run_inprocess(nodes)
    consumer = nodes[-1]
    sent_before = (consumer.next_msg_id, consumer.counters.to_dict())
    from marketplace.protocols.sketch.consumer import QueryPlan

    consumer.role.answer(QueryPlan(moments=3, covariance=True, cdf_points=(0.5,)))
    after = (consumer.next_msg_id, consumer.counters.to_dict())
    assert after == sent_before


def test_the_consumer_ranks_owners_and_the_report_checks_the_ranking(sketch_scenario, tmp_path):
    sketch_scenario["sketch"]["epsilon"] = 50.0
    report = run_raw(sketch_scenario, tmp_path)
    ranking = report["ranking"]
    assert sorted(ranking["order"]) == ["owner-1", "owner-2", "owner-3"]
    check = ranking["check"]
    assert len(check["true_mmd2"]) == 3 and check["spearman"] is not None and check["spearman"] > 0


def test_the_run_saves_sketch_files_that_the_cli_answers_from(sketch_scenario, run_cache):
    shared = run_cache.run(sketch_scenario)  # the CLI only reads the run's files
    report = shared.report
    merged = Path(report["files"]["sketches"]["merged"])
    assert merged.is_file() and SketchRelease.load(merged).parts == 3
    result = query(shared, merged, "--json")
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout)
    assert answers["moments"]["1"] == pytest.approx(report["estimates"]["moments"]["1"], rel=1e-9, abs=1e-12)
    assert answers["counts"]["fractions"] == pytest.approx(
        report["estimates"]["counts"]["fractions"], rel=1e-9, abs=1e-12
    )
    custom = query(shared, merged, "--moments", "1", "--count", "0:0:0.5,2:0.1:0.9")
    assert custom.returncode == 0 and "count query 1" in custom.stdout
    assert report["map"]["attributes"] == ["f0", "f1", "f2"]  # the data's columns name the attributes
    assert SketchRelease.load(merged).attributes == ("f0", "f1", "f2")  # and the files keep them
    named = query(shared, merged, "--cdf", "0.5", "--count", "f0:0:0.5,2:0.1:0.9", "--json")
    assert named.returncode == 0, named.stderr
    by_name = json.loads(named.stdout)
    assert by_name["attributes"] == ["f0", "f1", "f2"]
    assert by_name["counts"]["fractions"] == pytest.approx(
        json.loads(custom_json(shared, merged))["counts"]["fractions"]
    )
    printed = query(shared, merged, "--cdf", "0.5")
    assert "  f1: " in printed.stdout and "x1" not in printed.stdout, printed.stdout
    unknown = query(shared, merged, "--count", "age:0:1")
    assert unknown.returncode == 2 and "one of f0, f1, f2 or an index in 0..2" in unknown.stderr, unknown.stderr
    wrong = query(shared, merged, "--set", "seed=4")
    assert wrong.returncode == 2 and "map" in wrong.stderr


def query(shared, merged: Path, *args: str):
    """``marketplace sketch query MERGED --scenario <the run's resolved scenario> ARGS``."""
    return run_cli("sketch", "query", str(merged), "--scenario", str(shared.folder / "scenario.resolved.yaml"), *args)


def custom_json(shared, merged: Path) -> str:
    """The same count query as the named one, with the attribute given by its index."""
    result = query(shared, merged, "--cdf", "0.5", "--count", "0:0:0.5,2:0.1:0.9", "--json")
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_processes_and_in_process_give_the_same_report(sketch_scenario, tmp_path, run_cache):
    a = run_cache.run(sketch_scenario).report
    b = run_raw(sketch_scenario, tmp_path, "b", driver="processes")
    assert b["status"] == "completed", b["failures"]
    left, right = without_timing(a), without_timing(b)
    assert left["messages"]["by_kind"] == right["messages"]["by_kind"]
    left["messages"].pop("heartbeats"), right["messages"].pop("heartbeats")
    assert left == right


WARM_PARTY = """
import sys, time
from pathlib import Path
import scipy.stats, sklearn.isotonic, yaml, zmq
import marketplace.cli, marketplace.cli.parties, marketplace.parties, marketplace.transport.zmq_driver
import marketplace.protocols.sketch.consumer, marketplace.protocols.sketch.owner
endpoint_file, deadline = Path(sys.argv[1]), time.monotonic() + 120
while not endpoint_file.exists() or not endpoint_file.read_text().strip():
    if time.monotonic() > deadline:
        sys.exit("the curator never listened")
    time.sleep(0.02)
sys.exit(marketplace.cli.main([*sys.argv[2:], "--endpoint", endpoint_file.read_text().strip()]))
"""
"""A party's command line (``marketplace.cli.main``, as ``python -m marketplace`` runs it), its libraries
imported before the curator's endpoint is known: started once it is, it connects within a second."""


@pytest.mark.slow
def test_an_owner_that_never_shows_up_is_a_dropout_over_real_processes(sketch_scenario, tmp_path):
    # owner-2 is declared lost start_timeout_s after the last party arrived: that wait is the test's
    # cost, asleep. The others import their libraries while the curator starts (WARM_PARTY), so each
    # connects within a second of the curator's endpoint, however slowly Python starts on a busy machine
    sketch_scenario["transport"].update(start_timeout_s=10.0, heartbeat_interval_s=0.2, heartbeat_timeout_s=1.0)
    path = write_scenario(tmp_path, sketch_scenario, "s.yaml")
    endpoint_file = tmp_path / "endpoint"
    insecure = ["--insecure"]  # no CURVE keys for this loopback test
    others: list[subprocess.Popen] = []
    curator = None
    try:
        for party in ("owner-1", "owner-3", "consumer"):  # owner-2 never starts
            role = ["owner", "--id", party] if party.startswith("owner") else ["consumer"]
            others.append(
                subprocess.Popen(
                    [sys.executable, "-c", WARM_PARTY, str(endpoint_file)]
                    + role
                    + ["--scenario", str(path), "--report", str(tmp_path / f"{party}.json")]
                    + insecure,
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        curator = subprocess.Popen(
            [sys.executable, "-m", "marketplace"]
            + [
                "curator",
                "--scenario",
                str(path),
                "--endpoint",
                "tcp://127.0.0.1:0",
                "--endpoint-file",
                str(endpoint_file),
                "--report",
                str(tmp_path / "curator.json"),
            ]
            + insecure,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert curator.wait(timeout=120) == 0, curator.stderr.read()
        assert all(p.wait(timeout=60) == 0 for p in others)
    finally:
        for p in [*others, *([curator] if curator else [])]:
            if p.poll() is None:
                p.kill()
                p.wait()
    result = json.loads((tmp_path / "curator.json").read_text())["result"]
    assert "owner-2" in result["dropouts"] and result["released"] == ["owner-1", "owner-3"]
    assert "never connected within start_timeout_s" in result["dropouts"]["owner-2"]["reason"]
    consumer = json.loads((tmp_path / "consumer.json").read_text())["result"]
    assert sorted(consumer["sketches"]["owners"]) == ["owner-1", "owner-3"]
    assert consumer["estimates"]["moments"]["1"]


# --- refusals ----------------------------------------------------------------------------------------


def test_a_scenario_without_a_public_box_is_refused(sketch_scenario, tmp_path):
    del sketch_scenario["sketch"]["lower"], sketch_scenario["sketch"]["upper"]
    with pytest.raises(ScenarioError, match="sketch.lower"):
        parse_scenario(sketch_scenario, source="t", base_dir=tmp_path)


def test_a_box_of_the_wrong_width_is_named(sketch_scenario, tmp_path):
    sketch_scenario["sketch"].update(lower=[0, 0], upper=[1, 1])
    with pytest.raises(ScenarioError, match=r"sketch.lower: expected 3 bounds"):
        run_raw(sketch_scenario, tmp_path)


def test_a_budget_below_one_release_is_refused_before_start_from_the_cli(sketch_scenario, tmp_path):
    sketch_scenario["sketch"].update(epsilon=2.0, budget_epsilon=1.0)
    path = write_scenario(tmp_path, sketch_scenario, "s.yaml")
    result = run_cli("run", str(path), "--driver", "inprocess", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "sketch.budget_epsilon" in result.stderr and not (tmp_path / "out").exists()


def envelope(body, sender, receiver="curator", msg_id=1):
    return Envelope(PROTOCOL_VERSION, "t", msg_id, sender, receiver, type(body).KIND, None, body)


@pytest.fixture
def started(sketch_scenario, tmp_path):
    """A curator that has every hello and has sent its requests, and the owners' honest releases."""
    config = parse_scenario(sketch_scenario, source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    curator = build_role(config, "curator", world=world, exchange=plugins.exchange(config.protocol))
    roles = {
        p: build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)[1:]
    }
    requests = []
    for party, role in roles.items():
        for send in role.start():
            requests += curator.handle(envelope(send.body, party))
    assert curator.phase == "collecting" and len(requests) == 3
    releases = {s.to: roles[s.to].handle(envelope(s.body, "curator", s.to))[0].body for s in requests}
    return curator, roles, releases


def replace(body: SketchReleaseBody, **changes) -> SketchReleaseBody:
    import msgspec

    return msgspec.structs.replace(body, **changes)


def test_the_curator_flags_a_release_of_another_map_or_shape_or_privacy(started):
    curator, _, releases = started
    good = releases["owner-1"]
    curator.handle(envelope(replace(good, map_fingerprint="0" * 64), "owner-1"))
    curator.handle(envelope(replace(good, numerator=good.numerator[:-2]), "owner-2"))
    curator.handle(envelope(replace(releases["owner-3"], epsilon=100.0), "owner-3"))
    flagged = curator.result()["flagged"]
    assert (
        "map_fingerprint" in flagged["owner-1"]
        and "numerator" in flagged["owner-2"]
        and "epsilon" in flagged["owner-3"]
    )
    assert curator.phase == "closing" and curator.failure == "no owner released a sketch"


def test_a_sketch_sent_twice_is_refused_and_the_first_stands(started):
    curator, _, releases = started
    curator.handle(envelope(releases["owner-1"], "owner-1"))
    with pytest.raises(ProtocolError, match="already received"):
        curator.handle(envelope(releases["owner-1"], "owner-1", msg_id=2))
    assert "owner-1" in curator.releases and not curator.flagged


def test_a_nan_in_a_sketch_is_refused_by_the_decoder_naming_the_field(started, sketch_scenario, tmp_path):
    _, _, releases = started
    config = parse_scenario(sketch_scenario, source="t", base_dir=tmp_path).config
    node = Node(
        build_role(
            config,
            "curator",
            world=make_world(config, plugins.exchange(config.protocol)),
            exchange=plugins.exchange(config.protocol),
        ),
        run_id="t",
        max_message_bytes=1 << 24,
    )
    bad = replace(releases["owner-1"], numerator=np.full_like(releases["owner-1"].numerator, np.nan))
    frame = encode(envelope(bad, "owner-1"))
    (reply,) = node.receive(frame, peer="owner-1")
    assert node.errors and "body.numerator" in node.errors[0] and "finite" in node.errors[0]
    assert reply.kind == "error"


def test_an_owner_lost_before_releasing_is_a_dropout_and_the_others_are_published(started):
    curator, _, releases = started
    curator.handle(envelope(releases["owner-1"], "owner-1"))
    curator.handle(envelope(releases["owner-3"], "owner-3"))
    sends = curator.peer_lost("owner-2")
    (publication,) = [s.body for s in sends if isinstance(s.body, SketchPublication)]
    assert publication.owners == ("owner-1", "owner-3")
    assert np.allclose(publication.merged_numerator, releases["owner-1"].numerator + releases["owner-3"].numerator)
    assert curator.result()["dropouts"] == {"owner-2": {"phase": "collecting", "released": False, "reason": "lost"}}


def test_an_owner_releases_once_and_only_for_its_own_map(started):
    _, roles, _ = started
    owner = roles["owner-1"]
    with pytest.raises(ProtocolError, match="already released"):
        owner.handle(
            envelope(
                SketchRequest(map_fingerprint=owner.feature_map.fingerprint, n_features=60), "curator", "owner-1", 2
            )
        )
    other = roles["owner-2"]
    other.released = None
    with pytest.raises(ProtocolError, match="map_fingerprint"):
        other.handle(envelope(SketchRequest(map_fingerprint="f" * 64, n_features=60), "curator", "owner-2", 3))


def test_the_consumer_refuses_a_merge_that_is_not_the_sum_of_the_parts(started, sketch_scenario, tmp_path):
    curator, roles, releases = started
    sends = []
    for owner, body in releases.items():
        sends += curator.handle(envelope(body, owner))
    (publication,) = [s.body for s in sends if isinstance(s.body, SketchPublication)]
    import msgspec

    forged = msgspec.structs.replace(publication, merged_numerator=publication.merged_numerator + 1.0)
    consumer = roles["consumer"]
    with pytest.raises(ProtocolError, match="merged_numerator"):
        consumer.handle(envelope(forged, "curator", "consumer"))
    assert consumer.handle(envelope(publication, "curator", "consumer", msg_id=2)) == []
    assert consumer.estimates is None, "the M2M fit is local work, after the consumer's bye (finish)"
    consumer.finish()
    assert consumer.estimates is not None and consumer.ranking is not None


def test_merging_the_published_sketches_equals_sketching_the_union(started, sketch_scenario, tmp_path):
    sketch_scenario["sketch"]["epsilon"] = None
    config = parse_scenario(sketch_scenario, source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    from marketplace.protocols.sketch import merge_sketches
    from marketplace.protocols.sketch.exchange import public_map, unit_records

    fmap = public_map(config)
    parts = [exact_sketch(unit_records(config, o), fmap) for o in world.owners]
    union = exact_sketch(np.vstack([unit_records(config, o) for o in world.owners]), fmap)
    merged = merge_sketches(parts)
    assert merged.count == union.count and np.allclose(merged.numerator, union.numerator, rtol=1e-12, atol=1e-9)
    assert not math.isfinite(merged.epsilon)


# --- the experiments' data sources ----------------------------------------------------------------

from conftest import needs_data  # noqa: E402


def test_the_uniform_source_gives_the_owners_exactly_their_rows(tmp_path):
    from marketplace.scenario import load_scenario

    config = load_scenario(ROOT / "scenarios" / "sketch-uniform.yaml").config
    world = make_world(config, plugins.exchange(config.protocol))
    assert sum(len(o) for o in world.owners) == 27_000 and world.dim == 10
    assert 0.0 <= world.owners[0].X.min() and world.owners[0].X.max() <= 1.0


@pytest.mark.data
@needs_data("lifesci_ds1.10", "occupancy")
def test_lifesci_and_occupancy_load_with_the_papers_shapes():
    from marketplace.data.sources.lifesci import LifeSciSource, lifesci
    from marketplace.data.sources.occupancy import OccupancySource, occupancy

    life = lifesci(LifeSciSource(consumer_rows=1000), np.random.default_rng(0))
    assert life.X.shape == (26_733, 10) and int(life.y.sum()) == 804 and int((life.group == 0).sum()) == 1000
    occ = occupancy(OccupancySource())
    assert occ.X.shape == (8143 + 2665 + 9752, 5) and int((occ.group == 1).sum()) == 8143
    assert set(np.unique(occ.y)) == {0, 1}


@pytest.mark.data
@needs_data("lifesci_ds1.10", "occupancy")
def test_the_shipped_data_scenarios_fit_their_public_boxes():
    from marketplace.protocols.sketch.exchange import check_world
    from marketplace.scenario import load_scenario

    for name in ("sketch-lifesci.yaml", "sketch-occupancy.yaml"):
        config = load_scenario(ROOT / "scenarios" / name, ["sketch.clip=false"]).config
        check_world(config, make_world(config, plugins.exchange(config.protocol)))  # no row outside the box


def test_an_owner_whose_ledger_declined_is_never_asked_for_a_sketch_whenever_its_hello_comes(sketch_scenario, tmp_path):
    """A declined party sends its decline, then its hello, on one ordered connection. The curator
    excludes it on the decline, so the other parties' hellos start the protocol without it, and its
    hello, read after the start, is taken quietly (no refusal, no request): the processes driver,
    which may read the two frames in separate batches, counts the same messages as in-process."""
    config = parse_scenario(sketch_scenario, source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    curator = build_role(config, "curator", world=world, exchange=plugins.exchange(config.protocol))
    declined = DeclinedParty(
        party_id="owner-2", role_name="owner", scenario_name=config.name, protocol=config.protocol, reason="budget"
    )
    decline, hello = declined.start()
    assert decline.body.about_kind == "lifetime" and hello.body.KIND == "hello"
    assert curator.on_error(envelope(decline.body, "owner-2")) == []
    requests = []
    for party in ("owner-1", "owner-3", "consumer"):
        role = build_role(config, party, world=world, exchange=plugins.exchange(config.protocol))
        for send in role.start():
            requests += curator.handle(envelope(send.body, party))
    assert curator.phase == "collecting" and sorted(s.to for s in requests) == ["owner-1", "owner-3"]
    assert curator.handle(envelope(hello.body, "owner-2", msg_id=2)) == []
    assert curator.result()["dropouts"]["owner-2"]["declined"] is True
