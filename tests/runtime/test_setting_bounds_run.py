"""What validates also runs: settings drawn across the accepted range of every numeric setting of each
protocol's section (log-uniform, plus both edges) either are refused when the scenario is validated or
give a run that ends with a report, never a crash (OverflowError, ZeroDivisionError, a NaN that
breaks a solver...) in a party. The runs are tiny (two owners, a few hundred rows, a few rounds) and
in-process.

The float settings are drawn from their ranges as the schema declares them (read from the section's
dataclasses, so a new setting is drawn too), and the choices (mechanism, notion, release, ...) with
them, since each choice does its own arithmetic with the numbers. Counts and sizes stay at the tiny
scenario's values: their upper bounds cost time, not precision, and are checked by
tests/runtime/test_setting_bounds.py."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from marketplace import plugins
from marketplace.runner.run import run_scenario
from marketplace.scenario import ScenarioError, load_scenario
from marketplace.schema import Range

pytestmark = pytest.mark.slow

TINY = {
    "summarize": (
        "quickstart.yaml",
        [
            "parties.owners=2",
            "data.source.covariate_shift.rows_per_component=100",
            "data.source.covariate_shift.dim=2",
            "data.consumer.validation_size=20",
            "data.consumer.test_size=20",
            "data.seed_set.size=5",
            "summarize.rounds=3",
            "summarize.features=8",
            "summarize.privacy.enabled=true",
            "summarize.privacy.t_init=5",
            "summarize.privacy.t_sub=2",
            "summarize.baselines=[]",
        ],
    ),
    "sketch": (
        "sketch-quickstart.yaml",
        [
            "parties.owners=2",
            "data.source.covariate_shift.rows_per_component=150",
            "data.consumer.validation_size=20",
            "data.consumer.test_size=20",
            "sketch.samples=200",
            "sketch.map.features=16",
            "sketch.map.repetitions=4",
            "sketch.map.buckets=4",
            "sketch.map.bins=4",
            "sketch.queries.random_counts=2",
        ],
    ),
    "stc": (
        "stc-synthetic.yaml",
        [
            "data.source.stc_synthetic.n_source=100",
            "data.source.stc_synthetic.n_target=100",
            "data.consumer.validation_size=80",
            "data.consumer.test_size=5",
            "stc.k=3",
            "stc.t=5",
            "stc.kmeans_clusters=4",
            "stc.baselines=[cluster_t, nonprivate_stc, private_kmeans]",
        ],
    ),
    "pfds": (
        "pfds-synthetic.yaml",
        ["parties.owners=2", "data.source.table.synthetic.rows=300", "pfds.h_max=3", "pfds.p=2", "pfds.folds=3"],
    ),
}
"""A tiny scenario of each protocol (a second or so in-process), as a shipped file and overrides."""

NOT_DRAWN = {"secure", "enabled", "precision", "owner_features", "baselines", "partition_attribute"} | {
    "fold",
    "sharers",
    "baseline_agents",
}
"""Settings left alone: OpenDP's samplers (seconds per draw, and their own exact arithmetic), the switch
into the private protocol (always on here), working precisions, what only adds or names work, and
which agents do what in pfds (drawn, they mostly name agents or folds the tiny scenario lacks)."""


def _inner(hint: Any) -> tuple[Any, Range | None]:
    """The plain type of a hint and its range, through ``Annotated`` and ``X | None``."""
    if get_origin(hint) is typing.Annotated:
        base, *meta = get_args(hint)
        inner, bounds = _inner(base)
        return inner, next((m for m in meta if isinstance(m, Range)), bounds)
    if get_origin(hint) in (typing.Union, types.UnionType):
        options = [o for o in get_args(hint) if o is not type(None)]
        if len(options) == 1:
            return _inner(options[0])
    return hint, None


SIZE_CAP = 8
"""Counts and sizes are drawn from their lowest value up to this many times it (at least up to this)."""

EDGE_LEAVE_OUT = {"summarize.privacy.eps_later_rounds"}
"""Left at its default when every other setting sits at an edge (it cannot be set with
``summarize.privacy.total_epsilon``)."""


def drawable(cls: type, prefix: str) -> dict[str, tuple[Range | list[Any], bool]]:
    """Dotted key -> (what to draw: a bounded number's Range or a list of choices, whether null is
    allowed too), for every setting of the section ``cls`` and its nested sections."""
    out: dict[str, tuple[Range | list[Any], bool]] = {}
    hints = get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        if f.name in NOT_DRAWN:
            continue
        key = f"{prefix}.{f.name}"
        hint = hints[f.name]
        optional = get_origin(hint) in (typing.Union, types.UnionType) and type(None) in get_args(hint)
        plain, bounds = _inner(hint)
        if dataclasses.is_dataclass(plain):
            out.update(drawable(plain, key))
        elif plain in (int, float) and bounds is not None and bounds.min is not None:
            if plain is float and bounds.max is not None:
                out[key] = (bounds, optional)
            elif plain is int:
                top = max(SIZE_CAP, SIZE_CAP * int(bounds.min))
                high = top if bounds.max is None else min(top, bounds.max)
                out[key] = (Range(min=bounds.min, max=high), optional)
        elif get_origin(plain) is Literal:
            out[key] = (list(get_args(plain)), optional)
        elif plain is bool:
            out[key] = ([False, True], optional)
    return out


def _edges(bounds: Range) -> tuple[float, float]:
    """The smallest and largest values the range accepts."""
    lo = math.nextafter(bounds.min, math.inf) if bounds.min_open else bounds.min
    hi = math.nextafter(bounds.max, -math.inf) if bounds.max_open else bounds.max
    return lo, hi


def number_in(bounds: Range, integer: bool) -> st.SearchStrategy[float | int]:
    """An edge, or a log-uniform draw across the range (from 1e-12 of its top when it starts at 0)."""
    lo, hi = _edges(bounds)
    if integer:
        return st.integers(int(lo), int(hi))
    low_log = math.log(lo if lo > 0 else hi * 1e-12)
    inside = st.floats(low_log, math.log(hi)).map(lambda x: min(max(math.exp(x), lo), hi))
    return st.one_of(st.sampled_from([lo, hi]), inside)


def settings_of(protocol: str) -> st.SearchStrategy[dict[str, Any]]:
    """Every drawable setting of ``protocol``'s section at once (null now and then when allowed)."""
    section = plugins.protocols()[protocol].config
    hints = {key: _leaf_type(section, key) for key in drawable(section, protocol)}
    strategies = {}
    for key, (what, optional) in drawable(section, protocol).items():
        value = number_in(what, hints[key] is int) if isinstance(what, Range) else st.sampled_from(what)
        strategies[key] = st.one_of(st.none(), value) if optional else value
    return st.fixed_dictionaries(strategies).map(CONSISTENT.get(protocol, dict))


CONSISTENT = {"pfds": lambda values: {**values, "pfds.p": min(values["pfds.p"], values["pfds.h_max"])}}
"""Draws made consistent where a rule between two drawn settings would refuse most of them (pfds:
p <= h_max, which PfdsConfig checks itself)."""


def _leaf_type(cls: type, key: str) -> Any:
    """The plain type of the setting at the dotted ``key`` (its first part names the section ``cls``)."""
    hint: Any = cls
    for part in key.split(".")[1:]:
        hint = _inner(get_type_hints(hint, include_extras=True)[part])[0]
    return hint


CRASHES = ("Traceback", "OverflowError", "ZeroDivisionError", "FloatingPointError", "RecursionError", "MemoryError")


def runs_or_is_refused(protocol: str, values: dict[str, Any], tmp: Path) -> bool:
    """Validate the tiny scenario with ``values``; when it validates, run it: it must end with a
    report, not an exception. Returns whether it ran."""
    file, sets = TINY[protocol]
    try:
        scenario = load_scenario(ROOT / "scenarios" / file, sets).with_overrides(values)
    except ScenarioError:
        return False
    report = run_scenario(scenario, tmp, driver="inprocess")
    crashed = [f for f in report.get("failures") or [] if any(word in str(f) for word in CRASHES)]
    assert not crashed, (values, crashed)
    assert report["status"] in ("completed", "failed"), report["status"]
    return True


PROTOCOLS = sorted(TINY)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_float_setting_is_drawn_from_a_finite_range(protocol):
    section = plugins.protocols()[protocol].config
    keys = drawable(section, protocol)
    floats = [key for key, (what, _) in keys.items() if isinstance(what, Range) and _leaf_type(section, key) is float]
    assert floats, keys
    for key in floats:
        lo, hi = _edges(keys[key][0])
        assert -math.inf < lo < hi < math.inf, key


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("edge", [0, 1], ids=["low", "high"])
def test_every_float_setting_at_its_edge_validates_and_runs(protocol, edge, tmp_path):
    section = plugins.protocols()[protocol].config
    values = {
        key: _edges(what)[edge]
        for key, (what, _) in drawable(section, protocol).items()
        if isinstance(what, Range) and _leaf_type(section, key) is float and key not in EDGE_LEAVE_OUT
    }
    assert runs_or_is_refused(protocol, values, tmp_path / "run"), f"the edges {values} were refused"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_what_validates_runs(protocol, tmp_path_factory):
    ran = []

    @settings(max_examples=50, derandomize=True, database=None)
    @given(values=settings_of(protocol))
    def check(values: dict[str, Any]) -> None:
        ran.append(runs_or_is_refused(protocol, values, tmp_path_factory.mktemp(protocol) / "run"))

    check()
    assert sum(ran) >= len(ran) // 3, f"only {sum(ran)} of {len(ran)} drawn settings validated: the draw tests little"
