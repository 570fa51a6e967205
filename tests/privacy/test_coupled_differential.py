"""The coupled differential test (marketplace.differential) for the four shipped protocols, in sessions
shaped as deployments: each party holds only its own rows, and the consumer is handed the run report
assembled from what each party publishes. (The same test on a simulated run, ``marketplace run``'s
world, is the conformance check ``coupled_differential`` of tests/runtime/test_conformance.py.)

owner-1's file and a neighbour of it under the protocol's relation give, with every release's output
coupled, the same value in every field the curator, the consumer and the other owners receive, but
for the fields the protocol declares disclosures; and every field they receive is declared.
"""

from __future__ import annotations

import pytest
from conftest import ROOT
from test_what_leaves_an_owner import SECTIONS, market, party_files

import marketplace
from marketplace import plugins
from marketplace.differential import CHANGED, coupled_problems, holding, run_shares
from marketplace.parties import make_world, own_rows, party_ids, share_of, with_own_rows
from marketplace.privacy.view import Seen

PRIVATE_SUMMARIZE = SECTIONS["summarize"] | {"rounds": 6, "privacy": {"enabled": True, "eps_auction": 0.05, "tau": 2}}


def own_shares(scenario, folder):
    """Each party's share of a marketplace described by its public schema: its own rows, from its files."""
    config = scenario.config
    files = party_files(folder)
    world = make_world(config, plugins.exchange(config.protocol))
    shares = {}
    for party in party_ids(config):
        own = own_rows(config, party, **files.get(party, {}))
        shares[party] = with_own_rows(share_of(world, party), own)
        if "owner" in own:
            shares[party] = holding(shares[party], party, own["owner"])
    return shares


def problems(scenario, shares, *, served: bool) -> list[str]:
    exchange = plugins.exchange(scenario.config.protocol)
    view = exchange.declared_view(scenario.config)
    assert view is not None, f"{scenario.config.protocol} declares no view"
    plan = exchange.release_plan(scenario.config, CHANGED)
    assert plan is not None
    return coupled_problems(scenario, shares, view, served=served, relation=plan.relation)


@pytest.mark.parametrize(
    ("protocol", "section"),
    [pytest.param(p, SECTIONS[p], id=p) for p in sorted(SECTIONS)]
    + [pytest.param("summarize", PRIVATE_SUMMARIZE, id="summarize-private")],
)
def test_a_served_session_keeps_its_declared_view(protocol, section, tmp_path):
    scenario = market(protocol, section)
    assert problems(scenario, own_shares(scenario, tmp_path), served=True) == []


def test_an_assembled_pfds_session_keeps_its_declared_view():
    """pfds learns from a table that it cuts into the owners' shares (it is not served from a public
    schema): parties that run on their own for ``marketplace assemble``, the consumer handed the report."""
    scenario = marketplace.load(
        ROOT / "scenarios" / "pfds-synthetic.yaml", sets=["parties.owners=4", "data.source.table.synthetic.rows=2000"]
    )
    assert problems(scenario, run_shares(scenario), served=True) == []


def test_every_shipped_protocol_declares_its_view():
    for name in ("pfds", "sketch", "stc", "summarize"):
        scenario = market(name, SECTIONS.get(name, {})) if name != "pfds" else None
        config = (
            scenario.config
            if scenario is not None
            else marketplace.load(ROOT / "scenarios" / "pfds-synthetic.yaml").config
        )
        view = plugins.exchange(name).declared_view(config)
        assert view and all(isinstance(seen, Seen) for seen in view), name


@pytest.mark.parametrize("private", [True, False], ids=["private", "non-private"])
def test_a_neighbour_that_changes_a_point_owner_1_sold_differs_only_in_disclosures(private, tmp_path):
    """The neighbour changes the first point owner-1 sold (its last row is never bid for: a test of
    it alone would see nothing move), so the bids, the sold point and everything computed from it
    differ: each must be a declared disclosure."""
    from marketplace.differential import session
    from marketplace.privacy.coupling import Coupling

    section = PRIVATE_SUMMARIZE if private else SECTIONS["summarize"] | {"rounds": 8}
    scenario = market("summarize", section)
    shares = own_shares(scenario, tmp_path)
    sold = session(scenario, shares, Coupling("record"), served=False).results[CHANGED]["sent_rows"]
    assert sold, "owner-1 sold nothing: choose settings under which it sells"
    exchange = plugins.exchange("summarize")
    view = exchange.declared_view(scenario.config)
    relation = exchange.release_plan(scenario.config, CHANGED).relation
    found = coupled_problems(scenario, shares, view, served=True, relation=relation, row=sold[0])
    assert found == []
    undisclosed = [Seen(s.observer, s.field, "public", s.note) if s.kind == "disclosure" else s for s in view]
    found = coupled_problems(scenario, shares, undisclosed, served=True, relation=relation, row=sold[0])
    assert any(p.startswith("curator receives 'point<owner-1#0>.x") for p in found), found  # it did move
    if not private:  # the point entered D_s: what the consumer computes from the summary moved too
        assert any(p.startswith("consumer receives 'report.metrics.mmd2'") for p in found), found
