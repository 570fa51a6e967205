"""Downloading registered datasets into the cache, from upstream or from a mirror.

The downloading itself is pooch's (``pooch.Pooch.fetch``): it streams each file into a temporary
file inside the dataset's folder, checks its SHA-256 against the registry, and only then renames
it into place, so a cached file is always complete and verified; a failed attempt (a dropped
connection, a corrupted transfer) is retried with a growing pause, and a file that still does not
match is deleted, never kept. A file already in the cache with the right checksum is left alone.

Sources: each file's upstream URL (the registry's), or a *mirror*: a base URL (``http://``,
``https://`` or ``file:``) holding the same ``NAME/FILE`` paths as the cache. The mirror comes
from ``--mirror`` or ``$MARKETPLACE_DATA_MIRROR``. Pooch has no ``file:`` downloader, so a small
one here copies local files (with the same progress reporting).
"""

from __future__ import annotations

import logging
import os
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marketplace.datasets.cache import data_home
from marketplace.datasets.registry import DatasetSpec, FileSpec

if TYPE_CHECKING:
    from rich.console import Console

ENV_MIRROR = "MARKETPLACE_DATA_MIRROR"
"""Environment variable holding the default mirror base URL."""
LARGE_FILE = 1 << 20
"""Files at least this large get a progress bar on a terminal."""


class FetchError(RuntimeError):
    """A file could not be fetched; nothing half-written was left in the cache."""


@dataclass(frozen=True)
class Fetched:
    """One file after :func:`fetch_dataset`: where it is and whether it was downloaded now."""

    path: Path
    downloaded: bool


def mirror_url(text: str) -> str:
    """A mirror base URL ending in '/': ``http(s)://...``, ``file:...``, or an existing folder
    (turned into a ``file:`` URL). ValueError saying what is accepted otherwise."""
    text = text.strip()
    scheme = urllib.parse.urlparse(text).scheme.lower()
    if scheme in ("http", "https", "file"):
        return text if text.endswith("/") else text + "/"
    if text and not scheme and Path(text).expanduser().is_dir():
        return Path(text).expanduser().resolve().as_uri() + "/"
    raise ValueError(f"expected an http://, https:// or file: URL (or an existing folder), got {text!r}")


def default_mirror() -> str | None:
    """``$MARKETPLACE_DATA_MIRROR`` as a base URL, or None when it is unset."""
    env = os.environ.get(ENV_MIRROR, "").strip()
    return mirror_url(env) if env else None


def source_url(spec: DatasetSpec, file: FileSpec, mirror: str | None) -> str:
    """Where ``file`` is fetched from: ``mirror + NAME/FILE``, else its upstream URL.

    FetchError with the file's recipe when there is no mirror and no upstream server has it.
    """
    if mirror:
        return mirror + urllib.parse.quote(f"{spec.name}/{file.name}")
    if file.url is None:
        raise FetchError(
            f"{spec.name}/{file.name}: no upstream server publishes this exact file; fetch it from a "
            f"mirror (--mirror URL or ${ENV_MIRROR}), or make it yourself: {file.recipe}, "
            f"and place it at {data_home() / spec.name / file.name}"
        )
    return file.url


def fetch_dataset(
    spec: DatasetSpec,
    *,
    mirror: str | None = None,
    home: Path | None = None,
    retries: int = 3,
    timeout: float = 30.0,
    progress: Callable[[str, int], Any] | None = None,
) -> list[Fetched]:
    """Make every file of ``spec`` present and verified in the cache; return where each one is.

    ``retries`` extra attempts per file (pause 1 s, 2 s, ... between them); ``timeout`` seconds for
    each connection and each read. ``progress(label, total_bytes)`` may return a progress-bar
    object (pooch's protocol: ``total``, ``update``, ``reset``, ``close``) for a file being
    downloaded. Raises :class:`FetchError` naming the file, the URL and the reason; a file that
    failed leaves nothing behind (not even the dataset folder, if this call created it).
    """
    import pooch

    home = Path(home or data_home())
    folder = home / spec.name
    created = not folder.exists()
    registry = {f"{spec.name}/{f.name}": f"sha256:{f.sha256}" for f in spec.files}
    done = []
    try:
        for f in spec.files:
            key = f"{spec.name}/{f.name}"
            path = home / key
            if path.is_file() and path.stat().st_size == f.size and pooch.file_hash(str(path)) == f.sha256:
                done.append(Fetched(path, downloaded=False))
                continue
            url = source_url(spec, f, mirror)
            bar = progress(key, f.size) if progress is not None else None
            store = pooch.Pooch(path=home, base_url="", registry=registry, urls={key: url}, retry_if_failed=retries)
            try:
                with _quiet_pooch():
                    store.fetch(key, downloader=_downloader(url, bar, timeout))
            except Exception as err:  # noqa: BLE001 - every failure becomes one clear FetchError
                raise FetchError(
                    f"{key}: cannot fetch from {url}: {_reason(err)}"
                    + (f" (after {retries + 1} attempts)" if retries and _retried(err) else "")
                ) from None
            done.append(Fetched(path, downloaded=True))
    except FetchError:
        if created:
            _remove_if_empty(folder)
        raise
    return done


def _downloader(url: str, bar: Any, timeout: float) -> Callable[..., None]:
    """pooch's HTTP downloader for http(s) (bounded by ``timeout``), a local copy for ``file:``."""
    import pooch

    if urllib.parse.urlparse(url).scheme.lower() == "file":
        return _FileDownloader(bar)
    return pooch.HTTPDownloader(progressbar=bar or False, timeout=timeout, chunk_size=64 * 1024)


class _FileDownloader:
    """Copies a ``file:`` URL into pooch's temporary file, reporting progress like pooch's own."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar

    def __call__(self, url: str, output_file: str, pooch_instance: Any) -> None:
        source = Path(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
        with source.open("rb") as src, open(output_file, "wb") as dst:
            if self.bar:
                self.bar.total = source.stat().st_size
            for block in iter(lambda: src.read(1 << 20), b""):
                dst.write(block)
                if self.bar:
                    self.bar.update(len(block))
        if self.bar:
            self.bar.close()


def _reason(err: BaseException) -> str:
    """A one-line reason for a failed fetch."""
    text = str(err)
    if "hash" in text.lower() and "does not match" in text.lower():
        return (
            "the downloaded bytes do not match the registry's SHA-256 (corrupted or changed upstream); nothing was kept"
        )
    if isinstance(err, FileNotFoundError):
        return f"no such file ({err.filename})"
    text = text.replace("\n", " ")
    return f"{type(err).__name__}: {text[:300]}" if text else type(err).__name__


def _retried(err: BaseException) -> bool:
    """Whether pooch retried after ``err`` (it retries network errors and checksum mismatches)."""
    import requests

    return isinstance(err, (ValueError, requests.exceptions.RequestException))


class _quiet_pooch:
    """Silence pooch's own INFO lines ("Downloading file ..."); we print our own."""

    def __enter__(self) -> None:
        import pooch

        self.logger = pooch.get_logger()
        self.level = self.logger.level
        self.logger.setLevel(logging.WARNING)

    def __exit__(self, *exc: Any) -> None:
        self.logger.setLevel(self.level)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


class RichBar:
    """A progress bar in pooch's protocol (``total``, ``update``, ``reset``, ``close``) drawn with rich."""

    def __init__(self, label: str, total: int) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            transient=False,
            console=_stderr_console(),
        )
        self._task = self._progress.add_task(label, total=total)
        self._progress.start()

    @property
    def total(self) -> float | None:
        return self._progress.tasks[0].total

    @total.setter
    def total(self, value: int) -> None:
        if value:
            self._progress.update(self._task, total=value)

    def update(self, n: int) -> None:
        self._progress.advance(self._task, n)

    def reset(self) -> None:
        self._progress.reset(self._task, total=self.total)

    def close(self) -> None:
        self._progress.stop()


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def terminal_progress(label: str, total: int) -> RichBar | None:
    """A progress bar for a large file when stderr is a terminal; None otherwise."""
    if total >= LARGE_FILE and sys.stderr.isatty():
        return RichBar(label, total)
    return None
