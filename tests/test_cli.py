"""The command line as a new user meets it: help, validation errors with exit status 2, overrides."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import QUICKSTART, run_cli
from marketplace.cli import main


def write(tmp_path, data, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def quickstart_dict():
    return yaml.safe_load(QUICKSTART.read_text())


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    for word in ("run", "validate", "curator", "owner", "consumer", "Exit status"):
        assert word in out


@pytest.mark.parametrize(
    ("edit", "named_path", "expected"),
    [
        (lambda d: d["summarize"].update(roundz=3), "summarize.roundz", "unknown key"),
        (lambda d: d["summarize"].update(rounds="ten"), "summarize.rounds", "an integer"),
        (lambda d: d["summarize"].update(rounds=0), "summarize.rounds", "[1, inf)"),
        (lambda d: d["data"]["partition"].update(scheme="random"), "data.partition.scheme", "one of"),
        (lambda d: d.update(protocol="auction"), "protocol", "one of ['summarize']"),
        (lambda d: d["data"]["source"].update(kind="csv", csv={"path": "nope.csv", "label": "y"}), "data.source.csv.path", "an existing file"),
        (lambda d: d["transport"].update(heartbeat_timeout_s=0.1) if "transport" in d else d.update(transport={"heartbeat_timeout_s": 0.1}), "transport", "heartbeat_timeout_s"),
        (lambda d: d.pop("name"), "name", "required"),
    ],
)
def test_bad_scenario_exits_2_names_the_path_and_starts_nothing(tmp_path, edit, named_path, expected):
    data = quickstart_dict()
    edit(data)
    out = tmp_path / "out"
    code = main(["run", str(write(tmp_path, data)), "--out", str(out), "--quiet"])
    assert code == 2
    assert not out.exists()  # nothing was started, not even the output folder


def test_bad_scenario_message_names_file_path_and_expectation(tmp_path):
    data = quickstart_dict()
    data["data"]["consumer"]["validation_size"] = -3
    path = write(tmp_path, data)
    result = run_cli("run", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "data.consumer.validation_size" in result.stderr
    assert str(path) in result.stderr and "expected" in result.stderr and "-3" in result.stderr
    assert not (tmp_path / "out").exists()


def test_missing_scenario_file_exits_2(tmp_path):
    result = run_cli("run", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2
    assert "scenario file not found" in result.stderr


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "name: x\nprotocol: summarize\nsummarize: {rounds: [1,\n")
    result = run_cli("validate", str(path))
    assert result.returncode == 2
    assert "not valid YAML at line" in result.stderr


def test_data_that_cannot_be_split_exits_2_before_starting(tmp_path):
    data = quickstart_dict()
    data["data"]["consumer"]["validation_size"] = 100000
    out = tmp_path / "out"
    result = run_cli("run", str(write(tmp_path, data)), "--out", str(out), "--driver", "processes")
    assert result.returncode == 2
    assert "validation_size" in result.stderr
    assert not (out / "logs").exists()


def test_set_overrides_a_value_and_validate_prints_it(capsys):
    assert main(["validate", str(QUICKSTART), "--set", "summarize.rounds=7", "--set", "parties.owners=3"]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["summarize"]["rounds"] == 7 and resolved["parties"]["owners"] == 3


@pytest.mark.parametrize(("override", "named"), [("summarize.rounds", "key.path=value"), ("seed.x=3", "seed"),
                                                   ("summarize.rounds=-1", "summarize.rounds")])
def test_bad_override_exits_2(override, named, capsys):
    assert main(["validate", str(QUICKSTART), "--set", override]) == 2
    assert named in capsys.readouterr().err


def test_run_inprocess_from_the_cli_writes_a_report(tmp_path):
    out = tmp_path / "run"
    result = run_cli("run", str(QUICKSTART), "--driver", "inprocess", "--out", str(out), "--set", "summarize.rounds=5")
    assert result.returncode == 0, result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["driver"] == "inprocess" and len(report["selection"]) == 5
    assert "summary quality" in result.stdout and "parsimony" in result.stdout  # the table a person reads
    assert "round 5/5" in result.stderr  # plain progress lines when not on a terminal


def test_party_with_unknown_owner_id_exits_2():
    result = run_cli("owner", "--scenario", str(QUICKSTART), "--endpoint", "tcp://127.0.0.1:1", "--id", "owner-9")
    assert result.returncode == 2
    assert "owner-9" in result.stderr and "owner-4" in result.stderr


def test_privacy_compose_prints_the_papers_figures():
    result = run_cli("privacy", "compose", "--epsilon", "0.01", "--count", "1656", "--delta", "0.01", "--theorem", "advanced")
    assert result.returncode == 0 and result.stdout.startswith("epsilon = 1.40 ")
    result = run_cli("privacy", "compose", "--epsilon", "0.01/sqrt(5*200)", "--count", "5*200", "--delta", "1e-4", "--theorem", "advanced")
    assert result.returncode == 0 and result.stdout.startswith("epsilon = 0.043")


def test_privacy_compose_refuses_bad_input_with_exit_2():
    result = run_cli("privacy", "compose", "--epsilon", "-1", "--count", "3", "--delta", "0.1")
    assert result.returncode == 2 and "--epsilon" in result.stderr
