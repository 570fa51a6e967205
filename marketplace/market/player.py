"""Play a market: the request stream once per scheduling rule, each rule from fresh ledgers.

For each rule, in ``<out>/<rule>/`` (``<out>/repeat-<i>/<rule>/`` when the market is played more
than once): ``ledgers/`` holds the owners' lifetime ledgers (created by the owners on their first
request), ``keys/<request>/`` every party's noise key for that request, and ``<request>/`` the
request's run folder (report.json, messages.csv, ...). The market runner
derives every key from (market seed, rule, request id, party) and so holds them all: a simulation
that reproduces itself from one seed, like ``marketplace run``, not a deployment.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marketplace import plugins
from marketplace.market.spec import MarketSpec, Request
from marketplace.privacy import noise
from marketplace.privacy.lifetime import COUNTED, LifetimeLedger, ledger_file
from marketplace.roles.pricing import refusal
from marketplace.scheduling.costs import declared_costs
from marketplace.scheduling.rules import Amounts, Demand, amounts, filter_budget, make_rule

if TYPE_CHECKING:
    from marketplace.api import Driver, Launch

NOISE_KEY_PERSON = b"market-noise-key"


def noise_key(seed: int, rule: str, request_id: str, party: str) -> bytes:
    """The 32-byte noise key of ``party`` for one request of one rule's play: a BLAKE2b hash of
    (market seed, rule, request id, party), so that every request draws fresh noise and the same
    seed gives the same market."""
    text = "\x00".join((str(seed), rule, request_id, party)).encode()
    return hashlib.blake2b(text, digest_size=noise.KEY_BYTES, person=NOISE_KEY_PERSON).digest()


SEED_DERIVED = (
    "every party's noise key was derived by the market runner from (market seed, rule, request id, party): "
    "anyone who knows the market seed, or can read the keys/ folder, can recompute and strip every party's "
    "noise; a simulation that reproduces itself, not a deployment (where each party keeps a key nobody else holds)"
)
"""The noise line of every request a market plays: its parties read keys from files, but the files are
the seed's, so what a run would say of key files ("only whoever can read a party's key file") is not
all there is to say."""


def seed_derived_noise(report: Mapping[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """``report`` with its noise section saying that every key came from the market seed (and the
    parties' ``who_can_strip`` too); rewritten into ``folder/report.json`` when that exists."""
    out = dict(report)
    noise_section = out.get("noise")
    if isinstance(noise_section, dict) and noise_section.get("parties"):
        parties = {
            p: dict(d) | {"who_can_strip": "anyone who knows the market seed (the key is derived from it)"}
            for p, d in noise_section["parties"].items()
        }
        out["noise"] = noise_section | {"summary": SEED_DERIVED, "parties": parties}
        if folder is not None and (folder / "report.json").is_file():
            from marketplace.runtime import write_json

            write_json(folder / "report.json", out)
    return out


def write_noise_keys(folder: Path, spec: MarketSpec, rule: str, request: Request) -> Path:
    """Write every party's noise key for ``request`` into ``folder`` and return it."""
    for party in ("curator", *spec.owner_ids, "consumer"):
        noise.write_key(folder, party, noise_key(spec.seed, rule, request.id, party))
    return folder


def ledger_spent(folder: Path, owner: str) -> dict[str, float]:
    """What ``owner``'s lifetime ledger in ``folder`` counts as spent, in its filter's dimensions
    (empty while the owner has no ledger yet)."""
    path = ledger_file(folder, owner)
    if not path.is_file():
        return {}
    with LifetimeLedger.read(path) as ledger:
        return amounts(ledger.spent())


def request_charges(folder: Path, owners: list[str], request_id: str) -> dict[str, dict[str, float]]:
    """What each owner's ledger in ``folder`` counts for ``request_id`` (committed, or reserved and
    never settled), in its filter's dimensions; owners it charged nothing are left out."""
    out = {}
    for owner in owners:
        path = ledger_file(folder, owner)
        if not path.is_file():
            continue
        with LifetimeLedger.read(path) as ledger:
            row = next((r for r in ledger.history() if r.request_id == request_id), None)
        if row is not None and row.state in COUNTED:
            out[owner] = amounts(row.charged)
    return out


@dataclass
class Outcome:
    """What became of one request under one rule."""

    request: Request
    status: str
    order: int | None = None
    folder: str | None = None
    report: Mapping[str, Any] | None = None
    reason: str | None = None
    charged: dict[str, dict[str, float]] = field(default_factory=dict)
    """Owner -> what its ledger charged for this request."""
    seconds: float = 0.0


@dataclass
class Play:
    """One rule's play: every request's outcome (stream order), and each owner's spend after each arrival."""

    rule: str
    outcomes: list[Outcome]
    timeline: list[dict[str, dict[str, float]]] = field(default_factory=list)
    seconds: float = 0.0


RunRequest = Callable[[Any, Path, "Driver", "Launch"], Mapping[str, Any]]


def run_request(scenario: Any, folder: Path, driver: Driver, launch: Launch) -> Mapping[str, Any]:
    """Run one request's scenario to its end and return its report (a failed run's too)."""
    from marketplace.api import run

    return run(scenario, folder, driver=driver, launch=launch, check=False).raw


def demands(spec: MarketSpec) -> dict[str, Demand]:
    """Each request's charge per owner (in the filter's dimensions), from its declared costs."""
    out = {}
    for request in spec.requests:
        config = spec.scenario(request).config
        costs = declared_costs(config, spec.owner_ids, spec.relation, spec.filter, plugins.exchange(config.protocol))
        out[request.id] = Demand(
            request.id, request.index, {o: amounts(c[1]) for o, c in costs.items() if c is not None}
        )
    return out


def filter_budgets(spec: MarketSpec) -> dict[str, Amounts]:
    """Every owner's lifetime budget in the filter's dimensions."""
    return {o: filter_budget(spec.filter, spec.budget_of(o).epsilon, spec.budget_of(o).delta) for o in spec.owner_ids}


def play_rule(
    spec: MarketSpec,
    rule: str,
    out: Path,
    *,
    driver: Driver,
    launch: Launch = "forkserver",
    runner: RunRequest = run_request,
    on_request: Callable[[str, Outcome], None] | None = None,
    where: str | None = None,
) -> Play:
    """Play the stream under ``rule`` into ``out`` (a new folder): requests arrive in stream order,
    the rule picks which waiting request runs next, each run's owners charge their ledgers in
    ``out/ledgers``. ``where`` is ``out`` relative to the market's folder (default: the rule), the
    start of each outcome's ``folder``. Returns the :class:`Play`."""
    start = time.perf_counter()
    ledgers, asked = out / "ledgers", demands(spec)
    ledgers.mkdir(parents=True, exist_ok=False)
    scheduler = make_rule(rule, filter_budgets(spec), unlock_steps=spec.unlock_steps)
    outcomes: dict[str, Outcome] = {}
    timeline: list[dict[str, dict[str, float]]] = []
    spent = {o: ledger_spent(ledgers, o) for o in spec.owner_ids}
    by_id = {r.id: r for r in spec.requests}
    for n, request in enumerate(spec.requests, start=1):
        scheduler.arrive(asked[request.id])
        if n == len(spec.requests):
            scheduler.close()
        while (grant := scheduler.next_grant(spent)) is not None:
            granted = by_id[grant.id]
            scenario = spec.scenario(
                granted,
                rule=rule,
                ledgers=ledgers.resolve(),
                noise_keys=write_noise_keys(out / "keys" / granted.id, spec, rule, granted).resolve(),
            )
            folder = out / granted.id
            began = time.perf_counter()
            refused = refusal(scenario.config, plugins.exchange(granted.protocol), spec.owner_ids)
            if refused is not None:  # over the consumer's spending budget: it runs nothing, reserves nothing
                outcome = Outcome(granted, "refused", reason=refused)
            else:
                report = seed_derived_noise(runner(scenario, folder, driver, launch), folder)
                outcome = classify(granted, report, set(asked[granted.id].charges))
                outcome.folder = f"{where or rule}/{granted.id}"
            outcome.order = len(outcomes) + 1
            outcome.seconds = time.perf_counter() - began
            outcome.charged = request_charges(ledgers, spec.owner_ids, granted.id)
            outcomes[granted.id] = outcome
            spent = {o: ledger_spent(ledgers, o) for o in spec.owner_ids}
            if on_request is not None:
                on_request(rule, outcome)
        timeline.append({o: dict(s) for o, s in spent.items()})
    for demand, reason in scheduler.left():
        outcomes[demand.id] = Outcome(by_id[demand.id], "not granted", reason=reason)
        if on_request is not None:
            on_request(rule, outcomes[demand.id])
    return Play(rule, [outcomes[r.id] for r in spec.requests], timeline, time.perf_counter() - start)


def classify(request: Request, report: Mapping[str, Any], asked: set[str]) -> Outcome:
    """A run's status in the market: ``served`` (every owner asked served it), ``partial`` (some
    declined, the run completed), ``declined`` (every owner asked declined), ``failed`` (the run
    failed for another reason)."""
    lifetime = report.get("lifetime") or {}
    declined = set(lifetime.get("declined") or ()) & asked
    completed = report.get("status") == "completed"
    if asked and declined == asked:
        status = "declined"
    elif not completed:
        status = "failed"
    else:
        status = "partial" if declined else "served"
    reason = None
    if status == "failed":
        reason = "; ".join(report.get("failures") or ()) or "the run failed"
    elif declined:
        reason = lifetime.get("summary")
    return Outcome(request, status, report=report, reason=reason)
