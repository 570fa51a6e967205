"""Where the runtime finds its protocols: the ``marketplace.protocols`` entry-point group.

A protocol is a package of its own (the four shipped ones live in ``marketplace/protocols/<name>/``;
a user's can live in any installed distribution). It registers one :class:`ProtocolSpec` under
the entry-point group ``marketplace.protocols``, in its ``pyproject.toml``::

    [project.entry-points."marketplace.protocols"]
    stc = "marketplace.protocols.stc.plugin:PROTOCOL"

The spec is light on purpose: its name, its scenario section (a frozen dataclass that the
scenario schema takes as the section named after the protocol), where its *exchange* is, as
``module:attribute``, and, optionally, where its :class:`ScenarioRules` are (``scenario``): the checks,
release plans and public defaults that reading a scenario needs, in a module that imports no role, so
that reading a scenario imports neither the exchange nor the roles (:func:`scenario_rules`; without
them the exchange answers, as it always did). The exchange, an :class:`Exchange` that builds the
roles and the report, is imported only when a run of that protocol needs it (:func:`exchange`), and checked then: an
object that is not an Exchange, or a subclass that leaves a required method out, is refused with a
:class:`PluginError` naming the entry point and the missing methods, before any run starts.
Loading every spec to build the scenario schema stays cheap.

A plug-in that cannot be loaded (its module is missing, its spec fails the checks) is left out of
:func:`protocols`, and :func:`broken` says why in one line: the other protocols, and every command
that does not use it, work as usual; a scenario that names it is refused with that reason.

Nothing in the runtime names a protocol: the runner, the drivers, the wire and the scenario loader
ask this module. ``docs/extending.md`` describes what an exchange provides;
:mod:`marketplace.testing` checks that a protocol keeps the contract.
"""

from __future__ import annotations

import abc
import functools
import importlib
import importlib.metadata
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

if TYPE_CHECKING:  # types only: the plan's module imports the privacy package, which a spec need not load
    from marketplace.privacy.plan import ReleasePlan
    from marketplace.privacy.view import Seen

GROUP = "marketplace.protocols"
"""The entry-point group every protocol registers under."""

NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
RESERVED = frozenset(
    {"name", "protocol", "seed", "description", "parties", "data", "transport", "noise", "sweep", "lifetime"}
)
"""Top-level scenario keys: a protocol's section cannot take one of these names."""


class PluginError(RuntimeError):
    """A registered protocol that cannot be used: names the entry point and what is wrong."""


@dataclass(frozen=True)
class ProtocolSpec:
    """What a protocol registers: enough to build the scenario schema without importing its roles."""

    name: str
    """The scenario's ``protocol:`` value and the name of its section (lower case, ``[a-z0-9_]``)."""
    config: type
    """The scenario section: a frozen dataclass whose every field has a default, with the
    project's constraint markers (:mod:`marketplace.schema`) on its hints."""
    exchange: str
    """Where the protocol's :class:`Exchange` is, as ``module:attribute``: an Exchange subclass
    (built with no arguments) or instance (:func:`exchange` imports it on first use)."""
    scenario: str | None = None
    """Where the protocol's :class:`ScenarioRules` are, as ``module:attribute`` (a subclass, built with
    no arguments, or an instance): what reading a scenario asks of the protocol (its checks, release
    plans and public defaults), from a module light enough to import without the roles. None: the
    exchange answers for them (:func:`scenario_rules`), which imports the exchange while a scenario is read."""
    messages: str | None = None
    """Dotted path of the module declaring the protocol's message kinds (:class:`marketplace.messages.kinds.Body`);
    imported with the exchange, so every kind a run uses is known before its first frame is decoded."""
    summary: str = ""
    """One line that ``marketplace protocols`` shows."""
    report_schema: str | None = None
    """Where the JSON-schema fragment of the protocol's own report keys is, as ``package:file``
    (a package resource, e.g. ``"my_protocol:report.schema.json"``): an object with ``properties``
    and ``required``, checked for a report of this protocol. None: the report's own keys go unchecked."""
    commands: str | None = None
    """``module:function`` that adds the protocol's own ``marketplace`` subcommands: it is called
    with argparse's subparsers and each subcommand it adds sets ``func(args) -> exit status``."""
    data_sources: tuple[str, ...] = field(default=())
    """Dotted paths of modules that declare a data source (a module-level ``SOURCE``) of this
    protocol's own; they join ``data.source.kind`` for every scenario."""
    owner_publishes: tuple[str, ...] = field(default=())
    """The keys of an owner role's ``result()`` that may leave the owner in a deployment (a served
    session, or parties that run on their own for ``marketplace assemble``): public values and the
    accounts of its declared releases, such as its privacy ledger. Every other key stays in the
    owner's own report, and so do its timings: a key not listed here never reaches another party
    (:mod:`marketplace.runtime.publication`). A simulation's report shows the rest as the simulator's
    view."""
    curator_publishes: str | None = None
    """``module:function`` giving the curator's ``result()`` as it may leave the curator in a
    deployment (a new dict; say, why an owner was excluded without the private figures that decided
    it); None: the whole result."""


class ScenarioRules:
    """What reading a scenario asks of a protocol: the part of its contract that needs no role.

    Reading and validating a scenario (:func:`marketplace.scenario.parse_scenario`) calls these three,
    and nothing else of the protocol. A protocol may name a subclass in its spec (``scenario =
    "package.rules:MyRules"``) from a module that imports no role, so that reading a scenario stays
    cheap; without one its :class:`Exchange`, which is a ScenarioRules too, answers. ``config`` is the
    whole scenario (:class:`marketplace.scenario.config.ScenarioConfig`).
    """

    def check_plan(self, config: Any) -> None:
        """Refuse, before anything starts, a run whose settings cannot work or whose privacy plan exceeds a
        configured budget: raise :class:`marketplace.schema.SchemaError` naming the key. Default: none."""

    def release_plan(self, config: Any, party: str) -> ReleasePlan | None:
        """Every release of ``party``'s data a run may make (:meth:`Exchange.release_plan`). Default: None."""
        return None

    def public_defaults(self, section: dict[str, Any] | None, schema: Any) -> dict[str, Any] | None:
        """For a marketplace described by its public schema (``data.schema``), the protocol's section
        with the bounds it leaves out filled from the schema's ranges (a new dict), or None to leave it
        as it is. Default: None."""
        return None


class Exchange(ScenarioRules, abc.ABC):
    """What the runtime calls for everything protocol-specific: the contract of a protocol's exchange.

    A protocol subclasses it and names the subclass in its :class:`ProtocolSpec` (``exchange =
    "package.module:MyExchange"``). The nine abstract methods are required: a subclass that leaves
    one out is refused when the exchange loads. The other hooks have defaults that change nothing,
    so a protocol overrides only what it needs. ``config`` is the whole scenario (a
    :class:`marketplace.scenario.config.ScenarioConfig`; the protocol's section is the attribute
    named after it), ``world`` the data of the run (:class:`marketplace.data.world.World`),
    ``results`` maps each party id to its role's ``result()``, and ``report`` is the run's report.
    ``docs/extending.md`` (section 4) says what each one does, with an example.
    """

    sweep_headline: ClassVar[tuple[str, ...]] = ()
    """The :meth:`sweep_row` columns a sweep prints as each run finishes (empty: the first three)."""

    # --- required --------------------------------------------------------------------------------

    @abc.abstractmethod
    def build_role(self, config: Any, party: str, world: Any, owner_data: Any, noise: Any = None) -> Any:
        """The :class:`marketplace.roles.Role` of ``party`` (``"curator"``, ``"consumer"`` or
        ``"owner-i"``); ``owner_data`` replaces an owner's share of ``world`` when the owner reads its
        own file, ``noise`` is where the party's noise comes from
        (:func:`marketplace.privacy.noise.derive`)."""

    @abc.abstractmethod
    def check_plan(self, config: Any) -> None:
        """Refuse, before anything starts, a run whose privacy plan exceeds a configured budget:
        raise :class:`marketplace.schema.SchemaError` naming the key."""

    @abc.abstractmethod
    def progress(self, config: Any, curator: Any) -> tuple[int, int]:
        """``(done, total)`` of the run from its curator role (``done`` is usually the role's
        :meth:`~marketplace.roles.Role.progress`), for the in-process driver's progress bar."""

    @abc.abstractmethod
    def report(self, config: Any, world: Any, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The protocol's report sections; must hold ``privacy`` (one ledger per protected party)."""

    @abc.abstractmethod
    def head_rows(self, report: dict[str, Any]) -> list[tuple[str, str]]:
        """Lines ``(label, text)`` of the run's summary table."""

    @abc.abstractmethod
    def tables(self, report: dict[str, Any]) -> list[Any]:
        """The protocol's own ``rich.table.Table`` objects in the terminal summary."""

    @abc.abstractmethod
    def sweep_row(self, report: dict[str, Any]) -> dict[str, Any]:
        """What one run of a sweep records in ``runs.csv``: with ``eps_spent`` and ``delta_spent``
        when the protocol spends privacy. Called with an empty report too (the columns it knows)."""

    @abc.abstractmethod
    def sweep_table(self, summary: list[dict[str, Any]], keys: list[str], title: str) -> Any:
        """A sweep's summary ``rich.table.Table``, one row per point."""

    @abc.abstractmethod
    def plot_sweep(self, summary: list[dict[str, Any]], keys: list[str], path: Path, *, title: str) -> None:
        """Draw the sweep's figure (``sweep.png``) at ``path``."""

    # --- optional hooks: the defaults change nothing -------------------------------------------------

    def check_world(self, config: Any, world: Any) -> None:
        """Settings that need the data: raise ``ValueError("key.path: what is wrong")``. Default: none."""

    def report_without_references(
        self, config: Any, world: Any, results: dict[str, dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The protocol's report sections without the references computed on the whole world (a served
        session that did not ask for them): each reference left out stated in ``references_absent``
        (:mod:`marketplace.reporting.absent`, :data:`~marketplace.reporting.absent.NOT_ASKED`). Default:
        None, the protocol has no such form and :meth:`report` computes them."""
        return None

    def nothing_released(self, config: Any, results: dict[str, dict[str, Any]]) -> str | None:
        """Why the run ended with nothing from the owners (the run then fails), or None. Default: None."""
        return None

    def owner_exposure(self, config: Any, report: dict[str, Any]) -> dict[str, list[Any]] | None:
        """Per owner, what each observer receives of its data and which ledgers bound it
        (:class:`marketplace.reporting.per_owner.Exposure`), or None: the report then says the protocol
        states no model. Default: None."""
        return None

    def release_plan(self, config: Any, party: str) -> ReleasePlan | None:
        """Every release of ``party``'s data a run may make, declared once from the settings alone: a
        :class:`marketplace.privacy.plan.ReleasePlan` (what each release is, who receives it, its
        mechanism, sensitivity, relation, account and cost), whose ledgers the party's role records
        its releases on. The budget check before a run (:meth:`ReleasePlan.check`), the lifetime
        charge (:meth:`owner_cost`, :meth:`consumer_cost`) and the ledger entries all come from it.
        ``party`` is an owner's id or ``"consumer"``. Default: None, no plan (the run's parties then
        declare no finite cost, and a lifetime ledger declines every run)."""
        return None

    def declared_view(self, config: Any) -> tuple[Seen, ...] | None:
        """What each other party receives of an owner's data in a run of ``config``: every field of
        every message the curator, the consumer and the other owners receive, and of the run report
        the consumer gets in a deployment, declared public, a release or a disclosure
        (:class:`marketplace.privacy.view.Seen`; the runtime's own kinds are in
        :data:`marketplace.privacy.view.RUNTIME`). The coupled differential test
        (:mod:`marketplace.differential`) holds the protocol to it. Default: None, no declaration (the
        test then fails, saying so)."""
        return None

    def owner_cost(self, config: Any, party: str) -> Any:
        """What a run may release about owner ``party``'s data at most, from the settings alone: a
        :class:`marketplace.privacy.lifetime.Declared`, or None when nothing derived from its data is
        released. Default: the declaration of :meth:`release_plan`; an unbounded release when the
        protocol declares no plan (an owner keeping a lifetime ledger declines every run)."""
        plan = self.release_plan(config, party)
        return _undeclared(config, "owners") if plan is None else plan.declared()

    def consumer_cost(self, config: Any) -> Any:
        """The same as :meth:`owner_cost` for the consumer's target data."""
        plan = self.release_plan(config, "consumer")
        return _undeclared(config, "consumer") if plan is None else plan.declared()

    def points_for_sale(self, config: Any, party: str) -> int | None:
        """The most of owner ``party``'s own points a run may hand over (a sale under the owner's
        terms: its ledger reserves them before anything leaves), from the settings alone; None when
        the protocol sells no points. Default: None."""
        return None

    def secure_noise(self, config: Any) -> bool:
        """Whether a run of ``config`` draws its noise in ``secure`` mode (OS entropy, OpenDP's exact
        samplers: not reproducible from the seed), as each party's noise description says. Default: False."""
        return False

    def artifacts(self, report: dict[str, Any], out_dir: Path) -> None:
        """Write files of the protocol's own into the run folder. Default: none."""

    def make_world(self, config: Any) -> Any:
        """A :class:`marketplace.data.world.World` of the protocol's own, or None for the one built
        from the scenario's ``data:``. Default: None."""
        return None


def _undeclared(config: Any, who: str) -> Any:
    """The declaration of a protocol that states no lifetime cost: an unbounded release."""
    from marketplace.privacy.lifetime import Declared

    return Declared.unbounded_release(
        f"{config.protocol} ({config.name})",
        f"the {config.protocol!r} protocol declares no lifetime cost for its {who}",
    )


def missing_methods(cls: type) -> list[str]:
    """The abstract methods of :class:`Exchange` that ``cls`` leaves unimplemented, sorted."""
    return sorted(getattr(cls, "__abstractmethods__", ()))


def _check(spec: Any, where: str) -> ProtocolSpec:
    if not isinstance(spec, ProtocolSpec):
        raise PluginError(f"{where}: expected a marketplace.plugins.ProtocolSpec, got {type(spec).__name__}")
    if not NAME.match(spec.name) or spec.name in RESERVED:
        raise PluginError(
            f"{where}: protocol name {spec.name!r} must match {NAME.pattern} and not be one of {sorted(RESERVED)}"
        )
    if not isinstance(spec.config, type):
        raise PluginError(f"{where}: config must be a dataclass type, got {spec.config!r}")
    try:
        spec.config()
    except Exception as err:  # noqa: BLE001 - any failure means the section has no valid default
        raise PluginError(
            f"{where}: the section {spec.config.__name__} must build with every field at its "
            f"default ({type(err).__name__}: {_one_line(str(err))})"
        ) from None
    module, sep, attribute = spec.exchange.partition(":") if isinstance(spec.exchange, str) else ("", "", "")
    if not (sep and module and attribute.isidentifier()):
        raise PluginError(
            f"{where}: exchange must be 'module:attribute' naming a marketplace.plugins.Exchange "
            f"subclass or instance, got {spec.exchange!r}"
        )
    if spec.scenario is not None and not _is_reference(spec.scenario):
        raise PluginError(
            f"{where}: scenario must be 'module:attribute' naming a marketplace.plugins.ScenarioRules "
            f"subclass or instance, or None, got {spec.scenario!r}"
        )
    _check_publication(spec, where)
    return spec


def _is_reference(text: Any) -> bool:
    """Whether ``text`` reads as ``module:attribute``."""
    module, sep, attribute = text.partition(":") if isinstance(text, str) else ("", "", "")
    return bool(sep and module and attribute.isidentifier())


def _check_publication(spec: ProtocolSpec, where: str) -> None:
    """``owner_publishes`` is a tuple of strings, ``curator_publishes`` None or ``module:function``."""
    if not isinstance(spec.owner_publishes, tuple) or not all(isinstance(k, str) for k in spec.owner_publishes):
        raise PluginError(
            f"{where}: owner_publishes must be a tuple of result keys (strings), got {spec.owner_publishes!r}"
        )
    if spec.curator_publishes is None:
        return
    text = spec.curator_publishes if isinstance(spec.curator_publishes, str) else ""
    module, sep, function = text.partition(":")
    if not (sep and module and function.isidentifier()):
        raise PluginError(
            f"{where}: curator_publishes must be 'module:function' or None, got {spec.curator_publishes!r}"
        )


@functools.cache
def _registry() -> tuple[dict[str, ProtocolSpec], dict[str, str]]:
    """Every entry point of the group, loaded and checked once per process: the protocols that load,
    by name, and why each of the others cannot be used, by entry point name (both in name order)."""
    found: dict[str, ProtocolSpec] = {}
    seen: dict[str, str] = {}
    broken: dict[str, str] = {}
    for point in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        if point.name in seen and seen[point.name] == point.value:
            continue  # the same distribution seen twice on sys.path
        try:
            spec = _loaded(point, seen)
        except PluginError as err:
            broken.setdefault(point.name, _one_line(str(err)))
            continue
        found[spec.name] = spec
        seen[spec.name] = point.value
    return found, broken


def _loaded(point: importlib.metadata.EntryPoint, seen: dict[str, str]) -> ProtocolSpec:
    """The checked spec of ``point``, or :class:`PluginError` naming the entry point and what is wrong;
    ``seen`` maps the names already taken to their entry points' values."""
    where = f"entry point {point.name} = {point.value!r} ({GROUP})"
    try:
        spec = _check(point.load(), where)
    except PluginError:
        raise
    except Exception as err:  # noqa: BLE001 - a broken plug-in is reported with its entry point
        raise PluginError(f"{where}: could not be loaded ({type(err).__name__}: {_one_line(str(err))})") from err
    if spec.name != point.name:
        raise PluginError(f"{where}: the entry point is named {point.name!r} but its spec says {spec.name!r}")
    if spec.name in seen:
        raise PluginError(f"{where}: protocol {spec.name!r} is registered twice ({seen[spec.name]!r} too)")
    return spec


def _one_line(text: str) -> str:
    """``text`` with its line breaks (and the indentation after them) turned into single spaces."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def protocols() -> dict[str, ProtocolSpec]:
    """Every registered protocol that loads, by name, in name order (loaded once per process).

    A plug-in that cannot be loaded or fails the checks of its spec is left out, and
    :func:`broken` says why; :class:`PluginError` only when no protocol at all loads (with the
    reasons of those that do not, or saying that none is registered)."""
    found, broken = _registry()
    if not found and broken:
        raise PluginError("; ".join(broken.values()))
    if not found:
        raise PluginError(
            f"no protocol is registered under the entry-point group {GROUP!r}: install the "
            "package (python3 -m pip install -e .) so that its entry points are visible"
        )
    return found


def broken() -> dict[str, str]:
    """The registered plug-ins that cannot be used, in name order: entry point name -> why, in one
    line that names the entry point and the error (``"entry point toy = 'missing_mod:PROTOCOL'
    (marketplace.protocols): could not be loaded (ModuleNotFoundError: No module named 'missing_mod')"``).

    Such a plug-in could not be imported, or its spec failed the checks (not a :class:`ProtocolSpec`,
    a bad or reserved name, a name other than its entry point's, a section that does not build at
    its defaults, an exchange that is not ``module:attribute``, a name registered twice). The other
    protocols work as usual; :func:`spec` of a broken one raises :class:`PluginError` with this
    reason. Loaded once per process, with :func:`protocols`; empty when every plug-in loads."""
    return _registry()[1]


def names() -> tuple[str, ...]:
    """The registered protocol names, sorted."""
    return tuple(protocols())


def spec(name: str) -> ProtocolSpec:
    """The spec of protocol ``name``: :class:`PluginError` saying why when it is installed but cannot
    be loaded (:func:`broken`), ValueError naming the registered ones when it is unknown."""
    found = protocols()
    if name in found:
        return found[name]
    if name in broken():
        raise PluginError(f"protocol {name!r} is installed but cannot be loaded: {broken()[name]}")
    unusable = f" (installed but cannot be loaded: {list(broken())})" if broken() else ""
    raise ValueError(f"unknown protocol {name!r}: use one of {list(found)}{unusable}")


@functools.cache
def exchange(name: str) -> Exchange:
    """The :class:`Exchange` of protocol ``name``, imported on first use (its roles and message kinds
    with it) and checked: :class:`PluginError` naming the entry point when the spec's ``exchange``
    cannot be imported, is not an Exchange, or leaves required methods unimplemented."""
    chosen = spec(name)
    if chosen.messages is not None:
        importlib.import_module(chosen.messages)
    module, _, attribute = chosen.exchange.partition(":")
    where = f"{_where(name)}: exchange {chosen.exchange!r}"
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise PluginError(f"{where} could not be loaded ({type(err).__name__}: {err})") from err
    return checked_exchange(found, where)


@functools.cache
def scenario_rules(name: str) -> ScenarioRules:
    """What reading a scenario of protocol ``name`` asks of it (:class:`ScenarioRules`): the object its
    spec names as ``scenario``, imported on first use without the exchange or the roles, or, when the
    spec names none, its :func:`exchange`. :class:`PluginError` naming the entry point when the object
    cannot be imported or is not a ScenarioRules."""
    chosen = spec(name)
    if chosen.scenario is None:
        return exchange(name)
    module, _, attribute = chosen.scenario.partition(":")
    where = f"{_where(name)}: scenario {chosen.scenario!r}"
    try:
        found = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise PluginError(f"{where} could not be loaded ({type(err).__name__}: {err})") from err
    return cast(ScenarioRules, _instance(found, ScenarioRules, where))


def checked_exchange(found: Any, where: str) -> Exchange:
    """``found`` as an :class:`Exchange` instance (a subclass is built with no arguments), or
    :class:`PluginError` saying, after ``where``, what it is instead or which methods it lacks."""
    cls = found if isinstance(found, type) else type(found)
    if issubclass(cls, Exchange) and (missing := missing_methods(cls)):
        raise PluginError(
            f"{where}: {cls.__qualname__} leaves the required method{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} unimplemented"
        )
    return cast(Exchange, _instance(found, Exchange, where))


def _instance(found: Any, base: type, where: str) -> Any:
    """``found`` as an instance of ``base`` (a subclass is built with no arguments), or
    :class:`PluginError` saying, after ``where``, what it is instead or why it cannot be built."""
    cls = found if isinstance(found, type) else type(found)
    if not issubclass(cls, base):
        raise PluginError(
            f"{where}: expected a subclass or instance of marketplace.plugins.{base.__name__}, got "
            f"{'class' if isinstance(found, type) else 'a'} {cls.__module__}.{cls.__qualname__}"
        )
    if not isinstance(found, type):
        return found
    try:
        return found()
    except Exception as err:  # any failure means the class cannot serve as the plug-in's part
        raise PluginError(
            f"{where}: {cls.__qualname__}() must build with no arguments ({type(err).__name__}: {err})"
        ) from err


def _where(name: str) -> str:
    """How the error messages name protocol ``name``'s entry point."""
    for point in importlib.metadata.entry_points(group=GROUP):
        if point.name == name:
            return f"entry point {point.name} = {point.value!r} ({GROUP})"
    return f"protocol {name!r}"


def load_all() -> dict[str, Exchange]:
    """Every protocol's exchange, imported: after this every message kind of every protocol is
    registered (what a tool that decodes any kind, such as the fuzzer, needs)."""
    return {name: exchange(name) for name in protocols()}


def add_commands(subparsers: Any) -> list[str]:
    """Let every registered protocol add its own subcommands; returns their names."""
    before = set(subparsers.choices)
    for chosen in protocols().values():
        if chosen.commands is None:
            continue
        module, sep, function = chosen.commands.partition(":")
        if not sep:
            raise PluginError(f"protocol {chosen.name!r}: commands must be 'module:function', got {chosen.commands!r}")
        getattr(importlib.import_module(module), function)(subparsers)
    return sorted(set(subparsers.choices) - before)


@functools.cache
def curator_publication(name: str) -> Any:
    """The function protocol ``name``'s spec names as ``curator_publishes`` (imported on first use),
    or None when it names none: the curator's whole result may leave it."""
    where = spec(name).curator_publishes
    if where is None:
        return None
    module, _, function = where.partition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as err:
        raise PluginError(
            f"{_where(name)}: curator_publishes {where!r} could not be loaded ({type(err).__name__}: {err})"
        ) from err


def report_fragment(name: str) -> dict[str, Any] | None:
    """The JSON-schema fragment of protocol ``name``'s own report keys, or None."""
    import json
    from importlib import resources

    where = spec(name).report_schema
    if where is None:
        return None
    package, sep, file = where.partition(":")
    if not sep or not package or not file:
        raise PluginError(f"protocol {name!r}: report_schema must be 'package:file', got {where!r}")
    try:
        fragment = json.loads(resources.files(package).joinpath(file).read_text(encoding="utf-8"))
    except (OSError, ModuleNotFoundError, ValueError) as err:
        raise PluginError(f"protocol {name!r}: cannot read its report schema {where!r} ({err})") from None
    if not isinstance(fragment, dict) or not isinstance(fragment.get("properties"), dict):
        raise PluginError(f"protocol {name!r}: its report schema {where!r} must be an object with 'properties'")
    return fragment
