"""What a served consumer hands the server (publication.consumer_handover): of its result only how its
part ended, so the run report the server assembles and archives holds no figure the consumer computed,
while the consumer's own copy, assembled the same way from the same parties' reports with its whole
report, has them all. For every shipped protocol the server's assembly still makes a run report."""

from __future__ import annotations

import json

import pytest

from marketplace import plugins
from marketplace.parties import party_ids
from marketplace.runtime.assemble import assemble_from_reports
from marketplace.runtime.party_process import host_nodes
from marketplace.runtime.party_reports import party_report
from marketplace.runtime.publication import CONSUMER_HANDS_OVER, consumer_handover
from marketplace.scenario import Scenario
from marketplace.transport.inprocess import run_inprocess

DATA = {
    "source": {"kind": "covariate_shift", "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 200}},
    "partition": {"scheme": "by_group", "skew": 0.8},
    "consumer": {"target_groups": [0], "validation_size": 25, "test_size": 25},
    "seed_set": {"size": 0},
}
TABLE = {
    "source": {
        "kind": "table",
        "table": {"dataset": "synthetic", "synthetic": {"rows": 900, "numeric": 3, "categorical": 1, "values": 3}},
    }
}
SECTIONS = {
    "sketch": (DATA, {"lower": [-12] * 3, "upper": [12] * 3, "epsilon": 1.0, "samples": 300, "map": {"features": 20}}),
    "stc": (DATA, {"k": 3, "release": "nna", "domain": {"low": [-12], "high": [12]}}),
    "summarize": (DATA, {"rounds": 4, "features": 30, "gamma": 0.1}),
    "pfds": (TABLE, {"epsilon": 1.0, "h_max": 4, "t": 5, "p": 2, "model": "logistic", "baselines": []}),
}


@pytest.fixture(scope="module", params=sorted(SECTIONS))
def session(request):
    protocol = request.param
    data, section = SECTIONS[protocol]
    scenario = Scenario.from_dict(
        {"name": f"handover-{protocol}", "protocol": protocol, "seed": 7, "parties": {"owners": 3}, "data": data}
        | {protocol: section}
    )
    nodes = host_nodes(
        scenario, party_ids(scenario.config), run_id="s-1", exchange=plugins.exchange(scenario.config.protocol)
    )
    run_inprocess(nodes)
    reports = {
        n.party_id: json.loads(
            json.dumps(party_report(n, role_name=n.role.role_name, wall_s=1.0, driver={}, scenario=scenario))
        )
        for n in nodes
    }
    return protocol, scenario, reports


def test_a_consumer_hands_the_server_how_its_part_ended_and_nothing_it_computed(session):
    protocol, scenario, reports = session
    whole = reports["consumer"]
    handed = consumer_handover(whole)
    assert set(handed["result"]) == CONSUMER_HANDS_OVER & set(whole["result"]) and handed["timing"] is None
    assert {k: v for k, v in handed.items() if k not in ("result", "timing", "driver")} == {
        k: v for k, v in whole.items() if k not in ("result", "timing", "driver")
    }
    assert consumer_handover(handed) == handed


def test_the_server_assembles_a_run_report_without_the_consumers_figures(session):
    protocol, scenario, reports = session
    archived = assemble_from_reports(
        scenario,
        reports | {"consumer": consumer_handover(reports["consumer"])},
        {},
        driver="market",
        exchange=plugins.exchange(scenario.config.protocol),
    )
    mine = assemble_from_reports(
        scenario, reports, {}, driver="market", exchange=plugins.exchange(scenario.config.protocol)
    )
    assert archived["status"] == mine["status"] == "completed", (archived["failures"], mine["failures"])
    assert archived["party_details"]["consumer"]["result"] == {"end_status": "completed"}
    assert mine["party_details"]["consumer"]["result"] == reports["consumer"]["result"]
