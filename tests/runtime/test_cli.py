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
        (
            lambda d: d["data"]["source"].update(kind="csv", csv={"path": "nope.csv", "label": "y"}),
            "data.source.csv.path",
            "an existing file",
        ),
        (
            lambda d: (
                d["transport"].update(heartbeat_timeout_s=0.1)
                if "transport" in d
                else d.update(transport={"heartbeat_timeout_s": 0.1})
            ),
            "transport",
            "heartbeat_timeout_s",
        ),
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


@pytest.mark.parametrize(
    ("override", "named"),
    [("summarize.rounds", "key.path=value"), ("seed.x=3", "seed"), ("summarize.rounds=-1", "summarize.rounds")],
)
def test_bad_override_exits_2(override, named, capsys):
    assert main(["validate", str(QUICKSTART), "--set", override]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("nosuch.key=1", "--set nosuch.key=1: no scenario key 'nosuch.key'; did you mean noise.keys?"),
        (
            "summarize.round=5",
            "--set summarize.round=5: no scenario key 'summarize.round'; did you mean summarize.rounds",
        ),
        ("rounds=5", "--set rounds=5: no scenario key 'rounds'; did you mean summarize.rounds?"),
        ("summarize.privacy.eps_validaton=1", "did you mean summarize.privacy.eps_validation"),
        (
            "parties.owners.x=1",
            "--set parties.owners.x=1: no scenario key 'parties.owners.x'; did you mean parties.owners",
        ),
        ("zzz=1", "--set zzz=1: no scenario key 'zzz'; the top-level keys are name, protocol, seed,"),
        ("summarize.rounds=abc", "--set summarize.rounds=abc: summarize.rounds: expected an integer, got 'abc'"),
        ("=3", "--set =3: expected key.path=value"),
    ],
)
def test_a_bad_set_names_the_option_and_the_assignment_and_suggests_the_closest_key(override, said, capsys):
    assert main(["validate", str(QUICKSTART), "--set", override]) == 2
    err = capsys.readouterr().err
    assert said in err and "quickstart.yaml" not in err  # the file is fine: --set is what is wrong


def test_run_with_a_mistyped_set_key_stops_before_anything_starts_and_says_so(tmp_path):
    out = tmp_path / "run"
    result = run_cli(
        "run",
        str(QUICKSTART),
        "--driver",
        "inprocess",
        "--out",
        str(out),
        "--set",
        "summarize.rounds=3",
        "--set",
        "summarize.baseline=[]",
    )
    assert result.returncode == 2 and not out.exists()
    assert (
        "--set summarize.baseline=[]: no scenario key 'summarize.baseline'; did you mean summarize.baselines?"
        in result.stderr
    )


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
    result = run_cli(
        "privacy", "compose", "--epsilon", "0.01", "--count", "1656", "--delta", "0.01", "--theorem", "advanced"
    )
    assert result.returncode == 0 and result.stdout.startswith("epsilon = 1.40 ")
    result = run_cli(
        "privacy",
        "compose",
        "--epsilon",
        "0.01/sqrt(5*200)",
        "--count",
        "5*200",
        "--delta",
        "1e-4",
        "--theorem",
        "advanced",
    )
    assert result.returncode == 0 and result.stdout.startswith("epsilon = 0.043")


def test_privacy_compose_refuses_bad_input_with_exit_2():
    result = run_cli("privacy", "compose", "--epsilon", "-1", "--count", "3", "--delta", "0.1")
    assert result.returncode == 2 and "--epsilon" in result.stderr


# --------------------------------------------------------------------------- what a new user runs into


def test_scientific_notation_in_a_scenario_file_is_a_number(tmp_path, capsys):
    text = QUICKSTART.read_text() + "\n"
    data = yaml.safe_load(text)
    data["summarize"]["privacy"] = {"enabled": True}
    body = yaml.safe_dump(data).replace(
        "privacy:\n    enabled: true",
        "privacy:\n    enabled: true\n    delta_summary: 1e-5\n    delta_validation: 2E-3",
    )
    assert "1e-5" in body
    assert main(["validate", str(write(tmp_path, body))]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved["summarize"]["privacy"]["delta_summary"] == 1e-5
    assert resolved["summarize"]["privacy"]["delta_validation"] == 2e-3


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_an_empty_scenario_file_says_it_is_empty(tmp_path, text):
    result = run_cli("validate", str(write(tmp_path, text)))
    assert result.returncode == 2
    assert "the file is empty" in result.stderr and "NoneType" not in result.stderr


def test_a_scenario_that_is_not_a_mapping_says_what_came(tmp_path):
    result = run_cli("validate", str(write(tmp_path, "- a\n- b\n")))
    assert result.returncode == 2 and "a list of 2 items" in result.stderr


def test_validate_refuses_a_non_numeric_csv_feature_as_run_does(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,label\n1,x,0\n2,y,1\n3,z,0\n4,w,1\n")
    data = quickstart_dict()
    data["data"]["source"] = {"kind": "csv", "csv": {"path": "t.csv", "label": "label", "features": ["a", "b"]}}
    path = write(tmp_path, data)
    validated = run_cli("validate", str(path))
    assert validated.returncode == 2 and "column 'b', line 2: 'x' is not a finite number" in validated.stderr
    ran = run_cli("run", str(path), "--out", str(tmp_path / "out"), "--driver", "inprocess")
    assert ran.returncode == 2 and "column 'b'" in ran.stderr and not (tmp_path / "out").exists()


def test_validate_refuses_a_csv_with_a_missing_cell_instead_of_dropping_its_column_or_row(tmp_path):
    """An `NA` used to drop its whole column (validate said 2 features instead of 3), an empty cell
    or a missing label its row; both now stop validate and run with the line and the column."""
    data = quickstart_dict()
    data["data"]["source"] = {"kind": "csv", "csv": {"path": "t.csv", "label": "label"}}
    path = write(tmp_path, data)
    for cell, column in (("NA", "b"), ("", "b"), ("", "label")):
        rows = [[str(i), str(i % 5), str(i % 7), str(i % 2)] for i in range(200)]
        rows[40][["a", "b", "c", "label"].index(column)] = cell  # row 40 is line 42 (after the header)
        (tmp_path / "t.csv").write_text("a,b,c,label\n" + "".join(",".join(r) + "\n" for r in rows))
        validated = run_cli("validate", str(path))
        assert validated.returncode == 2, validated.stderr
        assert f"t.csv: line 42, column '{column}': missing value {cell!r}" in validated.stderr


def test_validate_refuses_owners_left_without_rows_naming_them():
    result = run_cli("validate", str(QUICKSTART), "--set", "parties.owners=500")
    assert result.returncode == 2
    assert "parties.owners: owner-142, owner-230, owner-380 would receive no rows" in result.stderr


def test_validate_prints_every_key_but_the_other_protocols_sections_and_they_read_back_the_same(tmp_path, capsys):
    """Every top-level key of the scenario schema is printed (``lifetime`` and ``sweep`` at their
    defaults too, ``lifetime`` with its terms), but for the sections of the protocols not chosen."""
    from dataclasses import fields

    from marketplace import plugins
    from marketplace.scenario import ScenarioConfig, load_scenario
    from marketplace.schema import to_plain

    assert main(["validate", str(QUICKSTART)]) == 0
    captured = capsys.readouterr()
    printed = yaml.safe_load(captured.out)
    others = set(plugins.names()) - {"summarize"}
    assert set(printed) == {f.name for f in fields(ScenarioConfig)} - others
    assert printed["lifetime"] == to_plain(load_scenario(QUICKSTART).config.lifetime)
    assert {"budget", "relation", "filter", "ledgers", "terms", "owner_terms"} <= set(printed["lifetime"])
    assert set(printed["data"]["source"]) == {"kind", "covariate_shift"}
    assert len(captured.out.splitlines()) < 130
    assert "valid (summarize; 4 owners holding" in captured.err
    again = load_scenario(write(tmp_path, captured.out))
    assert again.raw == load_scenario(QUICKSTART).raw


def test_run_refuses_an_out_that_is_a_file(tmp_path):
    target = tmp_path / "report.txt"
    target.write_text("keep me")
    result = run_cli("run", str(QUICKSTART), "--out", str(target), "--driver", "inprocess")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"--out: {target} is a file" in result.stderr and target.read_text() == "keep me"


def test_run_refuses_an_earlier_runs_folder_and_leaves_it_as_it_was(tmp_path, round_plots):
    out = tmp_path / "run"
    first = run_cli(
        "run",
        str(QUICKSTART),
        "--out",
        str(out),
        "--driver",
        "inprocess",
        "--set",
        "summarize.rounds=3",
        "--set",
        "summarize.baselines=[]",
        "--quiet",
    )
    assert first.returncode == 0, first.stderr
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    second = run_cli("run", str(QUICKSTART), "--out", str(out), "--driver", "inprocess", "--set", "summarize.rounds=4")
    assert second.returncode == 2
    assert (
        "already holds files (messages.csv, report.json, rounds.csv, rounds.png, scenario.resolved.yaml)"
        in second.stderr
    )
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    sweep = run_cli("run", str(QUICKSTART), "--out", str(out), "--sweep", "summarize.rounds=3,4")
    assert sweep.returncode == 2 and "already holds files" in sweep.stderr


def test_request_refuses_an_out_folder_that_holds_files_as_run_and_the_python_api_do(tmp_path):
    """`marketplace request --out` and `marketplace.request(out=...)` refuse the same folder, before
    anything is sent (no marketplace listens at the endpoint: nothing got that far)."""
    import marketplace
    from marketplace.runtime import RunFolderError

    out = tmp_path / "earlier"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    kit = tmp_path / "kit"
    result = run_cli("request", str(QUICKSTART), "--market", "tcp://127.0.0.1:9", "--keys", str(kit), "--out", str(out))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"marketplace request: --out: {out} already holds files (notes.txt)" in result.stderr
    with pytest.raises(RunFolderError, match="already holds files"):
        marketplace.request(QUICKSTART, market="tcp://127.0.0.1:9", keys=kit, out=out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"] and not kit.exists()


def test_an_empty_out_folder_is_used(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert (
        main(
            [
                "run",
                str(QUICKSTART),
                "--out",
                str(out),
                "--driver",
                "inprocess",
                "--set",
                "summarize.rounds=2",
                "--set",
                "summarize.baselines=[]",
                "--quiet",
            ]
        )
        == 0
    )
    assert (out / "report.json").is_file()


def test_default_run_folders_never_collide(tmp_path, monkeypatch):
    from marketplace.runtime import default_run_folder

    monkeypatch.chdir(tmp_path)
    first = default_run_folder("qs")
    first.mkdir(parents=True)
    second = default_run_folder("qs")
    assert second != first and second.name.startswith(first.name)


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_repeats_must_be_at_least_one(value):
    result = run_cli("run", str(QUICKSTART), "--repeats", value)
    assert result.returncode == 2
    assert f"--repeats: expected a whole number of at least 1, got '{value}'" in result.stderr


def test_keys_generate_twice_points_at_the_force_flag(tmp_path):
    assert run_cli("keys", "generate", str(tmp_path / "k"), "--owners", "1").returncode == 0
    again = run_cli("keys", "generate", str(tmp_path / "k"), "--owners", "1")
    assert again.returncode == 2
    assert "--force" in again.stderr and "overwrite=True" not in again.stderr
    assert run_cli("keys", "generate", str(tmp_path / "k"), "--owners", "1", "--force").returncode == 0


def test_progress_is_shown_while_the_baselines_compute(tmp_path):
    result = run_cli(
        "run", str(QUICKSTART), "--driver", "inprocess", "--out", str(tmp_path / "run"), "--set", "summarize.rounds=4"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    phase = next(i for i, line in enumerate(lines) if "computing the baselines (uniform, exact_greedy)" in line)
    assert "round 4/4" in lines[phase - 1] and lines[-1].startswith("quickstart: done (")


def test_a_long_phase_without_a_terminal_says_it_is_still_working(monkeypatch, capsys):
    import time

    from rich.console import Console

    from marketplace.runner import display

    monkeypatch.setattr(display, "QUIET_NOTE_S", 0.05)
    with display.round_progress(Console(file=open("/dev/null", "w")), "run") as progress:
        progress(1, 1)
        progress.phase("computing the baselines (a, b)")
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert "run: computing the baselines (a, b)..." in err and "run: still computing the baselines (a, b) (" in err
    assert err.rstrip().splitlines()[-1].startswith("run: done (")


def test_a_failure_cell_is_cut_short_and_the_report_keeps_it_whole(tmp_path):
    from marketplace.runner.display import summary_tables
    from marketplace.runner.run import run_scenario
    from marketplace.scenario import load_scenario

    report = run_scenario(
        load_scenario(QUICKSTART, ["summarize.rounds=2", "summarize.baselines=[]"]), tmp_path / "r", driver="inprocess"
    )
    long = "; ".join(f"owner-{i} exited with status 1: no bye before the deadline" for i in range(1, 101))
    report.update(status="failed", failures=[long])
    head = summary_tables(report)[0]
    cells = [str(c) for column in head.columns for c in column._cells]
    failure = next(c for c in cells if c.startswith("owner-1 exited"))
    assert len(failure) < 320 and f"({len(long)} characters; the full text is in report.json)" in failure
    assert report["failures"][0] == long


def test_counts_of_one_are_singular():
    from marketplace.protocols.pfds import display as pfds
    from marketplace.protocols.sketch import exchange as sketch
    from marketplace.reporting.format import plural

    assert (plural(1, "owner"), plural(2, "owner"), plural(1234, "row")) == ("1 owner", "2 owners", "1,234 rows")
    rows = dict(sketch.head_rows({"map": {"kind": "rff"}, "released": ["owner-1"], "end_reason": "done"}))
    assert "1 owner released" in rows["sketch"]
    rows = dict(pfds.head_rows({"agents": {"sharers": 1, "receivers": 1, "test_rows": 9}}))
    assert rows["agents"].startswith("1 sharer + 1 receiving owner + the consumer")


@pytest.mark.parametrize(
    ("argv", "forks"),
    [
        (["run", "s.yaml"], True),
        (["run", "s.yaml", "--driver", "processes", "--launch", "forkserver"], True),
        (["run", "s.yaml", "--set", "name=--driver"], True),
        (["run", "s.yaml", "--driver", "inprocess"], False),
        (["run", "s.yaml", "--driver=inprocess"], False),
        (["run", "s.yaml", "--launch", "exec"], False),
        (["run", "s.yaml", "--help"], False),
        (["run"], False),
        (["validate", "s.yaml"], False),
        ([], False),
    ],
)
def test_the_forkserver_starts_early_only_for_a_run_that_forks_its_parties(argv, forks):
    """`marketplace run` starts the forkserver before its parser (so the server's imports overlap
    the runner's); only a run whose parties will be forked from it may start it."""
    from marketplace.cli import _runs_forked_parties

    assert _runs_forked_parties(argv) is forks


def test_the_parties_table_of_a_large_run_lists_the_owners_that_did_not_complete_and_counts_the_rest():
    from marketplace.runner.display import PARTY_ROWS, _party_rows

    parties = (
        [{"id": "curator", "role": "curator", "status": "completed"}]
        + [{"id": f"owner-{i}", "role": "owner", "status": "completed"} for i in range(1, 1001)]
        + [{"id": "consumer", "role": "consumer", "status": "completed"}]
    )
    parties[500]["status"] = "lost"  # owner-500
    shown, hidden = _party_rows(parties)
    ids = [p["id"] if p is not None else None for p in shown]
    assert ids[0] == "curator" and ids[-1] == "consumer" and ids[-2] is None  # the count comes before the consumer
    assert "owner-500" in ids and ids[1] == "owner-500"  # trouble first
    assert len(shown) - 1 == PARTY_ROWS  # the rows of parties, and the one that counts the rest
    assert len(hidden) + sum(1 for p in shown if p is not None and p["role"] == "owner") == 1000
    assert all(p["status"] == "completed" for p in hidden)
    small = parties[:5] + parties[-1:]
    assert _party_rows(small) == (small, [])


def test_party_command_lines_parse_as_the_commands_they_start(tmp_path):
    """Every party a launcher starts gets its flags from party_command: keywords become --flags,
    None leaves a flag out, and the command line parses to the values given."""
    import sys

    from marketplace.cli import _parser
    from marketplace.runtime.command_line import party_command

    owners = party_command(
        "owners",
        scenario=tmp_path / "s.yaml",
        endpoint="tcp://127.0.0.1:5555",
        keys=None,
        run_id="r1",
        ids="owner-1,owner-2",
        report_dir=tmp_path / "parties",
        sets=["lifetime.ledgers=/l"],
        extra=["--max-rows", "7"],
    )
    assert owners[:4] == [sys.executable, "-m", "marketplace", "owners"] and "--keys" not in owners
    args = _parser().parse_args(owners[3:])
    assert (args.command, args.ids, args.run_id, args.report_dir) == (
        "owners",
        "owner-1,owner-2",
        "r1",
        str(tmp_path / "parties"),
    )
    assert args.overrides == ["lifetime.ledgers=/l"] and args.max_rows == 7
    curator = _parser().parse_args(
        party_command(
            "curator", scenario="s.yaml", endpoint="tcp://0.0.0.0:0", endpoint_file=tmp_path / "ep", run_id="r1"
        )[3:]
    )
    assert curator.endpoint_file == str(tmp_path / "ep") and curator.func.__name__ == "party_command"
    agent = _parser().parse_args(party_command("agent", market="tcp://h:1", keys="k", ids="owner-1", exit_with=42)[3:])
    assert agent.exit_with == 42 and agent.data is None
