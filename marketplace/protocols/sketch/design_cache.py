"""M²M designs kept on disk, so that a new consumer process does not build its design again.

A design (:class:`~marketplace.protocols.sketch.m2m.M2MDesign`: the synthetic points, their features
and Gram matrix) depends on public settings alone: the feature map (its fingerprint), the design's
seed, the sample count and the prior. Building it is the largest part of a sketch consumer's own
work, and ``marketplace request`` starts a new process for every request, so the design it builds is
written to a per-user cache folder (``~/.cache/marketplace/designs`` on Linux, or
``$MARKETPLACE_DESIGN_CACHE``; ``off`` keeps nothing) and read back by the next process.

A file is used only if it is whole and is the design asked for: it names its key and its map's
fingerprint, and holds the SHA-256 of its arrays, checked on every read; anything else (a truncated
or foreign file, another format) is ignored and the design built again, then written over it. What
is read is the built design bit for bit. The folder keeps the :data:`KEEP` designs used last.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .feature_maps import FeatureMap

ENV = "MARKETPLACE_DESIGN_CACHE"
"""Environment variable naming the cache folder, or ``off`` (``0``, ``no``, ``false``) for none."""
KEEP = 4
"""Designs the folder keeps (the latest used): 33 MB each at the quickstart's settings."""
MAX_BYTES = 256 * 2**20
"""A design holding more than this is not written (it is built again)."""
FORMAT = 1
ARRAYS = ("samples", "gram", "feature_mean", "features")


def cache_folder() -> Path | None:
    """The folder designs are kept in (not created here), or None when ``$MARKETPLACE_DESIGN_CACHE`` is off."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() in ("off", "0", "no", "false"):
        return None
    if env:
        return Path(os.path.abspath(os.path.expanduser(env)))
    import platformdirs

    return Path(platformdirs.user_cache_dir("marketplace")) / "designs"


def key_name(key: tuple[object, ...]) -> str:
    """The file name of a design's key (its public settings, as :meth:`M2MDesign.shared` forms it)."""
    return hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".npz"


def _digest(key: str, fingerprint: str, arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256(f"{FORMAT}|{key}|{fingerprint}".encode())
    for name in ARRAYS:
        if name in arrays:
            a = np.ascontiguousarray(arrays[name])
            h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.data)
    return h.hexdigest()


def read(key: tuple[object, ...], feature_map: FeatureMap) -> dict[str, np.ndarray] | None:
    """The arrays of the design ``key`` of ``feature_map`` kept on disk, or None when there is none
    that is whole and of this key and map."""
    folder = cache_folder()
    if folder is None:
        return None
    path = folder / key_name(key)
    try:
        with np.load(path, allow_pickle=False) as stored:
            meta = json.loads(str(stored["meta"]))
            arrays = {name: stored[name] for name in ARRAYS if name in stored.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    name = key_name(key)
    if meta.get("format") != FORMAT or meta.get("key") != name or meta.get("fingerprint") != feature_map.fingerprint:
        return None
    if meta.get("sha256") != _digest(name, feature_map.fingerprint, arrays):
        return None
    try:
        os.utime(path)  # used last: kept longest
    except OSError:
        pass
    return arrays


def write(key: tuple[object, ...], feature_map: FeatureMap, arrays: dict[str, np.ndarray]) -> None:
    """Keep the design's ``arrays`` for the next process (nothing when the folder is off, not
    writable, or the design too large); the folder keeps the :data:`KEEP` designs used last."""
    folder = cache_folder()
    if folder is None or sum(a.nbytes for a in arrays.values()) > MAX_BYTES:
        return
    name = key_name(key)
    meta = {"format": FORMAT, "key": name, "fingerprint": feature_map.fingerprint}
    meta["sha256"] = _digest(name, feature_map.fingerprint, arrays)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".design-", suffix=".npz", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
                for entry, array in [("meta", np.array(json.dumps(meta))), *arrays.items()]:
                    with z.open(f"{entry}.npy", "w", force_zip64=True) as member:  # as np.savez writes it
                        np.lib.format.write_array(member, array, allow_pickle=False)
            os.replace(tmp, folder / name)  # whole or not at all, for a process reading it meanwhile
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _prune(folder)
    except OSError:
        return


def _prune(folder: Path) -> None:
    """Remove all but the :data:`KEEP` designs used last."""
    kept = sorted(folder.glob("*.npz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in kept[KEEP:]:
        try:
            path.unlink()
        except OSError:
            pass
