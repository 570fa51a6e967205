"""Conformance checks for a protocol plug-in: does it keep the :class:`marketplace.plugins.Exchange` contract?

A plug-in author runs them with pytest, one test per check::

    from marketplace.testing import protocol_checks

    @pytest.mark.parametrize("check", protocol_checks("my_protocol", "scenario.yaml"), ids=str)
    def test_my_protocol_conforms(check):
        check()

or all at once, :func:`check_protocol`, which raises an ``AssertionError`` naming the check that failed.

What is checked (each :class:`Check` is named after it):

* ``contract``: the registered exchange loads, is an Exchange with no required method left out, and its
  ``sweep_headline`` and ``sweep_row({})`` have the expected types;
* ``bad_config``: a bad value of each key of the protocol's section is refused with a
  :class:`~marketplace.schema.SchemaError` (a scenario error) naming that key, and so is an unknown key;
* ``owner_cost_from_settings``: ``owner_cost(config, owner)`` and ``consumer_cost(config)`` answer from
  the settings alone (building the data fails while they run) with a ``Declared`` or None;
* ``runs_inprocess``: the scenario runs to ``completed`` in one process;
* ``sweep_row_spent``: ``sweep_row(report)`` holds ``eps_spent`` and ``delta_spent`` when an owner's
  ledger in the report spent privacy;
* ``owner_cost_covers_releases``: ``owner_cost`` is not None for an owner the report shows released
  something (a ledger that spent eps, or ``guarantee: none``);
* ``declared_cost_covers_spending``: what ``owner_cost`` declares covers what each owner's ledger in the
  report spent (its eps and delta, or its zCDP rho), so a lifetime ledger never charges less than a run
  spends, under the same neighbouring relation: a plug-in that declares eps/10 and spends eps fails,
  naming both figures;
* ``coupled_differential``: the coupled differential test (:mod:`marketplace.differential`) on the
  scenario's data and a neighbour of owner-1's under its release plan's relation: with every release
  coupled, each field the curator, the consumer and the other owners receive is declared in
  ``declared_view``, and one that differs is a declared disclosure;
* ``runs_processes``: the scenario runs to ``completed`` with every party in a process of its own;
* ``report_schema``: both reports follow the report schema with the protocol's fragment;
* ``history_same_under_both_drivers``: the report's per-round history does not depend on the driver.

Each check's ``drivers`` says which runs it needs (a test suite may mark those with ``processes`` slow).

The scenario is the author's (a file path, a mapping or a :class:`marketplace.scenario.Scenario`); by
default, ``{"name": "<protocol>-conformance", "protocol": <protocol>}`` with three owners, which
runs only for a protocol whose section and data need nothing set. Keep it small: it runs twice.
The runs write to a temporary folder, removed when the checks are.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from unittest import mock

from marketplace import plugins

BAD_VALUES: tuple[Any, ...] = ({"no_such_key": 1}, "\u2603 not a value", [[["nested"]]])
"""Values that fit no key of a section: a mapping with an unknown key, a string no number or
choice parses, a list of lists."""

Driver = Literal["inprocess", "processes"]
DRIVERS: tuple[Driver, ...] = ("inprocess", "processes")


@dataclasses.dataclass(frozen=True)
class Check:
    """One named conformance check of a protocol; calling it runs the check (AssertionError if it fails)."""

    name: str
    protocol: str
    run: Callable[[], None] = dataclasses.field(repr=False, compare=False)
    drivers: tuple[str, ...] = ()
    """The drivers whose runs the check needs (none: it runs nothing); ``processes`` starts OS processes."""

    def __call__(self) -> None:
        self.run()

    def __str__(self) -> str:
        return f"{self.protocol}-{self.name}"


class _Runs:
    """The scenario of the checks and its two runs, made on first use and shared by every check."""

    def __init__(self, name: str, scenario: Any) -> None:
        self.name = name
        self.given = scenario
        self.reports: dict[str, dict[str, Any]] = {}

    @functools.cached_property
    def folder(self) -> Path:
        """Where the runs write, removed with this object (or at exit)."""
        folder = Path(tempfile.mkdtemp(prefix=f"marketplace-conformance-{self.name}-"))
        weakref.finalize(self, shutil.rmtree, folder, True)
        return folder

    @functools.cached_property
    def scenario(self) -> Any:
        import marketplace
        from marketplace.scenario import ScenarioError

        given = (
            self.given
            if self.given is not None
            else {"name": f"{self.name}-conformance", "protocol": self.name, "parties": {"owners": 3}}
        )
        try:
            scenario = marketplace.load(given)
        except ScenarioError as err:
            how = "pass a small scenario of the protocol (scenario=...)" if self.given is None else "fix the scenario"
            raise AssertionError(f"{self.name}: the conformance scenario does not load: {err}; {how}") from None
        if scenario.config.protocol != self.name:
            raise AssertionError(
                f"{self.name}: the conformance scenario is of protocol "
                f"{scenario.config.protocol!r}, expected {self.name!r}"
            )
        return scenario

    def report(self, driver: Driver) -> dict[str, Any]:
        """The report of the scenario's run under ``driver``, as ``report.json`` holds it (run once)."""
        from marketplace.runner.run import run_scenario

        if driver not in self.reports:
            report = run_scenario(self.scenario, self.folder / driver, driver=driver)
            self.reports[driver] = json.loads(json.dumps(report))  # tuples become lists, as in the file
        return self.reports[driver]


def protocol_checks(name: str, scenario: Any = None) -> list[Check]:
    """The conformance checks of protocol ``name`` (registered under ``marketplace.protocols``), in
    order, run against ``scenario`` (module docstring). The runs are shared: made by the first check
    that needs them, once. A list, so that ``pytest.mark.parametrize`` can take it as it is."""
    runs = _Runs(name, scenario)
    return [
        Check(check.__name__.lstrip("_"), name, functools.partial(check, runs), drivers)
        for check, drivers in (
            (_contract, ()),
            (_bad_config, ()),
            (_owner_cost_from_settings, ()),
            (_runs_inprocess, ("inprocess",)),
            (_sweep_row_spent, ("inprocess",)),
            (_owner_cost_covers_releases, ("inprocess",)),
            (_declared_cost_covers_spending, ("inprocess",)),
            (_coupled_differential, ("inprocess",)),
            (_runs_processes, ("processes",)),
            (_report_schema, DRIVERS),
            (_history_same_under_both_drivers, DRIVERS),
        )
    ]


def check_protocol(name: str, scenario: Any = None) -> None:
    """Run every conformance check of protocol ``name`` against ``scenario``; AssertionError naming the
    first check that fails and why."""
    for check in protocol_checks(name, scenario):
        try:
            check()
        except AssertionError as err:
            raise AssertionError(f"conformance check {check} failed: {err}") from err


def parametrize_checks(name: str, scenario: Any = None) -> Any:
    """``pytest.mark.parametrize("check", protocol_checks(name, scenario), ids=str)``: decorate a test
    ``def test_conforms(check): check()`` with it."""
    import pytest

    return pytest.mark.parametrize("check", protocol_checks(name, scenario), ids=str)


# --- the checks ---------------------------------------------------------------------------------------


def _contract(runs: _Runs) -> None:
    try:
        exchange = plugins.exchange(runs.name)
    except plugins.PluginError as err:
        raise AssertionError(str(err)) from None
    assert isinstance(exchange, plugins.Exchange), f"{runs.name}: the exchange is a {type(exchange).__name__}"
    missing = plugins.missing_methods(type(exchange))
    assert not missing, f"{runs.name}: {type(exchange).__name__} leaves {', '.join(missing)} unimplemented"
    headline = exchange.sweep_headline
    assert isinstance(headline, tuple) and all(isinstance(c, str) for c in headline), (
        f"{runs.name}: sweep_headline must be a tuple of column names, got {headline!r}"
    )
    row = exchange.sweep_row({})  # a market asks an empty report for the columns a protocol knows
    assert isinstance(row, dict), f"{runs.name}: sweep_row({{}}) must return a dict, got {type(row).__name__}"


def _bad_config(runs: _Runs) -> None:
    import marketplace
    from marketplace.scenario import ScenarioError
    from marketplace.schema import SchemaError

    section = plugins.spec(runs.name).config
    keys = [f.name for f in dataclasses.fields(section)] + ["no_such_key"]
    for key in keys:
        where = f"{runs.name}.{key}"
        named = []
        for bad in BAD_VALUES:
            raw = copy.deepcopy(runs.scenario.raw)
            if not isinstance(raw.get(runs.name), dict):
                raw[runs.name] = {}
            raw[runs.name][key] = bad
            try:
                marketplace.load(raw)
            except (ScenarioError, SchemaError) as err:
                path = getattr(err, "path", "")
                assert path == where or path.startswith((f"{where}.", f"{where}[")), (
                    f"{where} = {bad!r} was refused naming {path!r} instead of {where!r}: {err}"
                )
                named.append(bad)
            except Exception as err:  # a crash on a bad value is what this check finds
                raise AssertionError(
                    f"{where} = {bad!r} raised {type(err).__name__} instead of a scenario error naming the key: {err}"
                ) from err
        assert named, f"{where}: every bad value was accepted ({', '.join(map(repr, BAD_VALUES))})"


@contextmanager
def _no_data() -> Iterator[None]:
    """While inside, building a world fails: what runs here works from the settings alone."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("it built the run's data: a declared cost comes from the settings alone")

    with mock.patch("marketplace.parties.make_world", refuse), mock.patch("marketplace.data.world.build_world", refuse):
        yield


def _owner_cost_from_settings(runs: _Runs) -> None:
    from marketplace.parties import party_ids
    from marketplace.privacy.lifetime import Declared

    config, exchange = runs.scenario.config, plugins.exchange(runs.name)
    with _no_data():
        declared = {owner: exchange.owner_cost(config, owner) for owner in party_ids(config)[1:-1]}
        declared["consumer"] = exchange.consumer_cost(config)
    for party, value in declared.items():
        assert value is None or isinstance(value, Declared), (
            f"{runs.name}: the declared cost of {party} must be a marketplace.privacy.lifetime.Declared or None, "
            f"got {type(value).__name__}"
        )


def _completed(runs: _Runs, driver: Driver) -> dict[str, Any]:
    report = runs.report(driver)
    assert report.get("status") == "completed", (
        f"{runs.name}: the run under the {driver} driver ended {report.get('status')!r}: {report.get('failures')}"
    )
    return report


def _runs_inprocess(runs: _Runs) -> None:
    _completed(runs, "inprocess")


def _runs_processes(runs: _Runs) -> None:
    _completed(runs, "processes")


def _report_schema(runs: _Runs) -> None:
    from marketplace.runner.report_schema import report_problems

    for driver in DRIVERS:
        problems = report_problems(_completed(runs, driver))
        assert not problems, f"{runs.name}: the {driver} run's report departs from the schema: " + "; ".join(problems)


def _spent(ledger: Any) -> bool:
    """Whether a report's ledger says it spent privacy (a positive eps)."""
    eps = ledger.get("eps") if isinstance(ledger, Mapping) else None
    return isinstance(eps, (int, float)) and eps > 0


def _sweep_row_spent(runs: _Runs) -> None:
    report = _completed(runs, "inprocess")
    row = plugins.exchange(runs.name).sweep_row(report)
    assert isinstance(row, dict), f"{runs.name}: sweep_row must return a dict, got {type(row).__name__}"
    owners = [p for p in report.get("privacy") or {} if p.startswith("owner-")]
    if not any(_spent(report["privacy"][p]) for p in owners):
        return  # no owner spent privacy: nothing to record
    for column in ("eps_spent", "delta_spent"):
        value = row.get(column)
        assert isinstance(value, (int, float)) and math.isfinite(value), (
            f"{runs.name}: the report's owners spent privacy, so sweep_row must record {column} (a number), "
            f"got {value!r}"
        )


def _history_same_under_both_drivers(runs: _Runs) -> None:
    inprocess, processes = (_completed(runs, driver).get("history") for driver in DRIVERS)
    assert inprocess == processes, (
        f"{runs.name}: the report's history differs between the drivers (inprocess: "
        f"{json.dumps(inprocess)[:300]}; processes: {json.dumps(processes)[:300]})"
    )


def _owner_cost_covers_releases(runs: _Runs) -> None:
    config, exchange = runs.scenario.config, plugins.exchange(runs.name)
    for owner, ledger in (_completed(runs, "inprocess").get("privacy") or {}).items():
        released = isinstance(ledger, Mapping) and (_spent(ledger) or ledger.get("guarantee") == "none")
        if owner.startswith("owner-") and released:
            assert exchange.owner_cost(config, owner) is not None, (
                f"{runs.name}: the report shows {owner} released something ({json.dumps(ledger)[:200]}) but "
                "owner_cost says the run releases nothing of its data (None)"
            )


SLACK = 1e-9
"""Relative slack of :func:`_covers`: a declared cost computed in another order than the ledger's sum
may differ from it in the last bits."""


def _covers(spent: Mapping[str, Any], cost: Any) -> bool:
    """Whether a declared ``cost`` (a :class:`~marketplace.privacy.lifetime.Cost`) bounds what a report's
    ledger ``spent``: its (eps, delta) within the declared (eps, delta); or, for a declared rho-zCDP,
    the ledger's rho within it, or its pure eps-DP (eps-DP implies eps^2/2-zCDP)."""
    eps, delta, rho = spent.get("eps"), spent.get("delta") or 0.0, spent.get("rho")
    if cost.eps is not None and isinstance(eps, (int, float)):
        if eps <= cost.eps * (1 + SLACK) and delta <= cost.delta * (1 + SLACK):
            return True
    if cost.rho is not None:
        if isinstance(rho, (int, float)) and rho <= cost.rho * (1 + SLACK):
            return True
        if isinstance(eps, (int, float)) and delta == 0 and eps**2 / 2 <= cost.rho * (1 + SLACK):
            return True
    return False


def _declared_cost_covers_spending(runs: _Runs) -> None:
    config, exchange = runs.scenario.config, plugins.exchange(runs.name)
    for owner, ledger in (_completed(runs, "inprocess").get("privacy") or {}).items():
        if not (owner.startswith("owner-") and _spent(ledger)):
            continue
        declared = exchange.owner_cost(config, owner)
        if declared is None or declared.cost is None:
            continue  # None: owner_cost_covers_releases fails it; unbounded: every ledger declines the run
        relation = (ledger.get("neighbouring") or {}).get("relation")
        assert relation in (None, declared.relation), (
            f"{runs.name}: {owner}'s ledger in the report protects under {relation!r} but owner_cost declares its "
            f"cost under {declared.relation!r}: a cost covers a spending only under the same relation"
        )
        spent = {key: ledger.get(key) for key in ("eps", "delta", "rho") if ledger.get(key) is not None}
        assert _covers(ledger, declared.cost), (
            f"{runs.name}: {owner}'s ledger in the report spent {json.dumps(spent)} but owner_cost declares "
            f"{declared.cost} ({declared.relation}): the declared cost, which its lifetime ledger charges, must "
            "cover what the run spends"
        )


def _coupled_differential(runs: _Runs) -> None:
    from marketplace.differential import CHANGED, coupled_problems, run_shares

    scenario, exchange = runs.scenario, plugins.exchange(runs.name)
    view = exchange.declared_view(scenario.config)
    assert view is not None, (
        f"{runs.name}: the exchange declares no view (declared_view): what the curator, the consumer and the "
        "other owners receive of an owner's data must be declared public, a release or a disclosure"
    )
    plan = exchange.release_plan(scenario.config, CHANGED)
    relation = plan.relation if plan is not None else "add/remove-one"
    problems = coupled_problems(scenario, run_shares(scenario), view, served=False, relation=relation)
    assert not problems, (
        f"{runs.name}: the coupled differential test found "
        + "; ".join(problems[:12])
        + (f" (and {len(problems) - 12} more)" if len(problems) > 12 else "")
    )
