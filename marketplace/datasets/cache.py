"""The local data cache: where fetched datasets live, and checked reads from it.

The cache is a folder laid out as ``NAME/FILE`` (the registry's dataset and file names). It is
``$MARKETPLACE_DATA`` when that is set, otherwise a per-user cache folder (``~/.cache/marketplace/
datasets`` on Linux). Any folder with that layout works, read-only too: nothing here writes to it.

Every read checks the bytes against the registry's size and SHA-256 before they are used, so a
truncated, corrupted or replaced file is refused with its name and the command that fixes it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from marketplace.datasets.registry import DatasetSpec, FileSpec, dataset

ENV_HOME = "MARKETPLACE_DATA"
"""Environment variable naming the cache folder."""


class DatasetMissing(LookupError):
    """A dataset the run needs is not (completely) in the cache; the message gives the fetch command."""

    def __init__(self, name: str, missing: list[str], home: Path) -> None:
        self.name = name
        self.missing = missing
        self.home = home
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        super().__init__(
            f"dataset {name!r} is not in the data cache {home} (missing {shown}); "
            f"fetch it with: {fetch_command([name])}"
        )

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def fetch_command(self) -> str:
        """The command that puts the dataset in the cache (``marketplace data fetch NAME``)."""
        return fetch_command([self.name])


class ChecksumMismatch(ValueError):
    """A cached file whose bytes differ from the registry's size or SHA-256."""


@dataclass(frozen=True)
class FileState:
    """What the cache holds for one registered file: ``ok``, ``missing``, ``wrong size`` or ``corrupt``."""

    dataset: str
    spec: FileSpec
    path: Path
    state: str


def data_home() -> Path:
    """The cache folder: ``$MARKETPLACE_DATA``, else the per-user cache folder (not created here)."""
    env = os.environ.get(ENV_HOME, "").strip()
    if env:
        return Path(os.path.abspath(os.path.expanduser(env)))
    import platformdirs

    return Path(platformdirs.user_cache_dir("marketplace")) / "datasets"


def fetch_command(names: list[str] | tuple[str, ...]) -> str:
    """The command a user runs to fetch ``names``."""
    return "marketplace data fetch " + " ".join(names)


def missing_files(spec: DatasetSpec, home: Path | None = None) -> list[str]:
    """Files of ``spec`` that are absent or have the wrong size (cheap: no file is read)."""
    folder = (home or data_home()) / spec.name
    missing = []
    for f in spec.files:
        try:
            if (folder / f.name).stat().st_size != f.size:
                missing.append(f"{f.name} (wrong size)")
        except OSError:
            missing.append(f.name)
    return missing


def require(name: str, home: Path | None = None) -> Path:
    """The folder of dataset ``name`` if every file is present with its registered size;
    :class:`DatasetMissing` (with the fetch command) otherwise. Reads no file."""
    spec = dataset(name)
    home = home or data_home()
    missing = missing_files(spec, home)
    if missing:
        raise DatasetMissing(spec.name, missing, home)
    return home / spec.name


def verify_bytes(data: bytes, spec: FileSpec, where: str) -> None:
    """:class:`ChecksumMismatch` naming ``where`` unless ``data`` has the registered size and SHA-256."""
    actual = hashlib.sha256(data).hexdigest()
    if len(data) != spec.size or actual != spec.sha256:
        raise ChecksumMismatch(
            f"{where}: expected {spec.size} bytes with SHA-256 {spec.sha256}, got {len(data)} bytes "
            f"with SHA-256 {actual}; the file is corrupt or was changed"
        )


def read_bytes(name: str, file: str, home: Path | None = None) -> bytes:
    """The bytes of one cached file, checked against the registry before they are returned.

    :class:`DatasetMissing` when the file is absent; :class:`ChecksumMismatch` (naming the file and
    the command that replaces it) when its bytes are not the registered ones.
    """
    spec = dataset(name)
    home = home or data_home()
    path = home / spec.name / spec.file(file).name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DatasetMissing(spec.name, missing_files(spec, home) or [file], home) from None
    try:
        verify_bytes(data, spec.file(file), str(path))
    except ChecksumMismatch as err:
        raise ChecksumMismatch(f"{err}: replace it with: {fetch_command([spec.name])}") from None
    return data


def file_states(spec: DatasetSpec, home: Path | None = None, *, full: bool = True) -> list[FileState]:
    """The state of every file of ``spec`` in the cache; ``full`` hashes each present file."""
    home = home or data_home()
    states = []
    for f in spec.files:
        path = home / spec.name / f.name
        if not path.is_file():
            state = "missing"
        elif path.stat().st_size != f.size:
            state = "wrong size"
        elif full and _sha256(path) != f.sha256:
            state = "corrupt"
        else:
            state = "ok"
        states.append(FileState(spec.name, f, path, state))
    return states


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
