"""The Python API: load a scenario, change it, validate it, run it (blocking or in the background)
and sweep it. The ``marketplace`` command line is a thin layer over these functions, so a run from
Python and ``marketplace run`` on the same scenario and seed give the same report.

Everything here is importable from ``marketplace`` itself::

    import marketplace

    scenario = marketplace.load("scenarios/quickstart.yaml", {"summarize.rounds": 20}, seed=3)
    report = marketplace.run(scenario, driver="inprocess")       # a Report; raises RunFailed if the run failed
    report.metrics["mmd2"], report.privacy, report.messages_by_kind, report.history
    report.save("quickstart.json")                              # the same bytes as the run's report.json
    marketplace.Report.load("runs/quickstart-.../")             # read one back

    handle = marketplace.start(scenario)                        # in a background thread
    handle.done(), handle.rounds, handle.result(timeout=600)

    result = marketplace.sweep(scenario, vary={"summarize.rounds": [10, 20]}, repeats=3, progress=True)
    result.rows, result.summary, result.report(0)

Overrides. A scenario is changed by key path, never by a bare field name (``rounds`` belongs to
several protocols): a mapping of dotted paths, ``{"summarize.rounds": 20, "parties.owners": 8}``,
and/or keywords naming top-level keys, ``seed=3`` or ``summarize={"rounds": 20}``. A mapping value
updates the mapping at its key, key by key; any other value replaces. ``load`` takes them, and so
does ``Scenario.with_overrides`` (which returns a new, validated scenario). ``load`` also takes
``sets=["summarize.rounds=20"]``, the command line's ``--set`` texts.

Errors are exceptions with the command line's words: :class:`ScenarioError` for a scenario that
cannot run (it names the file or override, the key path, what was expected and what came, and for
an unknown key the closest valid ones), :class:`DatasetMissing` for a dataset not in the cache
(``err.fetch_command``; a scenario naming one raises a :class:`ScenarioError` that is also a
``DatasetMissing``), :class:`RunFolderError` for an output folder that holds files, and
:class:`RunFailed` for a run that did not complete (``err.report`` is its :class:`Report`).

A script calling :func:`run` needs no ``if __name__ == "__main__":`` guard, under either driver
(see :mod:`marketplace.runtime.forkserver`).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from marketplace.runner.sweep import SweepPoint, SweepResult
    from marketplace.runtime import Report
    from marketplace.scenario import Scenario

__all__ = ["RunFailed", "RunHandle", "Validation", "load", "plan", "run", "start", "sweep", "validate"]

Driver = Literal["processes", "inprocess"]
Launch = Literal["forkserver", "exec"]
Progress = Callable[[int, int], None]
"""``progress(done, total)`` after each of the protocol's rounds; an object that also has a
``phase(text)`` method is told when the run moves on to the evaluation and baselines."""


class RunFailed(RuntimeError):
    """A run that ended ``failed``; ``report`` is its :class:`Report` (written to its folder too).
    A request to a served marketplace that could not be seen through raises its subclass
    :class:`~marketplace.service.client.RequestFailed`, whose ``report`` is None (no report came)."""

    report: Report | None

    def __init__(self, report: Report) -> None:
        self.report = report
        super().__init__("run failed: " + ("; ".join(report.failures) or "(no reason recorded)"))


def load(
    source: Scenario | str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    /,
    *,
    sets: list[str] | tuple[str, ...] = (),
    **fields: Any,
) -> Scenario:
    """A validated scenario from a file path, a mapping (what a file holds) or a scenario, with
    ``overrides`` (``{"summarize.rounds": 20}``), ``sets`` (``["summarize.rounds=20"]``, as
    ``--set``) and keyword ``fields`` (``seed=3``) applied in that order.

    For YAML text use ``Scenario.from_yaml(text)``. Raises :class:`ScenarioError`.
    """
    from marketplace.scenario import Scenario, ScenarioError
    from marketplace.scenario.load import apply_override

    if isinstance(source, Scenario):
        if sets:
            raw = copy.deepcopy(source.raw)
            for assignment in sets:
                apply_override(raw, assignment)
            source = Scenario.from_dict(raw, source=source.source)
        return source.with_overrides(overrides, **fields) if overrides or fields else source
    if isinstance(source, (str, Path)):
        return Scenario.from_file(source, overrides, sets=sets, **fields)
    if isinstance(source, Mapping):
        scenario = Scenario.from_dict(source)
        return load(scenario, overrides, sets=sets, **fields)
    raise ScenarioError(
        "load", "", f"expected a scenario file path, a mapping or a Scenario, got {type(source).__name__}"
    )


def _scenario(scenario: Scenario | str | Path | Mapping[str, Any], seed: int | None) -> Scenario:
    return load(scenario) if seed is None else load(scenario, seed=seed)


@dataclass(frozen=True)
class Validation:
    """A scenario checked as a run checks it before starting (its data built and split): how the
    data came out. ``str()`` is the line ``marketplace validate`` prints."""

    scenario: Scenario
    owners: int
    rows: int
    features: int
    validation_rows: int
    test_rows: int
    seed_set_rows: int
    world: Any = field(repr=False, compare=False)
    """The built data: ``world.owners[i]``, ``world.validation``, ``world.test``, ``world.seed_set``."""

    def __str__(self) -> str:
        from marketplace.reporting.format import plural

        schema = self.scenario.config.data.schema
        if schema is not None:
            return (
                f"{self.scenario.source}: valid ({self.scenario.config.protocol}; {plural(self.owners, 'owner')} and "
                f"the consumer bringing their own rows, described by a public schema of "
                f"{plural(schema.dim, 'feature')} and {plural(len(schema.label.classes), 'class', 'classes')})"
            )
        return (
            f"{self.scenario.source}: valid ({self.scenario.config.protocol}; {plural(self.owners, 'owner')} holding "
            f"{plural(self.rows, 'row')} of {plural(self.features, 'feature')}; the consumer {self.validation_rows} + "
            f"{self.test_rows} rows; seed set {self.seed_set_rows})"
        )


def validate(scenario: Scenario | str | Path | Mapping[str, Any], *, seed: int | None = None) -> Validation:
    """Check ``scenario`` as :func:`run` would before starting anything: every value, the privacy
    plan, and the data (the dataset is in the cache, the world builds and splits among the
    parties). ``seed`` replaces the scenario's. Raises :class:`ScenarioError`."""
    from marketplace import plugins
    from marketplace.runtime import prepare_world

    scenario = _scenario(scenario, seed)
    world = prepare_world(scenario, plugins.exchange(scenario.config.protocol))
    return Validation(
        scenario,
        len(world.owners),
        sum(len(owner) for owner in world.owners),
        world.dim,
        len(world.validation),
        len(world.test),
        len(world.seed_set),
        world,
    )


def output_folder(scenario: Scenario, out: str | Path | None, kind: str = "") -> Path:
    """``out`` if it is new or empty (:class:`RunFolderError` otherwise), else a fresh default
    folder ``runs/<name>[-kind]-<timestamp>``."""
    from marketplace.runtime import check_run_folder, default_run_folder

    return check_run_folder(out) if out is not None else default_run_folder(scenario.config.name, kind)


def run(
    scenario: Scenario | str | Path | Mapping[str, Any],
    out: str | Path | None = None,
    *,
    driver: Driver = "processes",
    launch: Launch = "forkserver",
    seed: int | None = None,
    progress: Progress | bool | None = None,
    check: bool = True,
) -> Report:
    """Run ``scenario`` to the end and return its :class:`Report` (also written to ``out``).

    ``out`` is the run folder, new or empty (default: ``runs/<name>-<timestamp>``, as the command
    line). ``driver``: every party its own OS process over ZeroMQ (``processes``) or one process
    with a deterministic queue (``inprocess``); ``launch``: how the processes driver starts parties
    (``forkserver`` or ``exec``, as a container). ``seed`` replaces the scenario's. ``progress``:
    ``True`` for a live display on stderr, or a :data:`Progress` callable.

    Raises :class:`ScenarioError` (nothing started), :class:`RunFolderError` (``out`` holds files),
    and, when ``check`` (the default), :class:`RunFailed` for a run that did not complete.
    """
    from marketplace.runner.run import check_driver

    check_driver(driver, launch)
    scenario = _scenario(scenario, seed)
    return _run_in(scenario, output_folder(scenario, out), driver=driver, launch=launch, progress=progress, check=check)


def _run_in(
    scenario: Scenario, folder: Path, *, driver: Driver, launch: Launch, progress: Progress | bool | None, check: bool
) -> Report:
    """:func:`run` in ``folder``, once the folder and the driver are checked."""
    from marketplace.runner.run import run_in_folder
    from marketplace.runtime import Report

    if progress is True:
        from rich.console import Console

        from marketplace.runner.display import round_progress

        with round_progress(Console(stderr=True), scenario.config.name) as shown:
            raw = run_in_folder(scenario, folder, driver=driver, launch=launch, on_round=shown, on_phase=shown.phase)
    else:
        on_round = progress if callable(progress) else None
        raw = run_in_folder(
            scenario, folder, driver=driver, launch=launch, on_round=on_round, on_phase=getattr(on_round, "phase", None)
        )
    report = Report.from_dict(raw, folder)
    if check and not report.completed:
        raise RunFailed(report)
    return report


class RunHandle:
    """A run going on in a background thread (from :func:`start`): ``done()``, ``result(timeout)``,
    ``exception(timeout)``, ``rounds`` (the latest ``(done, total)``), ``out`` (its folder)."""

    def __init__(self, scenario: Scenario, out: Path) -> None:
        self.scenario = scenario
        self.out = out
        self.rounds: tuple[int, int] | None = None
        self.future: Future[Report] = Future()

    def done(self) -> bool:
        """Whether the run has ended (completed, failed or raised)."""
        return self.future.done()

    def result(self, timeout: float | None = None) -> Report:
        """The report, waiting up to ``timeout`` seconds (``None``: as long as it takes). Raises
        what :func:`run` raises, or :class:`TimeoutError` if the run is still going."""
        return self.future.result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """What the run raised, or ``None``; waits as :meth:`result` does."""
        return self.future.exception(timeout)

    def __repr__(self) -> str:
        state = "done" if self.done() else f"running, rounds {self.rounds}" if self.rounds else "running"
        return f"RunHandle({self.scenario.config.name!r}, {self.out}, {state})"


def start(
    scenario: Scenario | str | Path | Mapping[str, Any],
    out: str | Path | None = None,
    *,
    driver: Driver = "processes",
    launch: Launch = "forkserver",
    seed: int | None = None,
    progress: Progress | None = None,
    check: bool = True,
) -> RunHandle:
    """:func:`run` in a background thread; returns at once with a :class:`RunHandle`. The scenario,
    the driver and the run folder are checked before it returns (raising as :func:`run` does);
    everything after that is raised by ``handle.result()``."""
    from marketplace.runner.run import check_driver

    check_driver(driver, launch)
    scenario = _scenario(scenario, seed)
    folder = output_folder(scenario, out)
    handle = RunHandle(scenario, folder)

    def follow(done: int, total: int) -> None:
        handle.rounds = (done, total)
        if progress is not None:
            progress(done, total)

    def work() -> None:
        if not handle.future.set_running_or_notify_cancel():
            return
        try:
            handle.future.set_result(
                _run_in(scenario, folder, driver=driver, launch=launch, progress=follow, check=check)
            )
        except BaseException as err:  # noqa: BLE001 - handed to whoever asks for the result
            handle.future.set_exception(err)

    threading.Thread(target=work, name=f"marketplace-run-{scenario.config.name}").start()
    return handle


def plan(
    scenario: Scenario | str | Path | Mapping[str, Any],
    vary: Mapping[str, list[Any]] | None = None,
    *,
    repeats: int | None = None,
    seed: int | None = None,
) -> list[SweepPoint]:
    """Every run of a sweep, validated, without running any: the scenario's own ``sweep.vary``
    updated with ``vary`` (key path -> list of values; every combination), each ``repeats`` times
    (default: ``sweep.repeats``) with seeds ``seed, seed + 1, ...``. Raises :class:`ScenarioError`
    naming the sweep value at fault."""
    from marketplace.runner.sweep import plan_sweep
    from marketplace.scenario import ScenarioError

    scenario = _scenario(scenario, seed)
    axes = {key: list(values) for key, values in scenario.config.sweep.vary.items()}
    for key, values in (vary or {}).items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise ScenarioError("vary", str(key), f"expected a list of values, got {values!r}")
        axes[key] = list(values)
    return plan_sweep(scenario, axes, scenario.config.sweep.repeats if repeats is None else repeats)


def sweep(
    scenario: Scenario | str | Path | Mapping[str, Any],
    vary: Mapping[str, list[Any]] | None = None,
    *,
    repeats: int | None = None,
    out: str | Path | None = None,
    driver: Driver = "processes",
    launch: Launch = "forkserver",
    seed: int | None = None,
    progress: bool = False,
    on_run: Callable[[SweepPoint, dict[str, Any]], None] | None = None,
) -> SweepResult:
    """Run the sweep :func:`plan` describes, one run after the other, and return its
    :class:`SweepResult`. Writes ``runs.csv`` (after every run), ``summary.csv``, ``sweep.png``
    (when a numeric key is swept) and each run's folder under ``out`` (default:
    ``runs/<name>-sweep-<timestamp>``). ``on_run(point, row)`` is called as each run finishes;
    ``progress=True`` prints a line per finished run (and a progress bar on a terminal). A run
    that fails is a row with its status, not an exception."""
    from marketplace.runner.sweep import SweepResult, run_folder, run_sweep, summarize_rows
    from marketplace.runtime import default_run_folder

    points = plan(scenario, vary, repeats=repeats, seed=seed)
    # the folder and the driver are checked by run_sweep, before its first run
    folder = Path(out) if out is not None else default_run_folder(points[0].scenario.config.name, "sweep")
    keys = list(points[0].values) if points else []
    if progress:
        from rich.console import Console

        from marketplace.runner.display import sweep_progress

        with sweep_progress(Console(), len(points)) as shown:

            def both(point: SweepPoint, row: dict[str, Any]) -> None:
                shown(point, row)
                if on_run is not None:
                    on_run(point, row)

            rows = run_sweep(points, folder, driver=driver, launch=launch, on_run=both)
    else:
        rows = run_sweep(points, folder, driver=driver, launch=launch, on_run=on_run)
    return SweepResult(rows, summarize_rows(rows, keys), keys, folder, [run_folder(folder, p) for p in points])
