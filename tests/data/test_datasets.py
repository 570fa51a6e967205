"""The dataset registry, the data cache and fetching: a local HTTP server on 127.0.0.1 serves the
data cache ($MARKETPLACE_DATA, filled by `marketplace data fetch NAME`) as a mirror; corrupted, interrupted and
unreachable downloads
leave nothing half-written; `marketplace data ...` from the command line."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import socket
import threading
from pathlib import Path

import pytest
from conftest import ROOT, needs_data, run_cli

from marketplace.datasets import DATASETS, ChecksumMismatch, DatasetMissing, read_bytes, require
from marketplace.datasets.cache import data_home, file_states, missing_files
from marketplace.datasets.fetch import FetchError, fetch_dataset, mirror_url

MIRROR = data_home()
"""The folder served as a mirror: the data cache, laid out as a mirror is (NAME/FILE). A test that
serves a dataset from it needs that dataset in the cache (``needs_data``; the skip names the fetch
command and the cache, which ``MARKETPLACE_DATA`` chooses)."""
SMALL = "diabetic_retinopathy_debrecen"  # one 117 KB file
SMALL_FILE = "messidor_features.arff"


class MirrorHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the mirror folder; ``corrupt`` paths get one byte flipped, and the first request of an
    ``interrupt`` path gets half its bytes before the connection is dropped."""

    corrupt: set[str] = set()
    interrupt: set[str] = set()
    requests: list[str] = []

    def log_message(self, *args) -> None:  # keep the test output clean
        pass

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        path = self.path.lstrip("/")
        type(self).requests.append(path)
        file = MIRROR / path
        if path in self.corrupt or path in self.interrupt:
            data = bytearray(file.read_bytes())
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if path in self.interrupt:
                self.interrupt.discard(path)
                self.wfile.write(bytes(data[: len(data) // 2]))
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            data[len(data) // 2] ^= 0xFF
            self.wfile.write(bytes(data))
            return
        super().do_GET()


@pytest.fixture
def mirror():
    """A threaded HTTP server on 127.0.0.1 serving the data cache as a mirror; yields its base URL."""
    handler = type("Handler", (MirrorHandler,), {"corrupt": set(), "interrupt": set(), "requests": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a, **k: handler(*a, directory=str(MIRROR), **k))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def leftovers(folder: Path) -> list[str]:
    """Every file under ``folder`` (temporary files included)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


# --------------------------------------------------------------------------- the registry


@pytest.mark.skipif(
    not (MIRROR / "MANIFEST.txt").is_file(),
    reason=f"needs a mirror's MANIFEST.txt (size, sha256, NAME/FILE per line) in the data cache {MIRROR}; "
    "set MARKETPLACE_DATA to a mirror folder that has one",
)
def test_the_registry_matches_the_mirror_manifest():
    manifest = {}
    for line in (MIRROR / "MANIFEST.txt").read_text().splitlines():
        size, sha, path = line.split(None, 2)
        manifest[path] = (int(size), sha)
    for spec in DATASETS.values():
        for f in spec.files:
            assert manifest[f"{spec.name}/{f.name}"] == (f.size, f.sha256), f"{spec.name}/{f.name}"


def test_every_dataset_has_provenance_licence_citation_and_a_way_to_get_each_file():
    assert {
        "adult",
        "bank_marketing",
        "bike_sharing",
        "diabetic_retinopathy_debrecen",
        "lifesci_ds1.10",
        "mnist",
        "occupancy",
        "office_caltech10_features",
        "superconductivity_subsample",
    } == set(DATASETS)
    assert (DATASETS["adult"].openml, DATASETS["mnist"].openml, DATASETS["bank_marketing"].openml) == (1590, 554, 1461)
    for spec in DATASETS.values():
        assert spec.origin.startswith("http") and spec.license and spec.citation and spec.files
        for f in spec.files:
            assert len(f.sha256) == 64 and f.size > 0
            assert (f.url or "").startswith("https://") or f.recipe, f"{spec.name}/{f.name} has no source"


# --------------------------------------------------------------------------- fetching


@needs_data("mnist")
def test_a_normal_fetch_from_the_http_mirror_caches_verified_files(tmp_path, mirror):
    base, handler = mirror
    fetched = fetch_dataset(DATASETS["mnist"], mirror=base, home=tmp_path, retries=0, timeout=10)
    assert [f.downloaded for f in fetched] == [True, True]
    assert leftovers(tmp_path) == ["mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz"]
    assert all(s.state == "ok" for s in file_states(DATASETS["mnist"], tmp_path))
    again = fetch_dataset(DATASETS["mnist"], mirror=base, home=tmp_path, retries=0, timeout=10)
    assert [f.downloaded for f in again] == [False, False] and len(handler.requests) == 2  # intact files are kept


@needs_data(SMALL)
def test_a_corrupted_download_is_rejected_and_never_cached(tmp_path, mirror):
    base, handler = mirror
    handler.corrupt.add(f"{SMALL}/{SMALL_FILE}")
    with pytest.raises(FetchError, match=r"do not match the registry's SHA-256.*nothing was kept.*after 2 attempts"):
        fetch_dataset(DATASETS[SMALL], mirror=base, home=tmp_path, retries=1, timeout=10)
    assert handler.requests == [f"{SMALL}/{SMALL_FILE}"] * 2  # retried once, then refused
    assert leftovers(tmp_path) == [] and not (tmp_path / SMALL).exists()


@needs_data(SMALL)
def test_an_interrupted_download_is_retried(tmp_path, mirror):
    base, handler = mirror
    handler.interrupt.add(f"{SMALL}/{SMALL_FILE}")
    fetched = fetch_dataset(DATASETS[SMALL], mirror=base, home=tmp_path, retries=2, timeout=10)
    assert handler.requests == [f"{SMALL}/{SMALL_FILE}"] * 2  # the first transfer broke off half way
    assert fetched[0].downloaded and leftovers(tmp_path) == [f"{SMALL}/{SMALL_FILE}"]
    assert hashlib.sha256(fetched[0].path.read_bytes()).hexdigest() == DATASETS[SMALL].files[0].sha256


def test_an_unreachable_mirror_gives_a_clear_error_and_leaves_nothing(tmp_path):
    with socket.socket() as probe:  # a port on which nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(
        FetchError, match=rf"{SMALL}/{SMALL_FILE}: cannot fetch from http://127.0.0.1:{port}/.*Connection"
    ):
        fetch_dataset(DATASETS[SMALL], mirror=f"http://127.0.0.1:{port}/", home=tmp_path, retries=0, timeout=5)
    assert leftovers(tmp_path) == [] and not (tmp_path / SMALL).exists()


@needs_data(SMALL)
def test_a_file_url_or_folder_works_as_a_mirror(tmp_path):
    fetch_dataset(DATASETS[SMALL], mirror=mirror_url(str(MIRROR)), home=tmp_path / "a")
    fetch_dataset(DATASETS[SMALL], mirror=MIRROR.as_uri() + "/", home=tmp_path / "b")
    assert leftovers(tmp_path / "a") == leftovers(tmp_path / "b") == [f"{SMALL}/{SMALL_FILE}"]


def test_a_missing_file_on_a_file_mirror_is_a_clear_error(tmp_path):
    with pytest.raises(FetchError, match=rf"{SMALL}/{SMALL_FILE}: cannot fetch from file:.*no such file"):
        fetch_dataset(DATASETS[SMALL], mirror=tmp_path.as_uri() + "/", home=tmp_path / "cache")
    assert not (tmp_path / "cache" / SMALL).exists()


def test_a_file_no_server_publishes_needs_a_mirror_and_says_how_to_make_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MARKETPLACE_DATA", str(tmp_path))
    with pytest.raises(FetchError, match=r"bank-full.csv.gz: no upstream server.*--mirror.*gzip -9 -n"):
        fetch_dataset(DATASETS["bank_marketing"], home=tmp_path)


@pytest.mark.parametrize("text", ["ftp://example.org/data", "not a url", ""])
def test_a_mirror_must_be_http_https_file_or_a_folder(text):
    with pytest.raises(ValueError, match="expected an http://, https:// or file: URL"):
        mirror_url(text)


# --------------------------------------------------------------------------- the cache


def test_require_and_read_name_the_missing_dataset_and_the_fetch_command(tmp_path):
    with pytest.raises(
        DatasetMissing, match=r"dataset 'mnist' is not in the data cache .*marketplace data fetch mnist"
    ):
        require("mnist", home=tmp_path)
    with pytest.raises(DatasetMissing, match="marketplace data fetch mnist"):
        read_bytes("mnist", "t10k-labels-idx1-ubyte.gz", home=tmp_path)


@needs_data(SMALL)
def test_a_wrong_size_counts_as_missing_and_a_changed_byte_as_corrupt(tmp_path):
    from marketplace.datasets import data_home

    shutil.copytree(data_home() / SMALL, tmp_path / SMALL)
    target = tmp_path / SMALL / SMALL_FILE
    data = bytearray(target.read_bytes())
    target.write_bytes(bytes(data[:-1]))
    assert missing_files(DATASETS[SMALL], tmp_path) == [f"{SMALL_FILE} (wrong size)"]
    data[0] ^= 0x01
    target.write_bytes(bytes(data))
    assert missing_files(DATASETS[SMALL], tmp_path) == []  # the size is right: only the hash can tell
    assert [s.state for s in file_states(DATASETS[SMALL], tmp_path)] == ["corrupt"]
    with pytest.raises(ChecksumMismatch, match=rf"{SMALL_FILE}: expected .* SHA-256 .*marketplace data fetch {SMALL}"):
        read_bytes(SMALL, SMALL_FILE, home=tmp_path)


# --------------------------------------------------------------------------- the command line


def cli(*args: str, cache: Path, **env: str):
    import os
    import subprocess
    import sys

    environment = {**os.environ, "MARKETPLACE_DATA": str(cache), **env}
    return subprocess.run(
        [sys.executable, "-m", "marketplace", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env=environment,
    )


@needs_data("adult")
def test_data_fetch_from_the_mirror_then_run_the_adult_scenario(tmp_path, mirror):
    """The path of a new user: the run refuses without data and prints the fetch command; after the
    fetch the shipped scenario runs (every party its own process)."""
    base, _ = mirror
    cache = tmp_path / "cache"
    refused = cli("run", "scenarios/adult.yaml", "--out", str(tmp_path / "refused"), cache=cache)
    assert refused.returncode == 2 and "marketplace data fetch adult" in refused.stderr
    assert not (tmp_path / "refused").exists()
    fetched = cli("data", "fetch", "adult", "--mirror", base, cache=cache)
    assert fetched.returncode == 0, fetched.stderr
    assert "adult: downloaded 3 of 3 files, every file verified" in fetched.stdout
    run = cli(
        "run",
        "scenarios/adult.yaml",
        "--out",
        str(tmp_path / "run"),
        "--set",
        "summarize.rounds=5",
        "--set",
        "summarize.baselines=[]",
        cache=cache,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "run" / "report.json").read_text())["status"] == "completed"


def test_data_list_shows_every_dataset_and_the_cache(tmp_path):
    result = cli("data", "list", cache=tmp_path)
    assert result.returncode == 0 and f"data cache: {tmp_path}" in result.stdout
    for name in DATASETS:
        assert name in result.stdout
    assert result.stdout.count("not fetched") == len(DATASETS)


def test_data_info_gives_origin_licence_citation_and_files():
    result = run_cli("data", "info", "adult")
    assert result.returncode == 0
    for text in ("OpenML id 1590", "CC BY 4.0", "Kohavi", "adult.data  3974305 bytes  sha256 5b002646"):
        assert text in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("fetch",),
        ("fetch", "adult", "--all"),
        ("fetch", "nope"),
        ("verify", "nope"),
        ("path", "nope"),
        ("info", "nope"),
        ("fetch", "adult", "--mirror", "ftp://x"),
        ("fetch", "adult", "--retries", "-1"),
        ("fetch", "adult", "--timeout", "0"),
    ],
)
def test_bad_data_arguments_exit_2(tmp_path, args):
    result = cli("data", *args, cache=tmp_path)
    assert result.returncode == 2, result
    assert result.stderr.strip()
    assert not any(tmp_path.iterdir())


def test_data_fetch_of_an_unreachable_mirror_exits_3_and_says_so(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = cli("data", "fetch", SMALL, "--mirror", f"http://127.0.0.1:{port}", "--retries", "0", cache=tmp_path)
    assert result.returncode == 3
    assert f"cannot fetch from http://127.0.0.1:{port}/{SMALL}/{SMALL_FILE}" in result.stderr
    assert "nothing half-written was kept" in result.stderr and leftovers(tmp_path) == []


@needs_data(SMALL)
def test_data_verify_and_path_report_a_corrupted_file(tmp_path):
    from marketplace.datasets import data_home

    shutil.copytree(data_home() / SMALL, tmp_path / SMALL)
    assert cli("data", "verify", SMALL, cache=tmp_path).returncode == 0
    path = cli("data", "path", SMALL, cache=tmp_path)
    assert path.returncode == 0 and path.stdout.strip() == str(tmp_path / SMALL)
    target = tmp_path / SMALL / SMALL_FILE
    data = bytearray(target.read_bytes())
    data[10] ^= 0x01
    target.write_bytes(bytes(data))
    result = cli("data", "verify", cache=tmp_path)
    assert result.returncode == 3
    assert f"{SMALL}: FAILED: {SMALL_FILE} corrupt; fix with: marketplace data fetch {SMALL}" in result.stdout
    assert "adult: not fetched" in result.stdout


def test_data_path_of_a_dataset_not_fetched_prints_where_it_goes_and_exits_3(tmp_path):
    result = cli("data", "path", "mnist", cache=tmp_path)
    assert result.returncode == 3 and result.stdout.strip() == str(tmp_path / "mnist")
    assert "marketplace data fetch mnist" in result.stderr


@needs_data("mnist")
def test_large_files_report_progress_in_poochs_protocol(tmp_path):
    from marketplace.datasets.fetch import LARGE_FILE, RichBar, terminal_progress

    bars = []

    def progress(label: str, total: int) -> RichBar:
        bars.append(RichBar(label, total))
        return bars[-1]

    fetch_dataset(DATASETS["mnist"], mirror=mirror_url(str(MIRROR)), home=tmp_path, progress=progress)
    assert [b.total for b in bars] == [f.size for f in DATASETS["mnist"].files]
    assert all(b._progress.tasks[0].completed == b.total for b in bars)
    assert terminal_progress("x", LARGE_FILE) is None  # stderr is not a terminal under pytest
