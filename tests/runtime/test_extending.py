"""A protocol from another package: the example of docs/extending.md (``tests/example_protocol``,
protocol ``noisy_count``) installed apart and run through the ``marketplace`` command.

The example is installed once per session with ``pip install --target`` into a temporary folder
that only the subprocesses started here see (``PYTHONPATH=<folder>:<repo>``): the test process
itself, and so every other test, keeps the four shipped protocols only. The runs write their
folders there too, not under pytest's temporary folder, whose reports the suite checks at the end
against the schema *this* process knows (without the example); each report is checked here
instead, in a subprocess that sees the example's report fragment.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from marketplace import plugins

EXAMPLE = ROOT / "tests" / "example_protocol"
SCENARIO = EXAMPLE / "scenario.yaml"
NAME = "noisy_count"
CLASSES = ("NoisyCountConfig", "NoisyCountCurator", "NoisyCountOwner", "NoisyCountConsumer")
KINDS = ("count_request", "count_release", "count_total")
SHIPPED = ("pfds", "sketch", "stc", "summarize")


class Installed:
    """The example installed in ``site``; runs the command line and Python with it visible."""

    def __init__(self, site: Path, how: str) -> None:
        self.site = site
        self.how = how
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}

    def cli(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        """``marketplace ARGS`` in a subprocess that sees the example."""
        return subprocess.run(
            [sys.executable, "-m", "marketplace", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env=self.env,
        )

    def python(self, code: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """``python -c CODE`` in a subprocess that sees the example."""
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env=self.env,
        )

    def folder(self, name: str) -> Path:
        """A fresh path for a run folder or a scenario file, beside the installed example."""
        path = self.site.parent / name
        assert not path.exists(), path
        return path


def _pip_install(source: Path, target: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            *extra,
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def example():
    """The example installed once for the session, without build isolation (with setuptools and
    wheel from this environment). setuptools older than 70.1 needs the ``wheel`` package to build a
    wheel; when it is missing the install is retried with pip's build isolation, which fetches the
    build backend from the package index, and the tests say so in their output."""
    with tempfile.TemporaryDirectory(prefix="marketplace-example-") as tmp:
        site, source = Path(tmp) / "site", Path(tmp) / "source"
        # built from a copy: setuptools leaves build/ and *.egg-info beside the sources it builds
        shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        first = _pip_install(source, site, "--no-build-isolation")
        how = "pip install --no-build-isolation"
        if first.returncode != 0:
            shutil.rmtree(site, ignore_errors=True)
            second = _pip_install(source, site)
            if second.returncode != 0:
                pytest.fail(
                    f"could not install {EXAMPLE}:\n--no-build-isolation: {first.stderr[-1500:]}\n"
                    f"with build isolation: {second.stderr[-1500:]}"
                )
            errors = [line.strip() for line in first.stderr.splitlines() if "error:" in line.lower()]
            how = (
                f"pip install with build isolation: --no-build-isolation failed ({_missing_build_tools()}): "
                f"{next((e for e in errors if 'bdist_wheel' in e), errors[-1] if errors else first.stderr[-300:])}"
            )
        print(f"example protocol installed by {how}", file=sys.stderr)
        yield Installed(site, how)


def _missing_build_tools() -> str:
    import importlib.metadata
    import importlib.util

    setuptools = importlib.metadata.version("setuptools") if importlib.util.find_spec("setuptools") else None
    wheel = importlib.util.find_spec("wheel") is not None
    return f"setuptools {setuptools or 'missing'}, wheel {'present' if wheel else 'missing'}"


def _report(run: Path) -> dict:
    return json.loads((run / "report.json").read_text())


def _schema_problems(example: Installed, run: Path) -> list[str]:
    """The report's departures from the schema as a process that sees the example builds it."""
    result = example.python(f"""
        import json
        from marketplace.runner.report_schema import report_problems
        print(json.dumps(report_problems(json.load(open({str(run / "report.json")!r})))))
    """)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _check_report(example: Installed, run: Path, result: subprocess.CompletedProcess) -> dict:
    """What every run of the example must show: completed, its sections, ledgers, kinds, table."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = _report(run)
    assert report["status"] == "completed" and report["protocol"] == NAME and report["failures"] == []
    assert _schema_problems(example, run) == []
    m = report["metrics"]
    assert m["label"] == 1 and m["owners_in_total"] == 4 and report["end_reason"] == "every owner released"
    assert isinstance(m["true_total"], int) and m["true_total"] > 0
    assert m["error"] == pytest.approx(m["released_total"] - m["true_total"])
    assert m["noise_sd"] == pytest.approx((2 * 4) ** 0.5 / 0.5)
    # the sum of 4 Lap(2) draws exceeds 8 standard deviations with probability below 1e-6
    assert abs(m["error"]) < 8 * m["noise_sd"]
    for owner in ("owner-1", "owner-2", "owner-3", "owner-4"):
        ledger = report["privacy"][owner]
        assert ledger["eps"] == pytest.approx(0.5) and ledger["delta"] == 0
        assert ledger["neighbouring"] == {"relation": "add/remove-one", "record": f"a row of {owner}'s data"}
        assert ledger["steps"] == [{"mechanism": "noisy_count.laplace", "eps": 0.5, "delta": 0.0, "count": 1}]
    assert report["privacy"]["consumer"]["guarantee"] == "none"
    by_kind = report["messages"]["by_kind"]
    assert {k: by_kind[k]["count"] for k in KINDS} == {"count_request": 4, "count_release": 4, "count_total": 1}
    assert report["privacy_per_owner"]["groups"][0]["owners"] == ["owner-1", "owner-2", "owner-3", "owner-4"]
    for text in (
        "noisy count of class 1",
        "released total",
        "count the rows of class 1 held by 4 owners",
        "owner-1: eps = 0.5",
    ):
        assert text in result.stdout, text
    return report


def test_the_example_is_seen_only_where_it_is_installed(example):
    assert NAME not in plugins.names()  # this process (and every other test) does not see it
    result = example.python("from marketplace import plugins; print(' '.join(plugins.names()))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == sorted((NAME, *SHIPPED))


def test_run_inprocess(example):
    run = example.folder("inprocess")
    _check_report(example, run, example.cli("run", str(SCENARIO), "--driver", "inprocess", "--out", str(run)))


def test_its_owners_charge_their_lifetime_ledgers(example, tmp_path):
    """The plug-in declares its owners' cost (owner_cost): a second run is charged on top of the first,
    and an owner whose budget cannot take it declines while the run goes on."""
    ledgers = tmp_path / "ledgers"
    settings = ["--set", f"lifetime.ledgers={ledgers}", "--set", 'lifetime.owner_budgets={"owner-2": {"epsilon": 0.7}}']
    first, second = example.folder("lifetime-1"), example.folder("lifetime-2")
    for run in (first, second):
        result = example.cli("run", str(SCENARIO), "--driver", "inprocess", "--quiet", "--out", str(run), *settings)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    one, two = _report(first)["lifetime"], _report(second)["lifetime"]
    assert {o: r["state"] for o, r in one["owners"].items()} == dict.fromkeys(
        ("owner-1", "owner-2", "owner-3", "owner-4"), "committed"
    )
    assert two["declined"] == ["owner-2"] and two["owners"]["owner-1"]["spent"] == {"eps": 1.0, "delta": 0.0}
    assert _report(second)["metrics"]["owners_in_total"] == 3
    assert _schema_problems(example, second) == []


@pytest.mark.slow
@pytest.mark.parametrize("launch", ["forkserver", "exec"])
def test_run_processes_over_curve(example, launch):
    """Every party its own process, CURVE on (the default); the same seed gives the same release
    as the in-process driver."""
    run, reference = example.folder(f"processes-{launch}"), example.folder(f"reference-{launch}")
    report = _check_report(example, run, example.cli("run", str(SCENARIO), "--launch", launch, "--out", str(run)))
    assert report["transport_security"] == "curve (authenticated, encrypted)"
    assert report["driver"] == "processes" and report["launch"] == launch
    assert len({p["pid"] for p in report["parties"]}) > 1
    same = example.cli("run", str(SCENARIO), "--driver", "inprocess", "--quiet", "--out", str(reference))
    assert same.returncode == 0, same.stderr
    assert _report(reference)["metrics"] == report["metrics"]


def test_the_release_is_laplace_noise_of_scale_one_over_epsilon(example):
    """The owner role's release, over 4000 noise seeds, against Lap(1/eps) around its true count
    (Kolmogorov-Smirnov at the 1e-3 level), and one spend of eps on its ledger each time: the noise is
    calibrated from the release plan's epsilon and sensitivity."""
    result = example.python("""
        import json
        import numpy as np
        from scipy import stats
        from marketplace.data.dataset import Dataset
        from marketplace.messages import Envelope
        from marketplace_example.config import NoisyCountConfig
        from marketplace_example.messages import CountRequest
        from marketplace_example.owner import NoisyCountOwner
        from marketplace_example.plan import release_plan
        from types import SimpleNamespace

        y = np.array([0, 1, 1, 2, 1, 0, 1])
        data = Dataset(X=np.zeros((len(y), 2)), y=y, group=np.zeros(len(y), dtype=int), feature_names=("a", "b"),
                       group_names=("g",), name="t")
        settings = NoisyCountConfig(label=1, epsilon=0.8)
        plan = release_plan(SimpleNamespace(name="s", noisy_count=settings), "owner-1")
        values, spent = [], set()
        for seed in range(4000):
            owner = NoisyCountOwner(party_id="owner-1", scenario_name="s", data=data, settings=settings, plan=plan,
                                    seed=seed)
            request = Envelope(version=2, run_id="r", msg_id=1, sender="curator", receiver="owner-1",
                               kind="count_request", reply_to=None, body=CountRequest(label=1))
            (send,) = owner.handle(request)
            values.append(send.body.value)
            spent.add((owner.ledger.to_dict()["eps"], send.body.epsilon))
        p = stats.kstest(np.array(values) - 4, stats.laplace(scale=1 / 0.8).cdf).pvalue
        print(json.dumps({"p": p, "spent": sorted(spent)}))
    """)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["p"] > 1e-3
    assert out["spent"] == [[0.8, 0.8]]


def test_a_sweep_uses_the_example_sweep_functions(example):
    run = example.folder("sweep")
    result = example.cli(
        "run",
        str(SCENARIO),
        "--driver",
        "inprocess",
        "--quiet",
        "--out",
        str(run),
        "--sweep",
        "noisy_count.epsilon=0.5,4",
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    with (run / "summary.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [float(r[f"{NAME}.epsilon"]) for r in rows] == [0.5, 4.0]
    assert [float(r["noise_sd_mean"]) for r in rows] == pytest.approx([8**0.5 / 0.5, 8**0.5 / 4])
    assert all(r["completed"] == "1" and float(r["abs_error_mean"]) >= 0 for r in rows)
    assert (run / "sweep.png").stat().st_size > 0


def _edited(example: Installed, name: str, edit) -> Path:
    raw = yaml.safe_load(SCENARIO.read_text())
    edit(raw)
    path = example.folder(name)
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_bad_value_of_its_own_key_exits_2_naming_the_key(example):
    path = _edited(example, "bad-epsilon.yaml", lambda raw: raw[NAME].update(epsilon=-1))
    out = example.folder("bad-epsilon-run")
    result = example.cli("run", str(path), "--out", str(out))
    assert result.returncode == 2
    assert f"{NAME}.epsilon: expected a number in (0, inf), got -1" in result.stderr
    assert not out.exists()  # refused before anything started


def test_a_budget_below_one_release_exits_2(example):
    result = example.cli("validate", str(SCENARIO), "--set", f"{NAME}.budget=0.1")
    assert result.returncode == 2
    assert f"{NAME}.budget: expected a budget that covers owner-1's planned releases" in result.stderr
    assert "budget (eps=0.1, delta=0), planned total (eps=0.5, delta=0)" in result.stderr  # both figures


def test_a_label_the_data_lacks_exits_2(example):
    result = example.cli("validate", str(SCENARIO), "--set", f"{NAME}.label=9")
    assert result.returncode == 2
    assert f"{NAME}.label: expected one of the owners' classes [0, 1], got 9" in result.stderr


def test_an_unknown_key_of_its_section_gets_the_closest_key(example):
    result = example.cli("validate", str(SCENARIO), "--set", f"{NAME}.epsilom=1")
    assert result.returncode == 2
    assert f"no scenario key '{NAME}.epsilom'; did you mean {NAME}.epsilon?" in result.stderr
    path = _edited(example, "unknown-key.yaml", lambda raw: raw[NAME].update(epsilom=raw[NAME].pop("epsilon")))
    result = example.cli("validate", str(path))
    assert result.returncode == 2
    assert f"{NAME}.epsilom: expected one of the known keys ['budget', 'epsilon', 'label', 'secure']" in result.stderr


def test_validate_accepts_it_and_prints_its_section(example):
    result = example.cli("validate", str(SCENARIO))
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    assert resolved["protocol"] == NAME
    assert resolved[NAME] == {"label": 1, "epsilon": 0.5, "budget": None, "secure": False}
    assert not set(SHIPPED) & set(resolved)  # the other protocols' sections are left out
    assert f"valid ({NAME}; 4 owners" in result.stderr


def test_an_unknown_protocol_lists_every_registered_one(example):
    path = _edited(example, "unknown-protocol.yaml", lambda raw: raw.update(protocol="noisy_cnt"))
    result = example.cli("validate", str(path))
    assert result.returncode == 2
    assert f"protocol: expected one of {sorted((NAME, *SHIPPED))}, got 'noisy_cnt'" in result.stderr


def test_nothing_in_the_marketplace_package_names_the_example():
    """The runtime knows the example only through its entry point: no word of its names (the
    protocol, the package, its classes, its message kinds) is in the package's source."""
    words = re.compile(r"\b(" + "|".join([NAME, "marketplace_example", *CLASSES, *KINDS]) + r")\b")
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "marketplace").rglob("*"))
        if path.is_file() and path.suffix in (".py", ".json", ".yaml", ".toml", ".txt", ".md")
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if words.search(line)
    ]
    assert found == []


def test_marketplace_protocols_lists_it(example):
    result = example.cli("protocols")
    assert result.returncode == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == sorted((NAME, *SHIPPED))


COUPLED = """
    import json
    import msgspec
    import marketplace
    from marketplace.differential import coupled_problems, run_shares
    from marketplace_example import owner as owner_module
    from marketplace_example.plan import VIEW

    scenario = marketplace.load("tests/example_protocol/scenario.yaml")
    release = owner_module.NoisyCountOwner._release
    def leaking(self, message):
        (send,) = release(self, message)
        body = msgspec.structs.replace(send.body, {change})
        return [type(send)(send.to, body, reply_to=send.reply_to)]
    owner_module.NoisyCountOwner._release = leaking
    print(json.dumps(coupled_problems(scenario, run_shares(scenario), VIEW, served=False, relation="add/remove-one")))
"""


def test_the_coupled_differential_test_holds_the_example_to_its_view(example):
    """With its release coupled, nothing the curator, the consumer or the other owners receive moves
    when owner-1 loses a row."""
    result = example.python(COUPLED.format(change=""))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("epsilon=float(len(self.labels))", "'count_release<owner-1#0>.epsilon', declared public"),
        ("value=float((self.labels == 1).sum())", "'count_release<owner-1#0>.value', declared release"),
    ],
    ids=["row count in a public field", "a value that bypasses the plan"],
)
def test_the_coupled_differential_test_names_a_leak(example, change, named):
    """An owner that puts its row count in a field declared public, or sends a count the plan never
    released (no noise through the plan's release), fails, naming the observer and the field."""
    result = example.python(COUPLED.format(change=change))
    assert result.returncode == 0, result.stderr
    problems = json.loads(result.stdout)
    assert any(problem.startswith("curator receives " + named) for problem in problems), problems
