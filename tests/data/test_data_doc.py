"""docs/data.md runs as written: every file it shows is an example, and every scenario among them
validates and completes a short in-process run through the command line (its ``main``, in the test's
process: the scenarios' data dominate, not a new interpreter's start).

An example is a fenced block whose info string carries a title, e.g. ```` ```csv title=customers.csv ````
or ```` ```yaml title=customers.yaml ````: the title is the file name the reader saves it under. Every
``csv`` and ``yaml`` block of the page must have one (a block without a title would escape these
tests). The CSV files are written beside each scenario, so a scenario names them by the same
relative path the page uses. A scenario that reads a public dataset is skipped, with the fetch
command, when the dataset is not in the data cache.

The page's coverage is checked too: every source kind has a section naming each of its options,
and a scenario example that uses it; the partition, consumer and seed_set sections name each of
their keys; the outputs and error messages the page quotes are what the command line prints.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT, needs_data, run_cli

from marketplace.cli import main as cli_main
from marketplace.scenario.load import read_yaml

DOC = ROOT / "docs" / "data.md"
FENCE = re.compile(r"^```(?P<lang>[\w-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r"""\btitle=(["']?)(?P<title>[^"'\s]+)\1""")
FILE_LANGUAGES = ("csv", "yaml")


@dataclass(frozen=True)
class Block:
    """One fenced block of the page: its language, title (None without one) and text."""

    lang: str
    title: str | None
    body: str


def blocks(text: str | None = None) -> list[Block]:
    """Every fenced block of docs/data.md (or of ``text``), in page order."""
    out = []
    for match in FENCE.finditer(DOC.read_text(encoding="utf-8") if text is None else text):
        title = TITLE.search(match["info"])
        out.append(Block(match["lang"], title["title"] if title else None, match["body"]))
    return out


def file_examples() -> list[Block]:
    return [b for b in blocks() if b.lang in FILE_LANGUAGES and b.title is not None]


def scenario_examples() -> list[Block]:
    return [b for b in file_examples() if b.lang == "yaml"]


def datasets_read(example: Block) -> tuple[str, ...]:
    """The public datasets the example's data source reads."""
    from marketplace.data.config import SourceConfig
    from marketplace.data.sources import datasets_of
    from marketplace.schema import build

    source = ((read_yaml(example.body) or {}).get("data") or {}).get("source") or {}
    return datasets_of(build(SourceConfig, source, "data.source"))


def example_param(example: Block):
    names = datasets_read(example)
    marks = [pytest.mark.data, needs_data(*names)] if names else []
    return pytest.param(example, id=example.title, marks=marks)


def write_examples(folder: Path) -> None:
    """Save every file example of the page under its title, as a reader would."""
    for example in file_examples():
        (folder / example.title).write_text(example.body, encoding="utf-8")


def sections() -> dict[str, str]:
    """Heading's first backticked name -> the text of its section (sub-sections included)."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    headings = [(i, len(m[1]), m[2]) for i, line in enumerate(lines) if (m := re.match(r"^(#+) (.*)$", line))]
    out = {}
    for n, (start, level, title) in enumerate(headings):
        name = re.search(r"`([^`]+)`", title)
        if name is None:
            continue
        end = next((i for i, lvl, _ in headings[n + 1 :] if lvl <= level), len(lines))
        out.setdefault(name[1], "\n".join(lines[start:end]))
    return out


# --- the examples run -------------------------------------------------------------------------


def is_schema_only(example: Block) -> bool:
    return "schema" in (read_yaml(example.body).get("data") or {})


SHORT_RUN = {"pfds": ["--set", "pfds.baselines=[]"]}
"""What an example's run leaves out, per protocol (the example validates as written): pfds' baselines
are models the runner fits after the run, for comparison only, on the data the run already read, and
were three quarters of a pfds example's run."""


def command(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``marketplace ARGS`` through the command line's ``main``: exit status, stdout, stderr."""
    capsys.readouterr()
    code = cli_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("example", [example_param(e) for e in scenario_examples()])
def test_scenario_example_validates_and_runs(example: Block, tmp_path: Path, capsys) -> None:
    write_examples(tmp_path)
    scenario = tmp_path / example.title
    code, out, err = command(capsys, "validate", str(scenario))
    assert code == 0, err
    assert f"{example.title}: valid (" in out + err
    protocol = read_yaml(example.body)["protocol"]
    folder = tmp_path / "run"
    run = ["run", str(scenario), "--driver", "inprocess", "--quiet", "--out", str(folder)]
    if is_schema_only(example):  # served, never simulated: its parties' own files are checked instead
        assert "bringing their own rows" in err
        code, out, err = command(capsys, *run)
        assert code == 2 and "data.schema" in err
        return
    code, out, err = command(capsys, *run, *SHORT_RUN.get(protocol, []))
    assert code == 0, err + out
    report = json.loads((folder / "report.json").read_text())
    assert report["status"] == "completed"
    assert report["scenario"] == read_yaml(example.body)["name"]


def test_every_file_block_is_a_titled_example_and_titles_are_unique() -> None:
    untitled = [b.body.splitlines()[0] if b.body else "" for b in blocks() if b.lang in FILE_LANGUAGES and not b.title]
    assert not untitled, f"csv/yaml blocks without title= escape the example tests; first lines: {untitled}"
    titles = [b.title for b in file_examples()]
    assert len(titles) == len(set(titles)), titles
    assert len(scenario_examples()) >= len(sections_of_sources())


def test_each_example_shows_its_file_name_to_the_reader() -> None:
    """A rendered page hides the info string, so the name to save a file under is written above it."""
    text = DOC.read_text(encoding="utf-8")
    for example in file_examples():
        fence = text.index(f"```{example.lang} title={example.title}\n")
        before = text[:fence].rstrip().splitlines()[-1]
        assert before == f"`{example.title}`:", (example.title, before)


def test_the_extractor_sees_titles_and_untitled_blocks() -> None:
    text = 'x\n```csv title=a.csv\nh\n1\n```\n\n```yaml title="b.yaml"\nname: b\n```\n```yaml\nk: v\n```\n'
    assert blocks(text) == [
        Block("csv", "a.csv", "h\n1\n"),
        Block("yaml", "b.yaml", "name: b\n"),
        Block("yaml", None, "k: v\n"),
    ]


def test_every_scenario_example_is_a_whole_scenario() -> None:
    for example in scenario_examples():
        raw = read_yaml(example.body)
        assert isinstance(raw, dict) and {"name", "protocol", "data"} <= set(raw), example.title


# --- the page covers every source, every option -------------------------------------------------


def sections_of_sources() -> dict[str, str]:
    from marketplace.data.sources import SOURCES

    found = sections()
    return {kind: found.get(kind, "") for kind in SOURCES}


def option_names(cls: type, prefix: str = "") -> list[str]:
    """The option keys of a dataclass, nested sections included (``synthetic`` and its keys)."""
    names = []
    for f in dataclasses.fields(cls):
        names.append(f.name)
        if isinstance(f.type, type) and dataclasses.is_dataclass(f.type):
            names.extend(option_names(f.type))
    return names


def test_every_source_kind_has_a_section_naming_each_option_and_a_scenario_using_it() -> None:
    from typing import get_type_hints

    from marketplace.data.sources import SOURCES

    used = {(read_yaml(e.body)["data"].get("source") or {}).get("kind", "covariate_shift") for e in scenario_examples()}
    for kind, source in SOURCES.items():
        section = sections_of_sources()[kind]
        assert section, f"docs/data.md has no heading naming `{kind}`"
        hints = get_type_hints(source.options)
        for name in [f.name for f in dataclasses.fields(source.options)]:
            assert f"`{name}`" in section, f"the `{kind}` section does not document its option `{name}`"
            nested = hints[name]
            if dataclasses.is_dataclass(nested):
                for inner in (f.name for f in dataclasses.fields(nested)):
                    assert f"`{inner}`" in section, f"the `{kind}` section does not document `{name}.{inner}`"
        assert kind in used, f"no scenario example of docs/data.md uses kind {kind!r}"


@pytest.mark.parametrize("name", ["partition", "consumer", "seed_set"])
def test_each_data_section_documents_every_key(name: str) -> None:
    from typing import get_type_hints

    from marketplace.data.config import DataConfig

    section = sections().get(name, "")
    assert section, f"docs/data.md has no heading naming `{name}`"
    for key in (f.name for f in dataclasses.fields(get_type_hints(DataConfig)[name])):
        assert f"`{key}`" in section, f"the `{name}` section does not document `{key}`"


def test_the_csv_table_states_the_defaults_of_the_code() -> None:
    from marketplace.data.sources.csv_file import CsvSource

    rows = {
        m[1]: (m[2].strip(), m[3].strip())
        for m in re.finditer(r"^\| `(\w+)` \|([^|]*)\|([^|]*)\|", sections()["csv"], re.MULTILINE)
    }
    shown = {(): "`[]`", None: "null", ",": '`","`'}
    for f in dataclasses.fields(CsvSource):
        kind, default = rows[f.name]
        if f.default is dataclasses.MISSING:
            assert "**required**" in kind and default == "", f.name
        elif isinstance(f.default, int):  # a limit: the number, then in words, `1048576` (1 Mi)
            assert kind == "integer" and re.fullmatch(rf"`{f.default}` \([^)]+\)", default), (f.name, default)
        else:
            assert default == shown[f.default], (f.name, default)


# --- what the page quotes is what the command line prints ----------------------------------------


def quoted_validate_lines() -> list[tuple[str, str]]:
    """(scenario file, line) for each ``# NAME.yaml: valid (...)`` output line quoted in a bash block."""
    return [
        (m[1], m[0][2:])
        for b in blocks()
        if b.lang == "bash"
        for m in re.finditer(r"^# (\S+\.yaml): valid \(.*\)$", b.body, re.MULTILINE)
    ]


def test_the_quoted_validate_output_is_what_validate_prints(tmp_path: Path) -> None:
    quoted = quoted_validate_lines()
    assert quoted
    write_examples(tmp_path)
    for name, line in quoted:
        validated = run_cli("validate", str(tmp_path / name))
        assert validated.returncode == 0, validated.stderr
        printed = (validated.stdout + validated.stderr).splitlines()
        assert any(shown == f"{tmp_path}/{line}" for shown in printed), (line, printed[-3:])


def quoted_errors() -> list[str]:
    return [line for b in blocks() if b.lang == "text" for line in b.body.splitlines() if line.strip()]


def test_the_quoted_missing_keys_error_is_what_validate_prints(tmp_path: Path) -> None:
    write_examples(tmp_path)
    text = (tmp_path / "customers.yaml").read_text()
    start = text.index("    csv:\n")
    end = text.index("  partition:")
    (tmp_path / "s.yaml").write_text(text[:start] + "    csv: {}\n" + text[end:])
    refused = run_cli("validate", str(tmp_path / "s.yaml"))
    assert refused.returncode == 2
    quoted = [line for line in quoted_errors() if "required keys" in line]
    assert quoted and quoted[0].replace("s.yaml", str(tmp_path / "s.yaml")) == refused.stderr.strip()


def test_the_quoted_limit_error_is_what_validate_prints(tmp_path: Path) -> None:
    write_examples(tmp_path)
    refused = run_cli("validate", str(tmp_path / "customers.yaml"), "--set", "data.source.csv.max_rows=40")
    assert refused.returncode == 2
    quoted = [line for line in quoted_errors() if "data.source.csv.max_rows" in line]
    assert len(quoted) == 1
    expected = (
        quoted[0]
        .replace(" customers.yaml:", f" {tmp_path}/customers.yaml:")
        .replace(" customers.csv ", f" {tmp_path}/customers.csv ")
    )
    assert refused.stderr.strip() == expected


@pytest.mark.parametrize(
    "override, needle",
    [
        ("data.consumer.test_size=10", "the consumer's target pool has"),
        ("data.seed_set.size=40", "data.seed_set.size = 40"),
    ],
)
def test_the_quoted_data_errors_are_what_validate_prints(override: str, needle: str, tmp_path: Path) -> None:
    write_examples(tmp_path)
    refused = run_cli("validate", str(tmp_path / "customers.yaml"), "--set", override)
    assert refused.returncode == 2
    quoted = [line for line in quoted_errors() if line.startswith(needle)]
    assert len(quoted) == 1 and quoted[0] in refused.stderr, (quoted, refused.stderr)


# --- a marketplace described by its schema ------------------------------------------------------


def schema_example() -> tuple[Block, list[Block]]:
    """The schema-only scenario of the page, and the CSV files that are its parties' own."""
    (scenario,) = [e for e in scenario_examples() if is_schema_only(e)]
    names = {f["name"] for f in read_yaml(scenario.body)["data"]["schema"]["features"]}
    own = [e for e in file_examples() if e.lang == "csv" and names <= set(e.body.splitlines()[0].split(","))]
    return scenario, own


def test_the_schema_examples_own_files_fit_its_schema_and_the_quoted_refusal_is_what_a_party_is_told(
    tmp_path, monkeypatch
):
    from marketplace.api import load
    from marketplace.data.own_files import OwnDataError, load_own_rows

    write_examples(tmp_path)
    scenario, own = schema_example()
    assert own, "the schema example shows no party's file"
    schema = load(tmp_path / scenario.title).config.data.schema
    for example in own:
        assert len(load_own_rows(tmp_path / example.title, schema, party="owner-1")) > 0
    quoted = next(b.body.strip() for b in blocks() if b.lang == "text" and b.body.startswith("owner-1: "))
    file, line, column, upper = re.match(
        r"owner-1: (\S+): line (\d+), column '(\w+)': expected a number in \[\S+, (\S+)\] .* found one outside it;",
        quoted,
    ).groups()
    value = f"{float(upper) + 37.123456:g}"
    rows = (tmp_path / file).read_text().splitlines()
    header = rows[0].split(",")
    cells = rows[int(line) - 1].split(",")
    cells[header.index(column)] = value
    rows[int(line) - 1] = ",".join(cells)
    (tmp_path / file).write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)  # the quoted refusal names the file as given, relative to where the party runs
    with pytest.raises(OwnDataError) as err:
        load_own_rows(Path(file), schema, party="owner-1")
    assert str(err.value) == quoted
    assert value not in str(err.value)


def test_the_schema_section_documents_every_key() -> None:
    from marketplace.data.public_schema import DataSchema

    section = sections()["schema"]
    for key in (f.name for f in dataclasses.fields(DataSchema)):
        assert f"| `{key}` |" in section, f"the `schema` section does not document `{key}`"
