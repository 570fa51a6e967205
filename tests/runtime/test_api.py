"""The Python API (marketplace.load/validate/run/start/plan/sweep, Report, SweepResult): the
scenario forms and overrides, its errors (with the command line's words), the same report as
`marketplace run` for the same scenario and seed, background runs, sweeps and their printed lines,
and scripts that call it without a main guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import QUICKSTART, ROOT, run_cli, tiny_raw
from golden.view import golden_view

import marketplace
import marketplace.runner.run as runner
import marketplace.runtime.nodes as nodes


def tiny(**summarize) -> marketplace.Scenario:
    return marketplace.load(tiny_raw(**summarize))


# --- loading and overriding ------------------------------------------------------------------------


def test_a_scenario_loads_from_a_file_a_mapping_yaml_text_and_a_scenario_alike(tmp_path):
    raw = tiny_raw()
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    forms = [
        marketplace.load(path),
        marketplace.load(str(path)),
        marketplace.load(raw),
        marketplace.Scenario.from_yaml(yaml.safe_dump(raw)),
        marketplace.Scenario.from_file(path),
        marketplace.Scenario.from_dict(raw),
    ]
    forms.append(marketplace.load(forms[0]))
    assert all(form.config == forms[0].config for form in forms)
    assert forms[0].source == str(path) and forms[2].source == "<dict>"


def test_overrides_by_dotted_path_keyword_and_nested_mapping_give_the_same_scenario():
    base = tiny()
    dotted = base.with_overrides({"summarize.rounds": 4, "seed": 5})
    keywords = base.with_overrides(seed=5, summarize={"rounds": 4})
    loaded = marketplace.load(tiny_raw(), {"summarize.rounds": 4}, seed=5)
    texts = marketplace.load(tiny_raw(), sets=["summarize.rounds=4", "seed=5"])
    assert dotted.config == keywords.config == loaded.config == texts.config
    assert dotted.config.summarize.rounds == 4 and dotted.config.seed == 5
    # a mapping updates key by key: the other summarize settings stay
    assert keywords.config.summarize.gamma == base.config.summarize.gamma == 0.5
    assert base.config.summarize.rounds == 6 and base.config.seed == 11  # the original is unchanged


def test_an_unknown_override_key_is_refused_with_the_closest_key_as_the_command_line_does(tmp_path):
    with pytest.raises(marketplace.ScenarioError) as err:
        marketplace.load(QUICKSTART, {"summarize.round": 3})
    assert (
        str(err.value)
        == "override summarize.round=3: no scenario key 'summarize.round'; did you mean summarize.rounds?"
    )
    cli = run_cli("validate", str(QUICKSTART), "--set", "summarize.round=3")
    assert cli.returncode == 2
    assert cli.stderr.strip() == (
        "marketplace: bad scenario: --set summarize.round=3: no scenario key 'summarize.round'; "
        "did you mean summarize.rounds?"
    )
    with pytest.raises(marketplace.ScenarioError, match="did you mean summarize.rounds"):
        tiny().with_overrides(summarize={"roundz": 3})


def test_a_bad_override_value_names_the_override_the_key_what_was_expected_and_what_came():
    with pytest.raises(marketplace.ScenarioError) as err:
        tiny().with_overrides({"parties.owners": 0})
    assert str(err.value) == "override parties.owners=0: parties.owners: expected a number in [1, 100000], got 0"
    with pytest.raises(
        marketplace.ScenarioError, match=r"override summarize.rounds='many': summarize.rounds: expected an integer"
    ):
        marketplace.load(tiny_raw(), {"summarize.rounds": "many"})
    with pytest.raises(marketplace.ScenarioError, match="expected a mapping of key paths to values"):
        tiny().with_overrides(["summarize.rounds=3"])


def test_a_missing_file_and_bad_yaml_raise_scenario_errors_with_the_command_lines_words(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(marketplace.ScenarioError) as err:
        marketplace.load(missing)
    assert str(err.value) == f"{missing}: scenario file not found"
    cli = run_cli("run", str(missing), "--driver", "inprocess")
    assert cli.returncode == 2 and cli.stderr.strip() == f"marketplace: bad scenario: {err.value}"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(marketplace.ScenarioError) as from_file:
        marketplace.load(bad)
    with pytest.raises(marketplace.ScenarioError) as from_text:
        marketplace.Scenario.from_yaml("name: [unclosed")
    assert str(from_text.value) == str(from_file.value).replace(str(bad), "<yaml>")
    assert str(from_text.value).startswith("<yaml>: not valid YAML at line 1, column 16: expected ',' or ']'")
    with pytest.raises(
        marketplace.ScenarioError, match="expected a scenario file path, a mapping or a Scenario, got int"
    ):
        marketplace.load(42)


def test_a_missing_dataset_is_a_dataset_missing_error_carrying_its_fetch_command(tmp_path):
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    script = (
        "import marketplace\n"
        "try:\n"
        f"    marketplace.load({str(ROOT / 'scenarios' / 'adult.yaml')!r})\n"
        "except marketplace.DatasetMissing as err:\n"
        "    print(isinstance(err, marketplace.ScenarioError), err.fetch_command, err.name)\n"
        "    print(err)\n"
    )
    env = dict(os.environ, MARKETPLACE_DATA=str(empty))
    api = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    first, message = api.stdout.strip().split("\n", 1)
    assert first == "True marketplace data fetch adult adult", api.stderr
    assert message.startswith(
        f"{ROOT / 'scenarios' / 'adult.yaml'}: data.source: dataset 'adult' is not in the data cache"
    )
    cli = subprocess.run(
        [sys.executable, "-m", "marketplace", "validate", str(ROOT / "scenarios" / "adult.yaml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert cli.returncode == 2 and cli.stderr.strip() == f"marketplace: bad scenario: {message}"


def test_validate_builds_the_data_and_prints_what_the_command_line_prints():
    checked = marketplace.validate(QUICKSTART, seed=5)
    assert checked.scenario.config.seed == 5
    assert (
        checked.owners == 4 and checked.features == 10 and checked.validation_rows == 200 and checked.test_rows == 500
    )
    assert checked.rows == sum(len(owner) for owner in checked.world.owners)
    cli = run_cli("validate", str(QUICKSTART), "--seed", "5")
    assert cli.returncode == 0
    assert cli.stderr.strip() == str(checked)
    assert yaml.safe_load(cli.stdout)["seed"] == 5


def test_a_value_only_the_data_can_refuse_is_a_scenario_error_from_validate():
    with pytest.raises(marketplace.ScenarioError, match=r"data\.consumer"):
        marketplace.validate(marketplace.load(tiny_raw(), {"data.consumer.validation_size": 10**5}))


# --- running ------------------------------------------------------------------------------------


def test_a_run_returns_a_typed_report_that_saves_the_very_report_json_the_runner_wrote(tmp_path):
    rounds = []
    report = marketplace.run(
        tiny(), tmp_path / "run", driver="inprocess", seed=3, progress=lambda d, t: rounds.append((d, t))
    )
    assert isinstance(report, marketplace.Report) and report.completed and report.status == "completed"
    assert (
        report.seed == 3
        and report.protocol == "summarize"
        and report.scenario == "tiny"
        and report.driver == "inprocess"
    )
    assert rounds[-1] == (6, 6)
    assert len(report.selection) == 6 and report.outputs["selection"] == report.selection
    assert set(report.outputs) >= {"selection", "metrics", "parsimony"} and "messages" not in report.outputs
    assert report.metrics["mmd2"] == report.raw["metrics"]["mmd2"] and report.parsimony == report.raw["parsimony"]
    assert report.messages_by_kind["request"]["count"] == 6
    assert sum(p["sent"] for p in report.messages_by_party.values()) == report.messages["total"]
    assert set(report.privacy) == set(report.raw["privacy"]) and report.timing["wall_s"] > 0
    assert report.history == report.raw.get("history") and report.failures == []
    assert report.folder == tmp_path / "run"

    saved = report.save(tmp_path / "copy.json")
    assert saved.read_bytes() == (tmp_path / "run" / "report.json").read_bytes()
    again = marketplace.Report.load(tmp_path / "run")
    assert again.raw == report.raw and again.folder == tmp_path / "run"
    assert report.save(tmp_path / "folder").read_bytes() == saved.read_bytes()
    with pytest.raises(FileNotFoundError, match="no such report"):
        marketplace.Report.load(tmp_path / "nothing")


@pytest.mark.parametrize("driver", ["inprocess", pytest.param("processes", marks=pytest.mark.slow)])
def test_marketplace_run_in_python_gives_the_same_report_as_the_command_line_for_the_same_seed(tmp_path, driver):
    cli = run_cli(
        "run",
        str(QUICKSTART),
        "--driver",
        driver,
        "--set",
        "summarize.rounds=5",
        "--seed",
        "3",
        "--out",
        str(tmp_path / "cli"),
        "--quiet",
    )
    assert cli.returncode == 0, cli.stderr
    from_cli = json.loads((tmp_path / "cli" / "report.json").read_text())
    report = marketplace.run(
        marketplace.load(QUICKSTART, {"summarize.rounds": 5}), tmp_path / "api", driver=driver, seed=3
    )
    assert from_cli["seed"] == report.seed == 3
    assert golden_view(report.raw) == golden_view(from_cli)
    other = marketplace.run(
        marketplace.load(QUICKSTART, {"summarize.rounds": 5}), tmp_path / "other", driver="inprocess", seed=4
    )
    assert golden_view(other.raw) != golden_view(from_cli)  # the seed is what makes them equal


def test_a_failed_run_raises_run_failed_carrying_its_report_with_the_command_lines_words(monkeypatch, tmp_path, capsys):
    from hostile_roles import make_hostile

    honest = nodes.build_role

    def build(config, party, **kwargs):
        role = honest(config, party, **kwargs)
        return make_hostile(role, "refuses_target") if party.startswith("owner-") else role

    monkeypatch.setattr(nodes, "build_role", build)
    with pytest.raises(marketplace.RunFailed) as err:
        marketplace.run(tiny(), tmp_path / "run", driver="inprocess")
    report = err.value.report
    assert report.status == "failed" and report.folder == tmp_path / "run"
    assert str(err.value) == "run failed: " + "; ".join(report.failures)
    assert any(f.startswith("every owner was lost") for f in report.failures)
    assert marketplace.Report.load(tmp_path / "run").raw == report.raw
    unchecked = marketplace.run(tiny(), tmp_path / "again", driver="inprocess", check=False)
    assert unchecked.status == "failed"

    from marketplace.cli import main

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_raw()))
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--driver", "inprocess", "--quiet"]) == 3
    assert f"marketplace: run failed: {report.failures[0]}" in capsys.readouterr().err


def test_a_run_refuses_a_folder_with_files_and_an_unknown_driver_before_starting(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("an earlier run")
    with pytest.raises(marketplace.RunFolderError, match="already holds files"):
        marketplace.run(tiny(), tmp_path / "used", driver="inprocess")
    with pytest.raises(marketplace.RunFolderError):
        marketplace.start(tiny(), tmp_path / "used", driver="inprocess")  # at once, not from result()
    with pytest.raises(ValueError, match="driver: expected 'processes' or 'inprocess', got 'threads'"):
        marketplace.run(tiny(), tmp_path / "new", driver="threads")
    assert not (tmp_path / "new").exists()


def test_a_background_run_reports_its_rounds_and_returns_the_same_report(tmp_path):
    handle = marketplace.start(tiny(), tmp_path / "bg", driver="inprocess", seed=3)
    report = handle.result(timeout=300)
    assert handle.done() and handle.exception() is None and handle.rounds == (6, 6)
    assert handle.out == tmp_path / "bg" and report.folder == handle.out
    blocking = marketplace.run(tiny(), tmp_path / "fg", driver="inprocess", seed=3)
    assert golden_view(report.raw) == golden_view(blocking.raw)


def test_a_background_run_that_fails_raises_from_result(monkeypatch, tmp_path):
    def broken(*args, **kwargs):
        raise marketplace.ScenarioError("tiny", "data", "cannot be built")

    monkeypatch.setattr(runner, "prepare_world", broken)
    handle = marketplace.start(tiny(), tmp_path / "bg", driver="inprocess")
    with pytest.raises(marketplace.ScenarioError, match="tiny: data: cannot be built"):
        handle.result(timeout=300)
    assert handle.done() and isinstance(handle.exception(), marketplace.ScenarioError)


# --- sweeps -------------------------------------------------------------------------------------


def test_a_sweep_returns_its_rows_summary_and_run_folders_and_calls_on_run_per_run(tmp_path, capsys):
    seen = []
    result = marketplace.sweep(
        tiny(),
        {"summarize.rounds": [2, 3]},
        repeats=2,
        out=tmp_path / "sweep",
        driver="inprocess",
        seed=20,
        on_run=lambda point, row: seen.append((point.index, row["status"])),
    )
    assert seen == [(0, "completed"), (1, "completed"), (2, "completed"), (3, "completed")]
    assert [(r["summarize.rounds"], r["seed"]) for r in result.rows] == [(2, 20), (2, 21), (3, 20), (3, 21)]
    assert [s["summarize.rounds"] for s in result.summary] == [2, 3] and all(s["runs"] == 2 for s in result.summary)
    assert result.keys == ["summarize.rounds"] and result.failed == []
    assert result.report(3).seed == 21 and len(result.report(3).selection) == 3
    assert (tmp_path / "sweep" / "runs.csv").exists() and len(result.run_folders) == 4
    assert capsys.readouterr().out == ""  # progress is off by default
    points = marketplace.plan(tiny(), {"summarize.rounds": [2, 3]}, repeats=2, seed=20)
    assert [(p.values, p.seed) for p in points] == [
        ({"summarize.rounds": 2}, 20),
        ({"summarize.rounds": 2}, 21),
        ({"summarize.rounds": 3}, 20),
        ({"summarize.rounds": 3}, 21),
    ]


def test_a_sweep_prints_each_run_as_it_finishes_with_its_headline_and_the_eps_spent(tmp_path, capsys):
    private = tiny_raw()
    private["summarize"]["privacy"] = {"enabled": True}
    scenario = marketplace.load(private)
    result = marketplace.sweep(
        scenario, {"summarize.rounds": [2, 3]}, out=tmp_path / "sweep", driver="inprocess", progress=True
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    for i, (line, row) in enumerate(zip(lines, result.rows)):
        assert line.startswith(f"[{i + 1}/2] rounds={row['summarize.rounds']} seed 11: completed, mmd2 ")
        assert "accuracy" in line
        assert f"eps spent {row['eps_spent']:.4g}" in line  # what the protocol states per owner (D_s here)


def test_the_command_lines_sweep_prints_a_line_per_run_and_no_bar_on_a_pipe(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_raw()))
    cli = run_cli(
        "run",
        str(path),
        "--driver",
        "inprocess",
        "--sweep",
        "summarize.rounds=2,3",
        "--seed",
        "30",
        "--out",
        str(tmp_path / "sweep"),
    )
    assert cli.returncode == 0, cli.stderr
    lines = [ln for ln in cli.stdout.splitlines() if ln.startswith("[")]
    assert [ln.split(":")[0] for ln in lines] == ["[1/2] rounds=2 seed 30", "[2/2] rounds=3 seed 30"]
    assert all(": completed, mmd2 " in ln and ", accuracy " in ln for ln in lines)
    assert cli.stdout.splitlines()[:2] == lines  # each as its run finished, before the table
    assert "\r" not in cli.stdout and "\x1b" not in cli.stdout  # no progress bar (nor colour) on a pipe


def test_a_sweep_over_an_unknown_key_names_the_closest_key(tmp_path):
    with pytest.raises(marketplace.ScenarioError) as err:
        marketplace.sweep(tiny(), {"summarize.round": [2, 3]}, out=tmp_path / "s", driver="inprocess")
    assert str(err.value) == "sweep: no scenario key 'summarize.round'; did you mean summarize.rounds?"
    with pytest.raises(marketplace.ScenarioError, match="vary: summarize.rounds: expected a list of values"):
        marketplace.plan(tiny(), {"summarize.rounds": 3})
    assert not (tmp_path / "s").exists()


# --- import and scripts -------------------------------------------------------------------------


def test_import_marketplace_stays_light_and_names_the_api():
    code = "import marketplace, sys; print(sorted(m for m in sys.modules if m.startswith('marketplace')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.strip() == "['marketplace', 'marketplace.version']", out.stderr  # the version: one constant
    for name in (
        "load",
        "validate",
        "run",
        "start",
        "plan",
        "sweep",
        "Scenario",
        "Report",
        "SweepResult",
        "RunHandle",
        "ScenarioError",
        "RunFailed",
        "RunFolderError",
        "DatasetMissing",
    ):
        assert name in dir(marketplace) and getattr(marketplace, name) is not None
    with pytest.raises(AttributeError, match="attribute nope"):
        marketplace.nope  # noqa: B018


SCRIPT = """\
import marketplace
print("script body ran", flush=True)
report = marketplace.run({quickstart!r}, {out!r}, seed=3, **{{"progress": None}})
print("status", report.status, len(report.selection))
"""
"""A researcher's script as written: the default processes driver, no main guard."""


def run_script(how: str, tmp_path: Path) -> subprocess.CompletedProcess:
    out = tmp_path / "run"
    scenario = tmp_path / "small.yaml"
    raw = yaml.safe_load(QUICKSTART.read_text())
    raw["summarize"]["rounds"] = 3
    scenario.write_text(yaml.safe_dump(raw))
    text = SCRIPT.format(quickstart=str(scenario), out=str(out))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    if how == "file":
        (tmp_path / "experiment.py").write_text(text)
        cmd, stdin = [sys.executable, str(tmp_path / "experiment.py")], None
    elif how == "module":
        (tmp_path / "experiment_mod.py").write_text(text)
        cmd, stdin = [sys.executable, "-m", "experiment_mod"], None
    elif how == "stdin":
        cmd, stdin = [sys.executable, "-"], text
    else:
        cmd, stdin = [sys.executable, "-c", text], None
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=240, cwd=tmp_path, env=env)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["file", "module", "stdin", "command"])
def test_a_script_without_a_main_guard_runs_once_with_the_processes_driver(tmp_path, how):
    proc = run_script(how, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["script body ran", "status completed 3"], proc.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["driver"] == "processes" and report["launch"] == "forkserver"
    assert all(p["status"] == "completed" for p in report["parties"])


def test_without_the_runners_main_module_adopted_the_forked_party_would_rerun_the_script(tmp_path, monkeypatch):
    """The mechanism the script test relies on: the forkserver's guard module gives the server's
    __main__ the runner's identity, which is what multiprocessing checks before re-running it."""
    from marketplace.runtime import forkserver

    script = tmp_path / "probe.py"
    script.write_text(
        textwrap.dedent("""\
        import json, os, sys
        from marketplace.runtime.forkserver import MAIN_ENV, runner_main
        print(json.dumps(runner_main()))
    """)
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path
    )
    assert json.loads(out.stdout) == {"path": str(script)}
    out = subprocess.run(
        [sys.executable, "-c", script.read_text()], capture_output=True, text=True, timeout=60, env=env
    )
    assert json.loads(out.stdout) == {}
    guard = subprocess.run(
        [sys.executable, "-c", "import marketplace.runtime.forkserver_guard, __main__; print(__main__.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(env, **{forkserver.MAIN_ENV: json.dumps({"path": "/x/y.py"})}),
    )
    assert guard.stdout.strip() == "/x/y.py", guard.stderr


def test_on_a_terminal_a_sweep_shows_a_bar_below_its_lines_and_prefers_a_spent_eps_column():
    import io

    from rich.console import Console

    from marketplace.runner.display import sweep_progress
    from marketplace.runner.sweep import result_line

    points = marketplace.plan(tiny(), {"summarize.rounds": [2, 3]})
    row = {
        "point": 0,
        "summarize.rounds": 2,
        "repeat": 0,
        "seed": 11,
        "status": "completed",
        "rounds": 2,
        "mmd2": 0.125,
        "accuracy": 0.5,
        "eps[curator]": 0.25,
        "eps[owner-1]": 0.75,
        "wall_s": 0.25,
    }
    assert (
        result_line(points[0], row, 2)
        == "[1/2] rounds=2 seed 11: completed, mmd2 0.125, accuracy 0.5, eps spent 0.75, 0.2 s"
    )
    spent = {**row, "eps_spent": 1.5}
    assert result_line(points[0], spent, 2).endswith("accuracy 0.5, eps spent 1.5, 0.2 s")
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=120)
    with sweep_progress(console, 2) as show:
        show(points[0], row)
    shown = screen.getvalue()
    assert "[1/2] rounds=2 seed 11: completed" in shown and "━" in shown and "1/2" in shown.split("completed", 1)[1]
    piped = io.StringIO()
    with sweep_progress(Console(file=piped, force_terminal=False, width=120), 2) as show:
        show(points[0], row)
    assert piped.getvalue() == result_line(points[0], row, 2) + "\n"


def test_every_type_stub_is_package_data():
    """The packages read their public names from their ``__init__.pyi`` when first used (lazy_loader), so an
    installed wheel without a stub could not even be imported: every stub must match a package-data pattern."""
    import tomllib

    package = ROOT / "marketplace"
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["marketplace"]
    shipped = {path for pattern in patterns for path in package.glob(pattern)}  # setuptools' glob: * stays in a folder
    stubs = set(package.rglob("*.pyi"))
    assert len(stubs) >= 6
    assert sorted(str(s.relative_to(package)) for s in stubs - shipped) == []
