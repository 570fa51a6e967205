"""The market file: one marketplace (owners, their data and lifetime budgets) and a stream of
consumer requests against it, read and checked before anything runs.

A market file is YAML with three top-level keys::

    market:                      # the marketplace
      name: demo
      seed: 11                   # the data split, public randomness and every request's noise keys
      owners: 16
      budget: {epsilon: 3.0, delta: 0.0}          # each owner's lifetime budget ...
      owner_budgets: {owner-3: {epsilon: 0.5}}    # ... or its own
      relation: add/remove-one   # what the budgets are stated under
      filter: basic              # basic | zcdp
      rules: [fcfs, dpf]         # the scheduling rules to compare (default: both)
      unlock_steps: null         # dpf: 1/N of each budget unlocks per arriving request (default N: the stream)
      quality: {pfds: pfds_consumer_error}   # what measures a request (default: the protocol's headline figure)
      repeats: 1                 # plays of the whole stream, with seeds seed, seed+1, ... (each from fresh ledgers)
      terms: {price: 1.0, points: 100, points_per_consumer: 20, price_per_eps: 2.0}  # owners' prices: per point
      owner_terms: {owner-2: {price: 3.0}}     # (summarize), per unit eps of privacy (every protocol); or their own
    scenario:                    # what every request starts from: data, transport, shared protocol settings
      data: {...}
      sketch: {lower: [...], upper: [...]}
    requests:
      - {consumer: alice, protocol: sketch, sketch: {epsilon: 0.5}, repeat: 4, arrival: 0, every: 1}
      - {consumer: bob, protocol: sketch, spending_budget: 20.0}   # its money for the owners' privacy prices

Every problem raises :class:`MarketError` naming the file, the key path (``requests[2].protocol``),
what was expected and what came.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marketplace import plugins
from marketplace.privacy.neighbouring import BUDGET_RELATIONS
from marketplace.scenario import Scenario, ScenarioError
from marketplace.scenario.config import LIFETIME_EPSILON
from marketplace.schema import describe_value

_EPSILON_LOW = LIFETIME_EPSILON.min if LIFETIME_EPSILON.min is not None else 0.0
"""The least eps of a budget (LIFETIME_EPSILON states one; number()'s own floor otherwise)."""
RULES = ("fcfs", "dpf")
RELATIONS = BUDGET_RELATIONS
FILTERS = ("basic", "zcdp")
TOP_KEYS = ("market", "scenario", "requests")
MARKET_KEYS = (
    "name",
    "seed",
    "owners",
    "budget",
    "owner_budgets",
    "relation",
    "filter",
    "rules",
    "unlock_steps",
    "quality",
    "terms",
    "owner_terms",
    "repeats",
)
TERMS_KEYS = ("price", "points", "points_per_consumer", "price_per_eps")
"""An owner's sale terms (the scenario's ``lifetime.terms``)."""
REQUEST_KEYS = ("consumer", "protocol", "arrival", "repeat", "every", "data", "spending_budget")
MARKET_OWNED = ("name", "protocol", "seed", "noise", "sweep", "lifetime")
"""Scenario keys the market sets for every request: a market file's ``scenario`` cannot hold them."""
MAX_REQUESTS = 10_000
MAX_REPEATS = 100
"""At most this many plays of the stream (``market.repeats``): each replays every request under every rule."""


class MarketError(ScenarioError):
    """A market file that cannot be played: names the file, the key path, what was expected and what came."""


@dataclass(frozen=True)
class Budget:
    """A lifetime budget (eps, delta)."""

    epsilon: float
    delta: float

    def as_dict(self) -> dict[str, float]:
        """``{"epsilon": .., "delta": ..}``, as the scenario's ``lifetime`` section takes it."""
        return {"epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True)
class Request:
    """One consumer request of the stream (after ``repeat`` is expanded): its id (``req-0001``, in
    arrival order), its position, who asks, the protocol, the scenario values it sets (its protocol
    section and ``data.consumer``), its arrival time and the list entry it came from."""

    id: str
    index: int
    consumer: str
    protocol: str
    values: Mapping[str, Any]
    arrival: float
    entry: int
    spending_budget: float | None = None
    """The consumer's money for the owners' privacy prices of this request (the scenario's
    ``lifetime.spending_budget``): priced above it, the request is refused before anything is reserved."""


@dataclass(frozen=True)
class MarketSpec:
    """A validated market: the marketplace, the base scenario of every request, and the stream."""

    name: str
    seed: int
    owners: int
    budget: Budget
    owner_budgets: Mapping[str, Budget]
    relation: str
    filter: str
    rules: tuple[str, ...]
    unlock_steps: int
    base: Mapping[str, Any]
    requests: tuple[Request, ...]
    source: str
    base_dir: Path
    quality: Mapping[str, str] = field(default_factory=dict)
    """Protocol -> the column of its sweep row that measures a request's quality (default: its headline)."""
    repeats: int = 1
    """How many times the whole stream is played under every rule, repeat i with seed ``seed + i``."""
    terms: Mapping[str, Any] | None = None
    """The owners' sale terms (price per point, points in a lifetime and per consumer), for protocols
    that sell points (``summarize``); checked as the scenario's ``lifetime.terms``."""
    owner_terms: Mapping[str, Any] = field(default_factory=dict)
    """Owner id -> its own sale terms instead of ``terms``."""

    @property
    def seeds(self) -> list[int]:
        """The seed of each repeat: seed, seed+1, ..., seed+repeats-1."""
        return [self.seed + i for i in range(self.repeats)]

    @property
    def owner_ids(self) -> list[str]:
        """owner-1 ... owner-K."""
        return [f"owner-{i}" for i in range(1, self.owners + 1)]

    def budget_of(self, owner: str) -> Budget:
        """``owner``'s lifetime budget: its own if the file gives one, else the market's."""
        return self.owner_budgets.get(owner, self.budget)

    def lifetime(self, request: Request, ledgers: str | Path | None) -> dict[str, Any]:
        """The scenario's ``lifetime`` section for ``request`` with its owners' ledgers in ``ledgers``."""
        return {
            "ledgers": None if ledgers is None else str(ledgers),
            "budget": self.budget.as_dict(),
            "owner_budgets": {o: b.as_dict() for o, b in self.owner_budgets.items()},
            "relation": self.relation,
            "filter": self.filter,
            "request_id": request.id if ledgers is not None else None,
            "consumer": request.consumer,
            **({"terms": dict(self.terms)} if self.terms is not None else {}),
            **({"owner_terms": {o: dict(t) for o, t in self.owner_terms.items()}} if self.owner_terms else {}),
            **({"spending_budget": request.spending_budget} if request.spending_budget is not None else {}),
        }

    def scenario_mapping(
        self,
        request: Request,
        *,
        rule: str | None = None,
        ledgers: str | Path | None = None,
        noise_keys: str | Path | None = None,
    ) -> dict[str, Any]:
        """The full scenario of ``request``: the base, then the request's own values, then what the
        market sets (name, protocol, seed, owners, noise keys, lifetime ledgers)."""
        raw = copy.deepcopy(dict(self.base))
        for key, value in request.values.items():
            _merge_into(raw, key, copy.deepcopy(value))
        raw["name"] = f"{self.name}-{rule}-{request.id}" if rule else f"{self.name}-{request.id}"
        raw["protocol"] = request.protocol
        raw["seed"] = self.seed
        raw.setdefault("parties", {})["owners"] = self.owners
        if noise_keys is not None:
            raw["noise"] = {"source": "keys", "keys": str(noise_keys)}
        raw["lifetime"] = self.lifetime(request, ledgers)
        return raw

    def scenario(self, request: Request, **where: Any) -> Scenario:
        """:meth:`scenario_mapping`, validated."""
        return Scenario.from_dict(
            self.scenario_mapping(request, **where), source=f"{self.source} ({request.id})", base_dir=self.base_dir
        )


def _merge_into(raw: dict[str, Any], key: str, value: Any) -> None:
    old = raw.get(key)
    if isinstance(old, dict) and isinstance(value, dict):
        for k, v in value.items():
            _merge_into(old, k, v)
    else:
        raw[key] = value


# --- reading --------------------------------------------------------------------------------


def is_market(raw: Any) -> bool:
    """Whether a parsed YAML document is a market file (a mapping with a top-level ``market:``)."""
    return isinstance(raw, Mapping) and "market" in raw


def read_market(
    source: str | Path | Mapping[str, Any], *, seed: int | None = None, repeats: int | None = None
) -> MarketSpec:
    """A validated :class:`MarketSpec` from a market file's path or from the mapping it holds;
    ``seed`` replaces ``market.seed``, ``repeats`` ``market.repeats``. Raises :class:`MarketError`."""
    from marketplace.scenario.load import read_scenario_text

    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise MarketError(str(path), "", "market file not found" if not path.exists() else "not a regular file")
        raw = read_scenario_text(path.read_text(encoding="utf-8"), str(path))
        name, base_dir, default_name = str(path), path.resolve().parent, path.stem
    elif isinstance(source, Mapping):
        raw, name, base_dir, default_name = source, "<market>", Path.cwd(), "market"
    else:
        raise MarketError("market", "", f"expected a market file path or a mapping, got {describe_value(source)}")
    return parse_market(raw, source=name, base_dir=base_dir, default_name=default_name, seed=seed, repeats=repeats)


class _Checker:
    """Raises :class:`MarketError` for one file, in one format."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, expected: str, got: Any) -> MarketError:
        return MarketError(self.source, path, f"expected {expected}, got {describe_value(got)}")

    def mapping(self, value: Any, path: str, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, "a mapping", value)
        if keys is not None:
            for key in value:
                if key not in keys:
                    raise MarketError(
                        self.source,
                        f"{path}.{key}" if path else str(key),
                        f"no such key; expected one of {', '.join(keys)}",
                    )
        return dict(value)

    def integer(self, value: Any, path: str, low: int, high: int = 2**63 - 1) -> int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= int(value) <= high:
            raise self.fail(path, f"a whole number from {low} to {high}", value)
        return int(value)

    def number(
        self,
        value: Any,
        path: str,
        *,
        low: float = 0.0,
        low_open: bool = False,
        high: float | None = None,
        high_open: bool = False,
    ) -> float:
        ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
        ok = ok and (value > low if low_open else value >= low)
        if ok and high is not None:
            ok = value < high if high_open else value <= high
        if not ok:
            bounds = f"{'>' if low_open else '>='} {low:g}" + (
                f" and {'<' if high_open else '<='} {high:g}" if high is not None else ""
            )
            raise self.fail(path, f"a number {bounds}", value)
        return float(value)

    def text(self, value: Any, path: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(path, "a non-empty string", value)
        return value

    def choice(self, value: Any, path: str, options: tuple[str, ...]) -> str:
        if value not in options:
            raise self.fail(path, f"one of {', '.join(options)}", value)
        return value

    def budget(self, value: Any, path: str, default: Budget | None = None) -> Budget:
        value = self.mapping(value, path, ("epsilon", "delta"))
        if "epsilon" in value:
            eps = self.number(value["epsilon"], f"{path}.epsilon", low=_EPSILON_LOW, high=LIFETIME_EPSILON.max)
        elif default is not None:
            eps = default.epsilon
        else:
            raise MarketError(self.source, f"{path}.epsilon", "missing; a budget needs its epsilon")
        delta = (
            self.number(value["delta"], f"{path}.delta", high=1.0, high_open=True)
            if "delta" in value
            else (default.delta if default is not None else 0.0)
        )
        return Budget(eps, delta)


def parse_market(
    raw: Any,
    *,
    source: str = "<market>",
    base_dir: Path | None = None,
    default_name: str = "market",
    seed: int | None = None,
    repeats: int | None = None,
) -> MarketSpec:
    """Validate a parsed market file (see the module docstring) into a :class:`MarketSpec`: every
    key, and every request's full scenario (so that no request fails to start mid-stream)."""
    check = _Checker(source)
    top = check.mapping(raw, "", TOP_KEYS)
    for key in ("market", "requests"):
        if key not in top:
            raise MarketError(
                source, key, "missing; a market file has `market:` (the marketplace) and `requests:` (the stream)"
            )
    market = check.mapping(top["market"], "market", MARKET_KEYS)
    if "owners" not in market:
        raise MarketError(source, "market.owners", "missing; expected the number of owners K (owner-1 ... owner-K)")
    owners = check.integer(market["owners"], "market.owners", 1, 100_000)
    name = check.text(market.get("name", default_name), "market.name")
    market_seed = check.integer(
        market.get("seed", 0) if seed is None else seed, "market.seed" if seed is None else "--seed", 0
    )
    plays = check.integer(
        market.get("repeats", 1) if repeats is None else repeats,
        "market.repeats" if repeats is None else "--repeats",
        1,
        MAX_REPEATS,
    )
    if market_seed + plays - 1 > 2**63 - 1:
        raise MarketError(
            source,
            "market.repeats" if repeats is None else "--repeats",
            f"repeat {plays - 1} would play with seed {market_seed} + {plays - 1}, past the largest seed 2**63 - 1; "
            "expected a smaller market.seed or fewer repeats",
        )
    budget = check.budget(market.get("budget", {"epsilon": 1.0, "delta": 0.0}), "market.budget")
    owner_budgets = _per_owner(check, market, "owner_budgets", owners, lambda v, at: check.budget(v, at, budget))
    terms = _terms(check, market["terms"], "market.terms") if market.get("terms") is not None else None
    owner_terms = _per_owner(check, market, "owner_terms", owners, lambda v, at: _terms(check, v, at))
    relation = check.choice(market.get("relation", "add/remove-one"), "market.relation", RELATIONS)
    filter_ = check.choice(market.get("filter", "basic"), "market.filter", FILTERS)
    rules = _rules(check, market.get("rules", list(RULES)))
    base = _base(check, top.get("scenario") or {})
    requests = _requests(check, top["requests"])
    quality = {}
    for protocol, column in check.mapping(market.get("quality") or {}, "market.quality").items():
        check.choice(protocol, f"market.quality.{protocol}", tuple(plugins.names()))
        quality[protocol] = check.choice(column, f"market.quality.{protocol}", _quality_columns(protocol))
    steps = market.get("unlock_steps")
    unlock_steps = len(requests) if steps is None else check.integer(steps, "market.unlock_steps", 1)
    spec = MarketSpec(
        name=name,
        seed=market_seed,
        owners=owners,
        budget=budget,
        owner_budgets=owner_budgets,
        relation=relation,
        filter=filter_,
        rules=rules,
        unlock_steps=unlock_steps,
        base=base,
        requests=requests,
        source=source,
        base_dir=base_dir or Path.cwd(),
        quality=quality,
        terms=terms,
        owner_terms=owner_terms,
        repeats=plays,
    )
    _check_scenarios(spec)
    return spec


def _quality_columns(protocol: str) -> tuple[str, ...]:
    """The figures a run of ``protocol`` reports per run (the columns of its sweep rows)."""
    row = plugins.exchange(protocol).sweep_row({})
    return tuple(sorted(k for k in row if "spent" not in k and "eps" not in k))


def _per_owner(
    check: _Checker, market: Mapping[str, Any], key: str, owners: int, read: Callable[[Any, str], Any]
) -> dict[str, Any]:
    """``market.<key>``: owner id -> its own setting, each read by ``read(value, key path)``; an id that
    is not one of owner-1 ... owner-``owners`` is refused, naming it."""
    out = {}
    names = {f"owner-{i}" for i in range(1, owners + 1)} if market.get(key) else set()
    for owner, value in check.mapping(market.get(key) or {}, f"market.{key}").items():
        where = f"market.{key}.{owner}"
        if not isinstance(owner, str) or owner not in names:
            raise MarketError(check.source, where, f"no such owner; expected one of owner-1 ... owner-{owners}")
        out[owner] = read(value, where)
    return out


def _rules(check: _Checker, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise check.fail("market.rules", f"a non-empty list of rules from {', '.join(RULES)}", value)
    for i, rule in enumerate(value):
        check.choice(rule, f"market.rules[{i}]", RULES)
    if len(set(value)) != len(value):
        raise check.fail("market.rules", "each rule once", value)
    return tuple(value)


def _base(check: _Checker, value: Any) -> dict[str, Any]:
    base = check.mapping(value, "scenario")
    for key in base:
        if key in MARKET_OWNED:
            raise MarketError(
                check.source,
                f"scenario.{key}",
                "the market sets this for every request; remove it "
                "(the name, protocol and seed come from `market:` and the request, noise keys and lifetime "
                "ledgers from the market runner)",
            )
    parties = base.get("parties")
    if isinstance(parties, Mapping) and "owners" in parties:
        raise MarketError(
            check.source, "scenario.parties.owners", "set the number of owners with market.owners instead"
        )
    return copy.deepcopy(base)


def _terms(check: _Checker, value: Any, path: str) -> dict[str, Any]:
    """An owner's sale terms: known keys, and its prices (per point, per unit eps) finite and >= 0."""
    terms = check.mapping(value, path, TERMS_KEYS)
    for key in ("price", "price_per_eps"):
        if key in terms:
            terms[key] = check.number(terms[key], f"{path}.{key}")
    return terms


def _requests(check: _Checker, value: Any) -> tuple[Request, ...]:
    if not isinstance(value, list) or not value:
        raise check.fail("requests", "a non-empty list of requests", value)
    protocols = plugins.names()
    expanded: list[tuple[float, int, int, str, str, dict[str, Any], float | None]] = []
    last = 0.0
    for i, entry in enumerate(value):
        where = f"requests[{i}]"
        entry = check.mapping(entry, where)
        for key in ("consumer", "protocol"):
            if key not in entry:
                raise MarketError(
                    check.source, f"{where}.{key}", "missing; every request names its consumer and its protocol"
                )
        consumer = check.text(entry["consumer"], f"{where}.consumer")
        protocol = check.choice(entry["protocol"], f"{where}.protocol", tuple(protocols))
        for key in entry:
            if key not in REQUEST_KEYS and key != protocol:
                raise MarketError(
                    check.source,
                    f"{where}.{key}",
                    f"no such request key; expected one of "
                    f"{', '.join(REQUEST_KEYS)} or {protocol} (the section of the request's protocol)",
                )
        values: dict[str, Any] = {}
        if protocol in entry:
            values[protocol] = check.mapping(entry[protocol], f"{where}.{protocol}")
        if "data" in entry:
            data = check.mapping(entry["data"], f"{where}.data", ("consumer",))
            values["data"] = {"consumer": check.mapping(data.get("consumer") or {}, f"{where}.data.consumer")}
        arrival = check.number(entry["arrival"], f"{where}.arrival") if "arrival" in entry else last
        repeat = check.integer(entry.get("repeat", 1), f"{where}.repeat", 1, MAX_REQUESTS)
        every = check.number(entry.get("every", 0.0), f"{where}.every")
        money = entry.get("spending_budget")
        spending = None if money is None else check.number(money, f"{where}.spending_budget")
        for k in range(repeat):
            expanded.append((arrival + k * every, len(expanded), i, consumer, protocol, values, spending))
        last = arrival + (repeat - 1) * every
        if len(expanded) > MAX_REQUESTS:
            raise check.fail("requests", f"at most {MAX_REQUESTS} requests once repeated", f"{len(expanded)} or more")
    expanded.sort(key=lambda r: (r[0], r[1]))
    return tuple(
        Request(id=f"req-{n:04d}", index=n - 1, consumer=c, protocol=p, values=v, arrival=a, entry=i, spending_budget=b)
        for n, (a, _, i, c, p, v, b) in enumerate(expanded, start=1)
    )


def _check_scenarios(spec: MarketSpec) -> None:
    """Build every list entry's scenario once, and its owners' declared costs, so that a request
    that cannot run is refused now, with its key path."""
    from marketplace.scheduling.costs import NoOwnerCost, declared_costs

    seen: set[int] = set()
    for request in spec.requests:
        if request.entry in seen:
            continue
        seen.add(request.entry)
        where = f"requests[{request.entry}]"
        try:
            scenario = Scenario.from_dict(spec.scenario_mapping(request), source=spec.source, base_dir=spec.base_dir)
        except ScenarioError as err:
            raise _locate(spec.source, where, request.protocol, err) from None
        try:
            exchange = plugins.exchange(request.protocol)  # each request's protocol, resolved as it is checked
            declared_costs(scenario.config, spec.owner_ids, spec.relation, spec.filter, exchange)
        except NoOwnerCost as err:
            raise MarketError(spec.source, f"{where}.protocol", str(err)) from None


def _locate(source: str, where: str, protocol: str, err: ScenarioError) -> MarketError:
    """A request's scenario error, placed in the market file: a key the request set is under
    ``requests[i]``, any other under ``scenario``."""
    text = str(err)
    prefix = f"{err.source}: {err.path}: " if err.path else f"{err.source}: "
    message = text[len(prefix) :] if text.startswith(prefix) else text
    path = err.path or ""
    if path.split(".")[0] == protocol or path.startswith("data.consumer"):
        return MarketError(source, f"{where}.{path}", message)
    if path.startswith("lifetime"):
        return MarketError(source, "market", f"{path}: {message}")
    return MarketError(source, f"scenario.{path}" if path else where, message + f" (in the scenario of {where})")


def is_market_file(path: str | Path) -> bool:
    """Whether ``path`` holds a market file (YAML whose top level has ``market:``); False for
    anything else, including a file that cannot be read (the scenario reader then says why)."""
    from marketplace.scenario.load import read_yaml

    try:
        return is_market(read_yaml(Path(path).read_text(encoding="utf-8")))
    except Exception:  # noqa: BLE001 - a file that cannot be read or parsed is not a market file
        return False


def describe(spec: MarketSpec) -> str:
    """One line for ``marketplace validate``: the stream, the owners and the rules."""
    protocols = ", ".join(
        f"{sum(r.protocol == p for r in spec.requests)} {p}" for p in dict.fromkeys(r.protocol for r in spec.requests)
    )
    own = f", {len(spec.owner_budgets)} with a budget of their own" if spec.owner_budgets else ""
    plays = f"; {spec.repeats} repeats, seeds {spec.seed} to {spec.seeds[-1]}" if spec.repeats > 1 else ""
    return (
        f"{spec.source}: valid market ({len(spec.requests)} requests: {protocols}; {spec.owners} owners with lifetime "
        f"budget eps={spec.budget.epsilon:g}, delta={spec.budget.delta:g}{own}; filter {spec.filter}; "
        f"rules {', '.join(spec.rules)}{plays})"
    )


def check_worlds(spec: MarketSpec) -> None:
    """Build the data of every list entry's request as a run would before starting (the dataset is
    in the cache, the world builds and splits among the parties), so that no request fails on its
    data mid-stream. Raises :class:`MarketError` naming the request."""
    from marketplace.runtime import prepare_world

    seen: set[int] = set()
    for request in spec.requests:
        if request.entry in seen:
            continue
        seen.add(request.entry)
        where = f"requests[{request.entry}]"
        try:
            prepare_world(spec.scenario(request), plugins.exchange(request.protocol))
        except ScenarioError as err:
            if "data" in request.values and (err.path or "").startswith("data"):  # the request set its consumer's data
                text, prefix = str(err), f"{err.source}: {err.path}: "
                raise MarketError(
                    spec.source, f"{where}.data", text[len(prefix) :] if text.startswith(prefix) else text
                ) from None
            raise _locate(spec.source, where, request.protocol, err) from None
