"""Which run and which scenario a party report belongs to, so that reports of different runs are
never assembled into one.

Parties that run on their own (containers, other machines) each write a report; ``marketplace
assemble`` joins them. Every report carries the run id and the scenario's identity: its name, seed,
protocol and a fingerprint of everything in it that shapes the run. ``transport`` (timeouts, key
folder) and file locations may differ from party to party and are left out, so the owner at another
site with its data under another path still matches.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from marketplace.scenario import Scenario
from marketplace.scenario.fingerprint import fingerprint


class ReportMismatch(ValueError):
    """Party reports that do not belong together, or to the scenario given (exit status 2)."""


def scenario_fingerprint(scenario: Scenario) -> str:
    """SHA-256 (hex, first 16 digits) of the scenario's configuration fingerprint: the parts every
    party must agree on (:mod:`marketplace.scenario.fingerprint`, the same check the curator makes
    at hello), without ``transport``, ``sweep`` or file locations, which may differ per party."""
    text = json.dumps(fingerprint(scenario.config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def scenario_identity(scenario: Scenario) -> dict[str, Any]:
    """What a party report and a kit record about the scenario they were made for."""
    config = scenario.config
    return {
        "name": config.name,
        "seed": config.seed,
        "protocol": config.protocol,
        "fingerprint": scenario_fingerprint(scenario),
    }


def check_reports(scenario: Scenario, reports: dict[str, dict[str, Any]], paths: dict[str, Path]) -> None:
    """Refuse party reports that were written for another scenario, that name another party than
    their file, or whose run ids differ. ``reports`` maps party id -> report (only those read)."""
    expected = scenario_identity(scenario)
    for party, rep in reports.items():
        path = paths[party]
        if rep.get("id") != party:
            raise ReportMismatch(f"{path}: the report of party {rep.get('id')!r}, expected {party!r}")
        got = rep.get("scenario")
        if not isinstance(got, dict) or "fingerprint" not in got:
            raise ReportMismatch(
                f"{path}: names no scenario (a report from an older marketplace version?): "
                f"expected scenario {expected['name']!r} with fingerprint {expected['fingerprint']}"
            )
        if got.get("fingerprint") != expected["fingerprint"]:
            raise ReportMismatch(
                f"{path}: written for scenario {got.get('name')!r} (seed {got.get('seed')}, protocol "
                f"{got.get('protocol')}, "
                f"fingerprint {got.get('fingerprint')}), but the scenario given is {expected['name']!r} (seed "
                f"{expected['seed']}, "
                f"protocol {expected['protocol']}, fingerprint {expected['fingerprint']}): pass the scenario the "
                f"parties ran "
                f"(--scenario), with the same --set overrides"
            )
    run_ids = {party: rep.get("run_id") for party, rep in reports.items()}
    if len(set(run_ids.values())) > 1:
        shown = ", ".join(f"{party} {rid!r}" for party, rid in run_ids.items())
        raise ReportMismatch(
            f"the party reports come from different runs (run ids: {shown}): assemble the reports of one run only"
        )
